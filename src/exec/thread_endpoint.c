/* exec/thread_endpoint.c - a sub worker as a thread: a one-task mailbox, a
 * spin-then-park wait, and completion through the engine's lock-free list.
 *
 * Owns: the worker thread and its mailbox.
 * Must never: touch engine state directly (it sees the engine only through
 * core/endpoint.h); completions go through st_endpoint_complete(). The
 * mailbox word is the only shared state. Its transitions, each made by
 * exactly one party:
 *   IDLE    -> TASK | PINNED  dispatch (engine, after copying the dispatch;
 *                             PINNED: a group member, never lent)
 *   TASK | PINNED -> RUNNING  the worker claims it (compare-and-swap)
 *   TASK    -> LENT           a waiting thread claims it instead (lend)
 *   LENT    -> TASK           that thread gives back a task of a later run
 *   RUNNING | LENT -> IDLE    whoever ran it, before completing it
 *   IDLE    -> STOP           engine, at close (nothing in flight)
 */
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exec/thread_endpoint.h"
#include "util/alloc.h"
#include "util/thread_role.h"
#include "util/assert.h"
#include "util/stamp.h"
#include "util/error.h"
#include "util/futex.h"
#include "util/message.h"

enum { MBOX_IDLE = 0, MBOX_TASK, MBOX_PINNED, MBOX_RUNNING, MBOX_LENT, MBOX_STOP };

typedef struct thread_ep {
    st_endpoint base;
    pthread_t thread;
    st_event mbox;
    uint32_t spin_ns;
    int before_claim_hook; /* a test watches claims (ST_HOOK_SUB_BEFORE_CLAIM) */
    st_dispatch d;         /* valid while mbox is neither IDLE nor STOP */
    st_completion comp;    /* reused per task; free again once the engine dispatches anew */
} thread_ep;

/* Message set by strata_task_set_error() on the thread running a task body
 * (the last one set wins: it describes the failure the body returns). */
static _Thread_local char tls_task_msg[STRATA_ERRMSG_MAX];
static _Thread_local int tls_task_msg_set;

void strata_task_set_error(const char *fmt, ...) {
    if (!fmt)
        return; /* no message: the failure names the returned value (as strata_program_fail) */
    va_list ap;
    va_start(ap, fmt);
    st_msg_formatv(tls_task_msg, sizeof tls_task_msg, fmt, ap);
    va_end(ap);
    tls_task_msg_set = 1;
}

void st_run_host_callable(const st_dispatch *d, uint32_t worker, st_completion *c) {
    tls_task_msg_set = 0;
    st_args_misuse_reset();
    /* The body gets a view of the stored arguments, never the stored struct:
     * that holds only its used part, so a copy of it would read past them. */
    strata_task_view args = strata_args_view(d->args);
    args.worker = worker;
    c->t_start = d->timed ? st_stamp() : 0;
    int rc = d->callable->fn ? d->callable->fn(&args, d->callable->user) : 0;
    c->t_end = d->timed ? st_stamp() : 0;
    c->ran_on = (int32_t)worker;
    c->ref = d->ref;
    c->member = d->member;
    /* A typed read that failed fails the task even if the body went on: it
     * computed with a 0 it never passed. */
    if (st_args_misuse_take(c->msg, sizeof c->msg)) {
        c->status = STRATA_ETASK;
        return;
    }
    c->status = rc == 0 ? STRATA_OK : STRATA_ETASK;
    if (rc == 0)
        c->msg[0] = '\0';
    else if (tls_task_msg_set)
        st_msg_format(c->msg, sizeof c->msg, "%s", tls_task_msg);
    else
        st_msg_format(c->msg, sizeof c->msg, "returned %d", rc);
}

/* Take the task in the mailbox (word value v) for this thread; 0 if a
 * waiting thread took it first. */
static int claim_task(thread_ep *ep, uint32_t v) {
    if (ep->before_claim_hook)
        st_endpoint_before_claim(&ep->base); /* d may change until claimed */
    return atomic_compare_exchange_strong(&ep->mbox.value, &v, MBOX_RUNNING);
}

