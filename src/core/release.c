/* core/release.c - what follows a task's end (DESIGN §5.5): completions,
 * dependency release, poison, consumption, and routing ready tasks.
 *
 * Owns: handling the completions drained from the inbox (stale and duplicate
 * ones ignored), the endpoint's busy/idle count they free, releasing
 * consumers and producers, poisoning everything downstream of a failure,
 * consuming a slot whose last reference went (its heap space, member arrays,
 * the run's fence), and putting a READY task on its run's queue.
 * Must never: consume a slot that is not terminal or still referenced, fail
 * loudly on a completion for a task that is gone, or call an endpoint.
 * Engine lock held throughout.
 */
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "core/endpoint.h"
#include "core/engine.h"
#include "core/heap_ring.h"
#include "core/ready_queue.h"
#include "core/release.h"
#include "core/run.h"
#include "core/slot.h"
#include "core/worker.h"
#include "util/alloc.h"
#include "util/growable.h"
#include "util/assert.h"
#include "util/stamp.h"
#include "util/futex.h"

/* ---- consumption and references ------------------------------------------ */

static void free_member_arrays(strata_worker *w, st_slot *s) {
    if (s->args_bytes && s->args_bytes <= ST_SPARE_ARGS_MAX && w->slots.keep_spares) {
        st_free(s->spare_args); /* the current block is never the smaller: keep it */
        s->spare_args = s->args;
        s->spare_bytes = s->args_bytes;
    } else if (s->args != st_slot_inline_args(s)) {
        st_free(s->args);
    }
    s->args_bytes = 0;
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
    free_member_arrays(w, s);
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
    if (s->kind != ST_SLOT_ALLOC) {
        s->run->st_not_run++;
        if (ST_TRACING(w))
            st_trace_not_run(w, s);
    }
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
    uint32_t n = 0, cap = 64;
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
                uint64_t *nw =
                    st_grow(work, &cap, n + 1, sizeof *nw, cap, stack_buf, "the poison work list");
                if (!nw) { /* out of memory: poison this consumer right away instead */
                    st_slot *c = st_slots_get(&w->slots, s->consumers.v[i]);
                    if (c)
                        st_poison(w, c, status);
                    continue;
                }
                work = nw;
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
    if (ST_TIMED(w))
        s->t_ready = st_stamp();
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
    st_stats_count(w, s, c);
    if (ST_TIMED(w))
        st_trace_task_end(w, s, c);
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

void st_drain_completions(strata_worker *w) {
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
        atomic_store_explicit(&fifo->queued, ST_COMP_FREE, memory_order_release);
        fifo = next;
    }
}
