// label: concurrency
/* tests/unit/test_futex.c - waiting on a word (util/futex.h): the raw futex
 * wait and wake with deadlines, the spin-then-park event (st_event) and the
 * futex mutex (st_mutex).
 *
 * Owns: what each call returns (woken, changed, expired), that a waiter
 * parks once its spin is over and is counted as a sleeper while parked, that
 * a set or bump wakes a parked waiter, and mutual exclusion with a parked
 * contender woken by unlock.
 * Must never: assert how long anything took. "Parked" is observed through the
 * event's sleeper count or the thread's scheduler state, never guessed from
 * a delay; every wait a test makes is bounded (10 s) only to turn a lost
 * wake-up into a failure instead of a hang.
 */
#include "test_support.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "util/clock.h"
#include "util/futex.h"

#define SEC TS_SEC
#define BOUND (10 * SEC) /* turns a lost wake-up into a failure */

static void sleep_us(long us) {
    nanosleep(&(struct timespec){us / 1000000, (us % 1000000) * 1000}, NULL);
}

/* Poll `cond(arg)` until it holds or BOUND passes; returns whether it held. */
static int eventually(int (*cond)(void *), void *arg) {
    uint64_t deadline = st_deadline_after(BOUND);
    while (!cond(arg)) {
        if (st_now_ns() >= deadline)
            return 0;
        sleep_us(50);
    }
    return 1;
}

/* The scheduler state of thread `tid` of this process ('S': sleeping). */
static char thread_state(pid_t tid) {
    char path[64];
    snprintf(path, sizeof path, "/proc/self/task/%d/stat", (int)tid);
    char state = ts_stat_state(path);
    return state ? state : '?';
}

/* ---- the raw futex ----------------------------------------------------------------- */

static void futex_wait_on_another_value_returns_at_once(void **state) {
    (void)state;
    _Atomic uint32_t word = 5;
    assert_int_equal(st_futex_wait(&word, 4, UINT64_MAX), 0);
    assert_int_equal(st_futex_wait(&word, 4, st_deadline_after(BOUND)), 0);
}

static void futex_wait_past_its_deadline_times_out(void **state) {
    (void)state;
    _Atomic uint32_t word = 0;
    assert_int_equal(st_futex_wait(&word, 0, 0), -1);                          /* long past */
    assert_int_equal(st_futex_wait(&word, 0, st_now_ns()), -1);                /* just now */
    assert_int_equal(st_futex_wait(&word, 0, st_deadline_after(1000000)), -1); /* parks, expires */
}

typedef struct futex_waiter {
    _Atomic uint32_t word;
    _Atomic pid_t tid;
    int rc;
    uint32_t seen;
} futex_waiter;

static void *wait_for_word_change(void *arg) {
    futex_waiter *fw = arg;
    atomic_store(&fw->tid, (pid_t)syscall(SYS_gettid));
    fw->rc = st_futex_wait(&fw->word, 0, st_deadline_after(BOUND));
    fw->seen = atomic_load(&fw->word);
    return NULL;
}

static int waiter_sleeps(void *arg) {
    futex_waiter *fw = arg;
    pid_t tid = atomic_load(&fw->tid);
    return tid != 0 && thread_state(tid) == 'S';
}

static void futex_wake_wakes_a_parked_waiter(void **state) {
    (void)state;
    futex_waiter fw = {0};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, wait_for_word_change, &fw), 0);
    assert_true(eventually(waiter_sleeps, &fw)); /* parked in the futex wait */
    atomic_store(&fw.word, 1);
    st_futex_wake(&fw.word, INT32_MAX);
    pthread_join(t, NULL);
    assert_int_equal(fw.rc, 0); /* woken, not expired */
    assert_int_equal(fw.seen, 1);
}

/* ---- st_event ------------------------------------------------------------------------ */

typedef struct event_waiter {
    st_event ev;
    uint32_t expected;
    uint32_t spin_ns;
    uint64_t deadline;
    int yielding;
    int rc;
    uint32_t seen;
    int woken; /* returned before its deadline: a wake-up ended the wait, not the clock */
    _Atomic int returned;
    _Atomic pid_t tid;
} event_waiter;

static void *wait_on_event(void *arg) {
    event_waiter *e = arg;
    atomic_store(&e->tid, (pid_t)syscall(SYS_gettid));
    e->rc = e->yielding ? st_event_wait_yielding(&e->ev, e->expected, e->spin_ns, e->deadline)
                        : st_event_wait(&e->ev, e->expected, e->spin_ns, e->deadline);
    e->seen = atomic_load(&e->ev.value);
    e->woken = st_now_ns() < e->deadline;
    atomic_store(&e->returned, 1);
    return NULL;
}

