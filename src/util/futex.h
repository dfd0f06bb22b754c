/* util/futex.h - spin-then-park waiting on a 32-bit word (Linux futex).
 *
 * Owns: the only place strata parks a thread on a word.
 * Must never: be used on a word that is not naturally aligned; must never
 * spin without bound (every spin ends in a park).
 */
#ifndef STRATA_UTIL_FUTEX_H
#define STRATA_UTIL_FUTEX_H

#include <stdatomic.h>
#include <stdint.h>

/* Park while *word == expected, until woken or deadline_ns (monotonic,
 * UINT64_MAX = forever). Returns 0 when woken / value changed, -1 on timeout.
 * Spurious returns are possible: callers re-check their condition. */
int st_futex_wait(_Atomic uint32_t *word, uint32_t expected, uint64_t deadline_ns);

/* Wake up to n waiters (INT32_MAX = all). shared: the word is in memory shared
 * between processes (uses the non-private futex op). */
void st_futex_wake(_Atomic uint32_t *word, int n);

static inline void st_cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

/* ---- event word: a value plus a sleeper count, so setters skip the wake
 * syscall when nobody sleeps (the common case with spinning peers). ---- */
typedef struct st_event {
    _Atomic uint32_t value;
    _Atomic uint32_t sleepers;
} st_event;

/* Wait (spin spin_ns, then park) while ev->value == expected. 0 once it
 * differs, -1 at deadline_ns. */
int st_event_wait(st_event *ev, uint32_t expected, uint32_t spin_ns, uint64_t deadline_ns);

/* Like st_event_wait, but yields the CPU from the start of the spin: for a
 * waiter that shares its core with the thread that will answer. */
int st_event_wait_yielding(st_event *ev, uint32_t expected, uint32_t spin_ns, uint64_t deadline_ns);

/* Store a new value and wake every sleeper. */
void st_event_set(st_event *ev, uint32_t value);

/* Increment the value and wake every sleeper; returns the new value. */
uint32_t st_event_bump(st_event *ev);

/* ---- st_mutex: a futex mutex (0 free, 1 locked, 2 locked with waiters).
 * Used instead of pthread_mutex so that trylock/unlock are sequentially
 * consistent, which the engine's combining scheduler relies on. ---- */
typedef struct st_mutex {
    _Atomic uint32_t word;
} st_mutex;

void st_mutex_lock(st_mutex *m);
int st_mutex_trylock(st_mutex *m); /* 1 if acquired */
void st_mutex_unlock(st_mutex *m);

#endif
