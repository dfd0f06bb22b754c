/* util/view.h - the arithmetic and validation of tensor views.
 *
 * Owns: element counts, byte sizes, row-major strides and the bounds check of
 * a strided view, all overflow-checked (util/checked.h), and the one builder
 * of a strata_tensor from (memory, offset, dtype, shape, strides) that every
 * public view maker uses (host buffers, chip memory, runtime memory).
 * Must never: know about workers, runs or chips (identity and memory kind are
 * passed in), or allocate.
 */
#ifndef STRATA_UTIL_VIEW_H
#define STRATA_UTIL_VIEW_H

#include <stdint.h>

#include "strata/tensor.h"

/* Elements of a shape whose dimensions are all >= 1: 1 and *out if the count
 * fits in int64, 0 if not. */
int st_shape_numel(int rank, const int64_t *shape, int64_t *out);

/* Bytes of a dense shape of elements of `elem` bytes: 1 if it fits in u64. */
int st_shape_bytes(int rank, const int64_t *shape, uint64_t elem, uint64_t *out);

/* Row-major element strides of a shape (last axis 1). 0 (and *bad_axis set)
 * if a stride does not fit in int64. */
int st_row_major_strides(int rank, const int64_t *shape, int64_t *strides, int *bad_axis);

/* One past the last byte a view touches:
 *   offset + (sum_k (shape_k - 1) * strides_k + 1) * elem.
 * 1 if that fits in u64, 0 if not (then it lies outside any buffer). */
int st_view_end(uint64_t offset, int rank, const int64_t *shape, const int64_t *strides,
                uint64_t elem, uint64_t *end);

/* Where a view's memory comes from. */
typedef struct st_view_memory {
    void *base;
    uint64_t nbytes;
    strata_buffer_id ident;
    uint8_t mem; /* strata_mem_kind */
} st_view_memory;

/* Validate and build a view of `m` (strides NULL = row-major). On failure
 * returns STRATA_EINVAL with a message starting with `what`; *out untouched. */
int st_view_build(const st_view_memory *m, uint64_t offset, strata_dtype dtype, int rank,
                  const int64_t *shape, const int64_t *strides, const char *what,
                  strata_tensor *out);

#endif
