/* core/run.c - run admission, phases, the completion fence, first error,
 * cancellation and retirement (DESIGN §5.4).
 *
 * Owns: the run FIFO, leases, the phase state machine:
 *   BUILDING --close, not head--> PREPARED --becomes head--> EXECUTING
 *   BUILDING --is head (even while building)--> EXECUTING
 *   EXECUTING|PREPARED|BUILDING --closed, fence reached--> COMPLETED | FAILED
 * Must never: fail loudly on scheduler-side calls, or retire a run before its
 * submission is closed and every slot it owns is consumed.
 * Caller holds the engine lock for every st_run_* call below except unref.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <stddef.h>
#include <string.h>

#include "core/endpoint.h"
#include "core/engine.h"
#include "core/helping.h"
#include "core/ready_queue.h"
#include "core/release.h"
#include "core/run.h"
#include "core/slot.h"
#include "core/tensormap.h"
#include "util/alloc.h"
#include "util/assert.h"
#include "util/error.h"
#include "util/growable.h"
#include "util/futex.h"
#include "util/lease.h"
#include "util/state_machine.h"

static const char *const phase_names[] = {"?",         "BUILDING",  "PREPARED",
                                          "EXECUTING", "COMPLETED", "FAILED"};

const char *st_run_phase_name(uint32_t phase) {
    return phase <= ST_RUN_FAILED ? phase_names[phase] : "?";
}

static uint32_t run_phase(const st_run *r) {
    return atomic_load_explicit(&((st_run *)r)->phase.value, memory_order_acquire);
}

/* Named phase transitions (util/state_machine.h). A run is made BUILDING. */
typedef enum run_transition {
    RUN_T_STAGE,    /* BUILDING -> PREPARED: built, not yet the head */
    RUN_T_START,    /* BUILDING | PREPARED -> EXECUTING: became the head */
    RUN_T_COMPLETE, /* any non-terminal -> COMPLETED: fence reached, no error */
    RUN_T_FAIL,     /* any non-terminal -> FAILED: fence reached with an error */
    RUN_T_COUNT
} run_transition;

#define BIT ST_SM_BIT
#define LIVE (BIT(ST_RUN_BUILDING) | BIT(ST_RUN_PREPARED) | BIT(ST_RUN_EXECUTING))
static const st_sm_rule run_rules[RUN_T_COUNT] = {
    [RUN_T_STAGE] = {BIT(ST_RUN_BUILDING), ST_RUN_PREPARED, "stage"},
    [RUN_T_START] = {BIT(ST_RUN_BUILDING) | BIT(ST_RUN_PREPARED), ST_RUN_EXECUTING, "start"},
    [RUN_T_COMPLETE] = {LIVE, ST_RUN_COMPLETED, "complete"},
    [RUN_T_FAIL] = {LIVE, ST_RUN_FAILED, "fail"},
};
static const st_sm run_machine = {"run", phase_names, ST_RUN_FAILED + 1, run_rules, RUN_T_COUNT};

static void run_transition_to(st_run *r, run_transition t) {
    uint32_t next = st_sm_next(&run_machine, run_phase(r), t, "phase");
    if (ST_TRACING(r->w))
        st_trace_phase(r->w, r, next); /* before the store: a waiter may release r */
    st_event_set(&r->phase, next);
}

void st_run_record_error(st_run *r, int status, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    st_error_setv(&r->error, status, fmt, ap);
    va_end(ap);
}

static void free_queues(st_run *r) {
    st_rq_free(&r->sub_q);
    st_rq_free(&r->group_q);
    for (int i = 0; i < r->ndirected; i++)
        st_rq_free(&r->directed_q[i]);
    st_free(r->directed_q);
    r->directed_q = NULL;
    r->ndirected = 0;
}

void st_run_unref(st_run *r) {
    if (atomic_fetch_sub(&r->refs, 1) != 1)
        return;
    free_queues(r);
    st_free(r);
}

void st_run_link_slot(st_run *r, st_slot *s) {
    s->run_prev = NULL;
    s->run_next = r->live;
    if (r->live)
        r->live->run_prev = s;
    r->live = s;
}

