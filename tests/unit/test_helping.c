// label: concurrency
/* tests/unit/test_helping.c - a thread waiting for its run runs sub tasks a
 * sub worker has not started (help_while_waiting), and only those.
 *
 * The named hook ST_HOOK_SUB_BEFORE_CLAIM holds a sub worker between finding
 * a task in its mailbox and claiming it, so which thread runs the task is
 * decided by the test, not by the scheduler's timing. */
#include "test_support.h"

#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/hooks.h"
#include "util/clock.h"

#define SEC 1000000000ull
#define MAX_RECORDS 8

typedef struct fixture {
    strata_worker *w;
    strata_callable record;
    _Atomic int held; /* 1: sub workers wait in the hook until it drops to 0 */
    uint64_t hold_ns; /* or: each claim is delayed by this much (0: none) */
    _Atomic int ran;  /* task bodies run so far */
    pthread_t ran_on[MAX_RECORDS];
    int group_members; /* orch_tasks submits a group of this many, or one task */
} fixture;

static int record_fn(const strata_task_view *a, void *u) {
    (void)a;
    fixture *f = u;
    int k = atomic_fetch_add(&f->ran, 1);
    if (k < MAX_RECORDS)
        f->ran_on[k] = pthread_self();
    return 0;
}

static void sleep_ns(uint64_t ns) {
    struct timespec ts = {(time_t)(ns / SEC), (long)(ns % SEC)};
    nanosleep(&ts, NULL);
}

/* Runs on a sub worker thread, before it claims the task it found. */
static void hold_claim(strata_worker *w, st_hook_point at, uint64_t ref, void *ctx) {
    (void)w, (void)at, (void)ref;
    fixture *f = ctx;
    if (f->hold_ns)
        sleep_ns(f->hold_ns);
    uint64_t give_up = st_now_ns() + 5 * SEC; /* a broken test must not hang CI */
    while (atomic_load(&f->held) && st_now_ns() < give_up)
        sleep_ns(100000);
}

static fixture *make(int subs, int help, uint64_t hold_ns, int held) {
    fixture *f = calloc(1, sizeof *f);
    assert_non_null(f);
    strata_worker_config cfg;
    strata_worker_config_init(&cfg);
    cfg.sub_workers = (uint32_t)subs;
    cfg.help_while_waiting = help;
    assert_ok(strata_worker_create(&cfg, &f->w));
    assert_ok(strata_worker_register_sub(f->w, "record", record_fn, f, &f->record));
    f->hold_ns = hold_ns;
    atomic_store(&f->held, held);
    st_worker_set_hook(f->w, ST_HOOK_SUB_BEFORE_CLAIM, hold_claim, f); /* before the threads */
    assert_ok(strata_worker_init(f->w));
    return f;
}

static void destroy(fixture *f) {
    atomic_store(&f->held, 0);
    strata_worker_destroy(f->w);
    free(f);
}

static int orch_tasks(strata_orch *o, void *arg) {
    fixture *f = arg;
    if (f->group_members > 1) {
        strata_task_args a[MAX_RECORDS];
        for (int i = 0; i < f->group_members; i++)
            strata_args_init(&a[i]);
        return strata_orch_submit_sub_group(o, f->record, a, f->group_members);
    }
    strata_task_args a;
    strata_args_init(&a);
    return strata_orch_submit_sub(o, f->record, &a);
}

static void assert_ran_on_caller(fixture *f, int k) {
    assert_true(pthread_equal(f->ran_on[k], pthread_self()));
}

static void assert_ran_on_sub_workers(fixture *f, int n) {
    assert_int_equal(atomic_load(&f->ran), n);
    for (int k = 0; k < n; k++)
        assert_false(pthread_equal(f->ran_on[k], pthread_self()));
}

/* The sub worker is held before its claim: only the waiting caller can run
 * the task, so the run finishing at all shows the caller ran it. */
