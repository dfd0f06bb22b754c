// label: concurrency
/* tests/unit/test_groups.c - group tasks and completion handling in the
 * scheduler, driven step by step (DESIGN §5.5, upstream notes §8 and §10):
 * members placed on their named workers with their own args, all-or-nothing
 * launch with reservation of a blocked head group's workers, groups before
 * singles on shared workers (also across a run switch), a finished member
 * freeing its worker, aggregation (the group stays RUNNING until every
 * member is terminal; the first failure is kept; duplicate, stray and stale
 * completions are ignored), cancellation and poison of whole groups, one
 * edge per producer, and sub groups waiting in FIFO order for N idle workers.
 *
 * Owns: a threadless "script" endpoint. Its dispatch only logs; the test
 * posts every completion itself (one fresh completion record each) and then
 * runs a scheduler pass under the engine lock, so the queue state each
 * assertion sees is exact, never a matter of timing.
 * Must never: assert wall-clock magnitudes (bounded waits only detect
 * hangs), run cmocka assertions inside an orchestration function or while
 * holding a lock (results are recorded and asserted afterwards), or leave a
 * held task behind at teardown.
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
#include "core/release.h"
#include "core/scheduler.h"
#include "util/clock.h"
#include "util/error.h"

#define SEC 1000000000ull
#define LOG_MAX 64
#define MAX_EPS 4
#define MAX_TASKS 64
#define MEET_TIMEOUT (5 * SEC)

/* ==== the script endpoint ================================================== */

typedef struct script_rec {
    uint64_t ref, run_id, tag; /* tag: scalar 0 of the member's args */
    uint32_t member;
    int done; /* the test completed it */
} script_rec;

typedef struct script_ep {
    st_endpoint base;
    /* Protects every field below. Lock order: taken inside the engine lock
     * (dispatch and activate run under it); never held while calling the
     * engine. */
    pthread_mutex_t mu;
    script_rec log[LOG_MAX];
    int n;
    int held, max_held; /* dispatched, not yet completed: more than 1 = double-booked */
    int reject_next;    /* complete the next dispatch as an endpoint failure, inside dispatch */
    int stopped;
    uint64_t acts[16];
    int nacts;
    st_completion comps[2 * LOG_MAX]; /* one fresh record per posted completion */
    int ncomps;
} script_ep;

static st_completion *fresh_record(script_ep *ep) {
    return ep->ncomps < 2 * LOG_MAX ? &ep->comps[ep->ncomps++] : NULL;
}

static void script_dispatch(st_endpoint *base, const st_dispatch *d) {
    script_ep *ep = (script_ep *)base;
    pthread_mutex_lock(&ep->mu);
    int reject = ep->stopped || ep->reject_next;
    ep->reject_next = 0;
    if (ep->n < LOG_MAX) {
        ep->log[ep->n++] = (script_rec){
            .ref = d->ref,
            .run_id = d->run_id,
            .tag = d->args->nscalars ? d->args->scalars[0] : 0,
            .member = d->member,
            .done = reject,
        };
    }
    if (!reject && ++ep->held > ep->max_held)
        ep->max_held = ep->held;
    st_completion *c = reject ? fresh_record(ep) : NULL;
    pthread_mutex_unlock(&ep->mu);
    if (c) /* completed from inside dispatch, under the engine lock */
        st_endpoint_complete_with(base, c, d, STRATA_EENDPOINT, "%s refused the task", base->label);
}

static void script_activate(st_endpoint *base, uint64_t run_id) {
    script_ep *ep = (script_ep *)base;
    pthread_mutex_lock(&ep->mu);
    if (ep->nacts < 16)
        ep->acts[ep->nacts++] = run_id;
    pthread_mutex_unlock(&ep->mu);
}

static void script_stop(st_endpoint *base) {
    script_ep *ep = (script_ep *)base;
    pthread_mutex_lock(&ep->mu);
    ep->stopped = 1;
    pthread_mutex_unlock(&ep->mu);
}

static void script_destroy(st_endpoint *base) {
    script_ep *ep = (script_ep *)base;
    pthread_mutex_destroy(&ep->mu);
    free(ep);
}

static const st_endpoint_ops script_ops = {
    .dispatch = script_dispatch,
    .progress = NULL,
    .activate = script_activate,
    .stop = script_stop,
    .destroy = script_destroy,
};

/* ==== fixture ================================================================ */

typedef struct gfx {
    strata_worker *w;
    script_ep *ep[MAX_EPS];
    strata_callable nl, gate, stamp, meet3;
    strata_buffer *buf;
    uint64_t refs[MAX_TASKS]; /* submitted tasks in order (ST_HOOK_AFTER_WIRING), lock held */
    int nrefs;
    int orch_rc; /* first failing call inside an orchestration function */
    char orch_msg[STRATA_ERRMSG_MAX];
    int cancel_groups; /* the claim hook cancels the next group it sees */
    int cancelled;
    _Atomic int gate_open;
    _Atomic int timeouts; /* bounded waits inside task bodies that expired */
    _Atomic uint64_t clock;
    _Atomic uint64_t start[MAX_TASKS]; /* tick at which sub task `tag` started */
    _Atomic int met;
    pthread_t member_thread[3];
} gfx;

static void sleep_us(long us) {
    struct timespec ts = {us / 1000000, (us % 1000000) * 1000};
    nanosleep(&ts, NULL);
}

static void stamp_start(gfx *f, const strata_task_view *a) {
    uint64_t tag = strata_args_scalar(a, 0);
    if (tag < MAX_TASKS)
        atomic_store(&f->start[tag], atomic_fetch_add(&f->clock, 1) + 1);
}

