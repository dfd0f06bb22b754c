// label: concurrency
/* tests/unit/test_hooks.c - races reproduced on purpose through the engine's
 * named test hooks (DESIGN §10):
 *   - a cancellation between the ready decision and the dispatch claim;
 *   - a producer finishing (failing or succeeding) while its consumer is
 *     being wired, before publication;
 *   - a sub worker that found its task and has not claimed it (the seam the
 *     helping tests hold workers in: it must fire, once per task). */
#include "test_support.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "core/engine.h"
#include "core/hooks.h"
#include "core/release.h"
#include "core/scheduler.h"
#include "test_endpoint.h"
#include "util/clock.h"

#define SEC 1000000000ull

/* The fixture's worker (one sub worker, one manual test endpoint running its
 * "nl" producers, the counted "count" task, a 4 KiB buffer) and what the
 * hooks saw. */
typedef struct fixture {
    ts_worker t;
    int hook_fired;
    int finish_status; /* how the held producer ends inside the wiring hook */
} fixture;

static fixture *make(void) {
    fixture *f = calloc(1, sizeof *f);
    assert_non_null(f);
    ts_worker_opts o;
    ts_worker_opts_init(&o);
    o.cfg.sub_workers = 1;
    o.endpoints = 1;
    o.manual_endpoints = 1;
    o.buffers[0] = 4096;
    ts_worker_open(&f->t, &o);
    return f;
}

static void destroy(fixture *f) {
    ts_worker_close(&f->t);
    free(f);
}

static strata_tensor whole(fixture *f) {
    strata_tensor t;
    int64_t n = 1024;
    assert_ok(strata_tensor_contiguous(f->t.buf[0], STRATA_I32, 1, &n, &t));
    return t;
}

static int orch_one_count(strata_orch *o, void *arg) {
    fixture *f = arg;
    strata_task_args a;
    strata_args_init(&a);
    return strata_orch_submit_sub(o, f->t.count, &a);
}

/* ---- cancellation between the ready decision and the dispatch claim ---- */

static void cancel_before_claim(strata_worker *w, st_hook_point at, uint64_t ref, void *ctx) {
    fixture *f = ctx;
    (void)at;
    if (f->hook_fired++)
        return;
    st_slot *s = st_hook_slot(w, ref);
    assert_non_null(s);
    assert_int_equal(st_slot_state(s), ST_READY); /* the ready decision was made */
    st_run_record_error(s->run, STRATA_ECANCELED, "run %llu: cancelled by the test",
                        (unsigned long long)s->run->id);
    st_poison(w, s, STRATA_ECANCELED); /* the cancellation wins the race */
}

static void cancellation_between_ready_and_claim_prevents_dispatch(void **state) {
    (void)state;
    fixture *f = make();
    st_worker_set_hook(f->t.w, ST_HOOK_BEFORE_DISPATCH_CLAIM, cancel_before_claim, f);
    strata_run *h;
    assert_ok(strata_worker_submit(f->t.w, orch_one_count, f, &h));
    assert_status(STRATA_ECANCELED, strata_run_wait(h, STRATA_WAIT_FOREVER));
    assert_int_equal(f->hook_fired, 1);
    assert_int_equal(atomic_load(&f->t.counter), 0); /* the task body never ran */
    assert_non_null(strstr(strata_run_error(h), "cancelled by the test"));
    strata_run_release(h);
    /* Nothing leaked into later runs: the hook no longer interferes. */
    assert_ok(strata_worker_run(f->t.w, orch_one_count, f));
    assert_int_equal(atomic_load(&f->t.counter), 1);
    destroy(f);
}

/* ---- a producer finishing while its consumer is wired ---- */

static void finish_producer_during_wiring(strata_worker *w, st_hook_point at, uint64_t ref,
                                          void *ctx) {
    fixture *f = ctx;
    (void)at;
    st_slot *s = st_hook_slot(w, ref);
    if (!s || s->kind != ST_SLOT_SUB || f->hook_fired++)
        return; /* only the consumer's wiring */
    assert_int_equal(st_slot_state(s), ST_BUILDING);
    assert_int_equal(s->producers.n, 1); /* wired to the running producer */
    /* Let the producer finish now; its completion is queued for the lock
     * holder (us), so process it here, between wiring and publication. */
    assert_int_equal(
        st_test_ep_finish(f->t.ep[0], f->finish_status, "producer failed mid-wiring", 10 * SEC), 0);
    uint64_t deadline = st_deadline_after(10 * SEC);
    while (atomic_load(&w->completions) == NULL && st_now_ns() < deadline)
        sched_yield();
    assert_non_null(atomic_load(&w->completions));
    st_sched_pass(w);
}

