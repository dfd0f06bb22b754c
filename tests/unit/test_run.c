// label: concurrency
/* tests/unit/test_run.c - runs: ids, phases, FIFO admission at depth 1 and 2,
 * leases and the dispatches that carry them, the completion fence, first
 * error, fail-fast, poison isolation, cancellation, underflow, unknown runs,
 * release and bounded waits; the run-end bell. */
#include "test_support.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/engine.h"
#include "test_endpoint.h"
#include "util/clock.h"
#include "util/error.h"

#define SEC 1000000000ull

/* The fixture's worker: one sub worker, one test endpoint, one 4 KiB buffer,
 * and its nl, noop, fail ("boom <scalar 0>") and count callables. */
typedef ts_worker fixture;

static fixture *make(uint32_t depth, int manual) {
    fixture *f = calloc(1, sizeof *f);
    assert_non_null(f);
    ts_worker_opts o;
    ts_worker_opts_init(&o);
    o.cfg.sub_workers = 1;
    o.cfg.pipeline_depth = depth;
    o.endpoints = 1;
    o.manual_endpoints = manual;
    o.buffers[0] = 4096;
    ts_worker_open(f, &o);
    return f;
}

static void destroy(fixture *f) {
    ts_worker_close(f);
    free(f);
}

static strata_tensor whole(fixture *f) {
    strata_tensor t;
    int64_t n = 1024;
    assert_ok(strata_tensor_contiguous(f->buf[0], STRATA_I32, 1, &n, &t));
    return t;
}

static uint32_t phase(strata_run *h) {
    return atomic_load(&h->phase.value);
}

/* ---- orchestration functions ---- */

static int orch_one_nl(strata_orch *o, void *arg) {
    fixture *f = arg;
    strata_task_args a;
    strata_args_init(&a);
    strata_args_add_scalar(&a, strata_orch_run_id(o));
    return strata_orch_submit_next_level(o, f->nl, &a, NULL, f->ep_id[0]);
}

static int orch_empty(strata_orch *o, void *arg) {
    (void)o;
    (void)arg;
    return STRATA_OK;
}

static void run_ids_start_at_one_and_grow(void **state) {
    (void)state;
    fixture *f = make(2, 0);
    for (uint64_t i = 1; i <= 5; i++) {
        strata_run *h;
        assert_ok(strata_worker_submit(f->w, orch_empty, f, &h));
        assert_int_equal(strata_run_id(h), i);
        assert_ok(strata_run_wait(h, STRATA_WAIT_FOREVER));
        strata_run_release(h);
    }
    destroy(f);
}

static void empty_run_completes(void **state) {
    (void)state;
    fixture *f = make(2, 0);
    assert_ok(strata_worker_run(f->w, orch_empty, f));
    strata_run *h;
    assert_ok(strata_worker_submit(f->w, orch_empty, f, &h));
    assert_ok(strata_run_wait(h, STRATA_WAIT_FOREVER));
    assert_int_equal(phase(h), ST_RUN_COMPLETED);
    assert_string_equal(strata_run_error(h), "");
    strata_run_release(h);
    destroy(f);
}

static void phases_follow_executing_then_completed(void **state) {
    (void)state;
    fixture *f = make(2, 1);
    strata_run *h;
    assert_ok(strata_worker_submit(f->w, orch_one_nl, f, &h));
    assert_int_equal(phase(h), ST_RUN_EXECUTING); /* the head executes while built */
    assert_false(strata_run_done(h));
    assert_status(STRATA_ETIMEDOUT, strata_run_wait(h, 1000000));
    assert_false(strata_run_done(h)); /* an expired wait leaves the run alone */
    assert_int_equal(st_test_ep_finish(f->ep[0], STRATA_OK, "", 10 * SEC), 0);
    assert_ok(strata_run_wait(h, STRATA_WAIT_FOREVER));
    assert_int_equal(phase(h), ST_RUN_COMPLETED);
    strata_run_release(h);
    destroy(f);
}

typedef struct later {
    fixture *f;
    _Atomic int orch_called;
    strata_run *h;
    int rc;
} later;

static int orch_flag(strata_orch *o, void *arg) {
    later *l = arg;
    atomic_store(&l->orch_called, 1);
    return orch_one_nl(o, l->f);
}