static int event_has_a_sleeper(void *arg) {
    return atomic_load(&((event_waiter *)arg)->ev.sleepers) == 1;
}

/* Counted as a sleeper and asleep: in the futex wait, the only place it sleeps. */
static int event_waiter_parked(void *arg) {
    event_waiter *e = arg;
    return event_has_a_sleeper(e) && thread_state(atomic_load(&e->tid)) == 'S';
}

static void start_event_waiter(event_waiter *e, pthread_t *t, uint32_t spin_ns, int yielding) {
    e->expected = atomic_load(&e->ev.value);
    e->spin_ns = spin_ns;
    e->deadline = st_deadline_after(BOUND);
    e->yielding = yielding;
    assert_int_equal(pthread_create(t, NULL, wait_on_event, e), 0);
}

static void event_wait_on_another_value_returns_at_once(void **state) {
    (void)state;
    st_event ev = {0};
    atomic_store(&ev.value, 3);
    assert_int_equal(st_event_wait(&ev, 2, 20000, st_deadline_after(BOUND)), 0);
    assert_int_equal(st_event_wait_yielding(&ev, 2, 20000, st_deadline_after(BOUND)), 0);
    assert_int_equal(atomic_load(&ev.sleepers), 0);
}

static void event_wait_past_its_deadline_times_out_without_parking(void **state) {
    (void)state;
    st_event ev = {0};
    assert_int_equal(st_event_wait(&ev, 0, 1000000, st_now_ns()), -1);
    assert_int_equal(st_event_wait_yielding(&ev, 0, 1000000, 0), -1);
    assert_int_equal(atomic_load(&ev.sleepers), 0); /* it expired while spinning */
}

static void a_parked_event_wait_expires_at_its_deadline(void **state) {
    (void)state;
    st_event ev = {0};
    /* no spin: straight to the futex, which expires */
    assert_int_equal(st_event_wait(&ev, 0, 0, st_deadline_after(2000000)), -1);
    assert_int_equal(st_event_wait_yielding(&ev, 0, 0, st_deadline_after(2000000)), -1);
    assert_int_equal(atomic_load(&ev.sleepers), 0); /* and is no longer counted */
}

/* A waiter whose value never changes spins for spin_ns and then parks: it is
 * counted as a sleeper (the spin has a bound), and a set wakes it. */
static void check_spin_then_park(int yielding) {
    event_waiter e = {0};
    pthread_t t;
    start_event_waiter(&e, &t, 200000 /* 200 us */, yielding);
    assert_true(eventually(event_has_a_sleeper, &e));
    assert_int_equal(atomic_load(&e.returned), 0);
    st_event_set(&e.ev, 9);
    pthread_join(t, NULL);
    assert_int_equal(e.rc, 0);
    assert_true(e.woken);
    assert_int_equal(e.seen, 9);
    assert_int_equal(atomic_load(&e.ev.sleepers), 0);
}

static void a_waiter_parks_after_its_spin_and_a_set_wakes_it(void **state) {
    (void)state;
    check_spin_then_park(0);
}

static void a_yielding_waiter_parks_after_its_spin_and_a_set_wakes_it(void **state) {
    (void)state;
    check_spin_then_park(1);
}

static void bump_adds_one_and_wakes_a_parked_waiter(void **state) {
    (void)state;
    event_waiter e = {0};
    atomic_store(&e.ev.value, 41);
    pthread_t t;
    start_event_waiter(&e, &t, 0, 0);
    assert_true(eventually(event_has_a_sleeper, &e));
    assert_int_equal(st_event_bump(&e.ev), 42);
    pthread_join(t, NULL);
    assert_int_equal(e.rc, 0);
    assert_true(e.woken);
    assert_int_equal(e.seen, 42);
}

static void set_and_bump_without_sleepers_only_store(void **state) {
    (void)state;
    st_event ev = {0};
    st_event_set(&ev, 7);
    assert_int_equal(atomic_load(&ev.value), 7);
    assert_int_equal(st_event_bump(&ev), 8);
    assert_int_equal(atomic_load(&ev.value), 8);
    assert_int_equal(atomic_load(&ev.sleepers), 0);
}

/* Woken, the waiter is runnable: it either returns or parks again. */
static int asleep_again_or_returned(void *arg) {
    event_waiter *e = arg;
    return atomic_load(&e->returned) || thread_state(atomic_load(&e->tid)) == 'S';
}

/* A wake-up that finds the value unchanged (a spurious return of the futex)
 * sends the waiter back to sleep: it returns only once the value differs. */
