/* util/growable.h - growing an array geometrically.
 *
 * Owns: the one growth policy of every array in the library that grows with
 * use (dependency lists, scope lists, ready queues, tensor map tables,
 * chip buffer lists, the sim backend's tables): at least `initial`
 * elements, then doubling; the size computed with checked arithmetic; the
 * first growth out of inline storage copies instead of reallocating; and an
 * ENOMEM message naming what could not grow and how big.
 * Must never: free or move the array on failure (the caller's array and
 * capacity stay as they were), or decide when to grow (callers test
 * `n == cap` themselves, so the common path costs no call).
 */
#ifndef STRATA_UTIL_GROWABLE_H
#define STRATA_UTIL_GROWABLE_H

#include <stddef.h>
#include <stdint.h>

#include "util/error.h"

/* Room for at least `need` elements of `elem` bytes in `items` (capacity
 * *cap). `inline_buf` is the array's inline storage (NULL if it has none):
 * while items points there it is copied out, never reallocated or freed.
 * Returns the array to use from now on, with *cap updated; NULL if memory ran
 * out or the size does not fit (then *bytes is what was asked for, SIZE_MAX
 * if it does not fit), leaving items and *cap untouched. Reports nothing: the
 * sim backend, which has its own way of reporting, uses it as it is. */
void *st_grow_raw(void *items, uint32_t *cap, uint32_t need, size_t elem, uint32_t initial,
                  const void *inline_buf, size_t *bytes);

/* st_grow_raw, and on failure the thread's error set to STRATA_ENOMEM naming
 * `what` and the size. */
static inline void *st_grow(void *items, uint32_t *cap, uint32_t need, size_t elem,
                            uint32_t initial, const void *inline_buf, const char *what) {
    size_t bytes = 0;
    void *n = st_grow_raw(items, cap, need, elem, initial, inline_buf, &bytes);
    if (!n)
        st_fail_nomem(what, bytes);
    return n;
}

#endif
