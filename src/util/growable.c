/* util/growable.c - the one growth step of a growable array.
 *
 * Owns: st_grow_raw (see util/growable.h).
 * Must never: lose the caller's array on failure, or report (its callers do).
 */
#include "util/growable.h"

#include <string.h>

#include "util/alloc.h"
#include "util/checked.h"

void *st_grow_raw(void *items, uint32_t *cap, uint32_t need, size_t elem, uint32_t initial,
                  const void *inline_buf, size_t *bytes_out) {
    uint64_t ncap = *cap ? *cap : (initial ? initial : 1);
    while (ncap < need)
        ncap *= 2;
    uint64_t bytes;
    if (ncap > UINT32_MAX || !st_mul_u64(ncap, elem, &bytes) || bytes > SIZE_MAX) {
        *bytes_out = SIZE_MAX;
        return NULL;
    }
    *bytes_out = (size_t)bytes;
    void *n;
    if (items && items == inline_buf) {
        n = st_malloc((size_t)bytes);
        if (n)
            memcpy(n, items, (size_t)*cap * elem);
    } else {
        n = st_realloc(items, (size_t)bytes);
    }
    if (n)
        *cap = (uint32_t)ncap;
    return n;
}
