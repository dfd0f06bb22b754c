/* core/footprint.c - byte footprints of tensor views, overlap and coverage.
 *
 * Owns: the lattice reasoning below. Must never: allocate, lock, or answer
 * "disjoint" / "covers" without a proof.
 *
 * The exact test. Write every byte a view touches as
 *     offset + sum_k i_k * S_k + j,   0 <= i_k < shape_k,  0 <= j < elem
 * where S_k = strides_k * elem are byte strides: a view is a sum of "byte
 * axes" (S_k, shape_k) plus the element axis (1, elem). Take distinct byte
 * strides (size-1 axes dropped), sort them descending and add 1:
 * L_0 > L_1 > ... > L_{m-1} = 1 - a lattice. Give the view, per level, the
 * count n_i of its axis with that stride (1 if none; two axes on one stride
 * -> no lattice) and write its offset greedily in digits
 *     a_0 = offset / L_0,  a_i = (offset mod L_{i-1}) / L_i.
 * Call it a box when (a_i + n_i) * L_i <= L_{i-1} for every i >= 1, i.e.
 * every digit the view reaches, a_i + i_i, is at most floor(L_{i-1}/L_i) - 1.
 * For such digit vectors d, sum_{j>i} d_j L_j <= sum_{j>i} (L_{j-1} - L_j)
 * = L_i - 1 < L_i, so greedy decomposition of x = sum d_j L_j gives back
 * exactly d: the map from these digit vectors to byte addresses is
 * one-to-one, and the view's bytes are exactly the box
 * { d : a_i <= d_i < a_i + n_i }. (No divisibility between levels is
 * needed.) Hence two boxes on one lattice share a byte iff they intersect on
 * every level, and one contains the other iff it does so on every level.
 * Anything that does not fit this picture is answered conservatively
 * (overlap 1, covers 0).
 *
 * st_footprint_of does the division work once: it stores each view's box on
 * its own lattice (its own strides only). Two views with the same own
 * lattice - tiles of one matrix, ranges of one byte array - compare their
 * stored boxes directly; other pairs refine both boxes onto the union of the
 * two lattices (a box stays a box on a finer lattice or the answer is 1/0).
 */
#include "core/footprint.h"

#include <string.h>

/* Element size; footprints are only built for validated views (known dtype). */
static inline uint32_t elem_size(uint8_t dtype) {
    size_t n = strata_dtype_size((strata_dtype)dtype);
    return n ? (uint32_t)n : 1;
}

static inline uint64_t div_by(uint64_t x, uint64_t d) {
    return (d & (d - 1)) == 0 ? x >> __builtin_ctzll(d)
                              : x / d; /* strides are mostly powers of two */
}

/* Greedy digits of `offset` on lv[0..m) into lo[], and whether the view with
 * counts n[] is a box there. */
static inline int decompose(uint64_t offset, const uint64_t *lv, const uint64_t *n, int m,
                            uint64_t *lo) {
    uint64_t rem = offset;
    for (int i = 0; i < m; i++) {
        uint64_t d = div_by(rem, lv[i]);
        rem -= d * lv[i];
        lo[i] = d;
        if (i > 0) {
            uint64_t reach;
            if (__builtin_mul_overflow(d + n[i], lv[i], &reach) || reach > lv[i - 1])
                return 0; /* a carry: not a box on this lattice */
        }
    }
    return 1;
}

/* The general computation below, specialised to a 1-D view with unit stride
 * (a vector, a byte range, a flattened tile): the commonest argument, built
 * on every submit. Same result field for field. */
static void footprint_of_vector(const strata_tensor *t, uint32_t elem, st_footprint *out) {
    uint64_t n = (uint64_t)t->shape[0];
    out->offset = t->offset;
    out->elem = elem;
    out->rank = 1;
    out->reserved_ = 0;
    memset(out->shape, 0, sizeof out->shape);
    memset(out->strides, 0, sizeof out->strides);
    out->shape[0] = t->shape[0];
    out->strides[0] = 1;
    out->lo = t->offset;
    out->hi = t->offset + n * elem;
    out->dense = 1;
    /* Levels: the axis (byte stride elem, count n) when n > 1, then the
     * element axis (1, elem) unless the axis already has stride 1. */
    int m = 0;
    if (n > 1) {
        out->lv[m] = elem;
        out->box_n[m++] = n;
    }
    if (elem > 1 || m == 0) {
        out->lv[m] = 1;
        out->box_n[m++] = elem;
    }
    if (m == 1) { /* a single level: the offset is the digit */
        out->box_lo[0] = t->offset;
        out->nlev = 1;
        return;
    }
    /* Two levels (elem, 1): a box iff the offset is a multiple of elem. */
    out->box_lo[0] = div_by(t->offset, elem);
    out->box_lo[1] = t->offset - out->box_lo[0] * elem;
    out->nlev = out->box_lo[1] == 0 ? 2 : 0;
}

