/* core/dispatch.c - handing the head run's ready tasks, and staged tasks of
 * its successor, to endpoints (DESIGN §5.4, §5.5, §6).
 *
 * Owns: the order of dispatch (next-level groups, all-or-nothing, then
 * singles up to each endpoint's capacity, then staged tasks of the successor
 * run, then sub tasks), the choice of an idle sub worker, the READY ->
 * RUNNING claim at the instant of dispatch, and which sub worker the calling
 * thread hosts.
 * Must never: dispatch a task without that claim, dispatch work of a run that
 * is not the head except staged single next-level tasks of the successor
 * (core/endpoint.h, "Staging"), take an endpoint's last record for a staged
 * task, or call into an endpoint's blocking paths (dispatch runs under the
 * engine lock).
 */
#include <sched.h>
#include <stdatomic.h>
#include <string.h>

#include "core/dispatch.h"
#include "core/endpoint.h"
#include "core/engine.h"
#include "core/hooks.h"
#include "core/ready_queue.h"
#include "core/run.h"
#include "core/slot.h"
#include "util/stamp.h"
#include "util/futex.h"
#include "util/registry.h"

static inline int st_next_has_room(const st_next_state *ns) {
    return ns->inflight < ns->capacity;
}

/* The sub worker this thread hosts (NULL on every other thread). */
static _Thread_local st_endpoint *tls_hosted_sub;

void st_endpoint_bind_thread(st_endpoint *ep) {
    tls_hosted_sub = ep;
}

st_endpoint *st_thread_sub_endpoint(void) {
    return tls_hosted_sub;
}

void st_endpoint_gone(st_endpoint *ep) {
    int was = atomic_exchange(&ep->gone, 1);
    if (!was && ep->is_sub)
        atomic_fetch_add(&ep->engine->gone_subs, 1);
}

st_endpoint *st_engine_endpoint(st_engine *e, int i) {
    if (i >= 0 && i < e->nsubs)
        return e->subs[i].ep;
    i -= e->nsubs;
    return i >= 0 && i < e->nnext ? e->next[i].ep : NULL;
}

/* A sub worker died (its process): take gone ones off the idle stack while a
 * living sub worker remains, so no task is handed to a dead one; with none
 * left alive they stay, and reject their tasks at once with the reason. Only
 * after a death: gone_subs is 0 otherwise. */
static void drop_gone_idle_subs(strata_worker *w) {
    if (atomic_load(&w->gone_subs) >= w->nsubs)
        return;
    int k = 0;
    for (int i = 0; i < w->nidle_subs; i++)
        if (!atomic_load_explicit(&w->subs[w->idle_subs[i]].ep->gone, memory_order_relaxed))
            w->idle_subs[k++] = w->idle_subs[i];
    w->nidle_subs = k;
}

static void dispatch_member(strata_worker *w, st_slot *s, uint16_t m, st_endpoint *ep,
                            uint32_t dispatch_id, int caller_cpu, int staged) {
    s->member_state[m] = ST_MEMBER_RUNNING;
    if (ST_TIMED(w) && m == 0)
        s->t_dispatch = st_stamp();
    st_dispatch d = {
        .ref = st_ref_of(s),
        .run_id = s->run->id,
        .lease = s->run->lease,
        .member = m,
        .dispatch_id = dispatch_id,
        .caller_cpu = caller_cpu,
        .lendable = s->nmembers == 1 && !staged, /* never run before its activation */
        .staged = staged,
        .timed = (uint8_t)ST_TIMED(w),
        .callable = st_registry_at(&w->callables, s->callable), /* checked at submit */
        .args = &s->args[m],
        .cfg = &s->cfg,
    };
    if (ep->ops->progress && atomic_fetch_add(&w->poll_inflight, 1) == 0)
        st_event_bump(&w->sched_ev); /* the scheduler thread starts polling */
    if (w->dispatch_observer)        /* before the endpoint may complete it */
        w->dispatch_observer(w->dispatch_observer_ctx, ep, &d);
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
            dispatch_member(w, s, m, ns->ep, ++ns->dispatched, -1, 0);
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
            dispatch_member(w, s, 0, ns->ep, ++ns->dispatched, -1, 0);
        }
    }
}

/* How many staged tasks endpoint ns takes: its own setting, kept below its
 * capacity so one record always stays for head-run work. */
static int staging_limit(const st_next_state *ns) {
    int lim = ns->ep->staging;
    return lim < ns->capacity ? lim : ns->capacity - 1;
}

/* Stage the successor's ready single next-level tasks (core/endpoint.h,
 * "Staging"): after the head's own next-level work, on endpoints that stage,
 * have room and are not reserved by a blocked head group, at most
 * staging_limit() per endpoint for this successor. The front of each queue
 * only: a diagnostics task there is left for after activation, and so is
 * what stands behind it (the run's dispatch order on an endpoint is kept). */
static void stage_successor(strata_worker *w, st_run *r) {
    uint32_t ph = atomic_load_explicit(&r->phase.value, memory_order_relaxed);
    if ((ph != ST_RUN_BUILDING && ph != ST_RUN_PREPARED) || st_run_failed(r))
        return;
    for (int i = 0; i < w->nnext; i++) {
        st_next_state *ns = &w->next[i];
        if (w->reserved[i] || ns->ep->staging <= 0)
            continue;
        if (ns->staged_run != r->id) {
            ns->staged_run = r->id;
            ns->nstaged = 0;
        }
        int lim = staging_limit(ns);
        st_slot *s;
        while (ns->nstaged < lim && st_next_has_room(ns) &&
               (s = front_ready(w, &r->directed_q[i])) != NULL) {
            if (s->cfg.flags & STRATA_CALL_DIAGNOSTICS)
                break;
            if (!take_for_dispatch(w, &r->directed_q[i], s))
                continue;
            ns->inflight++;
            ns->nstaged++;
            dispatch_member(w, s, 0, ns->ep, ++ns->dispatched, -1, 1);
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
    if (atomic_load_explicit(&w->gone_subs, memory_order_relaxed) != 0)
        drop_gone_idle_subs(w);
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
            dispatch_member(w, s, m, ss->ep, ++ss->dispatched, caller_cpu, 0);
        }
    }
}

void st_dispatch_ready(strata_worker *w) {
    st_run *r = w->fifo_head;
    if (!r || atomic_load_explicit(&r->phase.value, memory_order_relaxed) != ST_RUN_EXECUTING)
        return;
    if (w->nnext) {
        memset(w->reserved, 0, sizeof *w->reserved * (size_t)w->nnext);
        dispatch_next_groups(w, r);
        dispatch_next_singles(w, r);
        if (r->fifo_next)
            stage_successor(w, r->fifo_next);
    }
    dispatch_subs(w, r);
}