static void *submit_later(void *arg) {
    later *l = arg;
    l->rc = strata_worker_submit(l->f->w, orch_flag, l, &l->h);
    return NULL;
}

static int wait_flag(_Atomic int *flag) {
    for (int i = 0; i < 10000 && !atomic_load(flag); i++) {
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
    return atomic_load(flag);
}

static void depth2_builds_successor_while_head_executes(void **state) {
    (void)state;
    fixture *f = make(2, 1);
    strata_run *h1, *h2;
    assert_ok(strata_worker_submit(f->w, orch_one_nl, f, &h1));
    assert_ok(strata_worker_submit(f->w, orch_one_nl, f, &h2)); /* returns while run 1 executes */
    assert_int_equal(phase(h2), ST_RUN_PREPARED);
    assert_int_equal(st_test_ep_count(f->ep[0]), 1); /* run 2's task waits for the head */

    later l3 = {.f = f};
    pthread_t t;
    pthread_create(&t, NULL, submit_later, &l3);
    /* Run 3 waits for admission before its orchestration function is called. */
    assert_int_equal(atomic_load(&l3.orch_called), 0);

    assert_int_equal(st_test_ep_finish(f->ep[0], STRATA_OK, "", 10 * SEC), 0);
    assert_ok(strata_run_wait(h1, STRATA_WAIT_FOREVER));
    assert_true(wait_flag(&l3.orch_called)); /* run 1 retired: run 3 admitted */
    assert_int_equal(st_test_ep_finish(f->ep[0], STRATA_OK, "", 10 * SEC), 0);
    assert_ok(strata_run_wait(h2, STRATA_WAIT_FOREVER));
    pthread_join(t, NULL);
    assert_ok(l3.rc);
    assert_int_equal(st_test_ep_finish(f->ep[0], STRATA_OK, "", 10 * SEC), 0);
    assert_ok(strata_run_wait(l3.h, STRATA_WAIT_FOREVER));
    /* Dispatches happened in run order. */
    assert_int_equal(st_test_ep_count(f->ep[0]), 3);
    for (uint32_t i = 0; i < 3; i++)
        assert_int_equal(st_test_ep_record_at(f->ep[0], i).run_id, i + 1);
    uint64_t acts[8];
    assert_int_equal(st_test_ep_activations(f->ep[0], acts, 8), 3);
    assert_int_equal(acts[0], 1);
    assert_int_equal(acts[1], 2);
    assert_int_equal(acts[2], 3);
    strata_run_release(h1);
    strata_run_release(h2);
    strata_run_release(l3.h);
    destroy(f);
}

static void depth1_successor_waits_before_orchestration(void **state) {
    (void)state;
    fixture *f = make(1, 1);
    strata_run *h1;
    assert_ok(strata_worker_submit(f->w, orch_one_nl, f, &h1));
    later l2 = {.f = f};
    pthread_t t;
    pthread_create(&t, NULL, submit_later, &l2);
    assert_int_equal(atomic_load(&l2.orch_called), 0);
    assert_int_equal(st_test_ep_finish(f->ep[0], STRATA_OK, "", 10 * SEC), 0);
    assert_ok(strata_run_wait(h1, STRATA_WAIT_FOREVER));
    assert_true(wait_flag(&l2.orch_called));
    assert_int_equal(st_test_ep_finish(f->ep[0], STRATA_OK, "", 10 * SEC), 0);
    pthread_join(t, NULL);
    assert_ok(strata_run_wait(l2.h, STRATA_WAIT_FOREVER));
    strata_run_release(h1);
    strata_run_release(l2.h);
    destroy(f);
}

static void expect_lease(st_lease got, uint32_t slot, uint64_t generation) {
    if (got.slot != slot || got.generation != generation || got.reserved != 0)
        fail_msg("lease {slot %u, generation %llu, reserved %u}, expected {slot %u, generation "
                 "%llu}",
                 got.slot, (unsigned long long)got.generation, got.reserved, slot,
                 (unsigned long long)generation);
}

/* DESIGN §2, §6: an admitted run holds a lease {slot, generation} of the
 * pipeline slot pool, generations grow per slot, and a dispatch carries its
 * run's lease to the child (so a child can recognise a stale holder). */
static void every_dispatch_carries_its_runs_lease(void **state) {
    (void)state;
    fixture *f = make(2, 1);
    strata_run *h1, *h2, *h3;
    assert_ok(strata_worker_submit(f->w, orch_one_nl, f, &h1));
    assert_ok(strata_worker_submit(f->w, orch_one_nl, f, &h2));
    expect_lease(h1->lease, 0, 1);
    expect_lease(h2->lease, 1, 1);
    assert_int_equal(st_test_ep_finish(f->ep[0], STRATA_OK, "", 10 * SEC), 0);
    assert_ok(strata_run_wait(h1, STRATA_WAIT_FOREVER)); /* run 1 retired: slot 0 is free */
    assert_ok(strata_worker_submit(f->w, orch_one_nl, f, &h3));
    expect_lease(h3->lease, 0, 2); /* the same slot, a newer generation */
    assert_int_equal(st_test_ep_finish(f->ep[0], STRATA_OK, "", 10 * SEC), 0);
    assert_int_equal(st_test_ep_finish(f->ep[0], STRATA_OK, "", 10 * SEC), 0);
    assert_ok(strata_run_wait(h3, STRATA_WAIT_FOREVER));
    strata_run *runs[3] = {h1, h2, h3};
    assert_int_equal(st_test_ep_count(f->ep[0]), 3);
    for (uint32_t i = 0; i < 3; i++) {
        st_test_ep_record rec = st_test_ep_record_at(f->ep[0], i);
        assert_int_equal(rec.run_id, runs[i]->id);
        expect_lease(rec.lease, runs[i]->lease.slot, runs[i]->lease.generation);
    }
    strata_run_release(h1);
    strata_run_release(h2);
    strata_run_release(h3);
    destroy(f);
}

/* Two independent failing tasks on one sub worker: the first error wins. */
static int orch_two_failures(strata_orch *o, void *arg) {
    fixture *f = arg;
    for (uint64_t i = 1; i <= 2; i++) {
        strata_task_args a;
        strata_args_init(&a);
        strata_args_add_scalar(&a, 100 + i);
        strata_orch_submit_sub(o, f->fail, &a); /* the second may fail fast: fine */
    }
    return STRATA_OK;
}

/* st_worker_set_run_end_bell: each run's end, completed or failed, bumps
 * the bell once, after the run's phase is final; cleared, nothing is rung.
 * (strata_worker_run returns once the phase is final; the bump follows it
 * under the engine lock, so the test waits on the bell, 10 s at most.) */
static void each_run_end_rings_the_run_end_bell(void **state) {
    (void)state;
    fixture *f = make(2, 0);
    st_event bell = {0};
    st_worker_set_run_end_bell(f->w, &bell);
    assert_ok(strata_worker_run(f->w, orch_empty, f));
    assert_int_equal(st_event_wait(&bell, 0, 0, st_deadline_after(10 * SEC)), 0);
    assert_int_equal(atomic_load(&bell.value), 1);
    strata_run *h;
    assert_ok(strata_worker_submit(f->w, orch_two_failures, f, &h));
    assert_status(STRATA_ETASK, strata_run_wait(h, STRATA_WAIT_FOREVER));
    assert_int_equal(st_event_wait(&bell, 1, 0, st_deadline_after(10 * SEC)), 0);
    assert_int_equal(atomic_load(&bell.value), 2);
    assert_int_equal(phase(h), ST_RUN_FAILED);
    strata_run_release(h);
    st_worker_set_run_end_bell(f->w, NULL); /* waits for the engine lock: run 1's end is past */
    assert_ok(strata_worker_run(f->w, orch_empty, f));
    st_worker_set_run_end_bell(f->w, &bell); /* after that run's retirement, as above */
    assert_int_equal(atomic_load(&bell.value), 2);
    assert_ok(strata_worker_run(f->w, orch_empty, f));
    assert_int_equal(st_event_wait(&bell, 2, 0, st_deadline_after(10 * SEC)), 0);
    assert_int_equal(atomic_load(&bell.value), 3);
    st_worker_set_run_end_bell(f->w, NULL);
    destroy(f);
}

static void first_error_wins(void **state) {
    (void)state;
    fixture *f = make(2, 0);
    strata_run *h;
    assert_ok(strata_worker_submit(f->w, orch_two_failures, f, &h));
    assert_status(STRATA_ETASK, strata_run_wait(h, STRATA_WAIT_FOREVER));
    assert_int_equal(strata_run_status(h), STRATA_ETASK);
    const char *err = strata_run_error(h);
    assert_non_null(strstr(err, "boom 101"));
    assert_null(strstr(err, "boom 102"));
    assert_non_null(strstr(err, "run 1"));
    assert_non_null(strstr(err, "task 'fail' #1"));
    assert_non_null(strstr(err, "sub 0"));
    assert_non_null(strstr(strata_error_message(), "boom 101"));
    strata_run_release(h);
    destroy(f);
}

/* After a task failure is recorded, later submits of that run fail fast. */
static int orch_fail_then_keep_submitting(strata_orch *o, void *arg) {
    fixture *f = arg;
    strata_task_args a;
    strata_args_init(&a);
    strata_args_add_scalar(&a, 5);
    assert_ok(strata_orch_submit_sub(o, f->fail, &a));
    for (int i = 0; i < 100000; i++) {
        strata_args_init(&a);
        int rc = strata_orch_submit_sub(o, f->noop, &a);
        if (rc != STRATA_OK) {
            assert_int_equal(rc, STRATA_ETASK);
            assert_non_null(strstr(strata_error_message(), "boom 5"));
            return rc;
        }
        struct timespec ts = {0, 100000};
        nanosleep(&ts, NULL);
    }
    fail_msg("submits never failed fast");
    return STRATA_OK;
}

static void failed_run_fails_later_submits_fast(void **state) {
    (void)state;
    fixture *f = make(2, 0);
    strata_run *h;
    assert_ok(strata_worker_submit(f->w, orch_fail_then_keep_submitting, f, &h));
    assert_status(STRATA_ETASK, strata_run_wait(h, STRATA_WAIT_FOREVER));
    /* The task's error came first and stays the run's error. */
    assert_non_null(strstr(strata_run_error(h), "boom 5"));
    strata_run_release(h);
    destroy(f);
}

/* A failure poisons dependants of its own run only. */
static int orch_write_then_fail_reader(strata_orch *o, void *arg) {
    fixture *f = arg;
    strata_tensor t = whole(f);
    strata_task_args a;
    strata_args_init(&a);
    strata_args_add_tensor(&a, &t, STRATA_OUT_EXISTING);
    strata_args_add_scalar(&a, 9);
    STRATA_TRY(strata_orch_submit_sub(o, f->fail, &a));
    strata_args_init(&a);
    strata_args_add_tensor(&a, &t, STRATA_IN);
    strata_orch_submit_sub(o, f->count, &a); /* poisoned (or fails fast) */
    return STRATA_OK;
}

static int orch_count_reader(strata_orch *o, void *arg) {
    fixture *f = arg;
    strata_tensor t = whole(f);
    strata_task_args a;
    strata_args_init(&a);
    strata_args_add_tensor(&a, &t, STRATA_IN);
    return strata_orch_submit_sub(o, f->count, &a);
}

static void poison_stays_inside_its_run(void **state) {
    (void)state;
    fixture *f = make(2, 0);
    strata_run *h1, *h2;
    assert_ok(strata_worker_submit(f->w, orch_write_then_fail_reader, f, &h1));
    assert_ok(strata_worker_submit(f->w, orch_count_reader, f, &h2));
    assert_status(STRATA_ETASK, strata_run_wait(h1, STRATA_WAIT_FOREVER));
    assert_ok(strata_run_wait(h2, STRATA_WAIT_FOREVER));
    assert_string_equal(strata_run_error(h2), "");
    assert_int_equal(atomic_load(&f->counter), 1); /* only run 2's reader ran */
    strata_run_release(h1);
    strata_run_release(h2);
    assert_ok(strata_worker_run(f->w, orch_count_reader, f)); /* later runs are untouched */
    assert_int_equal(atomic_load(&f->counter), 2);
    destroy(f);
}

/* The orchestration function fails after submitting: unstarted tasks are
 * cancelled, the started one drains, and the function's error is the run's. */
static int orch_fail_after_submitting(strata_orch *o, void *arg) {
    fixture *f = arg;
    strata_tensor t = whole(f);
    strata_task_args a;
    strata_args_init(&a);
    strata_args_add_tensor(&a, &t, STRATA_OUT_EXISTING);
    STRATA_TRY(strata_orch_submit_next_level(o, f->nl, &a, NULL, f->ep_id[0]));
    for (int i = 0; i < 5; i++) {
        strata_args_init(&a);
        strata_args_add_tensor(&a, &t, STRATA_IN);
        STRATA_TRY(strata_orch_submit_sub(o, f->count, &a));
    }
    strata_args_init(&a);
    STRATA_TRY(strata_orch_submit_next_level(o, f->nl, &a, NULL, f->ep_id[0])); /* ready, queued */
    return st_fail(STRATA_EINVAL, "user said no");
}

static void orchestration_failure_cancels_unstarted_tasks(void **state) {
    (void)state;
    fixture *f = make(2, 1);
    strata_run *h;
    assert_ok(strata_worker_submit(f->w, orch_fail_after_submitting, f, &h));
    assert_false(strata_run_done(h)); /* the started task still holds the fence */
    assert_int_equal(st_test_ep_finish(f->ep[0], STRATA_OK, "", 10 * SEC), 0);
    assert_status(STRATA_EINVAL, strata_run_wait(h, STRATA_WAIT_FOREVER));
    assert_non_null(strstr(strata_run_error(h), "orchestration function failed"));
    assert_non_null(strstr(strata_run_error(h), "user said no"));
    assert_int_equal(atomic_load(&f->counter), 0);   /* dependants never ran */
    assert_int_equal(st_test_ep_count(f->ep[0]), 1); /* the queued single never launched */
    strata_run_release(h);
    assert_ok(strata_worker_run(f->w, orch_empty, f));
    destroy(f);
}

/* Scheduler-side accounting never fails loudly. */
static int orch_underflow(strata_orch *o, void *arg) {
    fixture *f = arg;
    st_engine_lock(f->w);
    st_run *r = o->run;
    assert_int_equal(r->active_tasks, 0);
    st_run_task_consumed(f->w, r); /* one consumption too many */
    assert_int_equal(r->active_tasks, 0);
    st_engine_unlock(f->w);
    return STRATA_OK;
}

static void counter_underflow_is_recorded_as_the_runs_error(void **state) {
    (void)state;
    fixture *f = make(2, 0);
    strata_run *h;
    assert_ok(strata_worker_submit(f->w, orch_underflow, f, &h));
    assert_status(STRATA_ESTATE, strata_run_wait(h, STRATA_WAIT_FOREVER));
    assert_non_null(strstr(strata_run_error(h), "underflow"));
    strata_run_release(h);
    assert_ok(strata_worker_run(f->w, orch_empty, f));
    destroy(f);
}

static void handles_outlive_the_worker(void **state) {
    (void)state;
    fixture *f = make(2, 0);
    strata_run *h;
    assert_ok(strata_worker_submit(f->w, orch_two_failures, f, &h));
    assert_ok(strata_worker_close(f->w)); /* waits for the run */
    assert_true(strata_run_done(h));
    strata_run *keep = h;
    assert_status(STRATA_ECLOSED, strata_worker_submit(f->w, orch_empty, f, &h));
    assert_null(h);
    destroy(f);
    assert_non_null(strstr(strata_run_error(keep), "boom"));
    strata_run_release(keep);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(run_ids_start_at_one_and_grow),
        cmocka_unit_test(empty_run_completes),
        cmocka_unit_test(each_run_end_rings_the_run_end_bell),
        cmocka_unit_test(phases_follow_executing_then_completed),
        cmocka_unit_test(depth2_builds_successor_while_head_executes),
        cmocka_unit_test(depth1_successor_waits_before_orchestration),
        cmocka_unit_test(every_dispatch_carries_its_runs_lease),
        cmocka_unit_test(first_error_wins),
        cmocka_unit_test(failed_run_fails_later_submits_fast),
        cmocka_unit_test(poison_stays_inside_its_run),
        cmocka_unit_test(orchestration_failure_cancels_unstarted_tasks),
        cmocka_unit_test(counter_underflow_is_recorded_as_the_runs_error),
        cmocka_unit_test(handles_outlive_the_worker),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