static void test_unbounded_wait_runs_unclaimed_task(void **state) {
    (void)state;
    fixture *f = make(1, 1, 0, 1);
    for (int r = 0; r < 3; r++) {
        assert_ok(strata_worker_run(f->w, orch_tasks, f));
        assert_int_equal(atomic_load(&f->ran), r + 1);
        assert_ran_on_caller(f, r);
    }
    /* The runs retired while their waiter was inside a help attempt. */
    assert_int_equal(atomic_load(&f->w->lingering_helpers), 0);
    atomic_store(&f->held, 0);
    assert_ok(strata_worker_close(f->w)); /* the held worker then finds its mailbox empty */
    assert_int_equal(atomic_load(&f->ran), 3);
    destroy(f);
}

/* Group members need distinct workers at once: a waiter never takes one, so
 * with each claim delayed the members still run on their sub workers. */
static void test_group_members_are_never_lent(void **state) {
    (void)state;
    fixture *f = make(2, 1, 20000000, 0);
    f->group_members = 2;
    assert_ok(strata_worker_run(f->w, orch_tasks, f));
    assert_ran_on_sub_workers(f, 2);
    assert_false(pthread_equal(f->ran_on[0], f->ran_on[1]));
    destroy(f);
}

/* A task taken by a waiter could outlast a deadline: bounded waits only wait. */
static void test_bounded_wait_does_not_help(void **state) {
    (void)state;
    fixture *f = make(1, 1, 20000000, 0);
    strata_run *h;
    assert_ok(strata_worker_submit(f->w, orch_tasks, f, &h));
    assert_ok(strata_run_wait(h, 5 * SEC));
    strata_run_release(h);
    assert_ran_on_sub_workers(f, 1);
    destroy(f);
}

static void test_help_while_waiting_off_keeps_bodies_on_sub_workers(void **state) {
    (void)state;
    fixture *f = make(1, 0, 20000000, 0);
    assert_ok(strata_worker_run(f->w, orch_tasks, f));
    assert_ok(strata_worker_run(f->w, orch_tasks, f));
    assert_ran_on_sub_workers(f, 2);
    destroy(f);
}

/* The lend operation itself: a task of a run later than the caller's bound is
 * put back for its worker untouched; within the bound it runs here. */
static void test_lend_gives_back_task_of_later_run(void **state) {
    (void)state;
    fixture *f = make(1, 0, 0, 1); /* no helping waits: this test lends by hand */
    strata_run *h;
    assert_ok(strata_worker_submit(f->w, orch_tasks, f, &h));
    uint64_t id = strata_run_id(h);
    st_endpoint *ep = f->w->subs[0].ep;
    assert_int_equal(ep->ops->lend(ep, id - 1, 1), 0);
    assert_int_equal(atomic_load(&f->ran), 0);
    assert_false(strata_run_done(h));
    uint64_t give_up = st_now_ns() + 5 * SEC;
    while (!ep->ops->lend(ep, id, 1) && st_now_ns() < give_up)
        sleep_ns(100000); /* the dispatch reaches the mailbox when the run is head */
    assert_int_equal(atomic_load(&f->ran), 1);
    assert_ran_on_caller(f, 0);
    assert_ok(strata_run_wait(h, 5 * SEC));
    strata_run_release(h);
    destroy(f);
}

/* Two threads wait for one run whose worker is held: one of them runs each
 * task, exactly once, and both see the run finish. */
typedef struct second_waiter {
    strata_run *h;
    int rc;
} second_waiter;

static void *second_waiter_main(void *arg) {
    second_waiter *sw = arg;
    sw->rc = strata_run_wait(sw->h, STRATA_WAIT_FOREVER);
    return NULL;
}

static int orch_four(strata_orch *o, void *arg) {
    for (int i = 0; i < 4; i++)
        STRATA_TRY(orch_tasks(o, arg));
    return STRATA_OK;
}

