// label: concurrency
/* tests/unit/test_scheduler.c - dispatch: directed FIFOs per next-level
 * worker, all-or-nothing groups with reservation of a blocked head's workers,
 * sub groups on distinct idle workers, poison of dependants only, and stale
 * queue entries. */
#include "test_support.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/engine.h"
#include "test_endpoint.h"
#include "util/clock.h"
#include "util/error.h"

#define SEC 1000000000ull

/* The fixture's worker (its nl, noop and count callables: count is the task
 * whose runs are counted), a failing producer and the meeting group members. */
typedef struct fixture {
    ts_worker t;
    strata_callable fail, meet;
    _Atomic int arrived;
    pthread_t threads[8];
    _Atomic int nthreads;
} fixture;

static int fail_fn(const strata_task_view *a, void *u) {
    (void)a;
    (void)u;
    strata_task_set_error("producer broke");
    return 1;
}

/* Group members meet: each waits (bounded) until all n arrived, proving they
 * ran at the same time on distinct workers. */
static int meet_fn(const strata_task_view *a, void *u) {
    fixture *f = u;
    int n = (int)strata_args_scalar(a, 0);
    int me = atomic_fetch_add(&f->nthreads, 1);
    if (me < 8)
        f->threads[me] = pthread_self();
    atomic_fetch_add(&f->arrived, 1);
    uint64_t deadline = st_deadline_after(10 * SEC);
    while (atomic_load(&f->arrived) < n) {
        if (st_now_ns() > deadline) {
            strata_task_set_error("members never met");
            return 1;
        }
        sched_yield();
    }
    return 0;
}

static fixture *make(int nsub, int nnext, int manual) {
    fixture *f = calloc(1, sizeof *f);
    assert_non_null(f);
    ts_worker_opts o;
    ts_worker_opts_init(&o);
    o.cfg.sub_workers = (uint32_t)nsub;
    o.endpoints = nnext;
    o.manual_endpoints = manual;
    o.buffers[0] = 1 << 16;
    o.subs[0] = (ts_sub){"broken", fail_fn, NULL, &f->fail};
    o.subs[1] = (ts_sub){"meet", meet_fn, f, &f->meet};
    ts_worker_open(&f->t, &o);
    return f;
}

static void destroy(fixture *f) {
    ts_worker_close(&f->t);
    free(f);
}

static strata_tensor slice(fixture *f, int i) {
    strata_tensor t;
    int64_t n = 16;
    assert_ok(strata_tensor_view(f->t.buf[0], (uint64_t)i * 64, STRATA_I32, 1, &n, NULL, &t));
    return t;
}

static void finish(fixture *f, int ep) {
    assert_int_equal(st_test_ep_finish(f->t.ep[ep], STRATA_OK, "", 10 * SEC), 0);
}

/* ---- directed FIFOs ---- */

static int orch_alternate(strata_orch *o, void *arg) {
    fixture *f = arg;
    for (uint64_t i = 1; i <= 40; i++) {
        strata_task_args a;
        strata_args_init(&a);
        strata_args_add_scalar(&a, i);
        STRATA_TRY(strata_orch_submit_next_level(o, f->t.nl, &a, NULL, (int)(i % 2)));
    }
    return STRATA_OK;
}

static void directed_tasks_run_in_fifo_order_on_their_worker(void **state) {
    (void)state;
    fixture *f = make(1, 2, 0);
    assert_ok(strata_worker_run(f->t.w, orch_alternate, f));
    for (int e = 0; e < 2; e++) {
        assert_int_equal(st_test_ep_count(f->t.ep[e]), 20);
        uint64_t prev = 0;
        for (uint32_t i = 0; i < 20; i++) {
            st_test_ep_record r = st_test_ep_record_at(f->t.ep[e], i);
            assert_int_equal(r.scalar0 % 2, (uint64_t)e); /* only its own tasks */
            assert_true(r.scalar0 > prev);                /* in submission order */
            prev = r.scalar0;
        }
    }
    destroy(f);
}

/* ---- groups ---- */

/* single A on 0 (held), group G on {0,1}, single S on 1. */
static int orch_blocked_group(strata_orch *o, void *arg) {
    fixture *f = arg;
    strata_task_args a, g[2];
    strata_args_init(&a);
    strata_args_add_scalar(&a, 1);
    STRATA_TRY(strata_orch_submit_next_level(o, f->t.nl, &a, NULL, 0));
    int ids[2] = {0, 1};
    for (int m = 0; m < 2; m++) {
        strata_args_init(&g[m]);
        strata_args_add_scalar(&g[m], 2);
    }
    STRATA_TRY(strata_orch_submit_next_level_group(o, f->t.nl, g, NULL, ids, 2));
    strata_args_init(&a);
    strata_args_add_scalar(&a, 3);
    STRATA_TRY(strata_orch_submit_next_level(o, f->t.nl, &a, NULL, 1));
    return STRATA_OK;
}