static int orch_producer_consumer(strata_orch *o, void *arg) {
    fixture *f = arg;
    strata_tensor t = whole(f);
    strata_task_args a;
    strata_args_init(&a);
    strata_args_add_tensor(&a, &t, STRATA_OUT_EXISTING);
    STRATA_TRY(strata_orch_submit_next_level(o, f->t.nl, &a, NULL, f->t.ep_id[0]));
    /* Make sure the producer is running (held by the endpoint) before wiring. */
    uint64_t deadline = st_deadline_after(10 * SEC);
    while (!st_test_ep_holding(f->t.ep[0]) && st_now_ns() < deadline)
        sched_yield();
    assert_true(st_test_ep_holding(f->t.ep[0]));
    strata_args_init(&a);
    strata_args_add_tensor(&a, &t, STRATA_IN);
    return strata_orch_submit_sub(o, f->t.count, &a);
}

static void producer_failing_while_consumer_is_wired_poisons_it(void **state) {
    (void)state;
    fixture *f = make();
    f->finish_status = STRATA_ETASK;
    st_worker_set_hook(f->t.w, ST_HOOK_AFTER_WIRING, finish_producer_during_wiring, f);
    strata_run *h;
    assert_ok(strata_worker_submit(f->t.w, orch_producer_consumer, f, &h));
    assert_status(STRATA_ETASK, strata_run_wait(h, STRATA_WAIT_FOREVER));
    assert_int_equal(f->hook_fired, 1);
    assert_int_equal(atomic_load(&f->t.counter), 0); /* the consumer never ran */
    assert_non_null(strstr(strata_run_error(h), "producer failed mid-wiring"));
    strata_run_release(h);
    st_worker_set_hook(f->t.w, ST_HOOK_AFTER_WIRING, NULL, NULL);
    assert_ok(strata_worker_run(f->t.w, orch_one_count, f));
    assert_int_equal(atomic_load(&f->t.counter), 1);
    destroy(f);
}

static void producer_completing_while_consumer_is_wired_releases_it(void **state) {
    (void)state;
    fixture *f = make();
    f->finish_status = STRATA_OK;
    st_worker_set_hook(f->t.w, ST_HOOK_AFTER_WIRING, finish_producer_during_wiring, f);
    assert_ok(strata_worker_run(f->t.w, orch_producer_consumer, f));
    assert_int_equal(f->hook_fired, 1);
    assert_int_equal(atomic_load(&f->t.counter), 1); /* published READY, then ran */
    destroy(f);
}

/* ---- a sub worker between finding its task and claiming it ---- */

typedef struct claim_watch {
    pthread_t caller;
    _Atomic int bodies;    /* task bodies run so far */
    _Atomic int claims;    /* hook calls so far */
    _Atomic int late;      /* hook calls that came after their task's body ran */
    _Atomic int on_caller; /* hook calls on the submitting thread */
    strata_callable body;
} claim_watch;

static int watched_body(const strata_task_view *a, void *u) {
    (void)a;
    atomic_fetch_add(&((claim_watch *)u)->bodies, 1);
    return 0;
}

static void watch_claim(strata_worker *w, st_hook_point at, uint64_t ref, void *ctx) {
    (void)w, (void)at, (void)ref;
    claim_watch *cw = ctx;
    int k = atomic_fetch_add(&cw->claims, 1);
    if (atomic_load(&cw->bodies) != k) /* runs are one task each, one after the other */
        atomic_fetch_add(&cw->late, 1);
    if (pthread_equal(pthread_self(), cw->caller))
        atomic_fetch_add(&cw->on_caller, 1);
}

static int orch_one_watched(strata_orch *o, void *arg) {
    strata_task_args a;
    strata_args_init(&a);
    return strata_orch_submit_sub(o, ((claim_watch *)arg)->body, &a);
}

static void sub_before_claim_fires_on_the_sub_worker_before_each_body(void **state) {
    (void)state;
    claim_watch cw = {.caller = pthread_self()};
    strata_worker_config cfg;
    strata_worker_config_init(&cfg);
    cfg.sub_workers = 1;
    cfg.help_while_waiting = 0; /* every body runs on the sub worker, after its claim */
    strata_worker *w;
    assert_ok(strata_worker_create(&cfg, &w));
    assert_ok(strata_worker_register_sub(w, "watched", watched_body, &cw, &cw.body));
    st_worker_set_hook(w, ST_HOOK_SUB_BEFORE_CLAIM, watch_claim, &cw); /* before the threads */
    assert_ok(strata_worker_init(w));
    for (int r = 0; r < 5; r++)
        assert_ok(strata_worker_run(w, orch_one_watched, &cw));
    assert_int_equal(atomic_load(&cw.bodies), 5);
    assert_int_equal(atomic_load(&cw.claims), 5);
    assert_int_equal(atomic_load(&cw.late), 0);
    assert_int_equal(atomic_load(&cw.on_caller), 0);
    strata_worker_destroy(w);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(cancellation_between_ready_and_claim_prevents_dispatch),
        cmocka_unit_test(producer_failing_while_consumer_is_wired_poisons_it),
        cmocka_unit_test(producer_completing_while_consumer_is_wired_releases_it),
        cmocka_unit_test(sub_before_claim_fires_on_the_sub_worker_before_each_body),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