void st_run_unlink_slot(st_run *r, st_slot *s) {
    if (s->run_prev)
        s->run_prev->run_next = s->run_next;
    else
        r->live = s->run_next;
    if (s->run_next)
        s->run_next->run_prev = s->run_prev;
    s->run_prev = s->run_next = NULL;
}

static void notify_endpoints_activated(strata_worker *w, st_run *r) {
    for (int i = 0; i < w->nnext; i++) {
        st_endpoint *ep = w->next[i].ep;
        if (ep->ops->activate)
            ep->ops->activate(ep, r->id);
    }
}

/* The FIFO head starts executing (it may still be building). */
static void activate_head(strata_worker *w) {
    st_run *r = w->fifo_head;
    if (!r || r->is_head)
        return;
    r->is_head = 1;
    run_transition_to(r, RUN_T_START);
    notify_endpoints_activated(w, r);
}

static void fifo_remove(strata_worker *w, st_run *r) {
    st_run **pp = &w->fifo_head;
    st_run *prev = NULL;
    while (*pp && *pp != r) {
        prev = *pp;
        pp = &(*pp)->fifo_next;
    }
    ST_ASSERT(*pp == r, "run %llu not in the FIFO", (unsigned long long)r->id);
    *pp = r->fifo_next;
    if (w->fifo_tail == r)
        w->fifo_tail = prev;
    r->fifo_next = NULL;
}

static void retire(strata_worker *w, st_run *r) {
    int was_head = r->is_head;
    fifo_remove(w, r);
    free_queues(r); /* only stale entries are left; a held handle keeps none */
    st_lease_return(&w->leases, r->lease);
    w->live_runs--;
    /* Before the terminal phase: a thread still helping keeps close waiting. */
    if (atomic_fetch_or(&r->help_state, ST_HELP_RETIRED) != 0)
        atomic_fetch_add(&w->lingering_helpers, 1);
    r->is_head = 0;
    run_transition_to(r, st_run_failed(r) ? RUN_T_FAIL : RUN_T_COMPLETE);
    if (w->run_end_bell) /* after the phase: the woken host sees the run done */
        st_event_bump(w->run_end_bell);
    /* The successor's activation before the admission waiter's wake: its
     * staged tasks launch on their endpoints' threads meanwhile, and the wake
     * costs this thread a system call. */
    if (was_head)
        activate_head(w);
    st_event_bump(&w->admit_ev);
    if (was_head && w->fifo_head)
        st_run_finish_if_ready(w, w->fifo_head);
    st_run_unref(r); /* the engine's reference */
}

void st_run_finish_if_ready(strata_worker *w, st_run *r) {
    if (!r->submission_closed || r->active_tasks > 0 || st_run_terminal_phase(run_phase(r)))
        return;
    if (!r->is_head && !st_run_failed(r))
        return; /* a completed run finishes in FIFO order, once it is the head */
    retire(w, r);
}

void st_run_task_consumed(strata_worker *w, st_run *r) {
    if (r->active_tasks <= 0) {
        st_run_record_error(r, STRATA_ESTATE,
                            "run %llu: task count underflow (a task was consumed twice)",
                            (unsigned long long)r->id);
        r->active_tasks = 0;
    } else {
        r->active_tasks--;
    }
    st_run_finish_if_ready(w, r);
}

