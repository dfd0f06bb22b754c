/* core/scheduler.c - the scheduler: completions, dependency release, poison,
 * consumption and dispatch (DESIGN §5.5).
 *
 * Owns: the scheduler pass and the scheduler thread.
 * Must never: dispatch a task without the READY -> RUNNING claim at the
 * instant of dispatch, dispatch work of a run that is not the head, or call
 * into an endpoint's blocking paths.
 *
 * The scheduler is a role, not only a thread: a pass runs under the engine
 * lock, and any thread that finds completions pending and the lock free runs
 * one (st_engine_kick). A sub worker that finishes a task usually processes
 * its own completion and picks up the next ready task without any thread
 * hand-off. The scheduler thread drives poll-based endpoints and otherwise
 * sleeps. Passes are mutually exclusive, so "only the scheduler dispatches"
 * holds for whichever thread runs the pass.
 */
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/engine.h"
#include "util/alloc.h"
#include "util/assert.h"
#include "util/clock.h"
#include "util/error.h"

/* ---- the engine lock and combining -------------------------------------- */

void st_engine_lock(strata_worker *w) {
    st_mutex_lock(&w->lock);
}

static int completions_pending(strata_worker *w) {
    return atomic_load(&w->completions) != NULL;
}

void st_engine_unlock(strata_worker *w) {
    st_mutex_unlock(&w->lock);
    /* seq_cst unlock then seq_cst load: a pusher whose trylock failed while we
     * held the lock has its completion visible here. */
    if (completions_pending(w))
        st_engine_kick(w);
}

void st_engine_kick(strata_worker *w) {
    while (completions_pending(w)) {
        if (!st_mutex_trylock(&w->lock))
            return; /* the holder re-checks after its unlock */
        st_sched_pass(w);
        st_mutex_unlock(&w->lock);
    }
}

void st_endpoint_complete(st_endpoint *ep, st_completion *c) {
    strata_worker *w = ep->engine;
    c->ep = ep;
    st_completion *head = atomic_load(&w->completions);
    do {
        c->next = head;
    } while (!atomic_compare_exchange_weak(&w->completions, &head, c));
    st_engine_kick(w);
}

void st_endpoint_complete_with(st_endpoint *ep, st_completion *c, const st_dispatch *d, int status,
                               const char *fmt, ...) {
    c->ref = d->ref;
    c->member = d->member;
    c->status = status;
    c->msg[0] = '\0';
    if (fmt) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(c->msg, sizeof c->msg, fmt, ap);
        va_end(ap);
    }
    st_endpoint_complete(ep, c);
}

/* The sub worker this thread hosts (NULL on every other thread). */
static _Thread_local st_endpoint *tls_hosted_sub;

void st_endpoint_bind_thread(st_endpoint *ep) {
    tls_hosted_sub = ep;
}

st_endpoint *st_thread_sub_endpoint(void) {
    return tls_hosted_sub;
}

/* ---- labels for messages ------------------------------------------------- */

void st_task_label(strata_worker *w, st_slot *s, char *buf, size_t n) {
    const st_callable_info *ci =
        s->callable >= 0 && s->callable < w->ncallables ? w->callables[s->callable] : NULL;
    snprintf(buf, n, "task '%s' #%llu", ci ? ci->name : "?", (unsigned long long)s->seq);
}

/* ---- consumption and references ------------------------------------------ */

static void free_member_arrays(st_slot *s) {
    if (s->args != st_slot_inline_args(s))
        st_free(s->args);
    if (s->targets != &s->inline_target)
        st_free(s->targets);
    if (s->member_state != &s->inline_member)
        st_free(s->member_state);
    s->args = st_slot_inline_args(s);
    s->targets = &s->inline_target;
    s->member_state = &s->inline_member;
}

static void consume(strata_worker *w, st_slot *s) {
    st_slot_transition(s, ST_T_CONSUME);
    int wake = 0;
    if (s->has_heap) {
        st_heap_release(&w->heap, s->heap_ticket);
        s->has_heap = 0;
        wake = w->heap_waiters;
    }
    free_member_arrays(s);
    st_run *r = s->run;
    st_run_unlink_slot(r, s);
    s->run = NULL;
    st_slots_recycle(&w->slots, s);
    /* A blocked orchestrator is woken once an eighth of the window is free,
     * not per slot: waking it per task would cost a context switch per task. */
    if (w->slot_waiters && w->slots.nfree >= (w->slots.capacity + 7) / 8)
        wake = 1;
    if (wake)
        st_event_bump(&w->space_ev);
    st_run_task_consumed(w, r);
}

