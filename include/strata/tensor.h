/* strata/tensor.h - buffers with identity, tensor views and task arguments.
 *
 * Owns: the value types a task is described with (strata_tensor,
 * strata_task_args) and the calls that build and validate them.
 * Must never: allocate on behalf of a task or know about runs; a tensor is a
 * plain value that can be copied freely.
 */
#ifndef STRATA_TENSOR_H
#define STRATA_TENSOR_H

#include <stddef.h>
#include <stdint.h>

#include "export.h"
#include "status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define STRATA_MAX_RANK 5     /* dimensions of one tensor view */
#define STRATA_MAX_TENSORS 16 /* tensor arguments of one task (or group member) */
#define STRATA_MAX_SCALARS 16 /* u64 scalar arguments of one task (or group member) */

typedef enum strata_dtype {
    STRATA_U8 = 0,
    STRATA_I8,
    STRATA_I16,
    STRATA_I32,
    STRATA_I64,
    STRATA_F16,
    STRATA_BF16,
    STRATA_F32,
    STRATA_F64,
    STRATA_DTYPE_COUNT
} strata_dtype;

/* Size in bytes of one element, or 0 for an unknown dtype. */
STRATA_API size_t strata_dtype_size(strata_dtype dtype);

/* How a task uses a tensor; dependencies are inferred from it (see docs/guide.md):
 *   IN            waits for the last writer of overlapping bytes
 *   OUT           waits for the last writer and every reader since; becomes the writer.
 *                 An OUT tensor without memory (data == NULL) gets runtime memory.
 *   INOUT         like OUT, and reads the previous contents
 *   OUT_EXISTING  like OUT on memory the caller already owns (never allocated)
 *   NO_DEP        no dependency tracking at all */
typedef enum strata_tag {
    STRATA_IN = 0,
    STRATA_OUT,
    STRATA_INOUT,
    STRATA_OUT_EXISTING,
    STRATA_NO_DEP
} strata_tag;

/* Where a buffer's memory lives. Host memory is visible to every child of the
 * worker; device memory belongs to one chip (owner_worker). */
typedef enum strata_mem_kind { STRATA_MEM_HOST = 0, STRATA_MEM_DEVICE = 1 } strata_mem_kind;

/* The stable identity dependencies are keyed on. Two tensors alias only if
 * their identities are equal; raw addresses are never compared. */
typedef struct strata_buffer_id {
    uint64_t id;         /* unique within one worker, never reused (0 = none) */
    uint32_t generation; /* bumped when the same id is re-bound */
    int32_t owner;       /* -1 for host memory, else the owning next-level worker id */
} strata_buffer_id;

/* A view of a buffer. Filled by strata_tensor_view()/strata_tensor_contiguous()
 * or by strata_orch_alloc(); treat the fields as read-only. */
typedef struct strata_tensor {
    void *base;             /* start of the buffer (the view starts at base + offset) */
    uint64_t buffer_bytes;  /* size of the whole buffer */
    uint64_t offset;        /* byte offset of element [0,...,0] */
    strata_buffer_id ident; /* identity of the buffer */
    uint8_t dtype;          /* strata_dtype */
    uint8_t rank;           /* 1..STRATA_MAX_RANK (0 only for an unset tensor) */
    uint8_t mem;            /* strata_mem_kind */
    uint8_t reserved_;      /* zero */
    uint32_t reserved2_;    /* zero */
    int64_t shape[STRATA_MAX_RANK];
    int64_t strides[STRATA_MAX_RANK]; /* in elements, each > 0 */
    uint64_t holder_; /* internal: task that owns runtime memory (0 for user memory) */
} strata_tensor;

/* Address of element [0,...,0]. */
static inline void *strata_tensor_data(const strata_tensor *t) {
    return t->base ? (void *)((char *)t->base + t->offset) : (void *)0;
}

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

/* ---- Task arguments -------------------------------------------------------- */

/* Arguments of one task: up to STRATA_MAX_TENSORS tagged tensors and
 * STRATA_MAX_SCALARS u64 scalars. A value type: init on the stack, fill, pass
 * to a submit call (which copies it). Adding past a limit fails and marks the
 * args invalid, so the later submit fails too instead of dropping arguments. */
typedef struct strata_task_args {
    uint32_t ntensors;
    uint32_t nscalars;
    int32_t invalid; /* nonzero once an add failed */
    uint32_t reserved_;
    uint8_t tags[STRATA_MAX_TENSORS]; /* strata_tag */
    uint64_t scalars[STRATA_MAX_SCALARS];
    strata_tensor tensors[STRATA_MAX_TENSORS];
} strata_task_args;

STRATA_API void strata_args_init(strata_task_args *a);

/* Copy the used part of src (its tensors, scalars and tags) into dst. The args
 * a task body receives are only valid up to their last used tensor (strata
 * stores them compactly): copy them with this call, never by assignment. */
STRATA_API void strata_args_copy(strata_task_args *dst, const strata_task_args *src);
STRATA_API int strata_args_add_tensor(strata_task_args *a, const strata_tensor *t, strata_tag tag);
STRATA_API int strata_args_add_scalar(strata_task_args *a, uint64_t value);

/* Typed accessors for task bodies; out-of-range indices return NULL / 0. */
STRATA_API void *strata_args_data(const strata_task_args *a, uint32_t i);
STRATA_API const strata_tensor *strata_args_tensor(const strata_task_args *a, uint32_t i);
STRATA_API uint64_t strata_args_scalar(const strata_task_args *a, uint32_t i);

#ifdef __cplusplus
}
#endif
#endif /* STRATA_TENSOR_H */
