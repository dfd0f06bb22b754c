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

/* Building: init on the stack, add tensors and scalars, submit. */
STRATA_API void strata_args_init(strata_task_args *a);

/* Copy the used part of src (its tensors, scalars and tags) into dst: the
 * same result as assignment for everything a submit reads, without copying
 * the unused 2 KiB. */
STRATA_API void strata_args_copy(strata_task_args *dst, const strata_task_args *src);
STRATA_API int strata_args_add_tensor(strata_task_args *a, const strata_tensor *t, strata_tag tag);
STRATA_API int strata_args_add_scalar(strata_task_args *a, uint64_t value);

/* Reading, in task bodies and chip programs (the view of a builder is
 * strata_args_view, types.h); out-of-range indices return NULL / 0. */
STRATA_API void *strata_args_data(const strata_task_view *a, uint32_t i);
STRATA_API const strata_tensor *strata_args_tensor(const strata_task_view *a, uint32_t i);
STRATA_API uint64_t strata_args_scalar(const strata_task_view *a, uint32_t i);

#ifdef __cplusplus
}
#endif
#endif /* STRATA_TENSOR_H */
