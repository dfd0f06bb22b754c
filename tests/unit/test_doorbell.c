// label: concurrency
/* tests/unit/test_doorbell.c - the mailbox doorbells (st_mbox_ring,
 * st_mbox_wait_bell) between two threads over one shared mapping.
 *
 * Owns: a ping-pong over the control frame's two bells, round after round,
 * each side seeing the other's payload word; that a waiter whose spin is
 * over parks (counted among the bell's sleepers) and a ring wakes it; that a
 * deadline ends a wait with -1 and a changed value ends it at once with 0.
 * Must never: assert timing, or wait without a bound (10 s turns a lost
 * ring into a failure). Parking is observed through the sleeper count.
 */
#include <pthread.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "test_support.h"

#include "ipc/mailbox.h"
#include "ipc/shm_region.h"
#include "util/clock.h"

#define BOUND (10 * TS_SEC)
#define ROUNDS 20000

typedef struct pong_ctx {
    st_mbox *m;
    int failed;
} pong_ctx;

static void *ponger(void *arg) {
    pong_ctx *c = arg;
    st_mbox_frame *ctl = st_mbox_control(c->m);
    uint32_t seen = 0;
    for (uint32_t r = 1; r <= ROUNDS; r++) {
        if (st_mbox_wait_bell(&ctl->child_bell, seen, 2000, st_deadline_after(BOUND)) != 0) {
            c->failed = 1;
            return NULL;
        }
        seen = atomic_load(&ctl->child_bell.value);
        if (atomic_load_explicit(&ctl->state, memory_order_acquire) != r)
            c->failed = 2; /* the ring came before the ping's word */
        ctl->result = r;                 /* the pong's payload */
        st_mbox_publish(ctl, (st_mbox_state)(r + 1)); /* published, then rung */
        st_mbox_ring(&ctl->parent_bell);
    }
    return NULL;
}

static void two_threads_ping_pong_over_the_bells(void **state) {
    (void)state;
    st_shm r;
    assert_ok(st_shm_create("doorbell test", sizeof(st_mbox), &r));
    st_mbox *m = r.base;
    st_mbox_init(m);
    st_mbox_frame *ctl = st_mbox_control(m);
    pong_ctx c = {.m = m};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, ponger, &c), 0);
    uint32_t seen = 0, lost = 0, wrong = 0;
    for (uint32_t rd = 1; rd <= ROUNDS && !lost; rd++) {
        st_mbox_publish(ctl, (st_mbox_state)rd); /* the ping, as a counting word */
        st_mbox_ring(&ctl->child_bell);
        if (st_mbox_wait_bell(&ctl->parent_bell, seen, 2000, st_deadline_after(BOUND)) != 0) {
            lost = 1;
            break;
        }
        seen = atomic_load(&ctl->parent_bell.value);
        wrong += st_mbox_state_of(ctl) != rd + 1 || ctl->result != rd;
    }
    assert_int_equal(pthread_join(t, NULL), 0);
    assert_int_equal(lost, 0);
    assert_int_equal(c.failed, 0);
    assert_int_equal(wrong, 0);
    assert_int_equal(atomic_load(&ctl->parent_bell.value), ROUNDS);
    assert_int_equal(atomic_load(&ctl->child_bell.value), ROUNDS);
    st_shm_destroy(&r);
}

typedef struct parked_ctx {
    st_event *bell;
    uint32_t seen;
    _Atomic int rc;
    _Atomic int done;
} parked_ctx;

static void *parked_waiter(void *arg) {
    parked_ctx *p = arg;
    atomic_store(&p->rc, st_mbox_wait_bell(p->bell, p->seen, 0, st_deadline_after(BOUND)));
    atomic_store(&p->done, 1);
    return NULL;
}

static void a_parked_waiter_is_woken_by_a_ring(void **state) {
    (void)state;
    st_shm r;
    assert_ok(st_shm_create("doorbell test", sizeof(st_mbox), &r));
    st_mbox *m = r.base;
    st_mbox_init(m);
    st_event *bell = &st_mbox_control(m)->child_bell;
    parked_ctx p = {.bell = bell, .seen = atomic_load(&bell->value), .rc = 99};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, parked_waiter, &p), 0);
    /* parked: counted among the sleepers (spin 0: it parks at once) */
    uint64_t deadline = st_deadline_after(BOUND);
    while (atomic_load(&bell->sleepers) == 0 && st_now_ns() < deadline)
        nanosleep(&(struct timespec){0, 50000}, NULL);
    assert_int_equal(atomic_load(&bell->sleepers), 1);
    assert_int_equal(atomic_load(&p.done), 0);
    st_mbox_ring(bell);
    assert_int_equal(pthread_join(t, NULL), 0);
    assert_int_equal(atomic_load(&p.rc), 0);
    assert_int_equal(atomic_load(&bell->sleepers), 0);
    assert_int_equal(atomic_load(&bell->value), p.seen + 1);
    st_shm_destroy(&r);
}

static void a_deadline_ends_a_wait_and_a_rung_bell_does_not_wait(void **state) {
    (void)state;
    static st_mbox m;
    st_mbox_init(&m);
    st_event *bell = &st_mbox_control(&m)->parent_bell;
    assert_int_equal(st_mbox_wait_bell(bell, 0, 1000, 0), -1);                     /* long past */
    assert_int_equal(st_mbox_wait_bell(bell, 0, 1000, st_deadline_after(2000000)), -1); /* parks */
    assert_int_equal(atomic_load(&bell->sleepers), 0);
    st_mbox_ring(bell);
    assert_int_equal(st_mbox_wait_bell(bell, 0, 1000, 0), 0); /* differs: no wait at all */
    assert_int_equal(st_mbox_wait_bell(bell, 1, 0, st_deadline_after(1000000)), -1);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(two_threads_ping_pong_over_the_bells),
        cmocka_unit_test(a_parked_waiter_is_woken_by_a_ring),
        cmocka_unit_test(a_deadline_ends_a_wait_and_a_rung_bell_does_not_wait),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
