/* util/stamp.h - the clock of tracing and statistics: stamps, and their
 * conversion to nanoseconds.
 *
 * Owns: which counter a stamp reads (chosen once per process), reading it,
 * and turning stamps and their differences into CLOCK_MONOTONIC nanoseconds.
 * Must never: be used for a deadline or a timeout (those are util/clock.h's
 * nanoseconds: a stamp is not a unit of time until it is converted), or be
 * read before st_stamp_setup (strata_worker_create calls it).
 *
 * Why not st_now_ns: a traced task reads the clock five times (submit, ready,
 * dispatch, start, end), and clock_gettime costs about 28 ns here against
 * about 12 ns for the CPU's time-stamp counter. The counter is used only
 * where the kernel itself keeps time by it (its clocksource is "tsc": it
 * checked that the counters of every CPU run in step and never stop) and the
 * CPU says it is invariant; forked processes share it, so a child's stamps
 * and its parent's are on one timeline. Anywhere else a stamp is
 * CLOCK_MONOTONIC nanoseconds and converting it changes nothing.
 */
#ifndef STRATA_UTIL_STAMP_H
#define STRATA_UTIL_STAMP_H

#include <stdint.h>

#include "util/clock.h"

#if defined(__x86_64__) || defined(__i386__)
#include <x86intrin.h>
#define ST_STAMP_HAVE_TSC 1
#else
#define ST_STAMP_HAVE_TSC 0
#endif

/* A process's stamp source: written once by st_stamp_setup, before any
 * thread or child that stamps exists, and only read afterwards. */
typedef struct st_stamp_clock {
    int tsc;       /* stamps are time-stamp counter ticks (else CLOCK_MONOTONIC ns) */
    uint64_t tick; /* a stamp read at setup ... */
    uint64_t ns;   /* ... and the CLOCK_MONOTONIC time beside it */
} st_stamp_clock;

extern st_stamp_clock st_stamp_process_clock;

/* Chooses the process's source (once; later calls return at once). */
void st_stamp_setup(void);

static inline uint64_t st_stamp(void) {
#if ST_STAMP_HAVE_TSC
    if (__builtin_expect(st_stamp_process_clock.tsc, 1))
        return __rdtsc();
#endif
    return st_now_ns();
}

/* Stamps to nanoseconds, measured between two readings of both clocks: the
 * one at setup and one taken when the scale is made. Every stamp taken
 * before the scale lies between the two, so a conversion is off by no more
 * than the jitter of reading a pair (tens of ns), however short the span. */
typedef struct st_stamp_scale {
    uint64_t tick0, ns0;
    double ns_per_tick;
} st_stamp_scale;

/* The process clock's scale, calibrated up to now. */
st_stamp_scale st_stamp_scale_now(void);
/* The scale of clock c with a second reading (tick1, ns1): the pure part of
 * st_stamp_scale_now, for tests. */
st_stamp_scale st_stamp_scale_between(const st_stamp_clock *c, uint64_t tick1, uint64_t ns1);
/* The CLOCK_MONOTONIC ns of a stamp; monotonic in the stamp. */
uint64_t st_stamp_to_ns(const st_stamp_scale *sc, uint64_t stamp);
/* The nanoseconds of a stamp difference (a duration, a sum of durations). */
uint64_t st_stamp_span_ns(const st_stamp_scale *sc, uint64_t ticks);

/* Whether the time-stamp counter may be a stamp: the kernel's current
 * clocksource name (NULL if unknown) and the CPU's invariant-TSC flag. */
int st_stamp_tsc_usable(const char *clocksource, int invariant_tsc);

#endif