static void *thread_ep_main(void *arg) {
    thread_ep *ep = arg;
    st_endpoint_bind_thread(&ep->base);
    st_thread_serve(ep->base.engine); /* task bodies here must not wait on this worker */
    int shares_core = 0;              /* the last task came from a caller on this CPU */
    for (;;) {
        /* Where this worker waits: the dispatcher prefers one not on its own CPU. */
        atomic_store_explicit(&ep->base.last_cpu, sched_getcpu(), memory_order_relaxed);
        if (shares_core) /* the caller needs this core to go on: give it away early */
            st_event_wait_yielding(&ep->mbox, MBOX_IDLE, ep->spin_ns, UINT64_MAX);
        else
            st_event_wait(&ep->mbox, MBOX_IDLE, ep->spin_ns, UINT64_MAX);
        uint32_t v = atomic_load_explicit(&ep->mbox.value, memory_order_acquire);
        switch (v) {
        case MBOX_STOP:
            return NULL;
        case MBOX_IDLE: /* a spurious wake-up */
            continue;
        case MBOX_LENT: /* a waiting thread runs it, likely on this core: give way */
            st_event_wait_yielding(&ep->mbox, MBOX_LENT, ep->spin_ns, UINT64_MAX);
            continue;
        case MBOX_TASK:
        case MBOX_PINNED:
            if (!claim_task(ep, v))
                continue; /* lent meanwhile */
            break;
        default: /* RUNNING is only ever set, and left, by this thread */
            ST_ASSERT(0, "%s: mailbox in state %u while waiting", ep->base.label, v);
            continue;
        }
        shares_core = ep->d.caller_cpu >= 0 && ep->d.caller_cpu == sched_getcpu();
        st_run_host_callable(&ep->d, (uint32_t)ep->base.worker_id, &ep->comp);
        /* Idle before completing: the engine may dispatch again right away. */
        atomic_store_explicit(&ep->mbox.value, MBOX_IDLE, memory_order_release);
        st_endpoint_complete(&ep->base, &ep->comp);
    }
}

static void thread_ep_dispatch(st_endpoint *base, const st_dispatch *d) {
    thread_ep *ep = (thread_ep *)base;
    if (atomic_load(&ep->mbox.value) != MBOX_IDLE) {
        st_endpoint_complete_with(base, &ep->comp, d, STRATA_EENDPOINT,
                                  "%s is stopping or busy; task rejected", base->label);
        return;
    }
    ep->d = *d;
    st_event_set(&ep->mbox, d->lendable ? MBOX_TASK : MBOX_PINNED);
}

/* The waiting thread runs the task instead of this worker, which may still be
 * waking up (or be parked on the waiter's own core). */
static int thread_ep_lend(st_endpoint *base, uint64_t max_run_id, uint32_t worker) {
    thread_ep *ep = (thread_ep *)base;
    uint32_t v = MBOX_TASK;
    if (atomic_load_explicit(&ep->mbox.value, memory_order_relaxed) != MBOX_TASK ||
        !atomic_compare_exchange_strong(&ep->mbox.value, &v, MBOX_LENT))
        return 0;
    if (ep->d.run_id > max_run_id) { /* the awaited run is over already */
        st_event_set(&ep->mbox, MBOX_TASK);
        return 0;
    }
    st_run_host_callable(&ep->d, worker, &ep->comp);
    st_event_set(&ep->mbox, MBOX_IDLE); /* wakes the worker if it parked on LENT */
    st_endpoint_complete(&ep->base, &ep->comp);
    return 1;
}

static void thread_ep_stop(st_endpoint *base) {
    thread_ep *ep = (thread_ep *)base;
    st_event_set(&ep->mbox, MBOX_STOP);
}

static void thread_ep_destroy(st_endpoint *base) {
    thread_ep *ep = (thread_ep *)base;
    pthread_join(ep->thread, NULL);
    st_free(ep);
}

static const st_endpoint_ops thread_ep_ops = {
    .dispatch = thread_ep_dispatch,
    .progress = NULL,
    .activate = NULL,
    .stop = thread_ep_stop,
    .destroy = thread_ep_destroy,
    .lend = thread_ep_lend,
};

int st_thread_endpoint_create(strata_worker *w, int index, const st_sub_port *port,
                              st_endpoint **out) {
    thread_ep *ep = st_calloc(1, sizeof *ep);
    if (!ep)
        return st_fail_nomem("strata_worker_init: a sub worker", sizeof *ep);
    ep->base.ops = &thread_ep_ops;
    ep->base.engine = w;
    ep->base.is_sub = 1;
    ep->base.worker_id = index;
    atomic_init(&ep->base.last_cpu, -1);
    snprintf(ep->base.label, sizeof ep->base.label, "sub %d", index);
    ep->spin_ns = port->spin_ns;
    ep->before_claim_hook = port->before_claim_hook;
    if (pthread_create(&ep->thread, NULL, thread_ep_main, ep) != 0) {
        st_free(ep);
        return st_fail(STRATA_ENOMEM, "strata_worker_init: could not start sub worker %d", index);
    }
    *out = &ep->base;
    return STRATA_OK;
}
