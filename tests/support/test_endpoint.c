/* tests/support/test_endpoint.c - the scriptable test endpoint.
 *
 * Owns: its thread (started in the worker's phase 2, start_threads: a
 * thread running while init forks process children could hold a
 * sanitizer's or the allocator's lock that the child then waits for), its
 * dispatch log (under its own mutex: protects the log, the held-task flag
 * and the activation list; never held while calling the engine) and a
 * one-task mailbox like the thread endpoint's.
 * Must never: complete a task twice or block the dispatching thread.
 */
#include "test_endpoint.h"

#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "exec/thread_endpoint.h"
#include "util/alloc.h"
#include "util/clock.h"
#include "util/error.h"
#include "util/futex.h"

enum { MBOX_IDLE = 0, MBOX_TASK = 1, MBOX_STOP = 2 };
enum { HOLD_NONE = 0, HOLD_WAITING = 1, HOLD_RELEASED = 2 };

struct st_test_ep {
    st_endpoint base;
    st_test_ep_config cfg;
    pthread_t thread;
    int started;
    st_event mbox;
    st_event hold; /* manual mode: HOLD_* */
    int finish_status;
    char finish_msg[STRATA_ERRMSG_MAX];
    st_dispatch d;
    st_completion comp;
    pthread_mutex_t log_mu; /* protects log, nlog, cap, acts, nacts */
    _Atomic int finishing;  /* st_test_ep_finish calls in progress: destroy waits for them */
    st_test_ep_record *log;
    uint32_t nlog, cap;
    uint64_t acts[64];
    uint32_t nacts;
};

static void log_dispatch(st_test_ep *ep, const st_dispatch *d) {
    pthread_mutex_lock(&ep->log_mu);
    if (ep->nlog == ep->cap) {
        /* The test's own record, not the library's: plain libc, outside the
         * allocation-failure hook, and a failure ends the test (a dropped
         * record would make the log lie). */
        uint32_t ncap = ep->cap ? ep->cap * 2 : 64;
        st_test_ep_record *nl = realloc(ep->log, sizeof *nl * ncap);
        if (!nl) {
            fprintf(stderr, "test endpoint: cannot grow its dispatch log\n");
            abort();
        }
        ep->log = nl;
        ep->cap = ncap;
    }
    ep->log[ep->nlog++] = (st_test_ep_record){
        .run_id = d->run_id,
        .lease = d->lease,
        .ref = d->ref,
        .member = d->member,
        .dispatch_id = d->dispatch_id,
        .scalar0 = d->args->nscalars ? d->args->scalars[0] : 0,
    };
    pthread_mutex_unlock(&ep->log_mu);
}

static void sleep_ns(uint64_t ns) {
    struct timespec ts = {(time_t)(ns / 1000000000ull), (long)(ns % 1000000000ull)};
    while (nanosleep(&ts, &ts) != 0) {
    }
}

static void *test_ep_main(void *arg) {
    st_test_ep *ep = arg;
    for (;;) {
        st_event_wait(&ep->mbox, MBOX_IDLE, 0, UINT64_MAX);
        uint32_t v = atomic_load(&ep->mbox.value);
        if (v == MBOX_STOP)
            break;
        if (v != MBOX_TASK)
            continue;
        st_run_host_callable(&ep->d, 0, &ep->comp); /* a next-level endpoint: index 0 */
        if (ep->cfg.delay_ns)
            sleep_ns(ep->cfg.delay_ns);
        if (ep->cfg.fail_nth && ep->d.dispatch_id == ep->cfg.fail_nth) {
            ep->comp.status = ep->cfg.fail_status ? ep->cfg.fail_status : STRATA_ETASK;
            snprintf(ep->comp.msg, sizeof ep->comp.msg, "injected failure of dispatch %u",
                     ep->d.dispatch_id);
        }
        if (ep->cfg.manual) {
            st_event_set(&ep->hold, HOLD_WAITING);
            st_event_wait(&ep->hold, HOLD_WAITING, 0, UINT64_MAX);
            ep->comp.status = ep->finish_status;
            snprintf(ep->comp.msg, sizeof ep->comp.msg, "%s", ep->finish_msg);
            atomic_store(&ep->hold.value, HOLD_NONE);
        }
        uint32_t expected = MBOX_TASK;
        atomic_compare_exchange_strong(&ep->mbox.value, &expected, MBOX_IDLE);
        st_endpoint_complete(&ep->base, &ep->comp);
    }
    return NULL;
}

static void test_ep_dispatch(st_endpoint *base, const st_dispatch *d) {
    st_test_ep *ep = (st_test_ep *)base;
    log_dispatch(ep, d);
    if (atomic_load(&ep->mbox.value) != MBOX_IDLE) {
        st_endpoint_complete_with(base, &ep->comp, d, STRATA_EENDPOINT,
                                  "%s is stopping or busy; task rejected", base->label);
        return;
    }
    ep->d = *d;
    st_event_set(&ep->mbox, MBOX_TASK);
}

