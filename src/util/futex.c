/* util/futex.c - Linux futex wrappers and the spin-then-park wait.
 *
 * Owns: syscalls on futex words. Must never: busy-wait past the spin budget.
 * Uses the shared (non-private) futex ops so that words placed in memory
 * shared with child processes work too.
 */
#include "util/futex.h"

#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <sched.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "util/clock.h"

/* Relax hints spun before the first yield, then a yield every
 * ST_SPIN_YIELD_MASK + 1 of them: when a waiter shares a core with the thread
 * it waits for (likely on small machines), rare yields would put a whole spin
 * slice on every hand-off; when it does not, the answer comes in the burst. */
#define ST_SPIN_BURST 32
#define ST_SPIN_YIELD_MASK 3

int st_futex_wait(_Atomic uint32_t *word, uint32_t expected, uint64_t deadline_ns) {
    struct timespec ts, *tsp = NULL;
    if (deadline_ns != UINT64_MAX) {
        uint64_t now = st_now_ns();
        if (now >= deadline_ns)
            return -1;
        uint64_t rel = deadline_ns - now;
        ts.tv_sec = (time_t)(rel / 1000000000ull);
        ts.tv_nsec = (long)(rel % 1000000000ull);
        tsp = &ts;
    }
    long rc = syscall(SYS_futex, (uint32_t *)word, FUTEX_WAIT, expected, tsp, NULL, 0);
    if (rc == -1 && errno == ETIMEDOUT)
        return -1;
    return 0;
}

void st_futex_wake(_Atomic uint32_t *word, int n) {
    syscall(SYS_futex, (uint32_t *)word, FUTEX_WAKE, n, NULL, NULL, 0);
}

/* Spin while *word == expected: first a short burst of relax hints (a peer
 * on another core answers within a few hundred ns), then yield the CPU every
 * few iterations (a peer sharing this core needs it to make progress).
 * 0: the word changed; 1: spin_ns elapsed; -1: deadline_ns passed. */
static int spin_while_equal(_Atomic uint32_t *word, uint32_t expected, uint32_t spin_ns,
                            unsigned burst, uint64_t deadline_ns) {
    uint64_t spin_end = st_now_ns() + spin_ns;
    for (unsigned n = 1; atomic_load_explicit(word, memory_order_acquire) == expected; n++) {
        st_cpu_relax();
        if (n < burst || (n & ST_SPIN_YIELD_MASK) != 0)
            continue;
        uint64_t now = st_now_ns();
        if (now >= deadline_ns)
            return -1;
        if (now >= spin_end)
            return 1;
        sched_yield();
    }
    return 0;
}

static int event_wait(st_event *ev, uint32_t expected, uint32_t spin_ns, unsigned burst,
                      uint64_t deadline_ns) {
    if (atomic_load(&ev->value) != expected)
        return 0;
    int spun = spin_while_equal(&ev->value, expected, spin_ns, burst, deadline_ns);
    if (spun <= 0)
        return spun;
    int rc = 0;
    atomic_fetch_add(&ev->sleepers, 1); /* seq_cst: pairs with the load in st_event_set */
    while (atomic_load(&ev->value) == expected) {
        if (st_futex_wait(&ev->value, expected, deadline_ns) < 0 &&
            atomic_load(&ev->value) == expected) {
            rc = -1;
            break;
        }
    }
    atomic_fetch_sub(&ev->sleepers, 1);
    return rc;
}

int st_event_wait(st_event *ev, uint32_t expected, uint32_t spin_ns, uint64_t deadline_ns) {
    return event_wait(ev, expected, spin_ns, ST_SPIN_BURST, deadline_ns);
}

int st_event_wait_yielding(st_event *ev, uint32_t expected, uint32_t spin_ns,
                           uint64_t deadline_ns) {
    return event_wait(ev, expected, spin_ns, 0, deadline_ns);
}

void st_event_set(st_event *ev, uint32_t value) {
    atomic_store(&ev->value, value); /* seq_cst: a sleeper either sees it or is counted */
    if (atomic_load(&ev->sleepers) != 0)
        st_futex_wake(&ev->value, INT32_MAX);
}

uint32_t st_event_bump(st_event *ev) {
    uint32_t v = atomic_fetch_add(&ev->value, 1) + 1;
    if (atomic_load(&ev->sleepers) != 0)
        st_futex_wake(&ev->value, INT32_MAX);
    return v;
}

int st_mutex_trylock(st_mutex *m) {
    uint32_t expected = 0;
    return atomic_compare_exchange_strong(&m->word, &expected, 1);
}

void st_mutex_lock(st_mutex *m) {
    uint32_t c = 0;
    if (atomic_compare_exchange_strong(&m->word, &c, 1))
        return;
    for (int i = 0; i < 100; i++) { /* brief spin: hold times are short */
        st_cpu_relax();
        c = 0;
        if (atomic_load_explicit(&m->word, memory_order_relaxed) == 0 &&
            atomic_compare_exchange_strong(&m->word, &c, 1))
            return;
    }
    if (c != 2)
        c = atomic_exchange(&m->word, 2);
    while (c != 0) {
        st_futex_wait(&m->word, 2, UINT64_MAX);
        c = atomic_exchange(&m->word, 2);
    }
}

void st_mutex_unlock(st_mutex *m) {
    if (atomic_exchange(&m->word, 0) == 2)
        st_futex_wake(&m->word, 1);
}
