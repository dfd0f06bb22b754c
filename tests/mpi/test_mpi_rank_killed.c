/* tests/mpi/test_mpi_rank_killed.c - a child's rank killed mid-run (run under
 * mpirun -np 3 with the fault flags of tests/CMakeLists.txt).
 *
 * Owns: the documented outcome of a rank that dies (docs/guide.md
 * "Multi-host", failure model): the task running there fails within the
 * heartbeat bound with an error naming the child and its rank; later tasks
 * for it fail at once with the same error; the directory forgets the copy
 * only that rank held; the other child goes on; close does not hang; the
 * L4's rank exits 0.
 */
#include <signal.h>
#include <stdint.h>
#include <time.h>
#include <unistd.h>

#include "mpi/remote_child.h"
#include "mpi_test.h"

static strata_callable g_work;

/* scalar 0: 1 = kill this rank (SIGKILL: no handler, no goodbye); writes x[0] = 7 */
static int work_sub(const strata_task_view *a, void *user) {
    (void)user;
    if (strata_args_u64(a, 0) == 1)
        raise(SIGKILL);
    int32_t *x = strata_args_data(a, 0);
    x[0] = 7;
    return 0;
}

static int setup(strata_worker *w, void *user) {
    (void)user;
    return strata_worker_register_sub(w, "work", work_sub, NULL, &g_work);
}

static int l3_work(strata_orch *o, void *arg) {
    (void)arg;
    const strata_task_view *ta = strata_orch_task_args(o);
    strata_tensor x = ta->tensors[0];
    return strata_orch_sub(o, g_work, STRATA_INOUT(x), STRATA_U64(strata_args_u64(ta, 0)));
}

typedef struct job {
    strata_buffer *b;
    int child;
    uint64_t kill;
    strata_callable work;
} job;

static int l4_orch(strata_orch *o, void *arg) {
    job *j = arg;
    strata_tensor x;
    int64_t n = 4, s = 1;
    STRATA_TRY(strata_tensor_view(j->b, 0, STRATA_I32, 1, &n, &s, &x));
    return strata_orch_next_level(o, j->work, NULL, j->child, STRATA_INOUT(x), STRATA_U64(j->kill));
}

static uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
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
    int child[2];
    const uint64_t bound = 1000000000ull; /* 1 s */
    for (int k = 0; k < 2; k++) {
        strata_child_config cc;
        strata_child_config_init(&cc);
        cc.worker.sub_workers = 1;
        cc.setup = setup;
        cc.host = STRATA_HOST_MPI;
        cc.rank = k + 1;
        cc.heartbeat_timeout_ns = bound;
        MT_OK(strata_worker_add_child(w, &cc, &child[k]));
    }
    strata_callable work;
    MT_OK(strata_worker_register_orch(w, "l3_work", l3_work, NULL, &work));
    MT_OK(strata_worker_init(w));

    job j = {.child = child[1], .kill = 0, .work = work};
    MT_OK(strata_buffer_create(w, 16, &j.b));
    MT_OK(strata_worker_run(w, l4_orch, &j)); /* both ranks work */
    MT_CHECK(((int32_t *)strata_buffer_data(j.b))[0] == 7, "the task ran");

    uint32_t entries = 0; /* rank 2 keeps the copy of x its task wrote: one entry */
    MT_OK(st_mpi_test_dir_entries(w, child[1], &entries));
    MT_CHECK(entries == 1, "one kept copy recorded before the kill (%u)", entries);

    j.kill = 1; /* rank 2 dies inside its task */
    uint64_t t0 = now_ns();
    strata_run *h;
    MT_OK(strata_worker_submit(w, l4_orch, &j, &h));
    int rc = strata_run_wait(h, 30ull * 1000000000ull);
    uint64_t took = now_ns() - t0;
    MT_CHECK(rc == STRATA_EENDPOINT, "the run fails as an endpoint failure (%s: %s)",
             strata_status_name(rc), strata_run_error(h));
    const char *expect = "L4 worker 1 (L3 child 1, rank 2)";
    MT_CHECK(strstr(strata_run_error(h), expect) &&
                 strstr(strata_run_error(h), "stopped answering"),
             "the error names the child and its rank: %s", strata_run_error(h));
    /* bounded: the heartbeat bound plus scheduling slack on an oversubscribed machine */
    MT_CHECK(took < 10 * bound, "failed after %llu ms (bound %llu ms)",
             (unsigned long long)(took / 1000000), (unsigned long long)(bound / 1000000));
    printf("the dead rank's task failed after %llu ms (heartbeat bound %llu ms)\n",
           (unsigned long long)(took / 1000000), (unsigned long long)(bound / 1000000));
    strata_run_release(h);

    j.kill = 0; /* later tasks for the dead child fail at once, with the same cause */
    MT_CHECK(strata_worker_run(w, l4_orch, &j) == STRATA_EENDPOINT, "a later task fails");
    /* the copy went with its only holder: the directory does not keep its entry */
    MT_OK(st_mpi_test_dir_entries(w, child[1], &entries));
    MT_CHECK(entries == 0, "no entry left for the dead rank's copy (%u)", entries);
    j.child = child[0]; /* the other child goes on */
    ((int32_t *)strata_buffer_data(j.b))[0] = 0;
    MT_OK(strata_worker_run(w, l4_orch, &j));
    MT_CHECK(((int32_t *)strata_buffer_data(j.b))[0] == 7, "child 0 still works");

    strata_buffer_destroy(j.b);
    MT_OK(strata_worker_close(w)); /* does not wait for the dead rank */
    strata_worker_destroy(w);
    MT_OK(strata_mpi_finalize()); /* with --enable-recovery the dead rank does not block it */
    printf("test_mpi_rank_killed: all checks passed\n");
    return 0;
}