/* Sub body: record the start, then wait (bounded) for the gate. */
static int gate_fn(const strata_task_view *a, void *u) {
    gfx *f = u;
    stamp_start(f, a);
    uint64_t deadline = st_deadline_after(10 * SEC);
    while (!atomic_load(&f->gate_open)) {
        if (st_now_ns() >= deadline) {
            atomic_fetch_add(&f->timeouts, 1);
            break;
        }
        sleep_us(100);
    }
    return 0;
}

static int stamp_fn(const strata_task_view *a, void *u) {
    stamp_start(u, a);
    return 0;
}

/* Sub group member: record the start and thread, then wait (bounded) until
 * all three members are inside at once. */
static int meet3_fn(const strata_task_view *a, void *u) {
    gfx *f = u;
    stamp_start(f, a);
    int me = atomic_fetch_add(&f->met, 1);
    if (me < 3)
        f->member_thread[me] = pthread_self();
    uint64_t deadline = st_deadline_after(MEET_TIMEOUT);
    while (atomic_load(&f->met) < 3) {
        if (st_now_ns() >= deadline) {
            atomic_fetch_add(&f->timeouts, 1);
            return 1;
        }
        sched_yield();
    }
    return 0;
}

static void capture_ref(strata_worker *w, st_hook_point at, uint64_t ref, void *ctx) {
    (void)w;
    (void)at;
    gfx *f = ctx;
    if (f->nrefs < MAX_TASKS)
        f->refs[f->nrefs++] = ref;
}

/* Cancels the first group it meets between the ready decision and the claim. */
static void cancel_group_at_claim(strata_worker *w, st_hook_point at, uint64_t ref, void *ctx) {
    (void)at;
    gfx *f = ctx;
    st_slot *s = st_hook_slot(w, ref);
    if (!f->cancel_groups || !s || s->nmembers < 2)
        return;
    f->cancel_groups = 0;
    f->cancelled++;
    st_run_record_error(s->run, STRATA_ECANCELED, "run %llu: group cancelled by the test",
                        (unsigned long long)s->run->id);
    st_poison(w, s, STRATA_ECANCELED);
}

static gfx *make_depth(int neps, int nsubs, uint32_t depth) {
    gfx *f = calloc(1, sizeof *f);
    assert_non_null(f);
    strata_worker_config cfg;
    strata_worker_config_init(&cfg);
    cfg.sub_workers = (uint32_t)nsubs;
    cfg.pipeline_depth = depth;
    assert_ok(strata_worker_create(&cfg, &f->w));
    for (int i = 0; i < neps; i++) {
        script_ep *ep = calloc(1, sizeof *ep);
        assert_non_null(ep);
        ep->base.ops = &script_ops;
        pthread_mutex_init(&ep->mu, NULL);
        int id;
        assert_ok(st_worker_add_endpoint(f->w, &ep->base, &id));
        assert_int_equal(id, i);
        snprintf(ep->base.label, sizeof ep->base.label, "%d (script)", id);
        f->ep[i] = ep;
    }
    assert_ok(st_register_next_level(f->w, "nl", NULL, NULL, NULL, &f->nl));
    assert_ok(strata_worker_register_sub(f->w, "gate", gate_fn, f, &f->gate));
    assert_ok(strata_worker_register_sub(f->w, "stamp", stamp_fn, f, &f->stamp));
    assert_ok(strata_worker_register_sub(f->w, "meet3", meet3_fn, f, &f->meet3));
    assert_ok(strata_worker_init(f->w));
    st_worker_set_hook(f->w, ST_HOOK_AFTER_WIRING, capture_ref, f);
    st_worker_set_hook(f->w, ST_HOOK_BEFORE_DISPATCH_CLAIM, cancel_group_at_claim, f);
    assert_ok(strata_buffer_create(f->w, 4096, &f->buf));
    return f;
}

static gfx *make(int neps, int nsubs) {
    return make_depth(neps, nsubs, 2);
}

static void destroy(gfx *f) {
    atomic_store(&f->gate_open, 1);
    strata_worker_destroy(f->w);
    strata_buffer_destroy(f->buf);
    assert_int_equal(atomic_load(&f->timeouts), 0);
    free(f);
}

/* ==== driving and observing ================================================== */

/* One scheduler pass under the engine lock: every completion posted before
 * this call is handled and everything dispatchable is dispatched. */
static void settle(gfx *f) {
    st_engine_lock(f->w);
    st_sched_pass(f->w);
    st_engine_unlock(f->w);
}

static int ep_count(gfx *f, int e) {
    pthread_mutex_lock(&f->ep[e]->mu);
    int n = f->ep[e]->n;
    pthread_mutex_unlock(&f->ep[e]->mu);
    return n;
}

static script_rec ep_rec(gfx *f, int e, int i) {
    script_rec r = {0};
    pthread_mutex_lock(&f->ep[e]->mu);
    if (i < f->ep[e]->n)
        r = f->ep[e]->log[i];
    pthread_mutex_unlock(&f->ep[e]->mu);
    return r;
}

static int ep_max_held(gfx *f, int e) {
    pthread_mutex_lock(&f->ep[e]->mu);
    int n = f->ep[e]->max_held;
    pthread_mutex_unlock(&f->ep[e]->mu);
    return n;
}

/* Post a completion for (ref, member) on endpoint e. i >= 0 marks log entry
 * i done (a real completion); i = -1 posts a stray one (duplicate, stale). */
static void post(gfx *f, int e, int i, uint64_t ref, uint32_t member, int status, const char *msg) {
    script_ep *ep = f->ep[e];
    pthread_mutex_lock(&ep->mu);
    if (i >= 0) {
        ep->log[i].done = 1;
        ep->held--;
    }
    st_completion *c = fresh_record(ep);
    pthread_mutex_unlock(&ep->mu);
    assert_non_null(c);
    c->ref = ref;
    c->member = member;
    c->status = status;
    snprintf(c->msg, sizeof c->msg, "%s", msg ? msg : "");
    st_endpoint_complete(&ep->base, c);
    settle(f);
}

