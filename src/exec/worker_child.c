/* exec/worker_child.c - a child Worker (L4 -> L3): a whole lower-level Worker
 * as one next-level child of its parent, hosted as a thread of this process
 * or in a process of its own.
 *
 * Owns: strata_child_config_init and the thread and process hostings of
 * strata_worker_add_child (src/mpi/child_add.c picks the hosting); the one way a
 * child Worker runs a task (run_task_on: the orchestration callable the task
 * names becomes one run of the inner worker, synchronous, its error the
 * task's message); the thread-hosted endpoint (one thread, capacity 1, which
 * brings its inner worker up in the parent's two init phases: every fork of
 * the tree before any thread of it); the
 * "worker" kind of process child (st_worker_child_kind: init brings up the
 * whole subtree in the child before it reports ready, a task frame is one run,
 * shutdown closes the inner worker, which closes its own children).
 * Must never: run a task of the parent on an engine thread of the parent (the
 * inner run is driven from the endpoint's own thread, or the child process),
 * block in dispatch (it runs under the parent's engine lock), or complete a
 * dispatch twice.
 *
 * The thread endpoint's mailbox word (an st_event), each move made by one party:
 *   IDLE -> TASK   dispatch (parent's engine, after copying the dispatch)
 *   TASK -> IDLE   the endpoint thread, after the run, before completing it
 *   any  -> STOP   stop (close: nothing is in flight by then; a task still
 *                  running is completed, then the thread exits)
 */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "core/endpoint.h"
#include "exec/process_endpoint.h"
#include "exec/worker_child.h"
#include "exec/worker_init.h"
#include "strata/worker.h"
#include "util/alloc.h"
#include "util/error.h"
#include "util/futex.h"
#include "util/message.h"
#include "util/thread_role.h"

void strata_child_config_init(strata_child_config *cfg) {
    if (!cfg)
        return;
    memset(cfg, 0, sizeof *cfg);
    strata_worker_config_init(&cfg->worker);
    cfg->host = STRATA_HOST_THREAD;
}

/* ---- One task = one run of the inner worker ------------------------------------------- */

int st_worker_child_start(strata_worker *inner, const char *label, const st_callable_info *ci,
                          const strata_task_args *args, strata_run **run, char *msg, size_t cap) {
    *run = NULL;
    strata_orch_fn orch = st_callable_orch(ci);
    if (!orch) {
        st_msg_format(msg, cap,
                      "'%s' is not an orchestration callable (register it with "
                      "strata_worker_register_orch)",
                      ci->name);
        return STRATA_ETASK;
    }
    strata_task_view view = strata_args_view(args);
    int rc = st_worker_submit_task(inner, orch, ci->user, &view, run);
    if (rc != STRATA_OK) { /* the inner worker refused a run: closed, or out of memory */
        st_msg_format(msg, cap, "%s refused the run: %s", label, strata_error_message());
        return rc == STRATA_ENOMEM ? STRATA_ENOMEM : STRATA_EENDPOINT;
    }
    msg[0] = '\0';
    return STRATA_OK;
}

int st_worker_child_finish(strata_run *run, char *msg, size_t cap) {
    int rc = strata_run_status(run);
    if (rc == STRATA_OK)
        msg[0] = '\0';
    else /* the run's error names its path below: "run 3: L3 worker 0 (sim:0): ..." */
        st_msg_format(msg, cap, "%s", strata_run_error(run));
    strata_run_release(run);
    return rc == STRATA_OK ? STRATA_OK : STRATA_ETASK;
}

int st_worker_child_run(strata_worker *inner, const char *label, const st_callable_info *ci,
                        const strata_task_args *args, char *msg, size_t cap) {
    strata_run *run = NULL;
    int rc = st_worker_child_start(inner, label, ci, args, &run, msg, cap);
    if (rc != STRATA_OK)
        return rc;
    (void)strata_run_wait(run, STRATA_WAIT_FOREVER);
    return st_worker_child_finish(run, msg, cap);
}

int st_worker_child_bring_up(const strata_child_config *cfg, const char *label, int init,
                             st_trace_region *trace, strata_worker **out) {
    strata_worker *inner = NULL;
    int rc = st_worker_create(&cfg->worker, 0, &inner);
    if (rc == STRATA_OK)
        st_trace_record_into(inner, trace); /* before setup: its chips' regions */
    if (rc == STRATA_OK && cfg->setup) {
        st_clear_error();
        int src = cfg->setup(inner, cfg->setup_user);
        if (src != STRATA_OK) {
            char why[STRATA_ERRMSG_MAX]; /* the thread's message is the one being written */
            st_msg_format(why, sizeof why, "%s",
                          strata_error_message()[0] ? strata_error_message() : "(no message)");
            rc = st_fail(src > 0 || src < STRATA_ECANCELED ? STRATA_ETASK : src,
                         "%s: setup failed: %s", label, why);
        }
    }
    if (rc == STRATA_OK && init)
        rc = strata_worker_init(inner);
    if (rc != STRATA_OK) {
        char keep[STRATA_ERRMSG_MAX];
        st_msg_format(keep, sizeof keep, "%s", strata_error_message());
        strata_worker_destroy(inner);
        return st_fail_msg(rc, keep);
    }
    *out = inner;
    return STRATA_OK;
}