static void test_two_waiters_run_each_task_once(void **state) {
    (void)state;
    fixture *f = make(1, 1, 0, 1);
    for (int round = 0; round < 20; round++) {
        atomic_store(&f->ran, 0);
        second_waiter sw = {0};
        assert_ok(strata_worker_submit(f->w, orch_four, f, &sw.h));
        pthread_t t;
        assert_int_equal(pthread_create(&t, NULL, second_waiter_main, &sw), 0);
        assert_ok(strata_run_wait(sw.h, STRATA_WAIT_FOREVER));
        pthread_join(t, NULL);
        assert_ok(sw.rc);
        assert_int_equal(atomic_load(&f->ran), 4);
        strata_run_release(sw.h);
    }
    destroy(f);
}

/* ---- a helping waiter racing the worker's close and destroy ---- */

typedef struct waiter {
    strata_worker *w;
    strata_callable record;
    strata_run *h;
    _Atomic int submitted;
    int wait_rc;
} waiter;

static int orch_many(strata_orch *o, void *arg) {
    waiter *wt = arg;
    for (int i = 0; i < 64; i++) {
        strata_task_args a;
        strata_args_init(&a);
        STRATA_TRY(strata_orch_submit_sub(o, wt->record, &a));
    }
    return STRATA_OK;
}

static int count_fn(const strata_task_view *a, void *u) {
    (void)a, (void)u;
    return 0;
}

static void *waiter_main(void *arg) {
    waiter *wt = arg;
    if (strata_worker_submit(wt->w, orch_many, wt, &wt->h) != STRATA_OK) {
        wt->wait_rc = -1;
        atomic_store(&wt->submitted, 1);
        return NULL;
    }
    atomic_store(&wt->submitted, 1);
    wt->wait_rc = strata_run_wait(wt->h, STRATA_WAIT_FOREVER); /* helps */
    strata_run_release(wt->h);
    return NULL;
}

/* close (which waits for the run) and destroy run while the waiter may still
 * be inside a help attempt; the sanitizer builds catch a late access. */
static void test_close_and_destroy_race_a_helping_waiter(void **state) {
    (void)state;
    for (int round = 0; round < 50; round++) {
        waiter wt = {0};
        strata_worker_config cfg;
        strata_worker_config_init(&cfg);
        assert_ok(strata_worker_create(&cfg, &wt.w));
        assert_ok(strata_worker_register_sub(wt.w, "nop", count_fn, NULL, &wt.record));
        assert_ok(strata_worker_init(wt.w));
        pthread_t t;
        assert_int_equal(pthread_create(&t, NULL, waiter_main, &wt), 0);
        while (!atomic_load(&wt.submitted))
            sched_yield();
        assert_ok(strata_worker_close(wt.w));
        strata_worker_destroy(wt.w);
        pthread_join(t, NULL);
        assert_int_equal(wt.wait_rc, STRATA_OK);
    }
}

static void test_help_while_waiting_must_be_0_or_1(void **state) {
    (void)state;
    strata_worker_config cfg;
    strata_worker_config_init(&cfg);
    assert_int_equal(cfg.help_while_waiting, 1);
    cfg.help_while_waiting = 2;
    strata_worker *w = NULL;
    assert_status(STRATA_EINVAL, strata_worker_create(&cfg, &w));
    assert_null(w);
    assert_non_null(strstr(strata_error_message(), "help_while_waiting"));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_unbounded_wait_runs_unclaimed_task),
        cmocka_unit_test(test_group_members_are_never_lent),
        cmocka_unit_test(test_bounded_wait_does_not_help),
        cmocka_unit_test(test_help_while_waiting_off_keeps_bodies_on_sub_workers),
        cmocka_unit_test(test_lend_gives_back_task_of_later_run),
        cmocka_unit_test(test_two_waiters_run_each_task_once),
        cmocka_unit_test(test_close_and_destroy_race_a_helping_waiter),
        cmocka_unit_test(test_help_while_waiting_must_be_0_or_1),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