void st_footprint_of(const strata_tensor *t, st_footprint *out) {
    int rank = t->rank > STRATA_MAX_RANK ? STRATA_MAX_RANK : t->rank;
    uint32_t elem = elem_size(t->dtype);
    if (rank == 1 && t->strides[0] == 1 && t->shape[0] > 0) {
        footprint_of_vector(t, elem, out);
        return;
    }
    out->offset = t->offset;
    out->elem = elem;
    out->rank = (uint8_t)rank;
    out->reserved_ = 0;
    /* axes of size > 1, sorted by stride descending, built in place */
    uint64_t *s = out->lv, *n = out->box_n;
    int m = 0, dup = 0, empty = 0;
    uint64_t span = 0; /* element distance from element 0 to the last element */
    for (int k = 0; k < STRATA_MAX_RANK; k++) { /* unused axes read as 0 */
        out->shape[k] = k < rank ? t->shape[k] : 0;
        out->strides[k] = k < rank ? t->strides[k] : 0;
    }
    for (int k = 0; k < rank; k++) {
        int64_t sh = t->shape[k], st = t->strides[k];
        if (sh <= 0) {
            empty = 1;
            continue;
        }
        span += (uint64_t)(sh - 1) * (uint64_t)st;
        if (sh == 1)
            continue;
        int p = m++;
        while (p > 0 && s[p - 1] < (uint64_t)st) {
            s[p] = s[p - 1];
            n[p] = n[p - 1];
            p--;
        }
        dup |= p > 0 && s[p - 1] == (uint64_t)st;
        s[p] = (uint64_t)st;
        n[p] = (uint64_t)sh;
    }
    out->lo = t->offset;
    out->nlev = 0;
    if (empty) {
        out->hi = t->offset;
        out->dense = 1; /* vacuously */
        return;
    }
    out->hi = t->offset + (span + 1) * elem;
    /* dense: from the smallest stride up, each stride is the product of the
     * counts below it (any axis order: transposed views are dense too) */
    uint64_t expect = 1;
    int dense = 1;
    for (int i = m - 1; i >= 0 && dense; i--) {
        dense = s[i] == expect;
        expect *= n[i];
    }
    out->dense = (uint8_t)dense;
    if (dup)
        return; /* two axes on one stride: no lattice */
    for (int i = 0; i < m; i++)
        s[i] *= elem; /* byte strides, all >= elem, so the element axis comes last */
    if (elem > 1 || m == 0 || s[m - 1] != 1) {
        s[m] = 1;
        n[m] = elem;
        m++;
    }
    if (decompose(t->offset, s, n, m, out->box_lo))
        out->nlev = (uint8_t)m;
}

void st_footprint_whole(uint64_t nbytes, st_footprint *out) {
    memset(out, 0, sizeof *out);
    out->lo = 0;
    out->hi = nbytes;
    out->offset = 0;
    out->elem = 1;
    out->rank = 1;
    out->dense = 1;
    out->shape[0] = (int64_t)nbytes;
    out->strides[0] = 1;
    if (nbytes > 0) {
        out->nlev = 1;
        out->lv[0] = 1;
        out->box_lo[0] = 0;
        out->box_n[0] = nbytes;
    }
}

int st_footprint_equal(const st_footprint *a, const st_footprint *b) {
    if (a->lo != b->lo || a->hi != b->hi || a->offset != b->offset || a->elem != b->elem ||
        a->rank != b->rank || a->dense != b->dense)
        return 0;
    for (int k = 0; k < a->rank && k < STRATA_MAX_RANK; k++)
        if (a->shape[k] != b->shape[k] || a->strides[k] != b->strides[k])
            return 0;
    return 1;
}

/* ---- the lattice ------------------------------------------------------------ */

static inline int same_lattice(const st_footprint *a, const st_footprint *b) {
    if (a->nlev == 0 || a->nlev != b->nlev)
        return 0;
    for (int i = 0; i < a->nlev; i++)
        if (a->lv[i] != b->lv[i])
            return 0;
    return 1;
}

/* Box of view f on the finer lattice lv[0..m) (which holds all of f's own
 * levels). 0 if it is not a box there. */
static int refine_box(const st_footprint *f, const uint64_t *lv, int m, uint64_t *lo, uint64_t *n) {
    for (int i = 0, j = 0; i < m; i++) {
        if (j < f->nlev && lv[i] == f->lv[j])
            n[i] = f->box_n[j++];
        else
            n[i] = 1;
    }
    return decompose(f->offset, lv, n, m, lo);
}

/* Both boxes on the union of the two own lattices. Returns the level count,
 * or 0 if the views do not fit one lattice. */