void st_release_ref(strata_worker *w, st_slot *s) {
    s->fanout_released++;
    if (s->fanout_released >= s->fanout_total + 1 && st_state_terminal(st_slot_state(s)))
        consume(w, s);
}

static void release_producers(strata_worker *w, st_slot *s) {
    for (uint32_t i = 0; i < s->producers.n; i++) {
        st_slot *p = st_slots_get(&w->slots, s->producers.v[i]);
        ST_ASSERT(p != NULL, "producer of slot %u vanished while referenced", s->index);
        if (p)
            st_release_ref(w, p);
    }
}

static void skip_unstarted_members(st_slot *s) {
    for (uint16_t m = 0; m < s->nmembers; m++) {
        if (s->member_state[m] == ST_MEMBER_WAITING) {
            s->member_state[m] = ST_MEMBER_SKIPPED;
            s->members_terminal++;
        }
    }
}

void st_settle_failed_unstarted(strata_worker *w, st_slot *s) {
    skip_unstarted_members(s);
    release_producers(w, s);
    st_release_ref(w, s); /* the terminal self release, last */
}

/* Poison s and, transitively, its consumers. A task claimed while BUILDING is
 * settled by its submitter at publication. Uses an explicit worklist (graph
 * depth is unbounded). */
void st_poison(strata_worker *w, st_slot *s0, int status) {
    uint64_t stack_buf[64];
    uint64_t *work = stack_buf;
    size_t n = 0, cap = 64;
    work[n++] = st_ref_of(s0);
    while (n > 0) {
        st_slot *s = st_slots_get(&w->slots, work[--n]);
        if (!s)
            continue;
        st_task_state from = st_slot_fail_claim(s);
        if (from == ST_STATE_COUNT)
            continue; /* running, finished or already failed */
        s->fail_status = status;
        if (from == ST_BUILDING) {
            s->poisoned_in_build = 1;
            continue;
        }
        for (uint32_t i = 0; i < s->consumers.n; i++) {
            if (n == cap) {
                uint64_t *nw = st_malloc(sizeof *nw * cap * 2);
                if (!nw) { /* out of memory: poison this consumer right away instead */
                    st_slot *c = st_slots_get(&w->slots, s->consumers.v[i]);
                    if (c)
                        st_poison(w, c, status);
                    continue;
                }
                memcpy(nw, work, sizeof *nw * n);
                if (work != stack_buf)
                    st_free(work);
                work = nw;
                cap *= 2;
            }
            work[n++] = s->consumers.v[i];
        }
        st_settle_failed_unstarted(w, s);
    }
    if (work != stack_buf)
        st_free(work);
}

/* ---- ready routing ------------------------------------------------------- */

void st_enqueue_ready(strata_worker *w, st_slot *s) {
    st_run *r = s->run;
    st_ready_queue *q;
    if (s->kind == ST_SLOT_SUB)
        q = &r->sub_q;
    else if (s->nmembers > 1)
        q = &r->group_q;
    else
        q = &r->directed_q[s->targets[0]];
    if (st_rq_push(q, st_ref_of(s)) != STRATA_OK) {
        char label[128];
        st_task_label(w, s, label, sizeof label);
        st_run_record_error(r, STRATA_ENOMEM, "run %llu: %s: queueing the task: %s",
                            (unsigned long long)r->id, label, strata_error_message());
        st_poison(w, s, STRATA_ENOMEM); /* its consumers too: they would wait forever */
    }
}

/* ---- completions --------------------------------------------------------- */

static void mark_endpoint_idle(strata_worker *w, st_endpoint *ep) {
    if (ep->is_sub) {
        st_sub_state *ss = &w->subs[ep->worker_id];
        if (ss->busy) {
            ss->busy = 0;
            w->idle_subs[w->nidle_subs++] = ep->worker_id;
        }
    } else {
        st_next_state *ns = &w->next[ep->worker_id];
        if (ns->inflight > 0)
            ns->inflight--;
        if (ep->ops->progress)
            atomic_fetch_sub(&w->poll_inflight, 1);
    }
}

