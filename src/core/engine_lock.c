/* core/engine_lock.c - the engine lock, combining, and the completion inbox.
 *
 * Owns: taking and dropping the engine lock, the lock-free stack endpoints
 * push completions onto (any thread, no lock), the re-check after every
 * unlock that runs a pass for a completion pushed meanwhile (st_engine_kick:
 * whoever finds work and the lock free runs the pass), and waiting on an
 * event with the lock dropped.
 * Must never: block an endpoint's push (a completion is a compare-and-swap,
 * then at most a try-lock), or leave a completion on the stack with the lock
 * free and nobody about to look at it.
 */
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>

#include "core/endpoint.h"
#include "core/engine.h"
#include "core/scheduler.h"
#include "util/assert.h"
#include "util/futex.h"
#include "util/message.h"

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

void st_completion_hold(st_completion *c) {
    int was = atomic_exchange(&c->queued, ST_COMP_HELD);
    ST_ASSERT(was == ST_COMP_FREE, "completion record %p held while %s", (void *)c,
              was == ST_COMP_HELD ? "held" : "queued");
    (void)was;
}

void st_endpoint_complete(st_endpoint *ep, st_completion *c) {
    strata_worker *w = ep->engine;
    int was = atomic_exchange(&c->queued, ST_COMP_QUEUED);
    ST_ASSERT(was != ST_COMP_QUEUED, "%s: completion record %p pushed while queued", ep->label,
              (void *)c);
    (void)was;
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
    c->t_start = c->t_end = 0; /* never ran */
    c->ran_on = -1;
    c->msg[0] = '\0';
    if (fmt) {
        va_list ap;
        va_start(ap, fmt);
        st_msg_formatv(c->msg, sizeof c->msg, fmt, ap);
        va_end(ap);
    }
    st_endpoint_complete(ep, c);
}

int st_engine_wait(strata_worker *w, st_event *ev, uint32_t seen, uint64_t deadline_ns) {
    st_engine_unlock(w);
    int rc = st_event_wait(ev, seen, w->cfg.spin_ns, deadline_ns);
    st_engine_lock(w);
    return rc;
}
