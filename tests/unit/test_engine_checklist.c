// label: concurrency
/* tests/unit/test_engine_checklist.c - engine behaviours from the upstream
 * unit-test list (reference/upstream-engine.md §10) that no other test of
 * ours covered, restated for our design (DESIGN §5): runs, admission,
 * retirement and its ordering, close, cancellation beside running work,
 * runs never sharing runtime memory, edges to finished producers, scopes,
 * argument limits and independent queues.
 *
 * Owns: nothing but these scenarios; each test names the upstream case it
 * answers. Group scheduling and completion handling live in test_groups.c.
 * Must never: assert wall-clock magnitudes (every wait is bounded only to
 * turn a hang into a failure), run cmocka assertions inside an orchestration
 * function (results are recorded and asserted afterwards), or leave a task
 * held at teardown.
 */
#include "test_support.h"

#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/engine.h"
#include "core/hooks.h"
#include "core/orchestrator.h"
#include "test_endpoint.h"
#include "util/clock.h"
#include "util/error.h"

#define SEC 1000000000ull
#define HANG (10 * SEC) /* a bound that only a hang reaches */
#define MAX_TASKS 64
#define ADMISSION_ROUNDS 200

/* The fixture's worker (manual test endpoints for "nl", the counted "count"
 * task, "gate" tasks that wait until ts_gate_open, a 4 KiB buffer) and what
 * the tests observe. The last task of a run that a concurrent close waits for
 * is a gate task: opening the gate touches only the fixture, never an
 * endpoint that close is about to free. */
typedef struct cfx {
    ts_worker t;
    strata_callable args_check;
    uint64_t refs[MAX_TASKS]; /* submitted tasks in order (ST_HOOK_AFTER_WIRING), lock held */
    int nrefs;
    int orch_rc; /* first failing call inside an orchestration function */
    char orch_msg[STRATA_ERRMSG_MAX];
    _Atomic int orch_called;
    strata_tensor kept; /* a tensor carried from one run to the next */
    int kept_rc;
    /* observations made inside orchestration functions */
    uint64_t seen[8];
} cfx;

static void sleep_us(long us) {
    struct timespec ts = {us / 1000000, (us % 1000000) * 1000};
    nanosleep(&ts, NULL);
}

/* Checks every argument of a task carrying the most tensors and scalars. */
static int args_check_fn(const strata_task_view *a, void *u) {
    (void)u;
    if (a->ntensors != STRATA_MAX_TENSORS || a->nscalars != STRATA_MAX_SCALARS) {
        strata_task_set_error("%u tensors and %u scalars arrived", a->ntensors, a->nscalars);
        return 1;
    }
    for (uint32_t i = 0; i < STRATA_MAX_SCALARS; i++)
        if (strata_args_scalar(a, i) != 3 * i + 1) {
            strata_task_set_error("scalar %u is %llu", i,
                                  (unsigned long long)strata_args_scalar(a, i));
            return 1;
        }
    for (uint32_t i = 0; i < STRATA_MAX_TENSORS; i++) {
        const strata_tensor *t = strata_args_tensor(a, i);
        if (a->tags[i] != (i % 2 ? STRATA_IN : STRATA_OUT_EXISTING) || t->offset != i * 64 ||
            t->shape[0] != 16 || *(const int32_t *)strata_args_data(a, i) != (int32_t)i) {
            strata_task_set_error("tensor %u arrived changed", i);
            return 1;
        }
    }
    return 0;
}

static void capture_ref(strata_worker *w, st_hook_point at, uint64_t ref, void *ctx) {
    (void)w;
    (void)at;
    cfx *f = ctx;
    if (f->nrefs < MAX_TASKS)
        f->refs[f->nrefs++] = ref;
}

static cfx *make_cfg(const strata_worker_config *cfg, int neps) {
    cfx *f = calloc(1, sizeof *f);
    assert_non_null(f);
    ts_worker_opts o;
    ts_worker_opts_init(&o);
    o.cfg = *cfg;
    o.endpoints = neps;
    o.manual_endpoints = 1;
    o.buffers[0] = 4096;
    o.subs[0] = (ts_sub){"args_check", args_check_fn, NULL, &f->args_check};
    ts_worker_open(&f->t, &o);
    st_worker_set_hook(f->t.w, ST_HOOK_AFTER_WIRING, capture_ref, f);
    return f;
}

static cfx *make(uint32_t depth, int neps, uint32_t nsubs) {
    strata_worker_config cfg;
    strata_worker_config_init(&cfg);
    cfg.sub_workers = nsubs;
    cfg.pipeline_depth = depth;
    return make_cfg(&cfg, neps);
}

static void destroy(cfx *f) {
    ts_worker_close(&f->t);
    free(f);
}

/* ---- observing ---------------------------------------------------------------- */

static void finish(cfx *f, int e) {
    if (st_test_ep_finish(f->t.ep[e], STRATA_OK, "", HANG) != 0)
        fail_msg("endpoint %d never received a task to finish", e);
}

