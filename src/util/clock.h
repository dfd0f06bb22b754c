/* util/clock.h - monotonic time in nanoseconds.
 *
 * Owns: the one clock every deadline in strata uses. Must never: use wall time.
 */
#ifndef STRATA_UTIL_CLOCK_H
#define STRATA_UTIL_CLOCK_H

#include <stdint.h>
#include <time.h>

static inline uint64_t st_now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* now + timeout, saturating (UINT64_MAX means "never"). */
static inline uint64_t st_deadline_after(uint64_t timeout_ns) {
    uint64_t now = st_now_ns();
    return timeout_ns >= UINT64_MAX - now ? UINT64_MAX : now + timeout_ns;
}

#endif