static void test_ep_activate(st_endpoint *base, uint64_t run_id) {
    st_test_ep *ep = (st_test_ep *)base;
    pthread_mutex_lock(&ep->log_mu);
    if (ep->nacts < 64)
        ep->acts[ep->nacts++] = run_id;
    pthread_mutex_unlock(&ep->log_mu);
}

static void test_ep_stop(st_endpoint *base) {
    st_test_ep *ep = (st_test_ep *)base;
    st_event_set(&ep->mbox, MBOX_STOP);
}

/* Phase 2 of the worker's init: every process of the tree is forked. */
static int test_ep_start_threads(st_endpoint *base) {
    st_test_ep *ep = (st_test_ep *)base;
    if (ep->started)
        return STRATA_OK;
    if (pthread_create(&ep->thread, NULL, test_ep_main, ep) != 0)
        return st_fail(STRATA_ENOMEM, "test endpoint: cannot start its thread");
    ep->started = 1;
    return STRATA_OK;
}

static void join_thread(st_test_ep *ep) {
    if (!ep->started)
        return;
    st_event_set(&ep->mbox, MBOX_STOP); /* also when the worker never stopped it */
    pthread_join(ep->thread, NULL);
    ep->started = 0;
}

/* The worker's init failed: back to never started (a retry starts it). */
static void test_ep_unstart(st_endpoint *base) {
    st_test_ep *ep = (st_test_ep *)base;
    join_thread(ep);
    atomic_store(&ep->mbox.value, MBOX_IDLE);
}

static void test_ep_destroy(st_endpoint *base) {
    st_test_ep *ep = (st_test_ep *)base;
    join_thread(ep);
    /* A finisher may still be inside st_event_set on our hold word. */
    while (atomic_load(&ep->finishing) != 0)
        sched_yield();
    pthread_mutex_destroy(&ep->log_mu);
    free(ep->log);
    st_free(ep);
}

static const st_endpoint_ops test_ep_ops = {
    .dispatch = test_ep_dispatch,
    .progress = NULL,
    .activate = test_ep_activate,
    .stop = test_ep_stop,
    .destroy = test_ep_destroy,
    .start_threads = test_ep_start_threads,
    .unstart = test_ep_unstart,
};

int st_test_ep_add(strata_worker *w, const st_test_ep_config *cfg, int *worker_id,
                   st_test_ep **out) {
    st_test_ep *ep = st_calloc(1, sizeof *ep);
    if (!ep)
        return st_fail_nomem("test endpoint", sizeof *ep);
    ep->base.ops = &test_ep_ops;
    if (cfg)
        ep->cfg = *cfg;
    pthread_mutex_init(&ep->log_mu, NULL);
    int rc = st_worker_add_endpoint(w, &ep->base, worker_id);
    if (rc != STRATA_OK) {
        pthread_mutex_destroy(&ep->log_mu);
        st_free(ep);
        return rc;
    }
    snprintf(ep->base.label, sizeof ep->base.label, "%d (test)", *worker_id);
    if (out)
        *out = ep;
    return STRATA_OK;
}

uint32_t st_test_ep_count(st_test_ep *ep) {
    pthread_mutex_lock(&ep->log_mu);
    uint32_t n = ep->nlog;
    pthread_mutex_unlock(&ep->log_mu);
    return n;
}

st_test_ep_record st_test_ep_record_at(st_test_ep *ep, uint32_t i) {
    st_test_ep_record r = {0};
    pthread_mutex_lock(&ep->log_mu);
    if (i < ep->nlog)
        r = ep->log[i];
    pthread_mutex_unlock(&ep->log_mu);
    return r;
}

uint32_t st_test_ep_activations(st_test_ep *ep, uint64_t *ids, uint32_t max) {
    pthread_mutex_lock(&ep->log_mu);
    uint32_t n = ep->nacts < max ? ep->nacts : max;
    memcpy(ids, ep->acts, sizeof *ids * n);
    uint32_t total = ep->nacts;
    pthread_mutex_unlock(&ep->log_mu);
    return total;
}

int st_test_ep_holding(st_test_ep *ep) {
    return atomic_load(&ep->hold.value) == HOLD_WAITING;
}

int st_test_ep_finish(st_test_ep *ep, int status, const char *msg, uint64_t timeout_ns) {
    uint64_t deadline = st_deadline_after(timeout_ns);
    while (atomic_load(&ep->hold.value) != HOLD_WAITING) {
        if (st_event_wait(&ep->hold, HOLD_NONE, 1000, deadline) < 0 &&
            atomic_load(&ep->hold.value) != HOLD_WAITING)
            return -1;
    }
    ep->finish_status = status;
    snprintf(ep->finish_msg, sizeof ep->finish_msg, "%s", msg ? msg : "");
    atomic_fetch_add(&ep->finishing, 1);
    st_event_set(&ep->hold, HOLD_RELEASED);
    atomic_fetch_sub(&ep->finishing, 1);
    return 0;
}