static int wait_flag(_Atomic int *flag, int value, uint64_t timeout_ns) {
    uint64_t deadline = st_deadline_after(timeout_ns);
    while (atomic_load(flag) < value && st_now_ns() < deadline)
        sleep_us(100);
    return atomic_load(flag) >= value;
}

static uint32_t phase(strata_run *h) {
    return atomic_load(&h->phase.value);
}

static st_task_state task_state(cfx *f, int k) {
    st_engine_lock(f->t.w);
    st_slot *s = k < f->nrefs ? st_slots_get(&f->t.w->slots, f->refs[k]) : NULL;
    st_task_state st = s ? st_slot_state(s) : ST_CONSUMED;
    st_engine_unlock(f->t.w);
    return st;
}

static uint32_t free_slots(cfx *f) {
    st_engine_lock(f->t.w);
    uint32_t n = f->t.w->slots.nfree;
    st_engine_unlock(f->t.w);
    return n;
}

static uint64_t heap_used(cfx *f) {
    st_engine_lock(f->t.w);
    uint64_t used = 0;
    for (int r = 0; r < ST_HEAP_RINGS; r++)
        used += st_heap_used(&f->t.w->heap, r);
    st_engine_unlock(f->t.w);
    return used;
}

static void assert_engine_idle(cfx *f) {
    assert_int_equal(free_slots(f), f->t.w->slots.capacity);
    assert_int_equal(heap_used(f), 0);
}

/* ---- orchestration helpers (record, never assert) ---------------------------------- */

static void note(cfx *f, int rc) {
    if (rc != STRATA_OK && f->orch_rc == STRATA_OK) {
        f->orch_rc = rc;
        snprintf(f->orch_msg, sizeof f->orch_msg, "%s", strata_error_message());
    }
}

static void assert_orch_ok(cfx *f) {
    if (f->orch_rc != STRATA_OK)
        fail_msg("a call inside the orchestration function failed: %s (%s)",
                 strata_status_name(f->orch_rc), f->orch_msg);
}

static void nl_task(strata_orch *o, cfx *f, int e, strata_tensor *t, strata_tag how) {
    strata_task_args a;
    strata_args_init(&a);
    strata_args_add_scalar(&a, strata_orch_run_id(o));
    if (t)
        strata_args_add_tensor(&a, t, how);
    note(f, strata_orch_submit_next_level(o, f->t.nl, &a, NULL, e));
}

static void count_task(strata_orch *o, cfx *f, strata_tensor *t, strata_tag how) {
    strata_task_args a;
    strata_args_init(&a);
    if (t)
        strata_args_add_tensor(&a, t, how);
    note(f, strata_orch_submit_sub(o, f->t.count, &a));
}

static int orch_one_nl(strata_orch *o, void *arg) {
    atomic_fetch_add(&((cfx *)arg)->orch_called, 1);
    nl_task(o, arg, 0, NULL, 0);
    return STRATA_OK;
}

static int orch_gate(strata_orch *o, void *arg) {
    cfx *f = arg;
    atomic_fetch_add(&f->orch_called, 1);
    strata_task_args a;
    strata_args_init(&a);
    note(f, strata_orch_submit_sub(o, f->t.gate, &a));
    return STRATA_OK;
}

static int orch_empty(strata_orch *o, void *arg) {
    (void)o;
    atomic_fetch_add(&((cfx *)arg)->orch_called, 1);
    return STRATA_OK;
}

typedef struct submitter {
    cfx *f;
    strata_orch_fn fn;
    strata_run *h;
    int rc;
    _Atomic int returned;
} submitter;

static void *submit_in_thread(void *arg) {
    submitter *s = arg;
    s->rc = strata_worker_submit(s->f->t.w, s->fn, s->f, &s->h);
    atomic_store(&s->returned, 1);
    return NULL;
}

/* ==== admission and retirement ============================================================ */

/* Upstream: DepthOneAdmission.ARetiringRunAlwaysWakesTheOneWaiterItUnblocks.
 * Each round a second submitter waits for admission while the only admitted
 * run retires; the retirement must hand the lease over every time. */