static int boxes(const st_footprint *a, const st_footprint *b, uint64_t *alo, uint64_t *an,
                 uint64_t *blo, uint64_t *bn) {
    if (a->nlev == 0 || b->nlev == 0)
        return 0;
    uint64_t lv[2 * ST_FP_LEVELS];
    int m = 0, i = 0, j = 0; /* merge two descending lists */
    while (i < a->nlev || j < b->nlev) {
        uint64_t x = j >= b->nlev || (i < a->nlev && a->lv[i] >= b->lv[j]) ? a->lv[i] : b->lv[j];
        if (i < a->nlev && a->lv[i] == x)
            i++;
        if (j < b->nlev && b->lv[j] == x)
            j++;
        lv[m++] = x;
    }
    if (!refine_box(a, lv, m, alo, an) || !refine_box(b, lv, m, blo, bn))
        return 0;
    return m;
}

static inline int boxes_meet(const uint64_t *alo, const uint64_t *an, const uint64_t *blo,
                             const uint64_t *bn, int m) {
    for (int i = 0; i < m; i++)
        if (alo[i] + an[i] <= blo[i] || blo[i] + bn[i] <= alo[i])
            return 0;
    return 1;
}

static inline int box_contains(const uint64_t *alo, const uint64_t *an, const uint64_t *blo,
                               const uint64_t *bn, int m) {
    for (int i = 0; i < m; i++)
        if (blo[i] < alo[i] || blo[i] + bn[i] > alo[i] + an[i])
            return 0;
    return 1;
}

int st_footprint_overlap(const st_footprint *a, const st_footprint *b) {
    if (a->hi <= b->lo || b->hi <= a->lo || a->lo >= a->hi || b->lo >= b->hi)
        return 0; /* disjoint ranges, or an empty view */
    if (a->dense && b->dense)
        return 1;
    if (same_lattice(a, b))
        return boxes_meet(a->box_lo, a->box_n, b->box_lo, b->box_n, a->nlev);
    /* A dense view contains every byte of its range; the other view always
     * touches its first and last byte. */
    if (a->dense &&
        ((b->lo >= a->lo && b->lo < a->hi) || (b->hi - 1 >= a->lo && b->hi - 1 < a->hi)))
        return 1;
    if (b->dense &&
        ((a->lo >= b->lo && a->lo < b->hi) || (a->hi - 1 >= b->lo && a->hi - 1 < b->hi)))
        return 1;
    uint64_t alo[2 * ST_FP_LEVELS], an[2 * ST_FP_LEVELS], blo[2 * ST_FP_LEVELS],
        bn[2 * ST_FP_LEVELS];
    int m = boxes(a, b, alo, an, blo, bn);
    return m == 0 ? 1 : boxes_meet(alo, an, blo, bn, m);
}

/* A contiguous vector's bytes [*lo, *hi): every byte of the range touched. */
static inline int vector_range(const strata_tensor *t, uint64_t *lo, uint64_t *hi) {
    if (t->rank != 1 || t->strides[0] != 1)
        return 0;
    *lo = t->offset;
    *hi = t->offset + (uint64_t)t->shape[0] * elem_size(t->dtype);
    return 1;
}

int st_views_overlap(const strata_tensor *a, const strata_tensor *b) {
    uint64_t alo, ahi, blo, bhi;
    /* st_footprint_overlap's dense case: both ranges non-empty and meeting */
    if (vector_range(a, &alo, &ahi) && vector_range(b, &blo, &bhi))
        return alo < ahi && blo < bhi && alo < bhi && blo < ahi;
    st_footprint fa, fb;
    st_footprint_of(a, &fa);
    st_footprint_of(b, &fb);
    return st_footprint_overlap(&fa, &fb);
}

int st_footprint_covers(const st_footprint *a, const st_footprint *b) {
    if (b->lo >= b->hi)
        return 1; /* nothing to cover */
    if (b->lo < a->lo || b->hi > a->hi || a->lo >= a->hi)
        return 0; /* b's first or last byte lies outside a */
    if (a->dense)
        return 1;
    if (same_lattice(a, b))
        return box_contains(a->box_lo, a->box_n, b->box_lo, b->box_n, a->nlev);
    /* Same element grid from the same start: b's index set is a's, cut short. */
    if (a->elem == b->elem && a->rank == b->rank && a->offset == b->offset) {
        int k = 0;
        while (k < a->rank && a->strides[k] == b->strides[k] && b->shape[k] <= a->shape[k])
            k++;
        if (k == a->rank)
            return 1;
    }
    uint64_t alo[2 * ST_FP_LEVELS], an[2 * ST_FP_LEVELS], blo[2 * ST_FP_LEVELS],
        bn[2 * ST_FP_LEVELS];
    int m = boxes(a, b, alo, an, blo, bn);
    return m == 0 ? 0 : box_contains(alo, an, blo, bn, m);
}