static void blocked_group_reserves_its_workers_and_never_launches_partially(void **state) {
    (void)state;
    fixture *f = make(1, 2, 1);
    strata_run *h;
    assert_ok(strata_worker_submit(f->t.w, orch_blocked_group, f, &h));
    /* Worker 1 is idle, but the blocked group holds it: neither the group's
     * member 1 nor the later single S may start there. */
    assert_int_equal(st_test_ep_count(f->t.ep[0]), 1);
    assert_int_equal(st_test_ep_count(f->t.ep[1]), 0);
    finish(f, 0); /* A done: the group launches on both workers at once */
    finish(f, 0); /* group member 0 */
    finish(f, 1); /* group member 1 */
    finish(f, 1); /* S */
    assert_ok(strata_run_wait(h, STRATA_WAIT_FOREVER));
    st_test_ep_record r0 = st_test_ep_record_at(f->t.ep[0], 1);
    st_test_ep_record r1a = st_test_ep_record_at(f->t.ep[1], 0);
    st_test_ep_record r1b = st_test_ep_record_at(f->t.ep[1], 1);
    assert_int_equal(r0.scalar0, 2);
    assert_int_equal(r0.member, 0);
    assert_int_equal(r1a.scalar0, 2); /* the group came before S on worker 1 */
    assert_int_equal(r1a.member, 1);
    assert_int_equal(r1b.scalar0, 3);
    assert_int_equal(r0.ref, r1a.ref); /* one task, two members */
    strata_run_release(h);
    destroy(f);
}

static int orch_group_member_fails(strata_orch *o, void *arg) {
    fixture *f = arg;
    strata_task_args g[3];
    int ids[3] = {0, 1, 2};
    for (int m = 0; m < 3; m++)
        strata_args_init(&g[m]);
    STRATA_TRY(strata_orch_submit_next_level_group(o, f->t.nl, g, NULL, ids, 3));
    return STRATA_OK;
}

static void group_fails_once_when_a_member_fails(void **state) {
    (void)state;
    fixture *f = make(1, 3, 1);
    strata_run *h;
    assert_ok(strata_worker_submit(f->t.w, orch_group_member_fails, f, &h));
    assert_int_equal(st_test_ep_finish(f->t.ep[1], STRATA_ETASK, "member one broke", 10 * SEC), 0);
    /* The run records the failure as soon as the member's completion is handled. */
    uint64_t deadline = st_deadline_after(10 * SEC);
    for (int recorded = 0; !recorded && st_now_ns() < deadline;) {
        st_engine_lock(f->t.w);
        recorded = st_run_failed(h);
        st_engine_unlock(f->t.w);
    }
    assert_false(strata_run_done(h)); /* peers still running keep the task alive */
    assert_int_equal(st_test_ep_finish(f->t.ep[0], STRATA_OK, "", 10 * SEC), 0);
    assert_int_equal(st_test_ep_finish(f->t.ep[2], STRATA_ETASK, "member two broke", 10 * SEC), 0);
    assert_status(STRATA_ETASK, strata_run_wait(h, STRATA_WAIT_FOREVER));
    assert_non_null(strstr(strata_run_error(h), "member 1 failed: member one broke"));
    assert_null(strstr(strata_run_error(h), "member two"));
    strata_run_release(h);
    destroy(f);
}

static int orch_sub_group(strata_orch *o, void *arg) {
    fixture *f = arg;
    strata_task_args g[3];
    for (int m = 0; m < 3; m++) {
        strata_args_init(&g[m]);
        strata_args_add_scalar(&g[m], 3);
    }
    return strata_orch_submit_sub_group(o, f->meet, g, 3);
}

static void sub_group_runs_members_at_once_on_distinct_workers(void **state) {
    (void)state;
    fixture *f = make(3, 0, 0);
    assert_ok(strata_worker_run(f->t.w, orch_sub_group, f));
    assert_int_equal(atomic_load(&f->nthreads), 3);
    assert_false(pthread_equal(f->threads[0], f->threads[1]));
    assert_false(pthread_equal(f->threads[0], f->threads[2]));
    assert_false(pthread_equal(f->threads[1], f->threads[2]));
    destroy(f);
}

/* ---- poison and stale entries ---- */