static void depth_one_retirement_always_admits_the_blocked_submitter(void **state) {
    (void)state;
    cfx *f = make(1, 1, 1);
    uint64_t expected_id = 1;
    for (int round = 0; round < ADMISSION_ROUNDS; round++) {
        strata_run *h1;
        assert_ok(strata_worker_submit(f->t.w, orch_one_nl, f, &h1));
        assert_int_equal(strata_run_id(h1), expected_id);
        submitter s = {.f = f, .fn = orch_one_nl};
        pthread_t t;
        assert_int_equal(pthread_create(&t, NULL, submit_in_thread, &s), 0);
        for (int spin = 0; spin < round % 7; spin++) /* vary who gets there first */
            sched_yield();
        finish(f, 0); /* run 1 retires; the waiter must be admitted */
        assert_ok(strata_run_wait(h1, HANG));
        if (st_test_ep_finish(f->t.ep[0], STRATA_OK, "", HANG) != 0)
            fail_msg("round %d: the waiting submitter was never admitted", round);
        pthread_join(t, NULL);
        assert_ok(s.rc);
        assert_int_equal(strata_run_id(s.h), expected_id + 1); /* ids stay monotonic */
        assert_ok(strata_run_wait(s.h, HANG));
        strata_run_release(h1);
        strata_run_release(s.h);
        expected_id += 2;
    }
    assert_int_equal(atomic_load(&f->orch_called), 2 * ADMISSION_ROUNDS);
    destroy(f);
}

/* Run 2: B on worker 1, a sub task, C on worker 0. */
static int orch_successor_work(strata_orch *o, void *arg) {
    cfx *f = arg;
    nl_task(o, f, 1, NULL, 0);
    count_task(o, f, NULL, 0);
    nl_task(o, f, 0, NULL, 0);
    return STRATA_OK;
}

/* Upstream: ReadyQueueTest (run-partitioned queues),
 * BuildingSuccessorActivatesAfterPriorRunIsTerminal. Only the head's
 * partitions are dispatched, even to workers that sit idle. */
static void a_successor_dispatches_nothing_until_it_is_the_head(void **state) {
    (void)state;
    cfx *f = make(2, 2, 1);
    strata_run *h1, *h2;
    assert_ok(strata_worker_submit(f->t.w, orch_one_nl, f, &h1));
    assert_ok(strata_worker_submit(f->t.w, orch_successor_work, f, &h2));
    assert_orch_ok(f);
    assert_int_equal(phase(h2), ST_RUN_PREPARED);
    assert_int_equal(task_state(f, 1), ST_READY); /* B: worker 1 is idle */
    assert_int_equal(task_state(f, 2), ST_READY); /* the sub task: sub worker idle */
    assert_int_equal(task_state(f, 3), ST_READY);
    assert_int_equal(st_test_ep_count(f->t.ep[1]), 0);
    assert_int_equal(atomic_load(&f->t.counter), 0);
    finish(f, 0); /* run 1 retires: run 2 becomes the head */
    finish(f, 1);
    finish(f, 0);
    assert_ok(strata_run_wait(h2, HANG));
    assert_int_equal(atomic_load(&f->t.counter), 1);
    assert_int_equal(st_test_ep_record_at(f->t.ep[1], 0).run_id, 2);
    uint64_t acts[4];
    assert_int_equal(st_test_ep_activations(f->t.ep[1], acts, 4), 2);
    assert_int_equal(acts[0], 1);
    assert_int_equal(acts[1], 2);
    strata_run_release(h1);
    strata_run_release(h2);
    destroy(f);
}

/* Release ordering: a finished successor completes only once it is the head. */
static void a_finished_successor_completes_only_after_the_head(void **state) {
    (void)state;
    cfx *f = make(2, 1, 1);
    strata_run *h1, *h2;
    assert_ok(strata_worker_submit(f->t.w, orch_one_nl, f, &h1));
    assert_ok(strata_worker_submit(f->t.w, orch_empty, f, &h2)); /* nothing left to do */
    assert_int_equal(phase(h2), ST_RUN_PREPARED);
    assert_false(strata_run_done(h2));
    assert_status(STRATA_ETIMEDOUT, strata_run_wait(h2, 1000000));
    finish(f, 0);
    assert_ok(strata_run_wait(h2, HANG));
    assert_true(strata_run_done(h1)); /* run 1 was already terminal */
    assert_int_equal(phase(h1), ST_RUN_COMPLETED);
    strata_run_release(h1);
    strata_run_release(h2);
    destroy(f);
}

static int orch_successor_gives_up(strata_orch *o, void *arg) {
    cfx *f = arg;
    nl_task(o, f, 0, NULL, 0); /* READY, queued behind the head */
    count_task(o, f, NULL, 0);
    return st_fail(STRATA_EINVAL, "successor gave up");
}

/* Upstream: FailedPreparedConstructionReturnsAdmissionWithoutDispatch. A
 * successor whose orchestration function fails is cancelled and retires at
 * once, without waiting for the head, and its lease admits the next run. */
