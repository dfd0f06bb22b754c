/* core/footprint.c - byte footprints of tensor views, overlap and coverage.
 *
 * Owns: the lattice reasoning below. Must never: allocate, lock, or answer
 * "disjoint" / "covers" without a proof.
 *
 * The exact test. Write every byte a view touches as
 *     offset + sum_k i_k * S_k + j,   0 <= i_k < shape_k,  0 <= j < elem
 * where S_k = strides_k * elem are byte strides: a view is a sum of "byte
 * axes" (S_k, shape_k) plus the element axis (1, elem). Take the distinct
 * byte strides of both views' axes (size-1 axes dropped), sort them
 * descending and add 1: L_0 > L_1 > ... > L_{m-1} = 1. When every L_i is a
 * multiple of L_{i+1} this is a mixed-radix number system: each byte address
 * x has unique digits d_0 = x / L_0, d_i = (x mod L_{i-1}) / L_i, with
 * 0 <= d_i < L_{i-1}/L_i for i >= 1. Give each view, per level, the count n_i
 * of its axis with that stride (1 if none; two axes of one view on one level
 * -> give up) and the digits a_i of its offset. If a_i + n_i <= L_{i-1}/L_i
 * for every i >= 1 then adding i_k * S_k never carries, so the view's bytes
 * are exactly the box { d : a_i <= d_i < a_i + n_i }. Since digits are
 * unique, two boxes share a byte iff they intersect on every level, and one
 * contains the other iff it does so on every level. Anything that does not
 * fit this picture is answered conservatively (overlap 1, covers 0).
 *
 * st_footprint_of does the division work once: it stores each view's box on
 * its own lattice (its own strides only). Two views with the same own
 * lattice - the common case of tiles of one matrix - compare their stored
 * boxes directly; other pairs refine both boxes onto the union lattice.
 */
#include "core/footprint.h"

#include <string.h>

static uint32_t elem_size(uint8_t dtype) {
    /* Kept local so this module depends on nothing but the header's types. */
    static const uint8_t sizes[STRATA_DTYPE_COUNT] = {
        [STRATA_U8] = 1,  [STRATA_I8] = 1,   [STRATA_I16] = 2, [STRATA_I32] = 4, [STRATA_I64] = 8,
        [STRATA_F16] = 2, [STRATA_BF16] = 2, [STRATA_F32] = 4, [STRATA_F64] = 8,
    };
    return dtype < STRATA_DTYPE_COUNT ? sizes[dtype] : 1;
}

/* Dense: ignoring size-1 axes, the axes sorted by stride are nested and
 * contiguous (smallest stride 1, each next stride = previous stride * shape),
 * so the elements tile [lo, hi) exactly. Any axis order (transposed) is fine. */
static int is_dense(const int64_t *shape, const int64_t *strides, int rank) {
    int64_t s[STRATA_MAX_RANK], n[STRATA_MAX_RANK];
    int m = 0;
    for (int k = 0; k < rank; k++) {
        if (shape[k] == 0)
            return 1; /* empty view: vacuously dense */
        if (shape[k] == 1)
            continue;
        int p = m++;
        while (p > 0 && s[p - 1] > strides[k]) { /* insertion sort, ascending stride */
            s[p] = s[p - 1];
            n[p] = n[p - 1];
            p--;
        }
        s[p] = strides[k];
        n[p] = shape[k];
    }
    int64_t expect = 1;
    for (int i = 0; i < m; i++) {
        if (s[i] != expect)
            return 0;
        expect *= n[i];
    }
    return 1;
}

/* The view's own lattice: its byte axes (size-1 axes dropped, the element
 * axis (1, elem) added) sorted by stride, plus level 1; valid if no two axes
 * share a stride, each stride divides the next larger one, and the offset's
 * digits never carry. Leaves nlev 0 otherwise. */
static void own_lattice(st_footprint *f) {
    uint64_t s[ST_FP_LEVELS], n[ST_FP_LEVELS];
    int m = 0;
    f->nlev = 0;
    for (int k = 0; k < f->rank; k++) {
        if (f->shape[k] <= 1)
            continue;
        uint64_t st = (uint64_t)f->strides[k] * f->elem;
        int p = m++;
        while (p > 0 && s[p - 1] < st) { /* insertion sort, descending */
            s[p] = s[p - 1];
            n[p] = n[p - 1];
            p--;
        }
        if (p > 0 && s[p - 1] == st)
            return; /* two axes on one stride (aliasing or worse) */
        s[p] = st;
        n[p] = (uint64_t)f->shape[k];
    }
    /* every axis stride is >= elem, so the element axis comes last */
    if (f->elem > 1 || m == 0 || s[m - 1] != 1) {
        s[m] = 1;
        n[m] = f->elem;
        m++;
    }
    uint64_t rem = f->offset;
    for (int i = 0; i < m; i++) {
        if (i + 1 < m && s[i] % s[i + 1] != 0)
            return;
        f->box_lo[i] = rem / s[i];
        rem %= s[i];
        if (i > 0 && f->box_lo[i] + n[i] > s[i - 1] / s[i])
            return;
        f->lv[i] = s[i];
        f->box_n[i] = n[i];
    }
    f->nlev = (uint8_t)m;
}

