/* tests/mpi/test_mpi_holder_killed.c - the rank holding a kept copy is killed
 * just before another child's task reads that copy (run under mpirun -np 3,
 * one host, with the fault flags of tests/CMakeLists.txt).
 *
 * Owns: the documented outcome of a holder that dies (docs/guide.md
 * "Multi-host", failure model): child B (rank 1) keeps the copy of a view it
 * wrote; rank 0 kills B's process (SIGKILL, by the pid B's task reported), and
 * at once runs a task on child A (rank 2) that reads the view. Rank 0 has not
 * found B dead yet, so it asks B to send the copy to A. That task fails within
 * the heartbeat bound with an error naming B; A is not declared dead: its later
 * tasks run (reading the view from rank 0 now), and close returns.
 */
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#include "mpi_test.h"
#include "test_support.h"

static strata_callable g_write, g_read;

/* x[0] = 7, x[1] = this process's pid */
static int write_sub(const strata_task_view *a, void *user) {
    (void)user;
    int32_t *x = strata_args_data(a, 0);
    x[0] = 7;
    x[1] = (int32_t)getpid();
    return 0;
}

/* y[0] = x[0] + 1 */
static int read_sub(const strata_task_view *a, void *user) {
    (void)user;
    const int32_t *x = strata_args_data(a, 0);
    int32_t *y = strata_args_data(a, 1);
    y[0] = x[0] + 1;
    return 0;
}

static int setup(strata_worker *w, void *user) {
    (void)user;
    STRATA_TRY(strata_worker_register_sub(w, "write", write_sub, NULL, &g_write));
    return strata_worker_register_sub(w, "read", read_sub, NULL, &g_read);
}

static int l3_write(strata_orch *o, void *arg) {
    (void)arg;
    strata_tensor x = strata_orch_task_args(o)->tensors[0];
    return strata_orch_sub(o, g_write, STRATA_INOUT(x));
}

static int l3_read(strata_orch *o, void *arg) {
    (void)arg;
    const strata_task_view *ta = strata_orch_task_args(o);
    strata_tensor x = ta->tensors[0], y = ta->tensors[1];
    return strata_orch_sub(o, g_read, STRATA_IN(x), STRATA_INOUT(y));
}

typedef struct job {
    int read; /* 0: the child writes x; 1: it reads x into y */
    strata_buffer *x, *y;
    int child;
    strata_callable l3_write, l3_read;
} job;

static int l4_orch(strata_orch *o, void *arg) {
    job *j = arg;
    strata_tensor x, y;
    int64_t n = 4, s = 1;
    STRATA_TRY(strata_tensor_view(j->x, 0, STRATA_I32, 1, &n, &s, &x));
    STRATA_TRY(strata_tensor_view(j->y, 0, STRATA_I32, 1, &n, &s, &y));
    if (!j->read)
        return strata_orch_next_level(o, j->l3_write, NULL, j->child, STRATA_INOUT(x));
    return strata_orch_next_level(o, j->l3_read, NULL, j->child, STRATA_IN(x), STRATA_INOUT(y));
}

static void kill_and_wait(pid_t pid) {
    MT_CHECK(kill(pid, SIGKILL) == 0,
             "kill of rank 1's process %d: %s (are the ranks on one host?)", (int)pid,
             strerror(errno));
    for (int i = 0; i < 5000 && !ts_process_gone(pid); i++) { /* bounded: 5 s */
        struct timespec ms = {0, 1000000};
        nanosleep(&ms, NULL);
    }
    MT_CHECK(ts_process_gone(pid), "rank 1's process %d still runs 5 s after SIGKILL", (int)pid);
}

