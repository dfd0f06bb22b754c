/* backends/sim/sim_completion.h - the sticky completion word of one sim run.
 *
 * Owns: the three-state word a launched run's executor publishes to, with
 * the first error kept, and the futex wait on it.
 * Must never: spin while waiting (waiters park on the futex), let a late
 * finish overwrite an abandoned word, or lose the first error.
 *
 * States: ERROR (initial, also "abandoned"), NOT_READY (armed by reset),
 * COMPLETE (the task that brings the remaining count to zero moves
 * NOT_READY -> COMPLETE with release order, so whoever observes COMPLETE
 * also observes every write of every task and the first error). Header-only
 * so the unit tests can exercise it without the backend's shared object.
 */
#ifndef STRATA_SIM_COMPLETION_H
#define STRATA_SIM_COMPLETION_H

#include <errno.h>
#include <linux/futex.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

enum { SIM_DONE_ERROR = 0, SIM_DONE_NOT_READY = 1, SIM_DONE_COMPLETE = 2 };

typedef struct sim_completion {
    _Atomic uint32_t state;      /* SIM_DONE_*; the futex word */
    _Atomic int32_t first_error; /* first non-zero task code, 0 if none */
    _Atomic uint32_t remaining;  /* tasks still to finish */
    _Atomic uint32_t sleepers;   /* waiters parked on state (skip the wake syscall if 0) */
} sim_completion;

static inline uint64_t sim_now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Arm for n > 0 tasks: no error, NOT_READY. */
static inline void sim_completion_reset(sim_completion *c, uint32_t n) {
    atomic_store_explicit(&c->first_error, 0, memory_order_relaxed);
    atomic_store_explicit(&c->remaining, n, memory_order_relaxed);
    atomic_store_explicit(&c->state, SIM_DONE_NOT_READY, memory_order_release);
}

static inline void sim_completion_wake(sim_completion *c) {
    if (atomic_load_explicit(&c->sleepers, memory_order_seq_cst) != 0)
        syscall(SYS_futex, (uint32_t *)&c->state, FUTEX_WAKE_PRIVATE, INT32_MAX, NULL, NULL, 0);
}

/* One task finished with code rc (0 = ok). The last one completes the word. */
static inline void sim_completion_finish(sim_completion *c, int32_t rc) {
    if (rc != 0) {
        int32_t none = 0;
        atomic_compare_exchange_strong_explicit(&c->first_error, &none, rc, memory_order_acq_rel,
                                                memory_order_relaxed);
    }
    if (atomic_fetch_sub_explicit(&c->remaining, 1, memory_order_acq_rel) != 1)
        return;
    uint32_t expected = SIM_DONE_NOT_READY;
    /* seq_cst so the sleeper count read in wake() cannot miss a parking waiter. */
    if (atomic_compare_exchange_strong_explicit(&c->state, &expected, SIM_DONE_COMPLETE,
                                                memory_order_seq_cst, memory_order_relaxed))
        sim_completion_wake(c);
}

/* Give up on the run: ERROR, which a late finish cannot overwrite. */
static inline void sim_completion_abandon(sim_completion *c) {
    atomic_store_explicit(&c->state, SIM_DONE_ERROR, memory_order_seq_cst);
    sim_completion_wake(c);
}

static inline uint32_t sim_completion_state(sim_completion *c) {
    return atomic_load_explicit(&c->state, memory_order_acquire);
}

static inline int32_t sim_completion_error(sim_completion *c) {
    return atomic_load_explicit(&c->first_error, memory_order_acquire);
}

/* Park until the word leaves NOT_READY or deadline_ns (UINT64_MAX = never).
 * Returns the state seen last (NOT_READY means the deadline passed). */
static inline uint32_t sim_completion_wait(sim_completion *c, uint64_t deadline_ns) {
    uint32_t s;
    while ((s = sim_completion_state(c)) == SIM_DONE_NOT_READY) {
        struct timespec ts, *tsp = NULL;
        if (deadline_ns != UINT64_MAX) {
            uint64_t now = sim_now_ns();
            if (now >= deadline_ns)
                return s;
            uint64_t rel = deadline_ns - now;
            ts.tv_sec = (time_t)(rel / 1000000000ull);
            ts.tv_nsec = (long)(rel % 1000000000ull);
            tsp = &ts;
        }
        atomic_fetch_add_explicit(&c->sleepers, 1, memory_order_seq_cst);
        if (atomic_load_explicit(&c->state, memory_order_seq_cst) == SIM_DONE_NOT_READY)
            syscall(SYS_futex, (uint32_t *)&c->state, FUTEX_WAIT_PRIVATE, SIM_DONE_NOT_READY, tsp,
                    NULL, 0);
        atomic_fetch_sub_explicit(&c->sleepers, 1, memory_order_seq_cst);
    }
    return s;
}

#endif
