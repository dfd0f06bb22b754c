/* strata/mpi.h - multi-host: an L4 Worker whose children are L3 Workers on
 * other MPI ranks, and memory that lives on a child.
 *
 * Owns: the MPI environment calls (init, rank, size, finalize, available) and
 * the remote memory calls (strata_worker_remote_*), which work on every
 * next-level child Worker, local or remote. Installed and exported in every
 * build: without MPI, strata_mpi_available() is 0 and the environment calls
 * fail with STRATA_ESTATE naming the packages to install.
 * Must never: expose MPI types (a program may include it without mpi.h).
 *
 * One program, every rank (docs/guide.md "Multi-host"): create the L4, register
 * the same callables, add the children with host = STRATA_HOST_MPI and
 * rank = r (1 .. size - 1), then strata_worker_init(l4). On rank 0 init returns
 * as usual once every child reported ready. On a rank r != 0 init never
 * returns: it brings up the L3 child whose config has rank r, serves rank 0
 * until rank 0's L4 closes, tears the child down, finalises MPI if strata
 * initialised it and exit()s with 0 (1 after a failure). A rank with no child
 * waits for rank 0's close and exits the same way.
 */
#ifndef STRATA_MPI_H
#define STRATA_MPI_H

#include <stddef.h>
#include <stdint.h>

#include "export.h"
#include "tensor.h"
#include "worker.h"

#ifdef __cplusplus
extern "C" {
#endif

/* 1 when the library was built with MPI, else 0. */
STRATA_API int strata_mpi_available(void);

/* Initialise MPI unless the program already did (MPI_Init_thread asking for
 * MPI_THREAD_MULTIPLE; MPI_THREAD_SERIALIZED is accepted too: the library
 * makes its MPI calls under one lock either way). argc/argv may be NULL.
 * STRATA_ESTATE when built without MPI, STRATA_EENDPOINT when MPI refuses or
 * gives less than MPI_THREAD_SERIALIZED. Idempotent. */
STRATA_API int strata_mpi_init(int *argc, char ***argv);

/* This process's rank in MPI_COMM_WORLD and the number of ranks: 0 and 1
 * before strata_mpi_init (or without MPI). */
STRATA_API int strata_mpi_rank(void);
STRATA_API int strata_mpi_size(void);

/* Finalise MPI if strata_mpi_init initialised it (STRATA_OK otherwise too).
 * Once a rank of the job was declared dead, MPI_Finalize is given a bound
 * (docs/guide.md, "Finalising after a death"): past it this returns with MPI
 * left unfinalised, says so on stderr, and no MPI call may follow. */
STRATA_API int strata_mpi_finalize(void);

/* ---- Remote memory: buffers that live where a child Worker lives --------------------------
 * For an MPI child the memory is on its rank and persists across runs until
 * freed ("load the weights once"); its tensors (strata_worker_remote_tensor)
 * are refused on every other child and on sub workers, as chip memory is, and
 * inside the child's L3 they are host tensors of its own buffers. For a local
 * child (thread or process) the memory is a strata_buffer of the parent, which
 * every process of the tree sees; the same calls work, so a program runs
 * unchanged with local or remote children. */
STRATA_API int strata_worker_remote_malloc(strata_worker *w, int worker_id, size_t nbytes,
                                           strata_buffer **out);
/* A view of a remote buffer, as strata_tensor_view() describes it. */
STRATA_API int strata_worker_remote_tensor(strata_worker *w, const strata_buffer *b,
                                           uint64_t offset, strata_dtype dtype, int rank,
                                           const int64_t *shape, const int64_t *strides,
                                           strata_tensor *out);
/* Synchronous copies into / out of a remote buffer at a byte offset; not
 * ordered against tasks (use them between runs). */
STRATA_API int strata_worker_remote_copy_to(strata_worker *w, strata_buffer *b, uint64_t offset,
                                            const void *src, size_t n);
STRATA_API int strata_worker_remote_copy_from(strata_worker *w, const strata_buffer *b,
                                              uint64_t offset, void *dst, size_t n);
/* Free the memory and the handle. */
STRATA_API int strata_worker_remote_free(strata_worker *w, strata_buffer *b);

#ifdef __cplusplus
}
#endif
#endif /* STRATA_MPI_H */
