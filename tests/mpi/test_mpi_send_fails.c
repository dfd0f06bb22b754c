/* tests/mpi/test_mpi_send_fails.c - an MPI_Isend of a task that reports
 * failure while the child holds another queued task (run under mpirun -np 3).
 *
 * Owns: the outcome of a send failure inside the progress thread's loop over
 * queued tasks (mpi/mpi_endpoint.c, through its test seam
 * STRATA_TEST_MPI_FAIL_TASK_SEND): the child is declared dead, each of its
 * tasks completes exactly once with the failure, later tasks for it fail at
 * once, the other child goes on, and close returns. The child declared dead
 * is alive, and how it leaves (docs/guide.md, failure model) is what
 * tests/CMakeLists.txt checks, with mpirun's status and this program's last
 * line, in three ways (argv[1]):
 *   (none)    its rank has heard rank 0 (a control call) and is told it was
 *             declared dead: it says so on stderr and exits 0, so mpirun does;
 *   unheard   rank 0 never sent it a frame before: told, it leaves the same way;
 *   untold    unheard, and the word is not sent either (seam
 *             STRATA_TEST_MPI_SILENT_DEATH, as on a broken link): it leaves
 *             after startup_timeout_ns and four heartbeat bounds of silence
 *             from its HELLO, with status 1, so mpirun exits 1.
 * A rank that never left would hold mpirun: its --timeout ends that job.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "mpi_test.h"

static strata_callable g_work;

static int work_sub(const strata_task_view *a, void *user) {
    (void)user;
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
    strata_tensor x = strata_orch_task_args(o)->tensors[0];
    return strata_orch_sub(o, g_work, STRATA_INOUT(x));
}

typedef struct job {
    strata_buffer *b[2];
    int child;
    int ntasks;
    strata_callable work;
} job;

/* ntasks independent tasks (one buffer each) on one child */
static int l4_orch(strata_orch *o, void *arg) {
    job *j = arg;
    for (int i = 0; i < j->ntasks; i++) {
        strata_tensor x;
        int64_t n = 4, s = 1;
        STRATA_TRY(strata_tensor_view(j->b[i], 0, STRATA_I32, 1, &n, &s, &x));
        STRATA_TRY(strata_orch_next_level(o, j->work, NULL, j->child, STRATA_INOUT(x)));
    }
    return STRATA_OK;
}

int main(int argc, char **argv) {
    mt_skip_without_mpi();
    /* both of child 0's slots queued, then the first task's send fails (rank 0 reads it) */
    setenv("STRATA_TEST_MPI_FAIL_TASK_SEND", "2", 1);
    int heard = argc < 2, told = argc < 2 || strcmp(argv[1], "untold") != 0;
    if (!told)
        setenv("STRATA_TEST_MPI_SILENT_DEATH", "1", 1);
    MT_OK(strata_mpi_init(&argc, &argv));
    MT_CHECK(strata_mpi_size() == 3, "run under mpirun -np 3 (size %d)", strata_mpi_size());
    strata_worker *w;
    strata_worker_config wc;
    strata_worker_config_init(&wc);
    wc.level = 4;
    wc.sub_workers = 1;
    MT_OK(strata_worker_create(&wc, &w));
    int child[2];
    for (int k = 0; k < 2; k++) {
        strata_child_config cc;
        strata_child_config_init(&cc);
        cc.worker.sub_workers = 1;
        cc.setup = setup;
        cc.host = STRATA_HOST_MPI;
        cc.rank = k + 1;
        if (k == 0) { /* untold, its rank leaves 5 + 4 s after its HELLO */
            cc.heartbeat_timeout_ns = 1000000000ull;
            cc.worker.startup_timeout_ns = 5000000000ull;
        }
        MT_OK(strata_worker_add_child(w, &cc, &child[k]));
    }
    strata_callable work;
    MT_OK(strata_worker_register_orch(w, "l3_work", l3_work, NULL, &work));
    MT_OK(strata_worker_init(w));

    job j = {.child = child[0], .ntasks = 2, .work = work};
    for (int i = 0; i < 2; i++)
        MT_OK(strata_buffer_create(w, 16, &j.b[i]));
    if (heard) { /* a control call: child 0's rank has heard rank 0 */
        strata_buffer *rb;
        MT_OK(strata_worker_remote_malloc(w, child[0], 16, &rb));
        MT_OK(strata_worker_remote_free(w, rb));
    }
    int rc = strata_worker_run(w, l4_orch, &j);
    MT_CHECK(rc == STRATA_EENDPOINT, "the run fails as an endpoint failure (%s: %s)",
             strata_status_name(rc), strata_error_message());
    MT_CHECK(strstr(strata_error_message(), "MPI_Isend of a task"),
             "the error says which call failed: %s", strata_error_message());

    j.ntasks = 1; /* later tasks for the dead child fail at once */
    MT_CHECK(strata_worker_run(w, l4_orch, &j) == STRATA_EENDPOINT, "a later task fails");
    j.child = child[1]; /* the other child goes on, its slots and records intact */
    for (int round = 0; round < 4; round++) {
        j.ntasks = 2;
        ((int32_t *)strata_buffer_data(j.b[0]))[0] = 0;
        ((int32_t *)strata_buffer_data(j.b[1]))[0] = 0;
        MT_OK(strata_worker_run(w, l4_orch, &j));
        MT_CHECK(((int32_t *)strata_buffer_data(j.b[0]))[0] == 7 &&
                     ((int32_t *)strata_buffer_data(j.b[1]))[0] == 7,
                 "child 1 ran both tasks (round %d)", round);
    }
    for (int i = 0; i < 2; i++)
        strata_buffer_destroy(j.b[i]);
    MT_OK(strata_worker_close(w)); /* does not wait for the dead child */
    strata_worker_destroy(w);
    MT_OK(strata_mpi_finalize());
    printf("test_mpi_send_fails: all checks passed\n");
    return 0;
}