static void a_failing_successor_retires_at_once_and_returns_its_lease(void **state) {
    (void)state;
    cfx *f = make(2, 1, 1);
    strata_run *h1, *h2;
    assert_ok(strata_worker_submit(f->t.w, orch_one_nl, f, &h1));
    assert_ok(strata_worker_submit(f->t.w, orch_successor_gives_up, f, &h2));
    assert_true(strata_run_done(h2));
    assert_false(strata_run_done(h1));
    assert_status(STRATA_EINVAL, strata_run_status(h2));
    assert_non_null(strstr(strata_run_error(h2), "successor gave up"));
    submitter s = {.f = f, .fn = orch_one_nl};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, submit_in_thread, &s), 0);
    int admitted = wait_flag(&s.returned, 1, 5 * SEC); /* run 1 still holds its lease */
    finish(f, 0);                                      /* run 1 */
    pthread_join(t, NULL);
    assert_true(admitted);
    assert_ok(s.rc);
    finish(f, 0); /* run 3 */
    assert_ok(strata_run_wait(s.h, HANG));
    assert_ok(strata_run_wait(h1, HANG));
    assert_int_equal(st_test_ep_count(f->t.ep[0]), 2); /* run 2's task never launched */
    assert_int_equal(st_test_ep_record_at(f->t.ep[0], 1).run_id, 3);
    assert_int_equal(atomic_load(&f->t.counter), 0);
    strata_run_release(h1);
    strata_run_release(h2);
    strata_run_release(s.h);
    assert_engine_idle(f);
    destroy(f);
}

static int orch_fail_empty(strata_orch *o, void *arg) {
    (void)o;
    (void)arg;
    return st_fail(STRATA_ETASK, "nothing could be built");
}

/* Upstream: FailedSubmissionCompletesWithoutEnteringDeviceWork,
 * FailedSubmissionCarriesItsMessageToTheFence. */
static void an_empty_failing_orchestration_fails_its_run_with_its_message(void **state) {
    (void)state;
    cfx *f = make(2, 1, 1);
    strata_run *h;
    assert_ok(strata_worker_submit(f->t.w, orch_fail_empty, f, &h));
    assert_true(strata_run_done(h));
    assert_status(STRATA_ETASK, strata_run_wait(h, HANG));
    assert_non_null(strstr(strata_error_message(), "nothing could be built"));
    assert_non_null(strstr(strata_run_error(h), "nothing could be built"));
    strata_run_release(h);
    assert_int_equal(st_test_ep_count(f->t.ep[0]), 0);
    destroy(f);
}

/* ==== release ordering of resources ===================================================== */

typedef struct alloc_ctx {
    cfx *f;
    int64_t elems;
} alloc_ctx;

/* An intermediate read by a task held on worker 0. */
static int orch_alloc_then_read(strata_orch *o, void *arg) {
    alloc_ctx *c = arg;
    strata_tensor t;
    int rc = strata_orch_alloc(o, 1, &c->elems, STRATA_I32, &t);
    note(c->f, rc);
    if (rc == STRATA_OK)
        nl_task(o, c->f, 0, &t, STRATA_IN);
    return STRATA_OK;
}

/* DESIGN §5.4: a run's resources are released before its fence is
 * observable: when run 1's wait returns, its runtime memory and slots are
 * back even though run 2 still holds its own. */
static void a_runs_memory_and_slots_are_back_when_its_wait_returns(void **state) {
    (void)state;
    cfx *f = make(2, 1, 1);
    alloc_ctx c1 = {f, 256}, c2 = {f, 512}; /* 1 KiB and 2 KiB */
    strata_run *h1, *h2;
    assert_ok(strata_worker_submit(f->t.w, orch_alloc_then_read, &c1, &h1));
    assert_ok(strata_worker_submit(f->t.w, orch_alloc_then_read, &c2, &h2));
    assert_orch_ok(f);
    finish(f, 0);
    assert_ok(strata_run_wait(h1, HANG));
    assert_int_equal(heap_used(f), 2048);                        /* run 2's only */
    assert_int_equal(free_slots(f), f->t.w->slots.capacity - 2); /* run 2's two */
    assert_false(strata_run_done(h2));
    finish(f, 0);
    assert_ok(strata_run_wait(h2, HANG));
    assert_engine_idle(f);
    strata_run_release(h1);
    strata_run_release(h2);
    destroy(f);
}

static int orch_fill_window_then_ignore_a_capacity_failure(strata_orch *o, void *arg) {
    cfx *f = arg;
    nl_task(o, f, 0, NULL, 0); /* held */
    nl_task(o, f, 0, NULL, 0); /* queued: the window of 2 is full */
    strata_tensor t;
    memset(&t, 0, sizeof t);
    t.dtype = STRATA_I32;
    t.rank = 1;
    t.shape[0] = 256;
    strata_task_args a;
    strata_args_init(&a);
    strata_args_add_tensor(&a, &t, STRATA_OUT); /* needs heap memory and a slot */
    st_clear_error();
    f->kept_rc = strata_orch_submit_sub(o, f->t.count, &a);
    snprintf(f->orch_msg, sizeof f->orch_msg, "%s", strata_error_message());
    f->seen[0] = heap_used(f);
    f->seen[1] = free_slots(f);
    return STRATA_OK; /* the orchestration goes on without that task */
}