/* Complete the i-th dispatch endpoint e received. */
static void complete(gfx *f, int e, int i, int status, const char *msg) {
    script_rec r = ep_rec(f, e, i);
    if (i >= ep_count(f, e) || r.done)
        fail_msg("endpoint %d has no open dispatch %d (it received %d)", e, i, ep_count(f, e));
    post(f, e, i, r.ref, r.member, status, msg);
}

/* Complete every open dispatch with success until h is done (teardown of a
 * test that stopped early, and of tests whose last steps are routine). */
static void drain(gfx *f, strata_run *h) {
    uint64_t deadline = st_deadline_after(10 * SEC);
    while (!strata_run_done(h) && st_now_ns() < deadline) {
        int progressed = 0;
        for (int e = 0; e < MAX_EPS && f->ep[e]; e++)
            for (int i = 0; i < ep_count(f, e); i++)
                if (!ep_rec(f, e, i).done) {
                    complete(f, e, i, STRATA_OK, "");
                    progressed = 1;
                }
        if (!progressed)
            sleep_us(100);
    }
    atomic_store(&f->gate_open, 1);
    if (strata_run_wait(h, 10 * SEC) == STRATA_ETIMEDOUT)
        fail_msg("run %llu never finished", (unsigned long long)strata_run_id(h));
}

/* State of the k-th submitted task; ST_CONSUMED once its slot is recycled. */
static st_task_state task_state(gfx *f, int k) {
    st_engine_lock(f->w);
    st_slot *s = k < f->nrefs ? st_slots_get(&f->w->slots, f->refs[k]) : NULL;
    st_task_state st = s ? st_slot_state(s) : ST_CONSUMED;
    st_engine_unlock(f->w);
    return st;
}

static int run_error_recorded(gfx *f, strata_run *h) {
    st_engine_lock(f->w);
    int e = st_error_status(&h->error);
    st_engine_unlock(f->w);
    return e;
}

static void assert_engine_idle(gfx *f) {
    st_engine_lock(f->w);
    uint32_t nfree = f->w->slots.nfree, cap = f->w->slots.capacity;
    st_engine_unlock(f->w);
    assert_int_equal(nfree, cap);
}

/* ==== orchestration helpers (record, never assert) ============================ */

static void note(gfx *f, int rc) {
    if (rc != STRATA_OK && f->orch_rc == STRATA_OK) {
        f->orch_rc = rc;
        snprintf(f->orch_msg, sizeof f->orch_msg, "%s", strata_error_message());
    }
}

static void assert_orch_ok(gfx *f) {
    if (f->orch_rc != STRATA_OK)
        fail_msg("a call inside the orchestration function failed: %s (%s)",
                 strata_status_name(f->orch_rc), f->orch_msg);
}

/* nslices adjacent slices of 16 I32 from slice `first` (slice i = bytes [64 i, 64 i + 64)). */
static strata_tensor span(gfx *f, int first, int nslices) {
    strata_tensor t;
    int64_t n = 16 * nslices;
    strata_tensor_view(f->buf, (uint64_t)first * 64, STRATA_I32, 1, &n, NULL, &t);
    return t;
}

static strata_tensor slice(gfx *f, int i) {
    return span(f, i, 1);
}

/* A single next-level task `tag` on worker e, with an optional tensor. */
static void single(strata_orch *o, gfx *f, int e, uint64_t tag, strata_tensor *t, strata_tag how) {
    strata_task_args a;
    strata_args_init(&a);
    strata_args_add_scalar(&a, tag);
    if (t)
        strata_args_add_tensor(&a, t, how);
    note(f, strata_orch_submit_next_level(o, f->nl, &a, NULL, e));
}

/* A next-level group on ids[0..n); member m carries scalar tag + m and, if
 * ts is given, tensor ts[m] (members that write need disjoint views). */
static void group(strata_orch *o, gfx *f, const int *ids, int n, uint64_t tag, strata_tensor *ts,
                  strata_tag how) {
    strata_task_args a[MAX_EPS];
    for (int m = 0; m < n; m++) {
        strata_args_init(&a[m]);
        strata_args_add_scalar(&a[m], tag + (uint64_t)m);
        if (ts)
            strata_args_add_tensor(&a[m], &ts[m], how);
    }
    note(f, strata_orch_submit_next_level_group(o, f->nl, a, NULL, ids, n));
}

static void sub(strata_orch *o, gfx *f, strata_callable fn, uint64_t tag) {
    strata_task_args a;
    strata_args_init(&a);
    strata_args_add_scalar(&a, tag);
    note(f, strata_orch_submit_sub(o, fn, &a));
}

static strata_run *submit_run(gfx *f, strata_orch_fn fn) {
    strata_run *h;
    assert_ok(strata_worker_submit(f->w, fn, f, &h));
    assert_orch_ok(f);
    settle(f);
    return h;
}

static void finish_ok(gfx *f, strata_run *h) {
    drain(f, h);
    assert_ok(strata_run_wait(h, STRATA_WAIT_FOREVER));
    strata_run_release(h);
}

/* ==== placement ================================================================== */

static int orch_group_on_2_0(strata_orch *o, void *arg) {
    gfx *f = arg;
    const int ids[2] = {2, 0};
    group(o, f, ids, 2, 10, NULL, 0);
    return STRATA_OK;
}

