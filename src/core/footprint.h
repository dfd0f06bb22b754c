/* core/footprint.h - the bytes a tensor view touches, and whether two such
 * byte sets overlap or cover one another.
 *
 * Owns: the conservative overlap / coverage tests dependency tracking is built
 * on (DESIGN §5.2).
 * Must never: report two views as disjoint when they share a byte, or report
 * that one view covers another when it does not (an extra dependency is safe,
 * a missing one is not). Must never allocate or lock; called under the engine
 * lock on the submit path.
 */
#ifndef STRATA_CORE_FOOTPRINT_H
#define STRATA_CORE_FOOTPRINT_H

#include <stdint.h>

#include "strata/tensor.h"

#define ST_FP_LEVELS (STRATA_MAX_RANK + 1)

typedef struct st_footprint {
    uint64_t lo, hi; /* byte range [lo, hi) touched by the view, relative to the buffer start */
    uint64_t offset; /* byte offset of element 0 */
    uint32_t elem;   /* element size in bytes */
    uint8_t rank;    /* 1..STRATA_MAX_RANK */
    uint8_t dense;   /* 1 if the view touches every byte of [lo, hi) */
    /* Precomputed by st_footprint_of/_whole (see footprint.c): the view's own
     * lattice, nlev byte strides descending (last 1), and the box its bytes
     * form on it; nlev == 0 when they form no box. Views on one lattice (tiles
     * of one matrix, ranges of one byte array) are compared in a few
     * instructions. */
    uint8_t nlev;
    uint8_t reserved_;
    int64_t shape[STRATA_MAX_RANK], strides[STRATA_MAX_RANK]; /* elements; unused axes are 0 */
    uint64_t lv[ST_FP_LEVELS], box_lo[ST_FP_LEVELS], box_n[ST_FP_LEVELS];
} st_footprint;

/* Footprint of a validated view (rank 1..5, strides > 0, shape >= 0). A view
 * with no elements has lo == hi == offset and overlaps nothing. */
void st_footprint_of(const strata_tensor *t, st_footprint *out);

/* The whole buffer [0, nbytes), dense. */
void st_footprint_whole(uint64_t nbytes, st_footprint *out);

/* 0 only if a and b provably share no byte, else 1. */
int st_footprint_overlap(const st_footprint *a, const st_footprint *b);

/* st_footprint_overlap of two validated views' footprints, without building
 * them where their byte ranges decide (both contiguous vectors: the
 * commonest arguments, e.g. tiles of one buffer in one task). */
int st_views_overlap(const strata_tensor *a, const strata_tensor *b);

/* 1 only if every byte b touches is provably touched by a, else 0.
 * An empty b is covered by anything. */
int st_footprint_covers(const st_footprint *a, const st_footprint *b);

/* 1 if a and b describe the same view (same fields), else 0. Footprints
 * must come from st_footprint_of/_whole (or be copies of such). */
int st_footprint_equal(const st_footprint *a, const st_footprint *b);

#endif