static int orch_poison_chain(strata_orch *o, void *arg) {
    fixture *f = arg;
    strata_tensor x = slice(f, 0), y = slice(f, 1), z = slice(f, 2);
    strata_task_args a;
    strata_args_init(&a);
    strata_args_add_tensor(&a, &x, STRATA_OUT_EXISTING);
    STRATA_TRY(strata_orch_submit_sub(o, f->fail, &a)); /* A fails */
    strata_args_init(&a);
    strata_args_add_tensor(&a, &x, STRATA_IN);
    strata_args_add_tensor(&a, &y, STRATA_OUT_EXISTING);
    strata_orch_submit_sub(o, f->t.count, &a); /* B depends on A */
    strata_args_init(&a);
    strata_args_add_tensor(&a, &y, STRATA_IN);
    strata_orch_submit_sub(o, f->t.count, &a); /* C depends on B */
    (void)z;
    return STRATA_OK;
}

static void failure_poisons_dependants_only(void **state) {
    (void)state;
    fixture *f = make(1, 1, 1);
    /* Hold the single sub worker's queue behind nothing: A runs first. */
    strata_run *h;
    assert_ok(strata_worker_submit(f->t.w, orch_poison_chain, f, &h));
    assert_status(STRATA_ETASK, strata_run_wait(h, STRATA_WAIT_FOREVER));
    assert_int_equal(atomic_load(&f->t.counter), 0);
    assert_non_null(strstr(strata_run_error(h), "producer broke"));
    strata_run_release(h);
    destroy(f);
}

static int orch_independent_survives(strata_orch *o, void *arg) {
    fixture *f = arg;
    strata_tensor x = slice(f, 0), z = slice(f, 2);
    strata_task_args a;
    /* D (independent) is queued first on worker... sub workers are shared, so
     * submit D before A to be independent of fail-fast timing. */
    strata_args_init(&a);
    strata_args_add_tensor(&a, &z, STRATA_OUT_EXISTING);
    STRATA_TRY(strata_orch_submit_sub(o, f->t.count, &a));
    strata_args_init(&a);
    strata_args_add_tensor(&a, &x, STRATA_OUT_EXISTING);
    STRATA_TRY(strata_orch_submit_sub(o, f->fail, &a));
    return STRATA_OK;
}

static void independent_tasks_of_a_failed_run_still_run(void **state) {
    (void)state;
    fixture *f = make(2, 0, 0);
    strata_run *h;
    assert_ok(strata_worker_submit(f->t.w, orch_independent_survives, f, &h));
    assert_status(STRATA_ETASK, strata_run_wait(h, STRATA_WAIT_FOREVER));
    assert_int_equal(atomic_load(&f->t.counter), 1);
    strata_run_release(h);
    destroy(f);
}

/* READY singles queued behind a held task are cancelled by an orchestration
 * failure; their queue entries go stale and are skipped. */
static int orch_queue_then_fail(strata_orch *o, void *arg) {
    fixture *f = arg;
    for (uint64_t i = 1; i <= 6; i++) {
        strata_task_args a;
        strata_args_init(&a);
        strata_args_add_scalar(&a, i);
        STRATA_TRY(strata_orch_submit_next_level(o, f->t.nl, &a, NULL, 0));
    }
    return st_fail(STRATA_EINVAL, "stop here");
}

static int orch_one_nl(strata_orch *o, void *arg) {
    fixture *f = arg;
    strata_task_args a;
    strata_args_init(&a);
    return strata_orch_submit_next_level(o, f->t.nl, &a, NULL, 0);
}

static void stale_queue_entries_are_skipped(void **state) {
    (void)state;
    fixture *f = make(1, 1, 1);
    strata_run *h;
    assert_ok(strata_worker_submit(f->t.w, orch_queue_then_fail, f, &h));
    finish(f, 0);
    assert_status(STRATA_EINVAL, strata_run_wait(h, STRATA_WAIT_FOREVER));
    assert_int_equal(st_test_ep_count(f->t.ep[0]), 1);
    strata_run_release(h);
    /* The worker goes on: a fresh run dispatches normally. */
    strata_run *h2;
    assert_ok(strata_worker_submit(f->t.w, orch_one_nl, f, &h2));
    finish(f, 0);
    assert_ok(strata_run_wait(h2, STRATA_WAIT_FOREVER));
    assert_int_equal(st_test_ep_count(f->t.ep[0]), 2);
    strata_run_release(h2);
    destroy(f);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(directed_tasks_run_in_fifo_order_on_their_worker),
        cmocka_unit_test(blocked_group_reserves_its_workers_and_never_launches_partially),
        cmocka_unit_test(group_fails_once_when_a_member_fails),
        cmocka_unit_test(sub_group_runs_members_at_once_on_distinct_workers),
        cmocka_unit_test(failure_poisons_dependants_only),
        cmocka_unit_test(independent_tasks_of_a_failed_run_still_run),
        cmocka_unit_test(stale_queue_entries_are_skipped),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