/* Upstream: GroupDispatchesToNWorkers, GroupMapsEachMemberToItsTargetWorkerIdNotIndex,
 * GroupTaskStoresArgsListPerMember. */
static void members_run_on_their_named_workers_with_their_own_args(void **state) {
    (void)state;
    gfx *f = make(3, 1);
    strata_run *h = submit_run(f, orch_group_on_2_0);
    assert_int_equal(ep_count(f, 2), 1);
    assert_int_equal(ep_count(f, 0), 1);
    assert_int_equal(ep_count(f, 1), 0);
    script_rec m0 = ep_rec(f, 2, 0), m1 = ep_rec(f, 0, 0);
    assert_int_equal(m0.member, 0); /* member i goes to worker_ids[i] */
    assert_int_equal(m0.tag, 10);   /* ... with args[i] */
    assert_int_equal(m1.member, 1);
    assert_int_equal(m1.tag, 11);
    assert_int_equal(m0.ref, m1.ref); /* one task */
    assert_int_equal(m0.run_id, strata_run_id(h));
    finish_ok(f, h);
    destroy(f);
}

/* ==== aggregation ================================================================= */

/* G on {0,1} writes slices 0 and 1; C on worker 2 reads both. */
static int orch_group_then_consumer(strata_orch *o, void *arg) {
    gfx *f = arg;
    strata_tensor halves[2] = {slice(f, 0), slice(f, 1)}, x = span(f, 0, 2);
    const int ids[2] = {0, 1};
    group(o, f, ids, 2, 1, halves, STRATA_INOUT);
    single(o, f, 2, 5, &x, STRATA_IN);
    return STRATA_OK;
}

/* Upstream: GroupCompletesOnlyWhenAllDone, GroupDependencyChain,
 * DependencyReleaseUsesConsumerWorkerQueue. */
static void a_group_completes_only_when_its_last_member_does(void **state) {
    (void)state;
    gfx *f = make(3, 1);
    strata_run *h = submit_run(f, orch_group_then_consumer);
    assert_int_equal(task_state(f, 1), ST_PENDING);
    complete(f, 0, 0, STRATA_OK, "");
    assert_int_equal(task_state(f, 0), ST_RUNNING); /* member 1 still runs */
    assert_int_equal(task_state(f, 1), ST_PENDING);
    assert_int_equal(ep_count(f, 2), 0);
    complete(f, 1, 0, STRATA_OK, "");
    assert_int_equal(ep_count(f, 2), 1); /* released into its own worker's queue, once */
    assert_int_equal(ep_rec(f, 2, 0).tag, 5);
    complete(f, 2, 0, STRATA_OK, "");
    assert_ok(strata_run_wait(h, 10 * SEC));
    assert_int_equal(ep_count(f, 2), 1);
    strata_run_release(h);
    assert_engine_idle(f);
    destroy(f);
}

/* Upstream: worker_done ignores duplicates and invalid member indices. Our
 * engine ignores any completion naming a member that is not running. */
static void duplicate_and_stray_member_completions_are_ignored(void **state) {
    (void)state;
    gfx *f = make(3, 1);
    strata_run *h = submit_run(f, orch_group_then_consumer);
    script_rec m0 = ep_rec(f, 0, 0);
    complete(f, 0, 0, STRATA_OK, "");
    post(f, 0, -1, m0.ref, 0, STRATA_OK, "");                      /* duplicate success */
    post(f, 0, -1, m0.ref, 0, STRATA_ETASK, "late duplicate");     /* duplicate failure */
    post(f, 0, -1, m0.ref, 7, STRATA_ETASK, "no such member");     /* member out of range */
    post(f, 0, -1, m0.ref + (1ull << 32), 1, STRATA_ETASK, "old"); /* wrong generation */
    assert_int_equal(task_state(f, 0), ST_RUNNING);                /* still waiting for member 1 */
    assert_int_equal(ep_count(f, 2), 0);           /* the consumer was not released */
    assert_int_equal(run_error_recorded(f, h), 0); /* no failure was taken from them */
    complete(f, 1, 0, STRATA_OK, "");
    assert_int_equal(ep_count(f, 2), 1); /* released exactly once */
    complete(f, 2, 0, STRATA_OK, "");
    assert_ok(strata_run_wait(h, 10 * SEC));
    assert_string_equal(strata_run_error(h), "");
    strata_run_release(h);
    assert_engine_idle(f);
    destroy(f);
}

/* G on {0,1}; then T and U queued on worker 0. */
static int orch_group_then_two_on_0(strata_orch *o, void *arg) {
    gfx *f = arg;
    const int ids[2] = {0, 1};
    group(o, f, ids, 2, 1, NULL, 0);
    single(o, f, 0, 2, NULL, 0);
    single(o, f, 0, 3, NULL, 0);
    return STRATA_OK;
}

/* A duplicate completion must not change anything, including whether the
 * worker it names is busy: worker 0 is running T when the duplicate of the
 * group's member 0 arrives, so U must still wait for T. */
static void a_duplicate_member_completion_does_not_free_a_busy_worker(void **state) {
    (void)state;
    gfx *f = make(2, 1);
    strata_run *h = submit_run(f, orch_group_then_two_on_0);
    script_rec m0 = ep_rec(f, 0, 0);
    complete(f, 0, 0, STRATA_OK, "");
    int t_running = ep_count(f, 0) == 2 && ep_rec(f, 0, 1).tag == 2;
    post(f, 0, -1, m0.ref, 0, STRATA_OK, ""); /* duplicate of member 0, group still RUNNING */
    int dispatched_after_duplicate = ep_count(f, 0);
    int max_held = ep_max_held(f, 0);
    finish_ok(f, h);
    destroy(f);
    assert_true(t_running);
    if (dispatched_after_duplicate != 2 || max_held != 1)
        fail_msg("after a duplicate completion worker 0 received %d dispatches (expected 2) "
                 "and held up to %d tasks at once (expected 1): the duplicate marked a busy "
                 "worker idle",
                 dispatched_after_duplicate, max_held);
}