/* Upstream: SubmitRegistrationFailureReleasesTheUnownedHeapRingSlot,
 * AllocRegistrationFailureReleasesTheUnownedRingSlot. docs/guide.md: a full
 * window fails the submit, not the run. The heap memory the submit had
 * already taken goes back; nothing is left half-built. */
static void a_capacity_failure_gives_back_its_memory_and_leaves_the_run_alone(void **state) {
    (void)state;
    strata_worker_config cfg;
    strata_worker_config_init(&cfg);
    cfg.sub_workers = 1;
    cfg.task_window = 2;
    cfg.capacity_timeout_ns = 50000000; /* short only so the failing wait ends soon */
    cfx *f = make_cfg(&cfg, 1);
    strata_run *h;
    assert_ok(strata_worker_submit(f->t.w, orch_fill_window_then_ignore_a_capacity_failure, f, &h));
    assert_status(STRATA_ECAPACITY, f->kept_rc);
    assert_non_null(strstr(f->orch_msg, "task_window"));
    assert_int_equal(f->seen[0], 0); /* the submit's heap memory was given back */
    assert_int_equal(f->seen[1], 0); /* the two accepted tasks hold the window */
    finish(f, 0);
    finish(f, 0);
    assert_ok(strata_run_wait(h, HANG));
    assert_string_equal(strata_run_error(h), "");
    assert_int_equal(atomic_load(&f->t.counter), 0);
    strata_run_release(h);
    assert_engine_idle(f);
    destroy(f);
}

/* ==== close ====================================================================================
 */

static int orch_two_nl(strata_orch *o, void *arg) {
    nl_task(o, arg, 0, NULL, 0);
    nl_task(o, arg, 0, NULL, 0);
    return STRATA_OK;
}

typedef struct closer {
    strata_worker *w;
    int rc;
    _Atomic int returned;
} closer;

static void *close_in_thread(void *arg) {
    closer *c = arg;
    c->rc = strata_worker_close(c->w);
    atomic_store(&c->returned, 1);
    return NULL;
}

/* Upstream: TearDownDrainsCurrentAndQueuedDispatches,
 * StopKeepsWorkerBusyUntilItsLastCompletionIsPublished. Close waits for the
 * head (a task running, one queued) and for its prepared successor. */
static void close_waits_for_the_head_and_its_prepared_successor(void **state) {
    (void)state;
    cfx *f = make(2, 1, 1);
    strata_run *h1, *h2;
    assert_ok(strata_worker_submit(f->t.w, orch_two_nl, f, &h1));
    assert_ok(strata_worker_submit(f->t.w, orch_gate, f, &h2));
    closer c = {.w = f->t.w};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, close_in_thread, &c), 0);
    finish(f, 0);
    finish(f, 0);
    assert_ok(strata_run_wait(h1, HANG));
    int early = atomic_load(&c.returned);               /* run 2's gate task still runs */
    uint32_t dispatched = st_test_ep_count(f->t.ep[0]); /* endpoints are gone after close */
    ts_gate_open(&f->t);
    int closed = wait_flag(&c.returned, 1, HANG);
    pthread_join(t, NULL);
    assert_false(early);
    assert_true(closed);
    assert_ok(c.rc);
    assert_int_equal(dispatched, 2);
    assert_int_equal(phase(h1), ST_RUN_COMPLETED);
    assert_int_equal(phase(h2), ST_RUN_COMPLETED);
    strata_run *h3;
    assert_status(STRATA_ECLOSED, strata_worker_submit(f->t.w, orch_one_nl, f, &h3));
    strata_run_release(h1);
    strata_run_release(h2);
    destroy(f);
}

/* A submitter waiting for admission when the worker closes gets ECLOSED and
 * its orchestration function is never called. */
static void close_refuses_a_submitter_waiting_for_admission(void **state) {
    (void)state;
    cfx *f = make(1, 1, 1);
    strata_run *h1;
    assert_ok(strata_worker_submit(f->t.w, orch_gate, f, &h1));
    submitter s = {.f = f, .fn = orch_one_nl};
    pthread_t ts, tc;
    assert_int_equal(pthread_create(&ts, NULL, submit_in_thread, &s), 0);
    sleep_us(5000); /* most likely waiting for admission by now (either way it must be refused) */
    closer c = {.w = f->t.w};
    assert_int_equal(pthread_create(&tc, NULL, close_in_thread, &c), 0);
    /* Retire run 1 only once close has begun, or the waiter would be admitted. */
    uint64_t deadline = st_deadline_after(HANG);
    int closing = 0;
    while (!closing && st_now_ns() < deadline) {
        st_engine_lock(f->t.w);
        closing = f->t.w->state == ST_WORKER_CLOSED;
        st_engine_unlock(f->t.w);
        if (!closing)
            sleep_us(100);
    }
    ts_gate_open(&f->t); /* run 1 retires */
    int closed = wait_flag(&c.returned, 1, HANG);
    int refused = wait_flag(&s.returned, 1, HANG);
    pthread_join(tc, NULL);
    pthread_join(ts, NULL);
    assert_true(closing);
    assert_true(closed);
    assert_true(refused);
    assert_ok(c.rc);
    assert_status(STRATA_ECLOSED, s.rc);
    assert_null(s.h);
    assert_int_equal(atomic_load(&f->orch_called), 1);
    assert_ok(strata_run_wait(h1, HANG));
    strata_run_release(h1);
    destroy(f);
}

