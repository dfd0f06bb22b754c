/* tests/mpi/test_mpi_startup_timeout.c - a rank that does not answer at
 * start-up (run under mpirun -np 3).
 *
 * Owns: the bound on rank 0's strata_worker_init: rank 2 reaches its own
 * strata_worker_init only after rank 0's startup_timeout_ns, so rank 0's
 * init fails with STRATA_ETIMEDOUT naming the child and its rank; destroying
 * the L4 then tells every rank to shut down, the late rank included (it
 * answers once it serves), and every rank exits 0.
 */
#include <unistd.h>

#include "mpi_test.h"

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
        cc.worker.startup_timeout_ns = 1000000000ull; /* 1 s */
        cc.host = STRATA_HOST_MPI;
        cc.rank = k + 1;
        int id;
        MT_OK(strata_worker_add_child(w, &cc, &id));
    }
    if (strata_mpi_rank() == 2)
        sleep(3);                   /* late: rank 0 gives up first */
    int rc = strata_worker_init(w); /* ranks 1 and 2 never return from here */
    char msg[512];
    snprintf(msg, sizeof msg, "%s", strata_error_message());
    MT_CHECK(rc == STRATA_ETIMEDOUT, "init times out (%s: %s)", strata_status_name(rc), msg);
    MT_CHECK(strstr(msg, "L4 child 1 (L3 child 1, rank 2) did not report ready within "
                         "startup_timeout_ns (1000 ms)"),
             "the message names the child and its rank: %s", msg);
    strata_worker_destroy(w); /* both ranks are told to shut down; rank 2 answers late */
    MT_OK(strata_mpi_finalize());
    printf("test_mpi_startup_timeout: all checks passed\n");
    return 0;
}