void st_footprint_of(const strata_tensor *t, st_footprint *out) {
    memset(out, 0, sizeof *out);
    int rank = t->rank > STRATA_MAX_RANK ? STRATA_MAX_RANK : t->rank;
    uint32_t elem = elem_size(t->dtype);
    out->offset = t->offset;
    out->elem = elem;
    out->rank = (uint8_t)rank;
    int empty = 0;
    uint64_t span = 0; /* element distance from element 0 to the last element */
    for (int k = 0; k < rank; k++) {
        out->shape[k] = t->shape[k];
        out->strides[k] = t->strides[k];
        if (t->shape[k] <= 0)
            empty = 1;
        else
            span += (uint64_t)(t->shape[k] - 1) * (uint64_t)t->strides[k];
    }
    out->lo = t->offset;
    out->hi = empty ? t->offset : t->offset + (span + 1) * elem;
    out->dense = (uint8_t)(empty ? 1 : is_dense(t->shape, t->strides, rank));
    if (!empty)
        own_lattice(out);
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

static int add_level(uint64_t *lv, int m, uint64_t s) {
    int p = 0;
    while (p < m && lv[p] > s)
        p++;
    if (p < m && lv[p] == s)
        return m;
    memmove(lv + p + 1, lv + p, (size_t)(m - p) * sizeof *lv);
    lv[p] = s;
    return m + 1;
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
    uint64_t rem = f->offset;
    for (int i = 0; i < m; i++) {
        lo[i] = rem / lv[i];
        rem %= lv[i];
        if (i > 0 && lo[i] + n[i] > lv[i - 1] / lv[i])
            return 0; /* a carry: not a box on this lattice */
    }
    return 1;
}

/* Both boxes on the union of the two own lattices. Returns the level count,
 * or 0 if the views do not fit one lattice. */
static int boxes(const st_footprint *a, const st_footprint *b, uint64_t *alo, uint64_t *an,
                 uint64_t *blo, uint64_t *bn) {
    if (a->nlev == 0 || b->nlev == 0)
        return 0;
    uint64_t lv[2 * ST_FP_LEVELS];
    int m = 0;
    for (int i = 0; i < a->nlev; i++)
        m = add_level(lv, m, a->lv[i]);
    for (int i = 0; i < b->nlev; i++)
        m = add_level(lv, m, b->lv[i]);
    for (int i = 0; i + 1 < m; i++)
        if (lv[i] % lv[i + 1] != 0)
            return 0;
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
    if (a->lo >= a->hi || b->lo >= b->hi)
        return 0; /* an empty view touches nothing */
    if (a->hi <= b->lo || b->hi <= a->lo)
        return 0;
    if (a->dense && b->dense)
        return 1;
    if (same_lattice(a, b))
        return boxes_meet(a->box_lo, a->box_n, b->box_lo, b->box_n, a->nlev);
    /* A dense view contains every byte of its range; the other view always
     * touches its first and last byte. */
    if (a->dense && ((b->lo >= a->lo && b->lo < a->hi) || (b->hi - 1 >= a->lo && b->hi - 1 < a->hi)))
        return 1;
    if (b->dense && ((a->lo >= b->lo && a->lo < b->hi) || (a->hi - 1 >= b->lo && a->hi - 1 < b->hi)))
        return 1;
    uint64_t alo[2 * ST_FP_LEVELS], an[2 * ST_FP_LEVELS], blo[2 * ST_FP_LEVELS], bn[2 * ST_FP_LEVELS];
    int m = boxes(a, b, alo, an, blo, bn);
    return m == 0 ? 1 : boxes_meet(alo, an, blo, bn, m);
}

int st_footprint_covers(const st_footprint *a, const st_footprint *b) {
    if (b->lo >= b->hi)
        return 1; /* nothing to cover */
    if (a->lo >= a->hi)
        return 0;
    if (b->lo < a->lo || b->hi > a->hi)
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
    uint64_t alo[2 * ST_FP_LEVELS], an[2 * ST_FP_LEVELS], blo[2 * ST_FP_LEVELS], bn[2 * ST_FP_LEVELS];
    int m = boxes(a, b, alo, an, blo, bn);
    return m == 0 ? 0 : box_contains(alo, an, blo, bn, m);
}
