/* mpi/remote_child.h - what the always-built files of src/mpi/ (the public
 * calls' dispatch: child_add.c, remote_memory.c) ask of the MPI-hosted child.
 *
 * Owns: the calls below, implemented by mpi_endpoint.c in a build with MPI
 * and by mpi_stub.c without it (each call then fails with STRATA_ESTATE
 * naming the packages libopenmpi-dev openmpi-bin, or answers "not an MPI
 * child").
 * Must never: mention an MPI type (the stub build has no mpi.h).
 */
#ifndef STRATA_MPI_REMOTE_CHILD_H
#define STRATA_MPI_REMOTE_CHILD_H

#include <stddef.h>
#include <stdint.h>

#include "strata/tensor.h"
#include "strata/worker.h"

/* strata_worker_add_child for STRATA_HOST_MPI. */
int st_mpi_child_add(strata_worker *parent, const strata_child_config *cfg, int *worker_id);

/* 1 if next-level worker `worker_id` of w is an MPI child. */
int st_mpi_is_child(strata_worker *w, int worker_id);

/* Remote memory on MPI child worker_id (strata/mpi.h): the buffer handle
 * stands for memory on the child's rank (its data pointer is the address
 * there, never dereferenced here). remote_memory.c keeps the record of which
 * buffer belongs to which child and checks ranges before these calls. */
int st_mpi_remote_malloc(strata_worker *w, int worker_id, size_t nbytes, strata_buffer **out);
int st_mpi_remote_copy_to(strata_worker *w, int worker_id, strata_buffer *b, uint64_t offset,
                          const void *src, size_t n);
int st_mpi_remote_copy_from(strata_worker *w, int worker_id, const strata_buffer *b,
                            uint64_t offset, void *dst, size_t n);
int st_mpi_remote_free(strata_worker *w, int worker_id, strata_buffer *b);

/* Test seam: what MPI child worker_id's rank itself counted (a control
 * call, so between runs): the bytes of task tensors it received from rank 0
 * and from other child ranks, sent to rank 0 and to other ranks, the tensors
 * it read from its own valid copy, the bytes of copies it keeps now, and the
 * CPU time its process used so far (user + system, ns: the idle check). */
typedef struct st_mpi_traffic {
    uint64_t from_root, to_root, from_peers, to_peers, cache_hits, cached_bytes, cpu_ns;
} st_mpi_traffic;
int st_mpi_child_traffic(strata_worker *w, int worker_id, st_mpi_traffic *out);
/* Test seam: the bytes of kept copies each MPI child of w's session may hold
 * (0: the default, ST_MPI_CACHE_BYTES). Between runs only. */
int st_mpi_test_set_cache_budget(strata_worker *w, int worker_id, uint64_t bytes);
/* Test seam: the cache ids rank 0 sends to drop per TASK frame of each MPI
 * child of w's session (0: the default, ST_MPI_DROPS_MAX; more is refused).
 * Between runs only. */
int st_mpi_test_set_drops_per_frame(strata_worker *w, int worker_id, uint32_t n);
/* Test seam: the entries of the copy directory of worker_id's session (rank
 * 0's record of the copies its children keep). Between runs only. */
int st_mpi_test_dir_entries(strata_worker *w, int worker_id, uint32_t *out);

#endif