/* ==== cancellation beside running work ======================================================= */

static int orch_cancel_beside_running_reader(strata_orch *o, void *arg) {
    cfx *f = arg;
    strata_tensor t;
    memset(&t, 0, sizeof t);
    t.dtype = STRATA_I32;
    t.rank = 1;
    t.shape[0] = 256;
    strata_task_args a;
    strata_args_init(&a);
    strata_args_add_tensor(&a, &t, STRATA_OUT); /* P: runtime memory */
    note(f, strata_orch_submit_sub(o, f->t.count, &a));
    t = a.tensors[0];
    nl_task(o, f, 0, &t, STRATA_IN);    /* C: reads it on worker 0, held */
    count_task(o, f, &t, STRATA_INOUT); /* D: waits for C */
    uint64_t deadline = st_deadline_after(HANG);
    while (!st_test_ep_holding(f->t.ep[0]) && st_now_ns() < deadline)
        sleep_us(100);
    if (!st_test_ep_holding(f->t.ep[0]))
        note(f, STRATA_ETIMEDOUT);
    return st_fail(STRATA_EINVAL, "stop while C runs");
}

/* Upstream: CancelKeepsProducerRefsHeldByARunningConsumer,
 * CancelReleasesProducerRefsHeldByAnUnstartedConsumer. */
static void cancellation_keeps_memory_a_running_consumer_reads(void **state) {
    (void)state;
    cfx *f = make(2, 1, 1);
    strata_run *h;
    assert_ok(strata_worker_submit(f->t.w, orch_cancel_beside_running_reader, f, &h));
    assert_orch_ok(f);
    assert_int_equal(task_state(f, 0), ST_COMPLETED); /* P: C still holds it */
    assert_int_equal(task_state(f, 1), ST_RUNNING);   /* C: never cancelled */
    assert_int_equal(task_state(f, 2), ST_CONSUMED);  /* D: cancelled and reclaimed */
    assert_int_equal(heap_used(f), 1024);             /* P's memory stays for C */
    assert_false(strata_run_done(h));
    finish(f, 0);
    assert_status(STRATA_EINVAL, strata_run_wait(h, HANG));
    assert_non_null(strstr(strata_run_error(h), "stop while C runs"));
    assert_int_equal(atomic_load(&f->t.counter), 1); /* P ran, D never did */
    strata_run_release(h);
    assert_engine_idle(f);
    destroy(f);
}

/* ==== runtime memory never crosses between runs ============================================= */

static int orch_produce_runtime_memory(strata_orch *o, void *arg) {
    cfx *f = arg;
    strata_tensor t;
    memset(&t, 0, sizeof t);
    t.dtype = STRATA_I32;
    t.rank = 1;
    t.shape[0] = 16;
    strata_task_args a;
    strata_args_init(&a);
    strata_args_add_tensor(&a, &t, STRATA_OUT);
    note(f, strata_orch_submit_next_level(o, f->t.nl, &a, NULL, 0)); /* P, held on worker 0 */
    f->kept = a.tensors[0];
    return STRATA_OK;
}

static int orch_use_kept_tensor(strata_orch *o, void *arg) {
    cfx *f = arg;
    strata_task_args a;
    strata_args_init(&a);
    strata_args_add_tensor(&a, &f->kept, STRATA_IN);
    st_clear_error();
    f->kept_rc = strata_orch_submit_sub(o, f->t.count, &a);
    return STRATA_OK;
}

/* docs/guide.md: "dependencies, failures and runtime memory never cross
 * between runs"; bad input returns a status and never hangs. Run 2 is given
 * run 1's runtime memory while run 1's producer still runs: the submit must
 * be refused, and run 1 must still finish (an edge from run 2's task to
 * run 1's producer would keep run 1 from retiring while run 2 cannot start
 * before run 1 retires). */
static void runtime_memory_of_one_run_is_refused_by_the_next(void **state) {
    (void)state;
    cfx *f = make(2, 1, 1);
    strata_run *h1, *h2;
    assert_ok(strata_worker_submit(f->t.w, orch_produce_runtime_memory, f, &h1));
    assert_orch_ok(f);
    assert_non_null(f->kept.base);
    assert_ok(strata_worker_submit(f->t.w, orch_use_kept_tensor, f, &h2));
    finish(f, 0);
    int rc1 = strata_run_wait(h1, 2 * SEC);
    if (rc1 == STRATA_ETIMEDOUT)
        fail_msg("run 1 never finished: run 2's task (submit returned %s) holds run 1's "
                 "producer, and run 2 cannot start before run 1 retires (deadlock; the "
                 "worker cannot be closed, so this test leaks it)",
                 strata_status_name(f->kept_rc));
    assert_ok(rc1);
    assert_status(STRATA_EINVAL, f->kept_rc);
    assert_int_not_equal(strata_run_wait(h2, HANG), STRATA_ETIMEDOUT);
    strata_run_release(h1);
    strata_run_release(h2);
    destroy(f);
}

