/* tests/mpi/test_mpi_root_killed.c - rank 0 (the L4) killed while its
 * ranks serve (run under mpirun -np 3 --enable-recovery; tests/CMakeLists.txt
 * checks the outcome, since no rank is left to report it).
 *
 * Owns: the documented outcome of a dead rank 0 (docs/guide.md,
 * "Multi-host", failure model): every other rank leaves within its silence
 * bound (four heartbeat bounds) with status 1 and a line on stderr saying
 * rank 0 went quiet. Rank 1 hosts the L4's one child; rank 2 hosts none
 * (a bystander) and is bounded by the same heartbeat as rank 1, from the
 * same program's config.
 * Must never: print its last line before rank 0 is gone, or let mpirun
 * wait past --timeout (a rank that never leaves fails the test there).
 */
#include <signal.h>
#include <stdint.h>
#include <stdio.h>

#include "mpi_test.h"

static int work_sub(const strata_task_view *a, void *user) {
    (void)user;
    int32_t *x = strata_args_data(a, 0);
    x[0] = 7;
    return 0;
}

static strata_callable g_work;

static int setup(strata_worker *w, void *user) {
    (void)user;
    return strata_worker_register_sub(w, "work", work_sub, NULL, &g_work);
}

static int l3_work(strata_orch *o, void *arg) {
    (void)arg;
    strata_tensor x = strata_orch_task_args(o)->tensors[0];
    return strata_orch_sub(o, g_work, STRATA_INOUT(x));
}

typedef struct job {
    strata_buffer *b;
    int child;
    strata_callable work;
} job;

static int l4_orch(strata_orch *o, void *arg) {
    job *j = arg;
    strata_tensor x;
    int64_t n = 4, s = 1;
    STRATA_TRY(strata_tensor_view(j->b, 0, STRATA_I32, 1, &n, &s, &x));
    return strata_orch_next_level(o, j->work, NULL, j->child, STRATA_INOUT(x));
}

int main(int argc, char **argv) {
    mt_skip_without_mpi();
    MT_OK(strata_mpi_init(&argc, &argv));
    MT_CHECK(strata_mpi_size() == 3, "run under mpirun -np 3 (size %d)", strata_mpi_size());
    strata_worker *w;
    strata_worker_config wc;
    strata_worker_config_init(&wc);
    wc.level = 4;
    wc.sub_workers = 1;
    MT_OK(strata_worker_create(&wc, &w));
    strata_child_config cc;
    strata_child_config_init(&cc);
    cc.worker.sub_workers = 1;
    cc.setup = setup;
    cc.host = STRATA_HOST_MPI;
    cc.rank = 1;                            /* rank 2 hosts no child */
    cc.heartbeat_timeout_ns = 500000000ull; /* 0.5 s: the ranks leave 2 s after rank 0 dies */
    job j = {0};
    MT_OK(strata_worker_add_child(w, &cc, &j.child));
    MT_OK(strata_worker_register_orch(w, "l3_work", l3_work, NULL, &j.work));
    MT_OK(strata_worker_init(w)); /* ranks 1 and 2 serve in here and never return */

    MT_OK(strata_buffer_create(w, 16, &j.b));
    MT_OK(strata_worker_run(w, l4_orch, &j));
    MT_CHECK(((int32_t *)strata_buffer_data(j.b))[0] == 7, "the child's task ran");
    printf("test_mpi_root_killed: the child ran its task; rank 0 kills itself\n");
    fflush(stdout);
    raise(SIGKILL); /* no close, no SHUTDOWN: the other ranks must notice the silence */
    return 1;
}