/* G on {0,1,2} writes slices 0..2; then S1 on worker 1; C on worker 0 reads them. */
static int orch_group3_single_consumer(strata_orch *o, void *arg) {
    gfx *f = arg;
    strata_tensor parts[3] = {slice(f, 0), slice(f, 1), slice(f, 2)}, x = span(f, 0, 3);
    const int ids[3] = {0, 1, 2};
    group(o, f, ids, 3, 1, parts, STRATA_INOUT);
    single(o, f, 1, 7, NULL, 0);
    single(o, f, 0, 8, &x, STRATA_IN);
    return STRATA_OK;
}

/* Upstream: GroupFailureWaitsForRunningMembersThenConsumes. */
static void a_failed_member_keeps_the_group_until_running_peers_finish(void **state) {
    (void)state;
    gfx *f = make(3, 1);
    strata_run *h = submit_run(f, orch_group3_single_consumer);
    complete(f, 1, 0, STRATA_ETASK, "member one broke");
    assert_int_not_equal(run_error_recorded(f, h), 0); /* recorded at once */
    assert_int_equal(task_state(f, 0), ST_RUNNING);    /* peers 0 and 2 still run */
    assert_int_equal(task_state(f, 2), ST_PENDING);    /* not yet poisoned */
    assert_false(strata_run_done(h));
    /* The failed member's worker is free for its own queue at once. */
    assert_int_equal(ep_count(f, 1), 2);
    assert_int_equal(ep_rec(f, 1, 1).tag, 7);
    complete(f, 1, 1, STRATA_OK, "");
    complete(f, 0, 0, STRATA_OK, "");
    assert_int_equal(task_state(f, 0), ST_RUNNING);
    complete(f, 2, 0, STRATA_ETASK, "member two broke too");
    assert_status(STRATA_ETASK, strata_run_wait(h, 10 * SEC));
    assert_int_equal(ep_count(f, 0), 1); /* the consumer was poisoned, never dispatched */
    assert_non_null(strstr(strata_run_error(h), "member 1 failed: member one broke"));
    assert_null(strstr(strata_run_error(h), "two broke"));
    strata_run_release(h);
    assert_engine_idle(f);
    destroy(f);
}

/* ==== all-or-nothing and reservation ================================================= */

/* A on 0; G on {0,1,2}. */
static int orch_busy_then_group3(strata_orch *o, void *arg) {
    gfx *f = arg;
    const int ids[3] = {0, 1, 2};
    single(o, f, 0, 1, NULL, 0);
    group(o, f, ids, 3, 10, NULL, 0);
    return STRATA_OK;
}

/* Upstream: BlockedGroupRemainsReadyUntilWorkerCompletion. */
static void a_blocked_group_launches_all_members_at_once_or_none(void **state) {
    (void)state;
    gfx *f = make(3, 1);
    strata_run *h = submit_run(f, orch_busy_then_group3);
    for (int pass = 0; pass < 5; pass++)
        settle(f);
    assert_int_equal(task_state(f, 1), ST_READY);
    assert_int_equal(ep_count(f, 1), 0); /* idle, but the group cannot start partially */
    assert_int_equal(ep_count(f, 2), 0);
    complete(f, 0, 0, STRATA_OK, "");
    /* one pass launched every member */
    assert_int_equal(ep_count(f, 0), 2);
    assert_int_equal(ep_count(f, 1), 1);
    assert_int_equal(ep_count(f, 2), 1);
    assert_int_equal(ep_rec(f, 0, 1).member, 0);
    assert_int_equal(ep_rec(f, 1, 0).member, 1);
    assert_int_equal(ep_rec(f, 2, 0).member, 2);
    finish_ok(f, h);
    destroy(f);
}

/* A on 0 (busy); S0 on 0 published before G on {0,1}; S1 on 1 after G. */
static int orch_singles_around_group(strata_orch *o, void *arg) {
    gfx *f = arg;
    const int ids[2] = {0, 1};
    single(o, f, 0, 1, NULL, 0);
    single(o, f, 0, 2, NULL, 0);
    group(o, f, ids, 2, 10, NULL, 0);
    single(o, f, 1, 3, NULL, 0);
    return STRATA_OK;
}

/* Upstream: LaunchableGroupPrecedesConflictingSingles. */
static void a_launchable_group_goes_before_singles_queued_on_its_workers(void **state) {
    (void)state;
    gfx *f = make(2, 1);
    strata_run *h = submit_run(f, orch_singles_around_group);
    assert_int_equal(ep_count(f, 1), 0); /* S1: worker 1 is reserved by the blocked group */
    complete(f, 0, 0, STRATA_OK, "");    /* A done: the group launches, not S0 */
    assert_int_equal(ep_count(f, 0), 2);
    assert_int_equal(ep_rec(f, 0, 1).tag, 10);
    assert_int_equal(ep_count(f, 1), 1);
    assert_int_equal(ep_rec(f, 1, 0).tag, 11);
    complete(f, 0, 1, STRATA_OK, "");
    assert_int_equal(ep_rec(f, 0, 2).tag, 2); /* S0 after the group's member */
    complete(f, 1, 0, STRATA_OK, "");
    assert_int_equal(ep_rec(f, 1, 1).tag, 3);
    finish_ok(f, h);
    destroy(f);
}