static void finish_task(strata_worker *w, st_slot *s, int ok) {
    st_slot_transition(s, ok ? ST_T_SUCCEED : ST_T_FAIL);
    for (uint32_t i = 0; i < s->consumers.n; i++) {
        st_slot *c = st_slots_get(&w->slots, s->consumers.v[i]);
        if (!c)
            continue;
        if (!ok) {
            st_poison(w, c, STRATA_ETASK);
            continue;
        }
        c->fanin_released++;
        if (st_slot_state(c) == ST_PENDING && c->fanin_released >= c->fanin_count) {
            st_slot_transition(c, ST_T_RELEASED);
            st_enqueue_ready(w, c);
        }
    }
    release_producers(w, s);
    st_release_ref(w, s); /* last: s stays alive while its consumers are handled */
}

static void record_member_failure(strata_worker *w, st_slot *s, const st_completion *c) {
    char label[128];
    st_task_label(w, s, label, sizeof label);
    const char *member = "";
    char mbuf[32] = "";
    if (s->nmembers > 1) {
        snprintf(mbuf, sizeof mbuf, " member %u", c->member);
        member = mbuf;
    }
    int status =
        c->status == STRATA_EENDPOINT || c->status == STRATA_ENOMEM ? c->status : STRATA_ETASK;
    st_run_record_error(s->run, status, "run %llu: L%d worker %s: %s%s failed: %s",
                        (unsigned long long)s->run->id, w->cfg.level, c->ep->label, label, member,
                        c->msg[0] ? c->msg : "(no message)");
}

static void handle_completion(strata_worker *w, st_completion *c) {
    st_slot *s = st_slots_get(&w->slots, c->ref);
    if (!s || st_slot_state(s) != ST_RUNNING)
        return; /* stale: ignored, and the endpoint stays as busy as it was */
    if (c->member >= s->nmembers || s->member_state[c->member] != ST_MEMBER_RUNNING)
        return;                   /* a duplicate, or a member that is not running: ignored */
    mark_endpoint_idle(w, c->ep); /* one valid completion frees one dispatch */
    if (c->status == STRATA_OK) {
        s->member_state[c->member] = ST_MEMBER_DONE;
    } else {
        s->member_state[c->member] = ST_MEMBER_FAILED;
        if (!s->group_failed) {
            s->group_failed = 1;
            s->fail_status = c->status;
            record_member_failure(w, s, c);
        }
    }
    s->members_terminal++;
    if (s->members_terminal == s->nmembers)
        finish_task(w, s, !s->group_failed);
}

static void drain_completions(strata_worker *w) {
    /* Look before taking: an exchange on an empty stack would still pull the
     * contended line away from the endpoints pushing to it. */
    if (atomic_load_explicit(&w->completions, memory_order_relaxed) == NULL)
        return;
    st_completion *c = atomic_exchange(&w->completions, NULL);
    st_completion *fifo = NULL;
    while (c) { /* the stack is LIFO; handle in arrival order */
        st_completion *next = c->next;
        c->next = fifo;
        fifo = c;
        c = next;
    }
    while (fifo) {
        st_completion *next = fifo->next; /* read first: the record is reusable after */
        handle_completion(w, fifo);
        fifo = next;
    }
}

/* ---- dispatch ------------------------------------------------------------- */

static void dispatch_member(strata_worker *w, st_slot *s, uint16_t m, st_endpoint *ep,
                            uint32_t dispatch_id, int caller_cpu) {
    s->member_state[m] = ST_MEMBER_RUNNING;
    st_dispatch d = {
        .ref = st_ref_of(s),
        .run_id = s->run->id,
        .member = m,
        .dispatch_id = dispatch_id,
        .caller_cpu = caller_cpu,
        .lendable = s->nmembers == 1,
        .callable = w->callables[s->callable],
        .args = &s->args[m],
        .cfg = &s->cfg,
    };
    if (ep->ops->progress && atomic_fetch_add(&w->poll_inflight, 1) == 0)
        st_event_bump(&w->sched_ev); /* the scheduler thread starts polling */
    ep->ops->dispatch(ep, &d);
}