/* ---- Thread hosting ------------------------------------------------------------------ */

enum { CHILD_IDLE = 0, CHILD_TASK, CHILD_STOP };

typedef struct child_thread_ep {
    st_endpoint base;
    strata_worker *inner;
    pthread_t thread;
    int started; /* the endpoint's thread runs (phase 2 of the parent's init) */
    int forked;  /* the inner worker's phase 1 ran: its processes are forked and ready */
    int running; /* the inner worker's phase 2 ran: it is RUNNING */
    int spent;   /* it was closed by a failed init after its phase 2: no retry */
    uint32_t spin_ns;
    st_event mbox;      /* the mailbox word (transitions at the top of this file) */
    st_dispatch d;      /* valid while the word is TASK */
    st_completion comp; /* reused per task */
} child_thread_ep;

static void *child_thread_main(void *arg) {
    child_thread_ep *ep = arg;
    st_thread_serve(ep->base.engine); /* the parent's: its runs are not waited on from here */
    for (;;) {
        st_event_wait(&ep->mbox, CHILD_IDLE, ep->spin_ns, UINT64_MAX);
        uint32_t v = atomic_load_explicit(&ep->mbox.value, memory_order_acquire);
        if (v == CHILD_STOP)
            return NULL;
        if (v != CHILD_TASK)
            continue;
        st_completion *c = &ep->comp;
        c->ref = ep->d.ref;
        c->member = ep->d.member;
        c->status = st_worker_child_run(ep->inner, ep->base.label, ep->d.callable, ep->d.args,
                                        c->msg, sizeof c->msg);
        uint32_t task = CHILD_TASK; /* idle before completing: the engine may dispatch anew */
        int stopped = !atomic_compare_exchange_strong(&ep->mbox.value, &task, CHILD_IDLE);
        st_endpoint_complete(&ep->base, c);
        if (stopped)
            return NULL;
    }
}

static void child_thread_dispatch(st_endpoint *base, const st_dispatch *d) {
    child_thread_ep *ep = (child_thread_ep *)base;
    uint32_t v = atomic_load_explicit(&ep->mbox.value, memory_order_acquire);
    if (v != CHILD_IDLE || !ep->started) {
        st_endpoint_complete_with(base, &ep->comp, d, STRATA_EENDPOINT, "%s is %s; task rejected",
                                  base->label, v == CHILD_TASK ? "busy" : "stopping");
        return;
    }
    ep->d = *d;
    st_event_set(&ep->mbox, CHILD_TASK);
}

static void child_thread_stop(st_endpoint *base) {
    child_thread_ep *ep = (child_thread_ep *)base;
    st_event_set(&ep->mbox, CHILD_STOP);
}

/* Phase 1 of the parent's init (its shared arena sealed, its own process
 * children forked): the inner worker forks the processes below it, which so
 * see the parent's buffers, and waits for them; no thread starts. */
static int child_thread_start_forks(st_endpoint *base) {
    child_thread_ep *ep = (child_thread_ep *)base;
    if (ep->spent)
        return st_fail(STRATA_ESTATE,
                       "%s: its worker was closed when an earlier strata_worker_init of the "
                       "parent failed after the child had started; destroy the parent and "
                       "build it again",
                       ep->base.label);
    if (ep->forked)
        return STRATA_OK;
    int rc = st_worker_init_forks(ep->inner);
    if (rc != STRATA_OK)
        return st_fail_prefix(rc, ep->base.label);
    ep->forked = 1;
    return STRATA_OK;
}

/* Phase 2 (every process of the tree forked): the inner worker's threads,
 * then the endpoint's own. */