/* ==== edges to finished producers, scopes ===================================================== */

/* The task that owns runtime memory t (0 once reclaimed), as the submit path finds it. */
static uint64_t holder_of(cfx *f, const strata_tensor *t) {
    st_engine_lock(f->t.w);
    uint64_t ref = st_runtime_holder(f->t.w, t);
    st_engine_unlock(f->t.w);
    return ref;
}

static int orch_inout_on_allocation(strata_orch *o, void *arg) {
    cfx *f = arg;
    strata_tensor t;
    int64_t n = 16;
    note(f, strata_orch_alloc(o, 1, &n, STRATA_I32, &t));
    uint64_t holder = holder_of(f, &t);
    nl_task(o, f, 0, &t, STRATA_INOUT);
    st_engine_lock(f->t.w);
    st_slot *alloc = st_slots_get(&f->t.w->slots, holder);
    st_slot *task = f->nrefs ? st_slots_get(&f->t.w->slots, f->refs[0]) : NULL;
    f->seen[0] = alloc ? st_slot_state(alloc) : 99;
    f->seen[1] = alloc ? alloc->fanout_total : 99;
    f->seen[2] = task ? task->producers.n : 99;
    f->seen[3] = task && task->producers.n ? task->producers.v[0] == holder : 0;
    f->seen[4] = task ? task->fanin_count : 99;
    st_engine_unlock(f->t.w);
    return STRATA_OK;
}

/* Upstream: InoutWiresCreatorAsFanin. DESIGN §5.2: a completed producer adds
 * an edge that is already satisfied. */
static void inout_on_a_finished_allocation_wires_a_satisfied_edge(void **state) {
    (void)state;
    cfx *f = make(2, 1, 1);
    strata_run *h;
    assert_ok(strata_worker_submit(f->t.w, orch_inout_on_allocation, f, &h));
    assert_orch_ok(f);
    assert_int_equal(f->seen[0], ST_COMPLETED);
    assert_int_equal(f->seen[1], 2); /* the scope's reference + the edge */
    assert_int_equal(f->seen[2], 1);
    assert_true(f->seen[3]);
    assert_int_equal(f->seen[4], 0); /* nothing live to wait for */
    assert_int_equal(task_state(f, 0), ST_RUNNING);
    finish(f, 0);
    assert_ok(strata_run_wait(h, HANG));
    strata_run_release(h);
    assert_engine_idle(f);
    destroy(f);
}

static int alive(cfx *f, uint64_t ref) {
    st_engine_lock(f->t.w);
    int a = st_slots_get(&f->t.w->slots, ref) != NULL;
    st_engine_unlock(f->t.w);
    return a;
}

static int orch_nested_scopes(strata_orch *o, void *arg) {
    cfx *f = arg;
    strata_tensor a, b;
    int64_t n = 16;
    note(f, strata_orch_scope_begin(o));
    note(f, strata_orch_alloc(o, 1, &n, STRATA_I32, &a));
    note(f, strata_orch_scope_begin(o));
    note(f, strata_orch_alloc(o, 1, &n, STRATA_I32, &b));
    uint64_t ha = holder_of(f, &a), hb = holder_of(f, &b);
    uint32_t before = free_slots(f);
    note(f, strata_orch_scope_begin(o)); /* an empty scope */
    note(f, strata_orch_scope_end(o));
    f->seen[0] = free_slots(f) == before;
    f->seen[1] = ha && hb && alive(f, ha) && alive(f, hb);
    note(f, strata_orch_scope_end(o)); /* the inner one: b only */
    f->seen[2] = alive(f, ha) && !alive(f, hb) && holder_of(f, &b) == 0;
    note(f, strata_orch_scope_end(o));
    f->seen[3] = !alive(f, ha) && holder_of(f, &a) == 0;
    return STRATA_OK;
}

/* Upstream: Scope.NestedScopes, Scope.EmptyScopeReleasesNothing. */
static void nested_scopes_release_only_their_own_references(void **state) {
    (void)state;
    cfx *f = make(2, 0, 1);
    assert_ok(strata_worker_run(f->t.w, orch_nested_scopes, f));
    assert_orch_ok(f);
    assert_true(f->seen[0]);
    assert_true(f->seen[1]);
    assert_true(f->seen[2]);
    assert_true(f->seen[3]);
    assert_engine_idle(f);
    destroy(f);
}

/* ==== arguments and independent queues =========================================================
 */