/* G on {0,1}; S on 0 queued behind member 0. */
static int orch_group_then_single_on_0(strata_orch *o, void *arg) {
    gfx *f = arg;
    const int ids[2] = {0, 1};
    group(o, f, ids, 2, 10, NULL, 0);
    single(o, f, 0, 2, NULL, 0);
    return STRATA_OK;
}

/* Upstream: BlockedGroupReservesTargetsThatBecomeIdleOneAtATime (last step),
 * QueuedSingleRunsAfterItsWorkerFreesUp. */
static void a_finished_member_frees_its_worker_for_its_queued_single(void **state) {
    (void)state;
    gfx *f = make(2, 1);
    strata_run *h = submit_run(f, orch_group_then_single_on_0);
    assert_int_equal(ep_count(f, 0), 1);
    complete(f, 0, 0, STRATA_OK, "");
    assert_int_equal(ep_count(f, 0), 2); /* S runs on worker 0 ... */
    assert_int_equal(ep_rec(f, 0, 1).tag, 2);
    assert_int_equal(task_state(f, 0), ST_RUNNING); /* ... while member 1 still runs */
    finish_ok(f, h);
    destroy(f);
}

/* A on 0, B on 1 (both busy); G on {0,1}; S0 on 0; S2 on 2. */
static int orch_group_waits_for_two(strata_orch *o, void *arg) {
    gfx *f = arg;
    const int ids[2] = {0, 1};
    single(o, f, 0, 1, NULL, 0);
    single(o, f, 1, 2, NULL, 0);
    group(o, f, ids, 2, 10, NULL, 0);
    single(o, f, 0, 3, NULL, 0);
    single(o, f, 2, 4, NULL, 0);
    return STRATA_OK;
}

/* Upstream: BlockedGroupReservesTargetsThatBecomeIdleOneAtATime. */
static void a_blocked_group_holds_freed_workers_while_unrelated_ones_proceed(void **state) {
    (void)state;
    gfx *f = make(3, 1);
    strata_run *h = submit_run(f, orch_group_waits_for_two);
    assert_int_equal(ep_count(f, 2), 1); /* unrelated worker proceeds */
    complete(f, 2, 0, STRATA_OK, "");
    complete(f, 0, 0, STRATA_OK, ""); /* worker 0 idle, but held for the group */
    assert_int_equal(ep_count(f, 0), 1);
    assert_int_equal(ep_count(f, 1), 1);
    complete(f, 1, 0, STRATA_OK, ""); /* now the group launches on both */
    assert_int_equal(ep_count(f, 0), 2);
    assert_int_equal(ep_rec(f, 0, 1).tag, 10);
    assert_int_equal(ep_rec(f, 1, 1).tag, 11);
    complete(f, 0, 1, STRATA_OK, "");
    assert_int_equal(ep_rec(f, 0, 2).tag, 3);
    finish_ok(f, h);
    destroy(f);
}

/* A on 0; G1 on {0,1} (blocked); G2 on {2,3}; S2 on 2. */
static int orch_two_groups(strata_orch *o, void *arg) {
    gfx *f = arg;
    const int g1[2] = {0, 1}, g2[2] = {2, 3};
    single(o, f, 0, 1, NULL, 0);
    group(o, f, g1, 2, 10, NULL, 0);
    group(o, f, g2, 2, 20, NULL, 0);
    single(o, f, 2, 2, NULL, 0);
    return STRATA_OK;
}

/* Upstream: ConsecutiveGroupsReserveOnlyBlockedHeadTargets; groups launch in
 * FIFO order (no scan past a blocked head). */
static void only_the_blocked_head_group_reserves_its_workers(void **state) {
    (void)state;
    gfx *f = make(4, 1);
    strata_run *h = submit_run(f, orch_two_groups);
    assert_int_equal(ep_count(f, 2), 1); /* S2: worker 2 is not held by G2 */
    assert_int_equal(ep_rec(f, 2, 0).tag, 2);
    assert_int_equal(ep_count(f, 3), 0); /* G2 waits behind the blocked head G1 */
    assert_int_equal(ep_count(f, 1), 0);
    complete(f, 0, 0, STRATA_OK, ""); /* G1 launches; G2 now waits for worker 2 */
    assert_int_equal(ep_rec(f, 0, 1).tag, 10);
    assert_int_equal(ep_rec(f, 1, 0).tag, 11);
    assert_int_equal(ep_count(f, 3), 0);
    complete(f, 2, 0, STRATA_OK, "");
    assert_int_equal(ep_rec(f, 2, 1).tag, 20);
    assert_int_equal(ep_rec(f, 3, 0).tag, 21);
    finish_ok(f, h);
    destroy(f);
}

/* Run 1: A on 0. */
static int orch_a_on_0(strata_orch *o, void *arg) {
    single(o, arg, 0, 1, NULL, 0);
    return STRATA_OK;
}

/* Run 2: S on 0, then G on {0,1}. */
static int orch_single_then_group(strata_orch *o, void *arg) {
    gfx *f = arg;
    const int ids[2] = {0, 1};
    single(o, f, 0, 2, NULL, 0);
    group(o, f, ids, 2, 10, NULL, 0);
    return STRATA_OK;
}

/* Upstream: ActiveRunSwitchCannotBypassSuccessorGroupReservation,
 * PreparedSuccessorSingleCannotBypassItsReadyGroup. */
