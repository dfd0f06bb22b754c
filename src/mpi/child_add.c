/* mpi/child_add.c - strata_worker_add_child: the hosting a child config asks for.
 *
 * Owns: the public call's argument check and its choice of hosting (a thread
 * or a process of this program: exec/worker_child.c; another MPI rank:
 * mpi/remote_child.h). It lives in the top layer because the MPI hosting
 * does, and is built with and without MPI.
 * Must never: call MPI (the stub build has none).
 */
#include "exec/worker_child.h"
#include "mpi/remote_child.h"
#include "strata/worker.h"
#include "util/error.h"

int strata_worker_add_child(strata_worker *parent, const strata_child_config *cfg, int *worker_id) {
    if (!parent || !cfg || !worker_id)
        return st_fail(STRATA_EINVAL,
                       "strata_worker_add_child: parent, config and id must not be NULL");
    switch (cfg->host) {
    case STRATA_HOST_THREAD:
        return st_worker_child_add_thread(parent, cfg, worker_id);
    case STRATA_HOST_PROCESS:
        return st_worker_child_add_process(parent, cfg, worker_id);
    case STRATA_HOST_MPI:
        return st_mpi_child_add(parent, cfg, worker_id);
    default:
        return st_fail(STRATA_EINVAL, "strata_worker_add_child: unknown host mode %d",
                       (int)cfg->host);
    }
}