int main(int argc, char **argv) {
    setvbuf(stdout, NULL, _IONBF, 0); /* what it printed survives a kill by the harness */
    mt_skip_without_mpi();
    MT_OK(strata_mpi_init(&argc, &argv));
    MT_CHECK(strata_mpi_size() == 3, "run under mpirun -np 3 (size %d)", strata_mpi_size());
    strata_worker *w;
    strata_worker_config wc;
    strata_worker_config_init(&wc);
    wc.level = 4;
    wc.sub_workers = 1;
    MT_OK(strata_worker_create(&wc, &w));
    int child[2]; /* B (the holder) on rank 1, A (the reader) on rank 2 */
    for (int k = 0; k < 2; k++) {
        strata_child_config cc;
        strata_child_config_init(&cc);
        cc.worker.sub_workers = 1;
        cc.setup = setup;
        cc.host = STRATA_HOST_MPI;
        cc.rank = k + 1;
        cc.heartbeat_timeout_ns = 1000000000ull; /* 1 s */
        MT_OK(strata_worker_add_child(w, &cc, &child[k]));
    }
    job j = {.read = 0, .child = child[0]};
    MT_OK(strata_worker_register_orch(w, "l3_write", l3_write, NULL, &j.l3_write));
    MT_OK(strata_worker_register_orch(w, "l3_read", l3_read, NULL, &j.l3_read));
    MT_OK(strata_worker_init(w));
    MT_OK(strata_buffer_create(w, 16, &j.x));
    MT_OK(strata_buffer_create(w, 16, &j.y));
    memset(strata_buffer_data(j.x), 0, 16);
    memset(strata_buffer_data(j.y), 0, 16);
    int32_t *x = strata_buffer_data(j.x), *y = strata_buffer_data(j.y);

    MT_OK(strata_worker_run(w, l4_orch, &j)); /* B writes x and keeps its copy */
    MT_CHECK(x[0] == 7 && x[1] > 0, "B wrote x (%d, pid %d)", x[0], x[1]);

    /* B dies; well within its heartbeat bound, A's task reads x: rank 0 still
     * takes B for a live holder and asks it for the copy */
    kill_and_wait((pid_t)x[1]);
    printf("B (pid %d) killed\n", x[1]);
    j.read = 1;
    j.child = child[1];
    strata_run *h;
    MT_OK(strata_worker_submit(w, l4_orch, &j, &h));
    int rc = strata_run_wait(h, 30ull * 1000000000ull);
    MT_CHECK(rc != STRATA_ETIMEDOUT,
             "A's task waiting for B's copy did not end within 30 s (heartbeat bound 1 s): the "
             "holder's death never reached it");
    const char *err = strata_run_error(h);
    MT_CHECK(rc == STRATA_EENDPOINT, "A's task fails as an endpoint failure (%s: %s)",
             strata_status_name(rc), err);
    MT_CHECK(strstr(err, "L4 worker 1 (L3 child 1, rank 2)") != NULL,
             "the error names A, whose task failed: %s", err);
    MT_CHECK(strstr(err, "L4 child 0 (L3 child 0, rank 1)") && strstr(err, "stopped answering"),
             "the error names B and why it is gone: %s", err);
    printf("A's task failed: %s\n", err);
    strata_run_release(h);

    /* A was not declared dead: it reads x again (from rank 0 now), and writes */
    y[0] = 0;
    rc = strata_worker_run(w, l4_orch, &j);
    MT_CHECK(rc == STRATA_OK, "A's later task runs (%s: %s)", strata_status_name(rc),
             strata_error_message());
    MT_CHECK(y[0] == 8, "A read x[0] = 7 (y[0] = %d)", y[0]);
    j.read = 0;
    x[0] = 0;
    MT_OK(strata_worker_run(w, l4_orch, &j));
    MT_CHECK(x[0] == 7, "A wrote x");
    j.child = child[0]; /* B stays dead: its tasks fail at once */
    MT_CHECK(strata_worker_run(w, l4_orch, &j) == STRATA_EENDPOINT, "a later task on B fails");

    strata_buffer_destroy(j.x);
    strata_buffer_destroy(j.y);
    printf("closing\n");
    MT_OK(strata_worker_close(w)); /* takes A's goodbye, does not wait for the dead rank */
    strata_worker_destroy(w);
    printf("finalizing\n");
    MT_OK(strata_mpi_finalize());
    printf("test_mpi_holder_killed: all checks passed\n");
    return 0;
}