/* A READY entry at the head of a queue, or NULL after dropping stale ones. */
static st_slot *front_ready(strata_worker *w, st_ready_queue *q) {
    while (!st_rq_empty(q)) {
        st_slot *s = st_slots_get(&w->slots, st_rq_front(q));
        if (s && st_slot_state(s) == ST_READY)
            return s;
        st_rq_pop(q); /* stale: cancelled, poisoned or recycled */
    }
    return NULL;
}

/* Pop s from its queue and claim it; 0 if a cancellation won the race. */
static int take_for_dispatch(strata_worker *w, st_ready_queue *q, st_slot *s) {
    st_rq_pop(q);
    st_hook(w, ST_HOOK_BEFORE_DISPATCH_CLAIM, st_ref_of(s));
    return st_slot_dispatch_claim(s);
}

static void dispatch_next_groups(strata_worker *w, st_run *r) {
    st_slot *s;
    while ((s = front_ready(w, &r->group_q)) != NULL) {
        int blocked = 0;
        for (uint16_t m = 0; m < s->nmembers; m++)
            blocked |= !st_next_has_room(&w->next[s->targets[m]]);
        if (blocked) {
            /* All-or-nothing: hold every target of the blocked head against singles. */
            for (uint16_t m = 0; m < s->nmembers; m++)
                w->reserved[s->targets[m]] = 1;
            return;
        }
        if (!take_for_dispatch(w, &r->group_q, s))
            continue;
        for (uint16_t m = 0; m < s->nmembers; m++) {
            st_next_state *ns = &w->next[s->targets[m]];
            ns->inflight++;
            dispatch_member(w, s, m, ns->ep, ++ns->dispatched, -1);
        }
    }
}

static void dispatch_next_singles(strata_worker *w, st_run *r) {
    for (int i = 0; i < w->nnext; i++) {
        st_next_state *ns = &w->next[i];
        if (w->reserved[i])
            continue;
        /* Up to the endpoint's capacity: a chip takes a second task of the head
         * run so its lane prepares it while the first executes. */
        st_slot *s;
        while (st_next_has_room(ns) && (s = front_ready(w, &r->directed_q[i])) != NULL) {
            if (!take_for_dispatch(w, &r->directed_q[i], s))
                continue;
            ns->inflight++;
            dispatch_member(w, s, 0, ns->ep, ++ns->dispatched, -1);
        }
    }
}

/* Take an idle sub worker. The dispatching thread itself when it is an idle
 * sub worker of this engine (it runs the task next, with no hand-off: how a
 * chain stays on one thread). Otherwise the most recently idle one (its cache
 * is warm), unless it last waited on the CPU this thread runs on while
 * another idle one did not: on a small machine a task handed to a worker
 * sharing the dispatcher's core waits for that core (a switch each way). */
static st_sub_state *take_idle_sub(strata_worker *w, st_endpoint *self, int *here) {
    int pick = w->nidle_subs - 1;
    if (self && self->engine == w && !w->subs[self->worker_id].busy) {
        for (int k = w->nidle_subs - 1; k >= 0; k--)
            if (w->idle_subs[k] == self->worker_id) {
                int idx = w->idle_subs[k];
                w->idle_subs[k] = w->idle_subs[--w->nidle_subs];
                return &w->subs[idx];
            }
    }
    if (w->nidle_subs > 1) {
        if (*here < 0)
            *here = sched_getcpu();
        for (int k = w->nidle_subs - 1; k >= 0 && *here >= 0; k--) {
            if (atomic_load_explicit(&w->subs[w->idle_subs[k]].ep->last_cpu,
                                     memory_order_relaxed) != *here) {
                pick = k;
                break;
            }
        }
    }
    int idx = w->idle_subs[pick];
    w->idle_subs[pick] = w->idle_subs[--w->nidle_subs];
    return &w->subs[idx];
}