static void at_a_run_switch_the_successors_group_goes_before_its_single(void **state) {
    (void)state;
    gfx *f = make(2, 1);
    strata_run *h1 = submit_run(f, orch_a_on_0);
    strata_run *h2 = submit_run(f, orch_single_then_group);
    assert_int_equal(ep_count(f, 1), 0); /* run 2 is not the head yet */
    complete(f, 0, 0, STRATA_OK, "");    /* run 1 retires inside this pass */
    assert_ok(strata_run_wait(h1, 10 * SEC));
    assert_int_equal(ep_count(f, 0), 2);
    assert_int_equal(ep_rec(f, 0, 1).tag, 10);
    assert_int_equal(ep_rec(f, 0, 1).run_id, strata_run_id(h2));
    assert_int_equal(ep_rec(f, 1, 0).tag, 11);
    complete(f, 0, 1, STRATA_OK, "");
    assert_int_equal(ep_rec(f, 0, 2).tag, 2);
    strata_run_release(h1);
    finish_ok(f, h2);
    destroy(f);
}

/* ==== cancellation, poison, edges ======================================================== */

static int orch_group_only(strata_orch *o, void *arg) {
    gfx *f = arg;
    const int ids[2] = {0, 1};
    group(o, f, ids, 2, 10, NULL, 0);
    return STRATA_OK;
}

static int orch_one_on_each(strata_orch *o, void *arg) {
    gfx *f = arg;
    single(o, f, 0, 1, NULL, 0);
    single(o, f, 1, 2, NULL, 0);
    return STRATA_OK;
}

/* Upstream: ACancellationThatWinsTheClaimStopsTheDispatch, for a group. */
static void a_group_cancelled_at_the_claim_dispatches_no_member(void **state) {
    (void)state;
    gfx *f = make(2, 1);
    f->cancel_groups = 1;
    strata_run *h;
    assert_ok(strata_worker_submit(f->w, orch_group_only, f, &h));
    assert_status(STRATA_ECANCELED, strata_run_wait(h, 10 * SEC));
    assert_int_equal(f->cancelled, 1);
    assert_int_equal(ep_count(f, 0), 0);
    assert_int_equal(ep_count(f, 1), 0);
    strata_run_release(h);
    assert_engine_idle(f);
    /* Neither worker was left busy or reserved. */
    h = submit_run(f, orch_one_on_each);
    assert_int_equal(ep_count(f, 0), 1);
    assert_int_equal(ep_count(f, 1), 1);
    finish_ok(f, h);
    destroy(f);
}

/* P on 2 writes x; G on {0,1} reads x in both members. */
static int orch_producer_then_reading_group(strata_orch *o, void *arg) {
    gfx *f = arg;
    strata_tensor x = slice(f, 0), both[2] = {x, x};
    const int ids[2] = {0, 1};
    single(o, f, 2, 1, &x, STRATA_OUT_EXISTING);
    group(o, f, ids, 2, 10, both, STRATA_IN);
    return STRATA_OK;
}

/* Upstream: GroupDuplicateInputsKeepOneProducer. */
static void group_members_reading_one_producer_share_one_edge(void **state) {
    (void)state;
    gfx *f = make(3, 1);
    strata_run *h = submit_run(f, orch_producer_then_reading_group);
    st_engine_lock(f->w);
    st_slot *p = st_slots_get(&f->w->slots, f->refs[0]);
    st_slot *g = st_slots_get(&f->w->slots, f->refs[1]);
    uint32_t g_producers = g ? g->producers.n : 99, p_consumers = p ? p->consumers.n : 99;
    uint32_t p_fanout = p ? p->fanout_total : 99, g_fanin = g ? g->fanin_count : 99;
    st_engine_unlock(f->w);
    assert_int_equal(g_producers, 1);
    assert_int_equal(p_consumers, 1);
    assert_int_equal(p_fanout, 1); /* one reference, from one consumer edge */
    assert_int_equal(g_fanin, 1);
    complete(f, 2, 0, STRATA_OK, "");
    assert_int_equal(ep_count(f, 0), 1);
    assert_int_equal(ep_count(f, 1), 1);
    finish_ok(f, h);
    assert_engine_idle(f);
    destroy(f);
}

/* Upstream: MarkGroupMembersSkipped / poison of a group that never ran. */
static void a_group_poisoned_before_it_ran_skips_every_member(void **state) {
    (void)state;
    gfx *f = make(3, 1);
    strata_run *h = submit_run(f, orch_producer_then_reading_group);
    complete(f, 2, 0, STRATA_ETASK, "producer broke");
    assert_status(STRATA_ETASK, strata_run_wait(h, 10 * SEC));
    assert_int_equal(ep_count(f, 0), 0);
    assert_int_equal(ep_count(f, 1), 0);
    assert_non_null(strstr(strata_run_error(h), "producer broke"));
    strata_run_release(h);
    assert_engine_idle(f); /* member bookkeeping let the slot be consumed */
    h = submit_run(f, orch_one_on_each);
    finish_ok(f, h);
    destroy(f);
}

/* Upstream: AdmissionRejectionsCompleteClaimedDispatchesWithoutThrowing. The
 * endpoint refuses inside dispatch, under the engine lock. */
static void a_member_refused_by_its_endpoint_fails_the_group_not_the_worker(void **state) {
    (void)state;
    gfx *f = make(2, 1);
    f->ep[1]->reject_next = 1;
    strata_run *h = submit_run(f, orch_group_only);
    assert_int_equal(ep_count(f, 1), 1);
    assert_int_equal(task_state(f, 0), ST_RUNNING); /* member 0 still runs */
    complete(f, 0, 0, STRATA_OK, "");
    assert_status(STRATA_EENDPOINT, strata_run_wait(h, 10 * SEC));
    assert_non_null(strstr(strata_run_error(h), "1 (script) refused the task"));
    strata_run_release(h);
    assert_engine_idle(f);
    h = submit_run(f, orch_one_on_each); /* the refusing worker takes work again */
    assert_int_equal(ep_count(f, 1), 2);
    finish_ok(f, h);
    destroy(f);
}

/* ==== stale completions ================================================================= */

