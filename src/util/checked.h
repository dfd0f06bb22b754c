/* util/checked.h - overflow-checked arithmetic on sizes, counts and offsets.
 *
 * Owns: the one way strata computes a size, count, stride or offset from user
 * input: every such product or sum goes through these, so a wrapped value can
 * never pass a bounds check or size an allocation.
 * Must never: report errors itself (callers know what the value was for and
 * name it in their message); abort; depend on anything above util.
 */
#ifndef STRATA_UTIL_CHECKED_H
#define STRATA_UTIL_CHECKED_H

#include <stdint.h>

/* Each returns 1 and stores the result if it fits, 0 (out untouched) if not. */

static inline int st_add_u64(uint64_t a, uint64_t b, uint64_t *out) {
    uint64_t r;
    if (__builtin_add_overflow(a, b, &r))
        return 0;
    *out = r;
    return 1;
}

static inline int st_mul_u64(uint64_t a, uint64_t b, uint64_t *out) {
    uint64_t r;
    if (__builtin_mul_overflow(a, b, &r))
        return 0;
    *out = r;
    return 1;
}

static inline int st_mul_i64(int64_t a, int64_t b, int64_t *out) {
    int64_t r;
    if (__builtin_mul_overflow(a, b, &r))
        return 0;
    *out = r;
    return 1;
}

/* Round x up to a multiple of align (a power of two). */
static inline int st_round_up_u64(uint64_t x, uint64_t align, uint64_t *out) {
    uint64_t r;
    if (!st_add_u64(x, align - 1, &r))
        return 0;
    *out = r & ~(align - 1);
    return 1;
}

#endif
