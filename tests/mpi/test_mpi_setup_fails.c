/* tests/mpi/test_mpi_setup_fails.c - a child whose setup fails on its rank
 * (run by tests/CMakeLists.txt through cmake/expect_run.cmake: mpirun's
 * exit status is 1, the failed rank's, and rank 0's report is on stdout).
 *
 * Owns: the start-up failure path: rank 0's strata_worker_init fails with
 * the rank's own message, naming the child and its rank; the healthy rank is
 * told to shut down; the failed rank exits 1 (docs/guide.md "Multi-host").
 */
#include "mpi_test.h"

static int failing_setup(strata_worker *w, void *user) {
    (void)w;
    (void)user;
    return strata_worker_register_sub(NULL, "no worker", NULL, NULL, NULL); /* fails: EINVAL */
}

int main(int argc, char **argv) {
    mt_skip_without_mpi();
    MT_OK(strata_mpi_init(&argc, &argv));
    MT_CHECK(strata_mpi_size() == 3, "run under mpirun -np 3 (size %d)", strata_mpi_size());
    strata_worker_config wc;
    strata_worker_config_init(&wc);
    wc.level = 4;
    wc.sub_workers = 1;
    strata_worker *w;
    MT_OK(strata_worker_create(&wc, &w));
    for (int k = 0; k < 2; k++) {
        strata_child_config cc;
        strata_child_config_init(&cc);
        cc.worker.sub_workers = 1;
        cc.setup = k == 1 ? failing_setup : NULL;
        cc.host = STRATA_HOST_MPI;
        cc.rank = k + 1;
        int id;
        MT_OK(strata_worker_add_child(w, &cc, &id));
    }
    int rc = strata_worker_init(w); /* rank 1 and 2 never return from here */
    char msg[512];
    snprintf(msg, sizeof msg, "%s", strata_error_message());
    MT_CHECK(rc != STRATA_OK, "init fails");
    MT_CHECK(strstr(msg, "L4 child 1 (L3 child 1, rank 2) failed to start on rank 2") &&
                 strstr(msg, "setup failed") && strstr(msg, "strata_worker_register_sub"),
             "the message names the child, its rank and the setup's own error: %s", msg);
    printf("setup failure reported: %s\n", msg);
    fflush(stdout);
    strata_worker_destroy(w); /* both ranks are told to shut down */
    MT_OK(strata_mpi_finalize());
    return 0;
}