/* A run 2 task B on 0 runs while C waits behind it. */
static int orch_two_on_0(strata_orch *o, void *arg) {
    gfx *f = arg;
    single(o, f, 0, 2, NULL, 0);
    single(o, f, 0, 3, NULL, 0);
    return STRATA_OK;
}

/* Upstream: ConsumingASlotOwnedByAReleasedRunIsIgnored,
 * ReportingErrorForAReleasedRunIsIgnored. A completion naming a task of a
 * finished run (its slot since recycled) changes nothing in the live run. */
static void a_stale_completion_from_a_finished_run_is_ignored(void **state) {
    (void)state;
    gfx *f = make(1, 1);
    strata_run *h1 = submit_run(f, orch_a_on_0);
    script_rec a = ep_rec(f, 0, 0);
    complete(f, 0, 0, STRATA_OK, "");
    assert_ok(strata_run_wait(h1, 10 * SEC));
    strata_run_release(h1);
    strata_run *h2 = submit_run(f, orch_two_on_0);
    post(f, 0, -1, a.ref, 0, STRATA_ETASK, "stale failure from run 1");
    int error = run_error_recorded(f, h2);
    st_task_state b = task_state(f, f->nrefs - 2);
    int dispatched = ep_count(f, 0), max_held = ep_max_held(f, 0);
    drain(f, h2);
    int rc = strata_run_wait(h2, 10 * SEC);
    strata_run_release(h2);
    destroy(f);
    assert_ok(rc);
    assert_int_equal(error, 0);
    assert_int_equal(b, ST_RUNNING);
    if (dispatched != 2 || max_held != 1)
        fail_msg("after a stale completion worker 0 received %d dispatches (expected 2) and "
                 "held up to %d tasks at once (expected 1): the stale completion marked a "
                 "busy worker idle",
                 dispatched, max_held);
}

/* ==== sub groups ========================================================================= */

static int orch_sub_group_fifo(strata_orch *o, void *arg) {
    gfx *f = arg;
    sub(o, f, f->gate, 0); /* occupies one of the three sub workers */
    uint64_t deadline = st_deadline_after(10 * SEC);
    while (atomic_load(&f->start[0]) == 0 && st_now_ns() < deadline)
        sleep_us(100);
    if (atomic_load(&f->start[0]) == 0)
        note(f, STRATA_ETIMEDOUT);
    strata_task_args m[3];
    for (int i = 0; i < 3; i++) {
        strata_args_init(&m[i]);
        strata_args_add_scalar(&m[i], (uint64_t)(1 + i));
    }
    note(f, strata_orch_submit_sub_group(o, f->meet3, m, 3)); /* needs 3 idle: waits */
    sub(o, f, f->stamp, 4);                                   /* 2 idle workers, but FIFO */
    return STRATA_OK;
}

/* Upstream: SubGroupUsesTheAllocationFreeGroupCommitPath,
 * BusySubWorkerRequeuesWithinTheActiveRun; ours: a sub group at the head
 * waits for N idle workers and nothing behind it overtakes it. */
static void a_sub_group_waits_for_n_idle_workers_in_fifo_order(void **state) {
    (void)state;
    gfx *f = make(0, 3);
    strata_run *h;
    assert_ok(strata_worker_submit(f->w, orch_sub_group_fifo, f, &h));
    assert_orch_ok(f);
    atomic_store(&f->gate_open, 1);
    assert_ok(strata_run_wait(h, 20 * SEC));
    strata_run_release(h);
    assert_int_equal(atomic_load(&f->met), 3); /* all members inside at once */
    assert_false(pthread_equal(f->member_thread[0], f->member_thread[1]));
    assert_false(pthread_equal(f->member_thread[0], f->member_thread[2]));
    assert_false(pthread_equal(f->member_thread[1], f->member_thread[2]));
    uint64_t s = atomic_load(&f->start[4]);
    for (int m = 1; m <= 3; m++) {
        uint64_t g = atomic_load(&f->start[m]);
        assert_true(g > atomic_load(&f->start[0]));
        if (s < g)
            fail_msg("the single submitted after the sub group started (tick %llu) before "
                     "member %d (tick %llu)",
                     (unsigned long long)s, m - 1, (unsigned long long)g);
    }
    destroy(f);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(members_run_on_their_named_workers_with_their_own_args),
        cmocka_unit_test(a_group_completes_only_when_its_last_member_does),
        cmocka_unit_test(duplicate_and_stray_member_completions_are_ignored),
        cmocka_unit_test(a_duplicate_member_completion_does_not_free_a_busy_worker),
        cmocka_unit_test(a_failed_member_keeps_the_group_until_running_peers_finish),
        cmocka_unit_test(a_blocked_group_launches_all_members_at_once_or_none),
        cmocka_unit_test(a_launchable_group_goes_before_singles_queued_on_its_workers),
        cmocka_unit_test(a_finished_member_frees_its_worker_for_its_queued_single),
        cmocka_unit_test(a_blocked_group_holds_freed_workers_while_unrelated_ones_proceed),
        cmocka_unit_test(only_the_blocked_head_group_reserves_its_workers),
        cmocka_unit_test(at_a_run_switch_the_successors_group_goes_before_its_single),
        cmocka_unit_test(a_group_cancelled_at_the_claim_dispatches_no_member),
        cmocka_unit_test(group_members_reading_one_producer_share_one_edge),
        cmocka_unit_test(a_group_poisoned_before_it_ran_skips_every_member),
        cmocka_unit_test(a_member_refused_by_its_endpoint_fails_the_group_not_the_worker),
        cmocka_unit_test(a_stale_completion_from_a_finished_run_is_ignored),
        cmocka_unit_test(a_sub_group_waits_for_n_idle_workers_in_fifo_order),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
