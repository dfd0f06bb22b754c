/* mpi/mpi_stub.c - the MPI calls in a build without MPI.
 *
 * Owns: strata_mpi_* and mpi/remote_child.h when CMake found no MPI: nothing
 * is an MPI child, and every call that needs MPI fails with STRATA_ESTATE
 * saying the library was built without it and which packages bring it.
 * Must never: be built together with the real mpi_*.c files.
 */
#include "mpi/remote_child.h"
#include "strata/mpi.h"
#include "util/error.h"

#define ST_NO_MPI                                                                                  \
    "strata was built without MPI (install libopenmpi-dev openmpi-bin and configure again)"

int strata_mpi_available(void) {
    return 0;
}

int strata_mpi_init(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    return st_fail(STRATA_ESTATE, "strata_mpi_init: " ST_NO_MPI);
}

int strata_mpi_rank(void) {
    return 0;
}

int strata_mpi_size(void) {
    return 1;
}

int strata_mpi_finalize(void) {
    return STRATA_OK;
}

int st_mpi_child_add(strata_worker *parent, const strata_child_config *cfg, int *worker_id) {
    (void)parent;
    (void)cfg;
    (void)worker_id;
    return st_fail(STRATA_ESTATE, "strata_worker_add_child: host STRATA_HOST_MPI: " ST_NO_MPI);
}

int st_mpi_is_child(strata_worker *w, int worker_id) {
    (void)w;
    (void)worker_id;
    return 0;
}

int st_mpi_remote_malloc(strata_worker *w, int worker_id, size_t nbytes, strata_buffer **out) {
    (void)w;
    (void)worker_id;
    (void)nbytes;
    (void)out;
    return st_fail(STRATA_ESTATE, "strata_worker_remote_malloc: " ST_NO_MPI);
}

int st_mpi_remote_copy_to(strata_worker *w, int worker_id, strata_buffer *b, uint64_t offset,
                          const void *src, size_t n) {
    (void)w, (void)worker_id, (void)b, (void)offset, (void)src, (void)n;
    return st_fail(STRATA_ESTATE, "strata_worker_remote_copy_to: " ST_NO_MPI);
}

int st_mpi_remote_copy_from(strata_worker *w, int worker_id, const strata_buffer *b,
                            uint64_t offset, void *dst, size_t n) {
    (void)w, (void)worker_id, (void)b, (void)offset, (void)dst, (void)n;
    return st_fail(STRATA_ESTATE, "strata_worker_remote_copy_from: " ST_NO_MPI);
}

int st_mpi_remote_free(strata_worker *w, int worker_id, strata_buffer *b) {
    (void)w, (void)worker_id, (void)b;
    return st_fail(STRATA_ESTATE, "strata_worker_remote_free: " ST_NO_MPI);
}

int st_mpi_test_set_cache_budget(strata_worker *w, int worker_id, uint64_t bytes) {
    (void)w;
    (void)worker_id;
    (void)bytes;
    return st_fail(STRATA_ESTATE, "st_mpi_test_set_cache_budget: " ST_NO_MPI);
}

int st_mpi_test_set_drops_per_frame(strata_worker *w, int worker_id, uint32_t n) {
    (void)w, (void)worker_id, (void)n;
    return st_fail(STRATA_ESTATE, "st_mpi_test_set_drops_per_frame: " ST_NO_MPI);
}

int st_mpi_test_dir_entries(strata_worker *w, int worker_id, uint32_t *out) {
    (void)w, (void)worker_id, (void)out;
    return st_fail(STRATA_ESTATE, "st_mpi_test_dir_entries: " ST_NO_MPI);
}

int st_mpi_child_traffic(strata_worker *w, int worker_id, st_mpi_traffic *out) {
    (void)w, (void)worker_id, (void)out;
    return st_fail(STRATA_ESTATE, "st_mpi_child_traffic: " ST_NO_MPI);
}