int st_run_begin(strata_worker *w, st_run **out) {
    st_engine_lock(w);
    for (;;) {
        if (w->state != ST_WORKER_RUNNING) {
            st_engine_unlock(w);
            return st_fail(w->state == ST_WORKER_CLOSED ? STRATA_ECLOSED : STRATA_ESTATE,
                           w->state == ST_WORKER_CLOSED
                               ? "strata_worker_submit: the worker is closed"
                               : "strata_worker_submit: the worker is not initialised (call "
                                 "strata_worker_init first)");
        }
        if (!w->building && w->live_runs < (int)w->cfg.pipeline_depth)
            break;
        uint32_t seen = atomic_load(&w->admit_ev.value);
        st_engine_wait(w, &w->admit_ev, seen, UINT64_MAX);
    }
    st_run *r = st_malloc(sizeof *r);
    if (r) {
        memset(r, 0, offsetof(st_run, error));
        st_error_init(&r->error); /* the status only: the message is written before it is read */
    }
    st_ready_queue *dq = r && w->nnext ? st_calloc((size_t)w->nnext, sizeof *dq) : NULL;
    if (!r || (w->nnext && !dq)) {
        st_free(r);
        st_engine_unlock(w);
        return r ? st_fail_nomem("strata_worker_submit: the run's next-level ready queues",
                                 (size_t)w->nnext * sizeof *dq)
                 : st_fail_nomem("strata_worker_submit: the run record", sizeof *r);
    }
    r->id = ++w->next_run_id;
    r->w = w;
    r->spin_ns = w->cfg.spin_ns;
    r->help_while_waiting = w->cfg.help_while_waiting;
    r->directed_q = dq;
    r->st_timed = ST_TIMED(w);
    r->ndirected = w->nnext;
    atomic_store(&r->refs, 2); /* caller + engine */
    atomic_store(&r->phase.value, ST_RUN_BUILDING);
    int leased = st_lease_take(&w->leases, &r->lease);
    ST_ASSERT(leased, "no free lease with %d live runs", w->live_runs);
    (void)leased;
    if (w->fifo_tail)
        w->fifo_tail->fifo_next = r;
    else
        w->fifo_head = r;
    w->fifo_tail = r;
    w->live_runs++;
    w->building = 1;
    st_tmap_reset(&w->tmap); /* the map only ever holds the building run's entries */
    if (ST_TRACING(w))
        st_trace_phase(w, r, ST_RUN_BUILDING);
    activate_head(w);
    *out = r;
    return STRATA_OK; /* lock held */
}

void st_run_close_submission(strata_worker *w, st_run *r) {
    ST_ASSERT(!r->submission_closed, "run %llu closed twice", (unsigned long long)r->id);
    r->submission_closed = 1;
    w->building = 0;
    if (ST_TRACING(w))
        st_trace_phase(w, r, ST_TRACE_BUILT);
    if (run_phase(r) == ST_RUN_BUILDING)
        run_transition_to(r, RUN_T_STAGE);
    st_event_bump(&w->admit_ev);
    st_run_finish_if_ready(w, r);
}

void st_run_fail_submission(strata_worker *w, st_run *r, int status, const char *msg) {
    st_run_record_error(r, status, "run %llu: orchestration function failed (%s): %s",
                        (unsigned long long)r->id, strata_status_name(status),
                        msg && msg[0] ? msg : "(no message)");
    st_run_cancel_unstarted(w, r);
    if (!r->submission_closed) {
        r->submission_closed = 1;
        w->building = 0;
        if (ST_TRACING(w))
            st_trace_phase(w, r, ST_TRACE_BUILT);
        st_event_bump(&w->admit_ev);
    }
    st_run_finish_if_ready(w, r);
}

void st_run_cancel_unstarted(strata_worker *w, st_run *r) {
    uint32_t n = 0, cap = 0;
    uint64_t *refs = NULL;
    for (st_slot *s = r->live; s; s = s->run_next) {
        st_task_state st = st_slot_state(s);
        if (st != ST_PENDING && st != ST_READY)
            continue;
        if (n == cap) {
            uint64_t *nr =
                st_grow(refs, &cap, n + 1, sizeof *nr, 64, NULL, "the list of tasks to cancel");
            if (!nr)
                break; /* out of memory: cancel what we have; the rest still run */
            refs = nr;
        }
        refs[n++] = st_ref_of(s);
    }
    /* Snapshot first: cancelling consumes slots and edits the live list. */
    for (size_t i = 0; i < n; i++) {
        st_slot *s = st_slots_get(&w->slots, refs[i]);
        if (s)
            st_poison(w, s, STRATA_ECANCELED);
    }
    st_free(refs);
}
