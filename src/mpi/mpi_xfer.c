/* mpi/mpi_xfer.c - the bytes of a tensor that travel (mpi/mpi_xfer.h).
 *
 * Owns: the tag -> direction rule, contiguity, pack and unpack.
 * Must never: read or write past the view (the engine checked the view lies
 * inside its buffer at submit; the remote rank checks again).
 */
#include <string.h>

#include "mpi/mpi_xfer.h"
#include "strata/tensor.h"

int st_xfer_dirs(const strata_tensor *t, uint8_t tag) {
    if (t->mem != STRATA_MEM_HOST)
        return 0;
    switch (tag) {
    case STRATA_IN:
    case STRATA_NO_DEP: /* not tracked: the body may read it, so it goes; nothing returns */
        return ST_XFER_IN;
    case STRATA_OUT:
    case STRATA_OUT_EXISTING:
        return ST_XFER_OUT;
    case STRATA_INOUT:
        return ST_XFER_IN | ST_XFER_OUT;
    default:
        return 0;
    }
}

uint64_t st_xfer_bytes(const strata_tensor *t) {
    uint64_t n = strata_dtype_size((strata_dtype)t->dtype);
    for (int i = 0; i < t->rank; i++)
        n *= (uint64_t)t->shape[i];
    return n;
}

int st_xfer_contiguous(const strata_tensor *t) {
    int64_t expect = 1;
    for (int i = t->rank - 1; i >= 0; i--) {
        if (t->shape[i] != 1 && t->strides[i] != expect)
            return 0;
        expect *= t->shape[i];
    }
    return 1;
}

/* Copy the view's elements, row-major, between the view and a dense array. */
static void walk(const strata_tensor *t, char *view, char *dense, int pack) {
    size_t es = strata_dtype_size((strata_dtype)t->dtype);
    int64_t idx[STRATA_MAX_RANK] = {0};
    int r = t->rank;
    /* the innermost axis is copied as a run when its stride is 1 */
    int64_t inner = t->shape[r - 1];
    int inner_dense = t->strides[r - 1] == 1;
    for (;;) {
        int64_t off = 0;
        for (int i = 0; i < r - 1; i++)
            off += idx[i] * t->strides[i];
        char *row = view + (size_t)off * es;
        if (inner_dense) {
            if (pack)
                memcpy(dense, row, (size_t)inner * es);
            else
                memcpy(row, dense, (size_t)inner * es);
            dense += (size_t)inner * es;
        } else {
            for (int64_t j = 0; j < inner; j++, dense += es) {
                char *e = row + (size_t)(j * t->strides[r - 1]) * es;
                if (pack)
                    memcpy(dense, e, es);
                else
                    memcpy(e, dense, es);
            }
        }
        int ax = r - 2;
        while (ax >= 0 && ++idx[ax] == t->shape[ax])
            idx[ax--] = 0;
        if (ax < 0)
            return;
    }
}

void st_xfer_pack(const strata_tensor *t, void *dst) {
    walk(t, strata_tensor_data(t), dst, 1);
}

void st_xfer_unpack(const strata_tensor *t, const void *src) {
    walk(t, strata_tensor_data(t), (char *)src, 0);
}