static int orch_most_arguments(strata_orch *o, void *arg) {
    cfx *f = arg;
    int32_t *p = strata_buffer_data(f->t.buf[0]);
    strata_task_args a;
    strata_args_init(&a);
    for (uint32_t i = 0; i < STRATA_MAX_TENSORS; i++) {
        p[i * 16] = (int32_t)i;
        strata_tensor t;
        int64_t n = 16;
        note(f, strata_tensor_view(f->t.buf[0], i * 64, STRATA_I32, 1, &n, NULL, &t));
        note(f, strata_args_add_tensor(&a, &t, i % 2 ? STRATA_IN : STRATA_OUT_EXISTING));
    }
    for (uint32_t i = 0; i < STRATA_MAX_SCALARS; i++)
        note(f, strata_args_add_scalar(&a, 3 * i + 1));
    note(f, strata_orch_submit_sub(o, f->args_check, &a));
    return STRATA_OK;
}

/* Upstream: ComposedKernelArgsBlobFitsMailbox. */
static void a_task_with_the_most_arguments_reaches_its_worker_intact(void **state) {
    (void)state;
    cfx *f = make(2, 0, 1);
    int rc = strata_worker_run(f->t.w, orch_most_arguments, f);
    assert_orch_ok(f);
    if (rc != STRATA_OK)
        fail_msg("the task saw different arguments: %s", strata_error_message());
    destroy(f);
}

static int orch_nl_then_sub(strata_orch *o, void *arg) {
    cfx *f = arg;
    nl_task(o, f, 0, NULL, 0);
    nl_task(o, f, 1, NULL, 0);
    count_task(o, f, NULL, 0);
    return STRATA_OK;
}

/* Upstream: SubTaskDispatchesWhileNextLevelPoolSaturated. */
static void sub_tasks_run_while_every_next_level_worker_is_busy(void **state) {
    (void)state;
    cfx *f = make(2, 2, 1);
    strata_run *h;
    assert_ok(strata_worker_submit(f->t.w, orch_nl_then_sub, f, &h));
    assert_true(wait_flag(&f->t.counter, 1, HANG));
    assert_false(strata_run_done(h));
    finish(f, 0);
    finish(f, 1);
    assert_ok(strata_run_wait(h, HANG));
    strata_run_release(h);
    destroy(f);
}

static int orch_two_queues(strata_orch *o, void *arg) {
    cfx *f = arg;
    for (int i = 0; i < 2; i++)
        nl_task(o, f, 0, NULL, 0);
    for (int i = 0; i < 3; i++)
        nl_task(o, f, 1, NULL, 0);
    return STRATA_OK;
}

/* Upstream: BusyTargetDoesNotBlockAnotherWorkerQueue. */
static void a_busy_worker_does_not_hold_up_another_workers_queue(void **state) {
    (void)state;
    cfx *f = make(2, 2, 1);
    strata_run *h;
    assert_ok(strata_worker_submit(f->t.w, orch_two_queues, f, &h));
    for (int i = 0; i < 3; i++)
        finish(f, 1); /* worker 1 drains its queue while worker 0 stays busy */
    assert_int_equal(st_test_ep_count(f->t.ep[1]), 3);
    assert_int_equal(st_test_ep_count(f->t.ep[0]), 1);
    finish(f, 0);
    finish(f, 0);
    assert_ok(strata_run_wait(h, HANG));
    assert_int_equal(st_test_ep_count(f->t.ep[0]), 2);
    strata_run_release(h);
    destroy(f);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(depth_one_retirement_always_admits_the_blocked_submitter),
        cmocka_unit_test(a_successor_dispatches_nothing_until_it_is_the_head),
        cmocka_unit_test(a_finished_successor_completes_only_after_the_head),
        cmocka_unit_test(a_failing_successor_retires_at_once_and_returns_its_lease),
        cmocka_unit_test(an_empty_failing_orchestration_fails_its_run_with_its_message),
        cmocka_unit_test(a_runs_memory_and_slots_are_back_when_its_wait_returns),
        cmocka_unit_test(a_capacity_failure_gives_back_its_memory_and_leaves_the_run_alone),
        cmocka_unit_test(close_waits_for_the_head_and_its_prepared_successor),
        cmocka_unit_test(close_refuses_a_submitter_waiting_for_admission),
        cmocka_unit_test(cancellation_keeps_memory_a_running_consumer_reads),
        cmocka_unit_test(inout_on_a_finished_allocation_wires_a_satisfied_edge),
        cmocka_unit_test(nested_scopes_release_only_their_own_references),
        cmocka_unit_test(a_task_with_the_most_arguments_reaches_its_worker_intact),
        cmocka_unit_test(sub_tasks_run_while_every_next_level_worker_is_busy),
        cmocka_unit_test(a_busy_worker_does_not_hold_up_another_workers_queue),
        cmocka_unit_test(runtime_memory_of_one_run_is_refused_by_the_next),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