static void a_wake_without_a_new_value_does_not_end_the_wait(void **state) {
    (void)state;
    event_waiter e = {0};
    pthread_t t;
    start_event_waiter(&e, &t, 0, 0);
    assert_true(eventually(event_waiter_parked, &e));
    for (int i = 0; i < 3; i++) {
        st_futex_wake(&e.ev.value, INT32_MAX); /* the waiter is runnable from here */
        assert_true(eventually(asleep_again_or_returned, &e));
        assert_int_equal(atomic_load(&e.returned), 0);
    }
    st_event_set(&e.ev, 1);
    pthread_join(t, NULL);
    assert_int_equal(e.rc, 0);
    assert_true(e.woken);
    assert_int_equal(e.seen, 1);
}

/* ---- st_mutex --------------------------------------------------------------------------- */

static void trylock_fails_while_the_mutex_is_held(void **state) {
    (void)state;
    st_mutex m = {0};
    assert_int_equal(st_mutex_trylock(&m), 1);
    assert_int_equal(st_mutex_trylock(&m), 0);
    st_mutex_unlock(&m);
    assert_int_equal(atomic_load(&m.word), 0);
    st_mutex_lock(&m);
    assert_int_equal(st_mutex_trylock(&m), 0);
    st_mutex_unlock(&m);
    assert_int_equal(st_mutex_trylock(&m), 1);
    st_mutex_unlock(&m);
}

typedef struct contender {
    st_mutex *m;
    _Atomic int locked;
    _Atomic int release;
} contender;

static void *lock_hold_unlock(void *arg) {
    contender *c = arg;
    st_mutex_lock(c->m);
    atomic_store(&c->locked, 1);
    uint64_t deadline = st_deadline_after(BOUND);
    while (!atomic_load(&c->release) && st_now_ns() < deadline)
        sleep_us(50);
    st_mutex_unlock(c->m);
    return NULL;
}

static int mutex_has_waiters(void *arg) {
    return atomic_load(&((st_mutex *)arg)->word) == 2;
}

static void unlock_wakes_a_parked_contender(void **state) {
    (void)state;
    st_mutex m = {0};
    st_mutex_lock(&m);
    contender c = {.m = &m};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, lock_hold_unlock, &c), 0);
    assert_true(eventually(mutex_has_waiters, &m)); /* the contender gave up spinning */
    assert_int_equal(atomic_load(&c.locked), 0);
    st_mutex_unlock(&m);
    uint64_t deadline = st_deadline_after(BOUND);
    while (!atomic_load(&c.locked) && st_now_ns() < deadline)
        sleep_us(50);
    assert_int_equal(atomic_load(&c.locked), 1); /* it got the mutex */
    assert_int_equal(st_mutex_trylock(&m), 0);
    atomic_store(&c.release, 1);
    pthread_join(t, NULL);
    assert_int_equal(atomic_load(&m.word), 0);
}

#define COUNTERS 4
#define ROUNDS 20000

typedef struct shared_count {
    st_mutex m;
    long value; /* plain: only the mutex orders the increments */
} shared_count;

static void *add_rounds(void *arg) {
    shared_count *s = arg;
    for (int i = 0; i < ROUNDS; i++) {
        st_mutex_lock(&s->m);
        s->value++;
        st_mutex_unlock(&s->m);
    }
    return NULL;
}

static void the_mutex_excludes_concurrent_holders(void **state) {
    (void)state;
    shared_count s = {0};
    pthread_t t[COUNTERS];
    for (int i = 0; i < COUNTERS; i++)
        assert_int_equal(pthread_create(&t[i], NULL, add_rounds, &s), 0);
    for (int i = 0; i < COUNTERS; i++)
        pthread_join(t[i], NULL);
    assert_int_equal(s.value, (long)COUNTERS * ROUNDS);
    assert_int_equal(atomic_load(&s.m.word), 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(futex_wait_on_another_value_returns_at_once),
        cmocka_unit_test(futex_wait_past_its_deadline_times_out),
        cmocka_unit_test(futex_wake_wakes_a_parked_waiter),
        cmocka_unit_test(event_wait_on_another_value_returns_at_once),
        cmocka_unit_test(event_wait_past_its_deadline_times_out_without_parking),
        cmocka_unit_test(a_parked_event_wait_expires_at_its_deadline),
        cmocka_unit_test(a_waiter_parks_after_its_spin_and_a_set_wakes_it),
        cmocka_unit_test(a_yielding_waiter_parks_after_its_spin_and_a_set_wakes_it),
        cmocka_unit_test(bump_adds_one_and_wakes_a_parked_waiter),
        cmocka_unit_test(set_and_bump_without_sleepers_only_store),
        cmocka_unit_test(a_wake_without_a_new_value_does_not_end_the_wait),
        cmocka_unit_test(trylock_fails_while_the_mutex_is_held),
        cmocka_unit_test(unlock_wakes_a_parked_contender),
        cmocka_unit_test(the_mutex_excludes_concurrent_holders),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
