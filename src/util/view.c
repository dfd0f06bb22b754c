/* util/view.c - tensor view arithmetic and the one view builder.
 *
 * Owns: strata_dtype_size, strata_tensor_numel and the checks every view
 * passes (see util/view.h).
 * Must never: compute a size, stride or extent without util/checked.h: a
 * wrapped product is how a view of 2^62 x 2^62 elements once fitted an
 * 8-byte buffer.
 */
#include "util/view.h"

#include <string.h>

#include "util/checked.h"
#include "util/error.h"

static const size_t dtype_sizes[STRATA_DTYPE_COUNT] = {
    [STRATA_U8] = 1,  [STRATA_I8] = 1,   [STRATA_I16] = 2, [STRATA_I32] = 4, [STRATA_I64] = 8,
    [STRATA_F16] = 2, [STRATA_BF16] = 2, [STRATA_F32] = 4, [STRATA_F64] = 8,
};

size_t strata_dtype_size(strata_dtype dtype) {
    return (unsigned)dtype < STRATA_DTYPE_COUNT ? dtype_sizes[dtype] : 0;
}

int st_shape_numel(int rank, const int64_t *shape, int64_t *out) {
    int64_t n = 1;
    for (int k = 0; k < rank; k++)
        if (!st_mul_i64(n, shape[k], &n))
            return 0;
    *out = n;
    return 1;
}

int64_t strata_tensor_numel(const strata_tensor *t) {
    int64_t n;
    if (!t || t->rank < 1 || t->rank > STRATA_MAX_RANK)
        return 0;
    for (int k = 0; k < t->rank; k++)
        if (t->shape[k] < 1)
            return 0;
    return st_shape_numel(t->rank, t->shape, &n) ? n : 0;
}

int st_shape_bytes(int rank, const int64_t *shape, uint64_t elem, uint64_t *out) {
    uint64_t n = elem;
    for (int k = 0; k < rank; k++)
        if (!st_mul_u64(n, (uint64_t)shape[k], &n))
            return 0;
    *out = n;
    return 1;
}

int st_row_major_strides(int rank, const int64_t *shape, int64_t *strides, int *bad_axis) {
    int64_t stride = 1;
    for (int k = rank - 1; k >= 0; k--) {
        strides[k] = stride;
        if (k > 0 && !st_mul_i64(stride, shape[k], &stride)) {
            *bad_axis = k - 1;
            return 0;
        }
    }
    return 1;
}

int st_view_end(uint64_t offset, int rank, const int64_t *shape, const int64_t *strides,
                uint64_t elem, uint64_t *end) {
    uint64_t last = 0; /* element index of the last element */
    for (int k = 0; k < rank; k++) {
        uint64_t step;
        if (!st_mul_u64((uint64_t)(shape[k] - 1), (uint64_t)strides[k], &step) ||
            !st_add_u64(last, step, &last))
            return 0;
    }
    uint64_t bytes;
    if (!st_add_u64(last, 1, &last) || !st_mul_u64(last, elem, &bytes) ||
        !st_add_u64(offset, bytes, end))
        return 0;
    return 1;
}

int st_view_build(const st_view_memory *m, uint64_t offset, strata_dtype dtype, int rank,
                  const int64_t *shape, const int64_t *strides, const char *what,
                  strata_tensor *out) {
    if (rank < 1 || rank > STRATA_MAX_RANK)
        return st_fail(STRATA_EINVAL, "%s: rank %d outside 1..%d", what, rank, STRATA_MAX_RANK);
    size_t elem = strata_dtype_size(dtype);
    if (elem == 0)
        return st_fail(STRATA_EINVAL, "%s: unknown dtype %d", what, (int)dtype);
    strata_tensor t;
    memset(&t, 0, sizeof t);
    for (int k = 0; k < rank; k++) {
        if (shape[k] < 1)
            return st_fail(STRATA_EINVAL, "%s: dimension %d is %lld (must be >= 1)", what, k,
                           (long long)shape[k]);
        t.shape[k] = shape[k];
    }
    if (strides) {
        for (int k = 0; k < rank; k++) {
            if (strides[k] < 1)
                return st_fail(STRATA_EINVAL, "%s: stride %d is %lld (strides must be positive)",
                               what, k, (long long)strides[k]);
            t.strides[k] = strides[k];
        }
    } else {
        int axis = 0;
        if (!st_row_major_strides(rank, t.shape, t.strides, &axis))
            return st_fail(STRATA_EINVAL,
                           "%s: shape too large: the row-major stride of dimension %d does not "
                           "fit in 64 bits",
                           what, axis);
    }
    uint64_t end;
    if (!st_view_end(offset, rank, t.shape, t.strides, elem, &end))
        return st_fail(STRATA_EINVAL,
                       "%s: the view's extent does not fit in 64 bits (it lies outside the "
                       "buffer of %llu bytes)",
                       what, (unsigned long long)m->nbytes);
    if (end > m->nbytes)
        return st_fail(STRATA_EINVAL,
                       "%s: the view ends at byte %llu but the buffer has %llu bytes", what,
                       (unsigned long long)end, (unsigned long long)m->nbytes);
    t.rank = (uint8_t)rank;
    t.dtype = (uint8_t)dtype;
    t.base = m->base;
    t.buffer_bytes = m->nbytes;
    t.offset = offset;
    t.ident = m->ident;
    t.mem = m->mem;
    *out = t;
    return STRATA_OK;
}