static int child_thread_start_threads(st_endpoint *base) {
    child_thread_ep *ep = (child_thread_ep *)base;
    if (!ep->forked)
        return st_fail(STRATA_ESTATE, "%s: its processes were not forked first", ep->base.label);
    if (!ep->running) {
        int rc = st_worker_init_threads(ep->inner);
        if (rc != STRATA_OK) {
            ep->forked = 0; /* the inner worker undid its phase 1 too */
            return st_fail_prefix(rc, ep->base.label);
        }
        st_trace_region_named(ep->inner); /* its names, for the parent's trace */
        ep->running = 1;
    }
    if (ep->started)
        return STRATA_OK;
    atomic_store(&ep->mbox.value, CHILD_IDLE);
    if (pthread_create(&ep->thread, NULL, child_thread_main, ep) != 0)
        return st_fail(STRATA_ENOMEM, "strata_worker_init: cannot start the thread of %s",
                       ep->base.label);
    ep->started = 1;
    return STRATA_OK;
}

/* The parent's init failed: join the endpoint's thread, then undo the inner
 * worker's phases. An inner worker still only forked goes back to CREATED
 * (its processes reaped; a retry forks them again); a RUNNING one cannot, so
 * it is closed (its whole subtree stopped and reaped) and the child is spent. */
static void child_thread_unstart(st_endpoint *base) {
    child_thread_ep *ep = (child_thread_ep *)base;
    if (ep->started) {
        st_event_set(&ep->mbox, CHILD_STOP);
        pthread_join(ep->thread, NULL);
        ep->started = 0;
        atomic_store(&ep->mbox.value, CHILD_IDLE);
    }
    if (ep->running) {
        strata_worker_close(ep->inner);
        ep->running = 0;
        ep->spent = 1;
    } else if (ep->forked) {
        st_worker_init_undo(ep->inner);
    }
    ep->forked = 0;
}

static void child_thread_destroy(st_endpoint *base) {
    child_thread_ep *ep = (child_thread_ep *)base;
    if (ep->started)
        pthread_join(ep->thread, NULL);
    strata_worker_destroy(ep->inner); /* closes its own children, recursively */
    st_free(ep);
}

/* Its inner worker's runs and process children, as the parent's own. */
static void child_thread_interrupt(st_endpoint *base) {
    child_thread_ep *ep = (child_thread_ep *)base;
    if (ep->running)
        (void)strata_worker_interrupt(ep->inner);
}

static const st_endpoint_ops child_thread_ops = {
    .dispatch = child_thread_dispatch,
    .progress = NULL,
    .activate = NULL,
    .stop = child_thread_stop,
    .destroy = child_thread_destroy,
    .lend = NULL,
    .registered = NULL, /* the inner worker's callables are its own (setup registers them) */
    .interrupt = child_thread_interrupt,
    .start_forks = child_thread_start_forks,
    .start_threads = child_thread_start_threads,
    .unstart = child_thread_unstart,
};

void st_worker_child_name(char *out, size_t cap, const strata_child_config *cfg, int worker_id) {
    if (cfg->name && cfg->name[0])
        snprintf(out, cap, "%s", cfg->name);
    else
        snprintf(out, cap, "L%d child %d", cfg->worker.level, worker_id);
}

static int add_thread_child(strata_worker *parent, const strata_child_config *cfg, int *worker_id) {
    /* The id it will get: the label must be known before setup runs. */
    int next_id = strata_worker_next_level_count(parent);
    char name[48];
    st_worker_child_name(name, sizeof name, cfg, next_id);
    child_thread_ep *ep = st_calloc(1, sizeof *ep);
    if (!ep)
        return st_fail_nomem("strata_worker_add_child: the child's endpoint", sizeof *ep);
    ep->base.ops = &child_thread_ops;
    ep->base.capacity = 1; /* one run at a time: a task is a whole run of the child */
    /* Created and set up now (setup's errors surface here); initialised at
     * the parent's init (child_thread_start_forks, then _start_threads). A
     * traced parent: the inner worker records into a region of the parent's,
     * merged into its file like a process child's (made for the id it will
     * get; a failed add leaves it to the next add of that id). */
    st_trace_region *trace = st_trace_region_new(parent, next_id, ST_REGION_WORKER);
    int rc = st_worker_child_bring_up(cfg, name, 0, trace, &ep->inner);
    if (rc == STRATA_OK)
        rc = st_worker_add_endpoint(parent, &ep->base, worker_id);
    if (rc != STRATA_OK) {
        char keep[STRATA_ERRMSG_MAX];
        st_msg_format(keep, sizeof keep, "strata_worker_add_child: %s", strata_error_message());
        strata_worker_destroy(ep->inner);
        st_free(ep);
        return st_fail_msg(rc, keep);
    }
    snprintf(ep->base.label, sizeof ep->base.label, "%d (%s)", *worker_id, name);
    ep->spin_ns = cfg->worker.spin_ns;
    return STRATA_OK; /* its worker and thread start at the parent's init, in two phases */
}

/* ---- Process hosting ----------------------------------------------------------------- */

/* What the child process starts from (kind_arg: inherited across the fork,
 * freed by the parent's endpoint when it is destroyed). */
