/* strata/tensor.h - buffers with identity, tensor views and task arguments.
 *
 * Owns: strata_buffer and the calls that build and validate the value types
 * a task is described with (strata_tensor, strata_task_args) and read it
 * (strata_task_view); their layouts are in types.h, shared with the backend
 * ABI.
 * Must never: allocate on behalf of a task or know about runs; a tensor is a
 * plain value that can be copied freely.
 */
#ifndef STRATA_TENSOR_H
#define STRATA_TENSOR_H

#include <stddef.h>
#include <stdint.h>

#include "export.h"
#include "status.h"
#include "types.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Size in bytes of one element, or 0 for an unknown dtype. */
STRATA_API size_t strata_dtype_size(strata_dtype dtype);

/* Number of elements of the view. */
STRATA_API int64_t strata_tensor_numel(const strata_tensor *t);

/* ---- Buffers ------------------------------------------------------------ */

typedef struct strata_worker strata_worker;
typedef struct strata_buffer strata_buffer;

/* Host memory owned by strata, zero-filled, mapped shared so every child
 * process of the worker sees it at the same address. */
STRATA_API int strata_buffer_create(strata_worker *w, size_t nbytes, strata_buffer **out);

/* Give identity to memory the caller already owns (visible to thread-hosted
 * workers only). strata never frees it. */
STRATA_API int strata_buffer_wrap(strata_worker *w, void *data, size_t nbytes, strata_buffer **out);

/* Release the handle (and the memory, if strata allocated it). The caller
 * guarantees no unfinished task still uses it. NULL is a no-op. Device
 * buffers (strata_worker_chip_malloc) are refused (strata_error_message() says
 * so): free them with strata_worker_chip_free. */
STRATA_API void strata_buffer_destroy(strata_buffer *b);

STRATA_API void *strata_buffer_data(const strata_buffer *b);
STRATA_API size_t strata_buffer_size(const strata_buffer *b);

/* A strided view: offset in bytes, shape and strides in elements (strides
 * NULL = row-major contiguous). Every element must lie inside the buffer. */
STRATA_API int strata_tensor_view(const strata_buffer *b, uint64_t offset, strata_dtype dtype,
                                  int rank, const int64_t *shape, const int64_t *strides,
                                  strata_tensor *out);

/* Row-major view of the whole buffer from offset 0. */
STRATA_API int strata_tensor_contiguous(const strata_buffer *b, strata_dtype dtype, int rank,
                                        const int64_t *shape, strata_tensor *out);

/* ---- Task arguments (strata_task_args and strata_task_view, types.h) -------- */

/* Building: init on the stack, add tensors and scalars, submit. Init writes
 * the 16-byte header only: the builder's arrays are read up to their counts. */
STRATA_API void strata_args_init(strata_task_args *a);

/* Copy the used part of src (its tensors, scalars, types, tags and payload)
 * into dst: the same result as assignment for everything a submit reads,
 * without copying the unused 8 KiB. */
STRATA_API void strata_args_copy(strata_task_args *dst, const strata_task_args *src);
STRATA_API int strata_args_add_tensor(strata_task_args *a, const strata_tensor *t, strata_tag tag);
/* A raw u64 scalar (type STRATA_SCALAR_U64), the same as strata_args_add_u64. */
STRATA_API int strata_args_add_scalar(strata_task_args *a, uint64_t value);
STRATA_API int strata_args_add_u64(strata_task_args *a, uint64_t value);
STRATA_API int strata_args_add_i64(strata_task_args *a, int64_t value);
STRATA_API int strata_args_add_f64(strata_task_args *a, double value);
STRATA_API int strata_args_add_f32(strata_task_args *a, float value);
/* The task's opaque payload: nbytes (1..STRATA_MAX_PAYLOAD) copied from
 * bytes, with the task. One per task: a second one fails. */
STRATA_API int strata_args_set_payload(strata_task_args *a, const void *bytes, size_t nbytes);

/* Reading, in task bodies and chip programs (the view of a builder is
 * strata_args_view, types.h); out-of-range indices return NULL / 0. */
STRATA_API void *strata_args_data(const strata_task_view *a, uint32_t i);
STRATA_API const strata_tensor *strata_args_tensor(const strata_task_view *a, uint32_t i);
/* Scalar i's raw u64 bits, whatever its type (0 past the end). */
STRATA_API uint64_t strata_args_scalar(const strata_task_view *a, uint32_t i);

/* Typed reads of scalar i (i counts scalars only, in the order they were
 * added). Always checked: an index past nscalars, or a scalar of another
 * type (an f64 read of an i64, ...), returns 0, sets strata_error_message()
 * to a STRATA_EINVAL message naming the call, the index and both types, and
 * fails what it was made in with that message: inside a sub task body the
 * task (STRATA_ETASK) even if the body returns 0, inside an orchestration
 * function its run (STRATA_EINVAL) even if it returns STRATA_OK. A chip
 * program checks strata_error_message() or the types itself. */
STRATA_API uint64_t strata_args_u64(const strata_task_view *a, uint32_t i);
STRATA_API int64_t strata_args_i64(const strata_task_view *a, uint32_t i);
STRATA_API double strata_args_f64(const strata_task_view *a, uint32_t i);
STRATA_API float strata_args_f32(const strata_task_view *a, uint32_t i);
/* The task's payload and its size in *nbytes (NULL and 0 if it has none; a
 * task without one is not an error). nbytes may be NULL. */
STRATA_API const void *strata_args_payload(const strata_task_view *a, size_t *nbytes);

#ifdef __cplusplus
}
#endif
#endif /* STRATA_TENSOR_H */