static void dispatch_subs(strata_worker *w, st_run *r) {
    st_slot *s;
    int here = -1;                                /* this thread's CPU, looked up once if needed */
    st_endpoint *self = st_thread_sub_endpoint(); /* NULL: a caller that will wait */
    while (w->nidle_subs > 0 && (s = front_ready(w, &r->sub_q)) != NULL) {
        if (s->nmembers > w->nidle_subs)
            return; /* a sub group waits for enough idle workers, in FIFO order */
        if (!take_for_dispatch(w, &r->sub_q, s))
            continue;
        for (uint16_t m = 0; m < s->nmembers; m++) {
            st_sub_state *ss = take_idle_sub(w, self, &here);
            ss->busy = 1;
            int caller_cpu = -1;
            if (!self) {
                if (here < 0)
                    here = sched_getcpu();
                caller_cpu = here;
                if (atomic_load_explicit(&ss->ep->last_cpu, memory_order_relaxed) == here)
                    atomic_store_explicit(&r->caller_shares_core, 1, memory_order_relaxed);
            }
            dispatch_member(w, s, m, ss->ep, ++ss->dispatched, caller_cpu);
        }
    }
}

static void dispatch_ready(strata_worker *w) {
    st_run *r = w->fifo_head;
    if (!r || atomic_load_explicit(&r->phase.value, memory_order_relaxed) != ST_RUN_EXECUTING)
        return;
    if (w->nnext) {
        memset(w->reserved, 0, sizeof *w->reserved * (size_t)w->nnext);
        dispatch_next_groups(w, r);
        dispatch_next_singles(w, r);
    }
    dispatch_subs(w, r);
}

void st_sched_pass(strata_worker *w) {
    drain_completions(w);
    /* Retiring a run inside the drain may have made the next one head. */
    dispatch_ready(w);
}

/* ---- the scheduler thread -------------------------------------------------- */

static int poll_endpoints(strata_worker *w) {
    int events = 0;
    for (int i = 0; i < w->nnext; i++) {
        st_endpoint *ep = w->next[i].ep;
        if (ep->ops->progress)
            events += ep->ops->progress(ep);
    }
    return events;
}

static int has_poll_endpoints(strata_worker *w) {
    for (int i = 0; i < w->nnext; i++)
        if (w->next[i].ep->ops->progress)
            return 1;
    return 0;
}

static void *sched_main(void *arg) {
    strata_worker *w = arg;
    const int polling = has_poll_endpoints(w);
    uint32_t seen = atomic_load(&w->sched_ev.value);
    while (!atomic_load(&w->stopping)) {
        if (polling && atomic_load(&w->poll_inflight) > 0) {
            /* Work is out on poll-driven children: poll; when a round finds
             * nothing, wait a little (or until woken) before the next one. */
            if (poll_endpoints(w) == 0)
                st_event_wait(&w->sched_ev, seen, w->cfg.spin_ns, st_deadline_after(200000));
        } else {
            /* Nothing to poll: sleep until a dispatch or stop bumps the word. */
            st_event_wait(&w->sched_ev, seen, 0, UINT64_MAX);
        }
        seen = atomic_load(&w->sched_ev.value);
        st_engine_kick(w);
    }
    return NULL;
}

int st_sched_start(strata_worker *w) {
    atomic_store(&w->stopping, 0);
    if (pthread_create(&w->sched_thread, NULL, sched_main, w) != 0)
        return st_fail(STRATA_ENOMEM, "could not start the scheduler thread");
    w->sched_started = 1;
    return STRATA_OK;
}

void st_sched_stop(strata_worker *w) {
    if (!w->sched_started)
        return;
    atomic_store(&w->stopping, 1);
    st_event_bump(&w->sched_ev);
    pthread_join(w->sched_thread, NULL);
    w->sched_started = 0;
}

/* ---- engine waits and hooks ------------------------------------------------ */

int st_engine_wait(strata_worker *w, st_event *ev, uint32_t seen, uint64_t deadline_ns) {
    st_engine_unlock(w);
    int rc = st_event_wait(ev, seen, w->cfg.spin_ns, deadline_ns);
    st_engine_lock(w);
    return rc;
}

void st_worker_set_hook(strata_worker *w, st_hook_point at, st_hook_fn fn, void *ctx) {
    st_engine_lock(w);
    w->hooks[at] = fn;
    w->hook_ctx[at] = ctx;
    st_engine_unlock(w);
}

void st_endpoint_before_claim(st_endpoint *ep) {
    st_hook(ep->engine, ST_HOOK_SUB_BEFORE_CLAIM, 0);
}

st_slot *st_hook_slot(strata_worker *w, uint64_t ref) {
    return st_slots_get(&w->slots, ref);
}