typedef struct proc_child_arg {
    strata_child_config cfg;
    char name[48];
    st_trace_region *trace; /* the parent's region for the inner worker's events, or NULL */
} proc_child_arg;

/* The child's own state (in the child process only). */
typedef struct proc_child_self {
    strata_worker *inner;
    char label[64];
} proc_child_self;

/* In the child: the whole subtree (the inner worker, its chips, its own
 * children, processes among them) comes up before the child reports ready. */
static int worker_kind_init(void *arg, void **self) {
    const proc_child_arg *a = arg;
    proc_child_self *s = st_calloc(1, sizeof *s);
    if (!s)
        return st_fail_nomem("child Worker: its state", sizeof *s);
    snprintf(s->label, sizeof s->label, "%s", a->name);
    int rc = st_worker_child_bring_up(&a->cfg, a->name, 0, a->trace, &s->inner);
    if (rc == STRATA_OK) {
        rc = strata_worker_init(s->inner);
        if (rc == STRATA_OK)
            st_trace_region_named(s->inner);
        else
            strata_worker_destroy(s->inner);
    }
    if (rc != STRATA_OK) {
        st_free(s);
        return rc;
    }
    *self = s;
    return STRATA_OK;
}

/* In the child: one task frame is one run of the inner worker (synchronous). */
static void worker_kind_task(void *self, st_mbox *m, uint32_t frame, const strata_task_args *args,
                             const st_callable_info *callable) {
    proc_child_self *s = self;
    char msg[STRATA_ERRMSG_MAX];
    int rc = st_worker_child_run(s->inner, s->label, callable, args, msg, sizeof msg);
    st_proc_task_finish(m, frame, rc, msg);
}

/* In the child: nothing is held between tasks; closing the inner worker
 * closes (and reaps) its own children. */
static void worker_kind_shutdown(void *self, st_mbox *m) {
    (void)m;
    proc_child_self *s = self;
    if (!s)
        return;
    strata_worker_destroy(s->inner);
    st_free(s);
}

static void worker_kind_release(void *kind_arg) {
    st_free(kind_arg);
}

const st_proc_kind st_worker_child_kind = {
    .name = "worker",
    .frames = 1, /* a task is a whole run: one at a time */
    .init = worker_kind_init,
    .task = worker_kind_task,
    .activate = NULL,
    .poll = NULL,
    .control = NULL,    /* a child Worker has no device memory of its own */
    .registered = NULL, /* the loop's table is all a task needs: the inner worker's callables
                           are its own (registered by setup) */
    .shutdown = worker_kind_shutdown,
    .release = worker_kind_release,
};

int st_worker_child_add_process(strata_worker *parent, const strata_child_config *cfg,
                                int *worker_id) {
    int next_id = strata_worker_next_level_count(parent);
    proc_child_arg *a = st_calloc(1, sizeof *a);
    if (!a)
        return st_fail_nomem("strata_worker_add_child: the child's start record", sizeof *a);
    a->cfg = *cfg;
    st_worker_child_name(a->name, sizeof a->name, cfg, next_id);
    a->cfg.name = NULL; /* a->name is the label the child uses */
    a->trace = st_trace_region_new(parent, next_id, ST_REGION_WORKER);
    st_proc_ep_config pc;
    memset(&pc, 0, sizeof pc);
    pc.kind = &st_worker_child_kind;
    pc.kind_arg = a;
    pc.is_sub = 0;
    pc.worker_id = next_id;
    pc.spin_ns = cfg->worker.spin_ns;
    pc.startup_timeout_ns = cfg->worker.startup_timeout_ns;
    snprintf(pc.label, sizeof pc.label, "%d (%s)", next_id, a->name);
    st_proc_ep *p = NULL;
    int rc = st_proc_ep_create(parent, &pc, &p);
    if (rc != STRATA_OK) {
        st_free(a);
        return st_fail_prefix(rc, "strata_worker_add_child");
    }
    st_endpoint *ep = st_proc_ep_endpoint(p);
    rc = st_worker_add_endpoint(parent, ep, worker_id);
    if (rc != STRATA_OK) {
        char keep[STRATA_ERRMSG_MAX];
        st_msg_format(keep, sizeof keep, "strata_worker_add_child: %s", strata_error_message());
        ep->ops->destroy(ep); /* never spawned: frees the mailbox and, through release, a */
        return st_fail_msg(rc, keep);
    }
    return STRATA_OK; /* forked at the parent's strata_worker_init */
}

int st_worker_child_add_thread(strata_worker *parent, const strata_child_config *cfg,
                               int *worker_id) {
    return add_thread_child(parent, cfg, worker_id);
}
