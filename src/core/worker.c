/* core/worker.c - the public Worker: configuration, lifecycle, callables and
 * the start of a run (strata_worker_submit); the run handle is run_handle.c.
 *
 * Owns: creation and teardown order of everything a worker holds (its sub
 * workers through the endpoint factory st_worker_start is handed), and the
 * thread's mark that an orchestration function of a worker runs on it.
 * Must never: start a thread before strata_worker_init's thread phase (every
 * process of the worker tree is forked before any thread of the tree starts:
 * st_worker_start_forks, then st_worker_start_threads), or let a thread that
 * orchestrates or runs a task body of the worker close, destroy or submit to it.
 */
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "core/arena.h"
#include "core/endpoint.h"
#include "core/engine.h"
#include "core/heap_ring.h"
#include "core/orchestrator.h"
#include "core/run.h"
#include "core/scheduler.h"
#include "core/slot.h"
#include "core/tensormap.h"
#include "core/worker.h"
#include "util/alloc.h"
#include "util/error.h"
#include "util/growable.h"
#include "util/message.h"
#include "util/registry.h"
#include "util/state_machine.h"

/* The worker whose orchestration function runs on this thread, if any:
 * catches strata_worker_submit / close called from inside an orchestration function. */
static _Thread_local strata_worker *tls_orchestrating;

/* The worker's lifecycle (util/state_machine.h); a worker is made CREATED.
 * Its state is read and moved under the engine lock. */
typedef enum worker_transition {
    WORKER_T_START, /* CREATED -> RUNNING: strata_worker_init */
    WORKER_T_CLOSE, /* CREATED | RUNNING -> CLOSED: strata_worker_close */
    WORKER_T_COUNT
} worker_transition;

static const char *const worker_state_names[] = {"CREATED", "RUNNING", "CLOSED"};
static const st_sm_rule worker_rules[WORKER_T_COUNT] = {
    [WORKER_T_START] = {ST_SM_BIT(ST_WORKER_CREATED), ST_WORKER_RUNNING, "start"},
    [WORKER_T_CLOSE] = {ST_SM_BIT(ST_WORKER_CREATED) | ST_SM_BIT(ST_WORKER_RUNNING),
                        ST_WORKER_CLOSED, "close"},
};
static const st_sm worker_machine = {"worker", worker_state_names, 3, worker_rules, WORKER_T_COUNT};

static void worker_move(strata_worker *w, worker_transition t) {
    w->state = (st_worker_state)st_sm_next(&worker_machine, (uint32_t)w->state, t, "state");
}

strata_worker *st_thread_orchestrating(void) {
    return tls_orchestrating;
}

int st_refuse_in_task(const char *what, const char *why) {
    return st_fail(STRATA_ESTATE,
                   "%s: called from a task body running on this worker (a sub function, or a "
                   "chip program on one of its chips): %s",
                   what, why);
}

static uint32_t default_sub_workers(void) {
    /* The CPUs this process may run on (taskset, a cpuset), else those online. */
    cpu_set_t set;
    long n = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : 0;
    if (n <= 0)
        n = sysconf(_SC_NPROCESSORS_ONLN);
    if (n < 1)
        n = 1;
    return n > STRATA_MAX_SUB_WORKERS ? STRATA_MAX_SUB_WORKERS : (uint32_t)n;
}

void strata_worker_config_init(strata_worker_config *cfg) {
    if (!cfg)
        return;
    memset(cfg, 0, sizeof *cfg);
    cfg->level = 3;
    /* One per core, not one fewer for a helping caller: a waiting caller runs
     * a task in place of the sub worker it was dispatched to (that one waits
     * meanwhile), so it never adds a body running in parallel, and cores - 1
     * sub workers would leave a core without work in a compute-bound run. */
    cfg->sub_workers = default_sub_workers();
    cfg->sub_mode = STRATA_HOST_THREAD;
    cfg->task_window = 4096;
    cfg->pipeline_depth = 2;
    cfg->heap_ring_bytes = 64ull << 20;
    cfg->capacity_timeout_ns = 10ull * 1000000000ull;
    cfg->spin_ns = 20000;
    cfg->help_while_waiting = 1;
    cfg->startup_timeout_ns = 30ull * 1000000000ull;
    cfg->shared_arena_bytes = 1ull << 30;
    cfg->trace_events_per_lane = 65536;
}

static int check_config(const strata_worker_config *c) {
    if (c->sub_workers > STRATA_MAX_SUB_WORKERS)
        return st_fail(STRATA_EINVAL, "strata_worker_create: sub_workers = %u (at most %d)",
                       c->sub_workers, STRATA_MAX_SUB_WORKERS);
    if (c->sub_mode == STRATA_HOST_MPI)
        return st_fail(STRATA_EINVAL,
                       "strata_worker_create: sub_mode STRATA_HOST_MPI: sub workers are threads "
                       "or processes (STRATA_HOST_MPI is for strata_child_config.host only)");
    if (c->sub_mode != STRATA_HOST_THREAD && c->sub_mode != STRATA_HOST_PROCESS)
        return st_fail(STRATA_EINVAL,
                       "strata_worker_create: sub_mode %d (STRATA_HOST_THREAD or "
                       "STRATA_HOST_PROCESS)",
                       (int)c->sub_mode);
    if (c->startup_timeout_ns == 0)
        return st_fail(STRATA_EINVAL, "strata_worker_create: startup_timeout_ns must be > 0");
    if (c->shared_arena_bytes == 0 || c->shared_arena_bytes > (1ull << 46))
        return st_fail(STRATA_EINVAL, "strata_worker_create: shared_arena_bytes = %llu (1 .. 2^46)",
                       (unsigned long long)c->shared_arena_bytes);
    if (c->task_window < 2 || c->task_window > (1u << 24) ||
        (c->task_window & (c->task_window - 1)))
        return st_fail(STRATA_EINVAL,
                       "strata_worker_create: task_window = %u (a power of two in 2..2^24)",
                       c->task_window);
    if (c->pipeline_depth < 1 || c->pipeline_depth > 2)
        return st_fail(STRATA_EINVAL, "strata_worker_create: pipeline_depth = %u (1 or 2)",
                       c->pipeline_depth);
    if (c->heap_ring_bytes % ST_HEAP_ALIGN)
        return st_fail(STRATA_EINVAL,
                       "strata_worker_create: heap_ring_bytes = %llu (a multiple of %d, or 0)",
                       (unsigned long long)c->heap_ring_bytes, ST_HEAP_ALIGN);
    if (c->capacity_timeout_ns == 0)
        return st_fail(STRATA_EINVAL, "strata_worker_create: capacity_timeout_ns must be > 0");
    if (c->spin_ns > 10000000)
        return st_fail(STRATA_EINVAL, "strata_worker_create: spin_ns = %u (at most 10 ms)",
                       c->spin_ns);
    if (c->help_while_waiting != 0 && c->help_while_waiting != 1)
        return st_fail(STRATA_EINVAL, "strata_worker_create: help_while_waiting = %d (0 or 1)",
                       c->help_while_waiting);
    if (c->trace_events_per_lane < 1 || c->trace_events_per_lane > (1u << 24))
        return st_fail(STRATA_EINVAL,
                       "strata_worker_create: trace_events_per_lane = %u (1 .. 2^24)",
                       c->trace_events_per_lane);
    if (c->collect_stats != 0 && c->collect_stats != 1)
        return st_fail(STRATA_EINVAL, "strata_worker_create: collect_stats = %d (0 or 1)",
                       c->collect_stats);
    if (c->trace_path && !c->trace_path[0])
        return st_fail(STRATA_EINVAL,
                       "strata_worker_create: trace_path is empty (NULL turns tracing off)");
    return STRATA_OK;
}

static int tmap_alive(void *ctx, uint64_t ref) {
    strata_worker *w = ctx;
    return st_slots_get(&w->slots, ref) != NULL;
}

int strata_worker_create(const strata_worker_config *cfg, strata_worker **out) {
    return st_worker_create(cfg, 1, out);
}

int st_worker_create(const strata_worker_config *cfg, int top_level, strata_worker **out) {
    if (!cfg || !out)
        return st_fail(STRATA_EINVAL, "strata_worker_create: cfg and out must not be NULL");
    *out = NULL;
    STRATA_TRY(check_config(cfg));
    strata_worker *w = st_calloc(1, sizeof *w);
    if (!w)
        return st_fail_nomem("strata_worker_create: the worker", sizeof *w);
    w->cfg = *cfg;
    w->trace.env_allowed = top_level;
    st_registry_init(&w->callables, w->callable_entries, ST_MAX_CALLABLES, "callable", "worker");
    atomic_store(&w->next_buffer_id, 1);
    w->orch.w = w;
    int rc = st_slots_init(&w->slots, cfg->task_window);
    if (rc == STRATA_OK)
        rc = st_tmap_init(&w->tmap);
    if (rc != STRATA_OK) {
        st_slots_destroy(&w->slots);
        st_free(w);
        return st_fail_prefix(rc, "strata_worker_create"); /* init described the failure */
    }
    st_tmap_set_alive_fn(&w->tmap, tmap_alive, w);
    st_tmap_set_fp_fn(&w->tmap, st_orch_fp_of, w); /* entries keep byte ranges only */
    /* Mapped shared now, before any child exists, so children see it at the same address. */
    rc = st_heap_init(&w->heap, cfg->heap_ring_bytes);
    if (rc != STRATA_OK) {
        st_tmap_destroy(&w->tmap);
        st_slots_destroy(&w->slots);
        st_free(w);
        return st_fail_prefix(rc, "strata_worker_create"); /* st_heap_init described it */
    }
    /* Reserved now, so every buffer, even one made before init, is seen by
     * the process children init forks; a reservation costs no memory. */
    rc = st_arena_create(cfg->shared_arena_bytes, &w->arena);
    if (rc == STRATA_OK) {
        rc = st_trace_create(w);
        if (rc != STRATA_OK)
            st_arena_put(w->arena);
    }
    if (rc != STRATA_OK) {
        st_heap_destroy(&w->heap);
        st_tmap_destroy(&w->tmap);
        st_slots_destroy(&w->slots);
        st_free(w);
        return st_fail_prefix(rc, "strata_worker_create");
    }
    *out = w;
    return STRATA_OK;
}

int st_worker_add_endpoint(strata_worker *w, st_endpoint *ep, int *worker_id_out) {
    if (!w || !ep || !worker_id_out)
        return st_fail(STRATA_EINVAL, "add endpoint: NULL argument");
    if (w->state != ST_WORKER_CREATED)
        return st_fail(STRATA_ESTATE, "next-level workers are added before strata_worker_init");
    if (w->nnext >= STRATA_MAX_NEXT_LEVEL)
        return st_fail(STRATA_ECAPACITY, "at most %d next-level workers", STRATA_MAX_NEXT_LEVEL);
    if ((uint32_t)w->nnext == w->cap_next) {
        st_next_state *nn = st_grow(w->next, &w->cap_next, (uint32_t)w->nnext + 1, sizeof *nn, 8,
                                    NULL, "adding a next-level worker: the endpoint table");
        if (!nn)
            return STRATA_ENOMEM;
        w->next = nn;
    }
    ep->engine = w;
    ep->is_sub = 0;
    ep->worker_id = w->nnext;
    w->next[w->nnext] = (st_next_state){.ep = ep, .capacity = ep->capacity > 1 ? ep->capacity : 1};
    *worker_id_out = w->nnext++;
    return STRATA_OK;
}

void st_worker_set_dispatch_observer(strata_worker *w, st_dispatch_observer_fn fn, void *ctx) {
    st_engine_lock(w);
    w->dispatch_observer = fn;
    w->dispatch_observer_ctx = ctx;
    st_engine_unlock(w);
}

void st_worker_set_run_end_bell(strata_worker *w, st_event *bell) {
    st_engine_lock(w);
    w->run_end_bell = bell;
    st_engine_unlock(w);
}

st_endpoint *st_worker_next_endpoint(strata_worker *w, int worker_id) {
    st_engine_lock(w);
    st_endpoint *ep = worker_id >= 0 && worker_id < w->nnext ? w->next[worker_id].ep : NULL;
    st_engine_unlock(w);
    return ep;
}

uint32_t strata_worker_sub_slots(const strata_worker *w) {
    if (!w)
        return 0;
    return w->cfg.sub_workers + (w->cfg.help_while_waiting ? 1u : 0u); /* the helper: nsubs */
}

int strata_worker_next_level_count(const strata_worker *w) {
    if (!w)
        return 0;
    strata_worker *mw = (strata_worker *)w; /* the lock is not part of the worker's value */
    st_engine_lock(mw);
    int n = mw->nnext;
    st_engine_unlock(mw);
    return n;
}

strata_host_mode st_worker_sub_mode(const strata_worker *w) {
    return w->cfg.sub_mode;
}

uint32_t st_engine_callable_count(st_engine *e) {
    return st_registry_count(&e->callables);
}

const st_callable_info *st_engine_callable(st_engine *e, uint32_t id) {
    return id < st_registry_count(&e->callables) ? st_registry_get(&e->callables, (int32_t)id)
                                                 : NULL;
}

/* Tell every child that keeps its own table (process children) about ci,
 * registered on the running worker. The first failure is returned, naming
 * the child; the callable stays registered (a child that refused it fails the
 * tasks it is given for it, naming the unknown digest). */
static int broadcast_registration(strata_worker *w, const st_callable_info *ci, const char *what) {
    st_endpoint *eps[STRATA_MAX_SUB_WORKERS + STRATA_MAX_NEXT_LEVEL];
    int n = 0;
    st_engine_lock(w);
    if (w->state == ST_WORKER_RUNNING) {
        for (int i = 0; i < w->nsubs; i++)
            if (w->subs[i].ep->ops->registered)
                eps[n++] = w->subs[i].ep;
        for (int i = 0; i < w->nnext; i++)
            if (w->next[i].ep->ops->registered)
                eps[n++] = w->next[i].ep;
    }
    if (n)
        w->broadcasting++; /* close waits: the endpoints stay until this is done */
    st_engine_unlock(w);
    if (!n)
        return STRATA_OK;
    char msg[STRATA_ERRMSG_MAX] = "";
    size_t len = 0;
    int failed = 0;
    for (int i = 0; i < n; i++) {
        if (eps[i]->ops->registered(eps[i], ci) == STRATA_OK)
            continue;
        /* every child's refusal is reported, in order, each naming its child */
        int k = snprintf(msg + len, sizeof msg - len, "%s%s", failed ? "; " : "",
                         strata_error_message());
        len = k < 0 ? len : len + (size_t)k < sizeof msg ? len + (size_t)k : sizeof msg - 1;
        failed++;
    }
    st_engine_lock(w);
    w->broadcasting--;
    st_event_bump(&w->admit_ev);
    st_engine_unlock(w);
    if (!failed)
        return STRATA_OK;
    return st_fail(STRATA_EENDPOINT, "%s: '%s': %d of %d children refused it: %s", what, ci->name,
                   failed, n, msg);
}

static int register_callable(strata_worker *w, const char *name, st_callable_kind kind,
                             strata_sub_fn fn, void *user, void *program, strata_callable *out,
                             const char *what) {
    if (!w || !name || !out)
        return st_fail(STRATA_EINVAL, "%s: worker, name and out must not be NULL", what);
    size_t len = strlen(name);
    if (len == 0 || len >= sizeof((st_callable_info *)0)->name)
        return st_fail(STRATA_EINVAL, "%s: name must be 1..%zu characters", what,
                       sizeof((st_callable_info *)0)->name - 1);
    if ((kind == ST_CALLABLE_SUB && !fn) || (kind == ST_CALLABLE_ORCH && !program))
        return st_fail(STRATA_EINVAL, "%s: '%s': function is NULL", what, name);
    st_callable_info *ci = st_calloc(1, sizeof *ci);
    if (!ci) {
        st_fail_nomem("the callable's record", sizeof *ci);
        return st_fail_prefix(STRATA_ENOMEM, what);
    }
    memcpy(ci->name, name, len + 1);
    ci->kind = kind;
    ci->fn = fn;
    ci->user = user;
    ci->program = program;
    ci->digest = st_digest_callable((int)kind, name);
    st_engine_lock(w);
    int rc = STRATA_OK;
    if (w->state == ST_WORKER_CLOSED)
        rc = st_fail(STRATA_ECLOSED, "%s: the worker is closed", what);
    int32_t id = -1;
    if (rc == STRATA_OK)
        rc = st_registry_add(&w->callables, ci->name, ci, what, &id);
    if (rc == STRATA_OK) {
        /* Endpoints read the id only of callables dispatched to them, under
         * this lock later: written after publication, still ordered before. */
        ci->id = id;
        *out = id;
    }
    st_engine_unlock(w);
    if (rc != STRATA_OK) {
        st_free(ci);
        return rc;
    }
    return broadcast_registration(w, ci, what);
}

int strata_worker_register_sub(strata_worker *w, const char *name, strata_sub_fn fn, void *user,
                               strata_callable *out) {
    return register_callable(w, name, ST_CALLABLE_SUB, fn, user, NULL, out,
                             "strata_worker_register_sub");
}

int st_register_next_level(strata_worker *w, const char *name, strata_sub_fn fn, void *user,
                           void *program, strata_callable *out) {
    return register_callable(w, name, ST_CALLABLE_NEXT, fn, user, program, out,
                             "register next-level callable");
}

int strata_worker_register_orch(strata_worker *w, const char *name, strata_orch_fn fn, void *user,
                                strata_callable *out) {
    void *program = NULL; /* the function, kept as a chip program's is (st_callable_orch) */
    memcpy(&program, &fn, sizeof program);
    return register_callable(w, name, ST_CALLABLE_ORCH, NULL, user, program, out,
                             "strata_worker_register_orch");
}

void st_task_label(strata_worker *w, st_slot *s, char *buf, size_t n) {
    const st_callable_info *ci = st_registry_get(&w->callables, s->callable);
    snprintf(buf, n, "task '%s' #%llu", ci ? ci->name : "?", (unsigned long long)s->seq);
}

/* Init rollback: stop and join the sub workers started so far, undo the
 * other children and free the tables, so the worker is as created (its arena
 * kept) and init may be retried. */
void st_worker_start_undo(strata_worker *w, const st_start_plan *plan) {
    if (!w || w->state != ST_WORKER_CREATED)
        return;
    for (int k = 0; k < w->nsubs; k++) {
        w->subs[k].ep->ops->stop(w->subs[k].ep);
        w->subs[k].ep->ops->destroy(w->subs[k].ep);
    }
    if (plan->undo_children)
        plan->undo_children(w);
    if (plan->shared_arena) /* every child forked since the seal is reaped: the worker is as created
                             */
        st_arena_unseal(w->arena);
    w->nsubs = 0;
    w->nidle_subs = 0;
    st_free(w->subs);
    st_free(w->idle_subs);
    st_free(w->reserved);
    w->subs = NULL;
    w->idle_subs = NULL;
    w->reserved = NULL;
}

static int init_failed(strata_worker *w, const st_start_plan *plan, int rc) {
    char keep[STRATA_ERRMSG_MAX]; /* the undo must not replace the failure's message */
    st_msg_format(keep, sizeof keep, "%s", strata_error_message());
    st_worker_start_undo(w, plan);
    return st_fail_msg(rc, keep);
}

static int alloc_init_tables(strata_worker *w) {
    size_t nsub = w->cfg.sub_workers ? w->cfg.sub_workers : 1;
    size_t nnext = (size_t)(w->nnext ? w->nnext : 1);
    if (!(w->subs = st_calloc(nsub, sizeof *w->subs)))
        return st_fail_nomem("strata_worker_init: the sub worker table", nsub * sizeof *w->subs);
    if (!(w->idle_subs = st_calloc(nsub, sizeof *w->idle_subs)))
        return st_fail_nomem("strata_worker_init: the idle sub worker stack",
                             nsub * sizeof *w->idle_subs);
    if (!(w->reserved = st_calloc(nnext, sizeof *w->reserved)))
        return st_fail_nomem("strata_worker_init: the next-level reservations",
                             nnext * sizeof *w->reserved);
    return STRATA_OK;
}

/* strata_worker_init (exec/worker_init.c) names the sub worker endpoint: the
 * engine knows none itself. */
/* Create the n sub worker endpoints through the plan's factory. */
static int create_subs(strata_worker *w, const st_start_plan *plan, const st_sub_port *port,
                       int n) {
    for (int i = 0; i < n; i++) {
        st_endpoint *ep;
        int rc = plan->create_sub(w, i, port, &ep);
        if (rc != STRATA_OK)
            return rc;
        atomic_init(&ep->gone, 0);
        w->subs[i].ep = ep;
        w->nsubs++;
    }
    return STRATA_OK;
}

static st_sub_port sub_port_of(const strata_worker *w) {
    return (st_sub_port){
        .spin_ns = w->cfg.spin_ns,
        .before_claim_hook = w->hooks[ST_HOOK_SUB_BEFORE_CLAIM] != NULL,
        .startup_timeout_ns = w->cfg.startup_timeout_ns,
        .timed = w->trace.timed,
    };
}

static int check_created(const strata_worker *w) {
    if (!w)
        return st_fail(STRATA_EINVAL, "strata_worker_init: worker is NULL");
    if (w->state != ST_WORKER_CREATED)
        return st_fail(STRATA_ESTATE, "strata_worker_init: already initialised%s",
                       w->state == ST_WORKER_CLOSED ? " and closed" : "");
    return STRATA_OK;
}

/* Phase 1: every fork of the subtree, no thread. Every fork of the whole
 * tree comes before its first thread: a thread running at a fork (in an
 * allocator, holding any lock) would leave the child a lock no one releases.
 * Process subs fork as they are made, so they are made here; thread subs
 * start threads, so they are made in phase 2. */
int st_worker_start_forks(strata_worker *w, const st_start_plan *plan) {
    STRATA_TRY(check_created(w));
    if (w->subs)
        return st_fail(STRATA_ESTATE, "strata_worker_init: its children are being started");
    int rc = alloc_init_tables(w);
    if (rc != STRATA_OK)
        return init_failed(w, plan, rc);
    if (plan->shared_arena) /* before the first fork: a region added later would be unseen */
        st_arena_seal(w->arena);
    const st_sub_port port = sub_port_of(w);
    if (plan->subs_fork && (rc = create_subs(w, plan, &port, (int)w->cfg.sub_workers)) != STRATA_OK)
        return init_failed(w, plan, rc);
    if (plan->fork_children) {
        st_endpoint *subs[STRATA_MAX_SUB_WORKERS];
        for (int i = 0; i < w->nsubs; i++)
            subs[i] = w->subs[i].ep;
        rc = plan->fork_children(w, subs, w->nsubs, &port);
        if (rc != STRATA_OK)
            return init_failed(w, plan, rc);
    }
    return STRATA_OK;
}

/* Phase 2: every thread of the subtree (the whole tree is forked by now). */
int st_worker_start_threads(strata_worker *w, const st_start_plan *plan) {
    STRATA_TRY(check_created(w));
    if (!w->subs)
        return st_fail(STRATA_ESTATE, "strata_worker_init: its processes were not forked first");
    const st_sub_port port = sub_port_of(w);
    int n = (int)w->cfg.sub_workers;
    int rc = STRATA_OK;
    if (plan->thread_children) {
        st_endpoint *subs[STRATA_MAX_SUB_WORKERS];
        for (int i = 0; i < w->nsubs; i++)
            subs[i] = w->subs[i].ep;
        rc = plan->thread_children(w, subs, w->nsubs, &port);
        if (rc != STRATA_OK)
            return init_failed(w, plan, rc);
    }
    if (!plan->subs_fork && (rc = create_subs(w, plan, &port, n)) != STRATA_OK)
        return init_failed(w, plan, rc);
    atomic_store(&w->gone_subs, 0);
    /* Idle stack with sub 0 on top. */
    for (int i = 0; i < n; i++)
        w->idle_subs[i] = n - 1 - i;
    w->nidle_subs = n;
    rc = st_sched_start(w);
    if (rc != STRATA_OK)
        return init_failed(w, plan, rc); /* the worker stays CREATED: init may be retried */
    st_engine_lock(w);
    st_trace_start(w);
    worker_move(w, WORKER_T_START);
    st_engine_unlock(w);
    return STRATA_OK;
}

/* After this a worker-level chip call that looks a chip up finds none, so
 * none reaches an endpoint being destroyed. The scheduler thread reads the
 * count without the lock: call this only once it has stopped (or never ran). */
static void detach_next_level(strata_worker *w) {
    st_engine_lock(w);
    w->nnext = 0;
    st_engine_unlock(w);
}

/* Closing (or destroying) w from a thread whose work w must finish first
 * would wait for itself: refuse it from w's orchestration function and from
 * its task bodies. */
static int refuse_close_from_within(const strata_worker *w, const char *what) {
    if (tls_orchestrating == w)
        return st_fail(STRATA_ESTATE, "%s: called from inside an orchestration function", what);
    if (st_in_task_of(w))
        return st_refuse_in_task(what, "close waits for every run, this task's own included; "
                                       "close the worker from the thread that drives it");
    return STRATA_OK;
}

int strata_worker_interrupt(strata_worker *w) {
    if (!w)
        return st_fail(STRATA_EINVAL, "strata_worker_interrupt: worker is NULL");
    STRATA_TRY(refuse_close_from_within(w, "strata_worker_interrupt"));
    st_engine_lock(w);
    if (w->state != ST_WORKER_RUNNING) {
        st_engine_unlock(w);
        return STRATA_OK;
    }
    for (st_run *r = w->fifo_head; r; r = r->fifo_next) {
        st_run_record_error(r, STRATA_ECANCELED, "run %llu: interrupted (strata_worker_interrupt)",
                            (unsigned long long)r->id);
        st_run_cancel_unstarted(w, r);
        st_run_finish_if_ready(w, r);
    }
    st_engine_unlock(w);
    /* Outside the lock: an endpoint's own lock is taken under the engine's
     * only by dispatch and activate (core/endpoint.h). */
    for (int i = 0; i < w->nsubs; i++)
        if (w->subs[i].ep->ops->interrupt)
            w->subs[i].ep->ops->interrupt(w->subs[i].ep);
    for (int i = 0; i < w->nnext; i++)
        if (w->next[i].ep->ops->interrupt)
            w->next[i].ep->ops->interrupt(w->next[i].ep);
    return STRATA_OK;
}

int strata_worker_close(strata_worker *w) {
    if (!w)
        return st_fail(STRATA_EINVAL, "strata_worker_close: worker is NULL");
    STRATA_TRY(refuse_close_from_within(w, "strata_worker_close"));
    st_engine_lock(w);
    if (w->state == ST_WORKER_CLOSED) {
        st_engine_unlock(w);
        return STRATA_OK;
    }
    int was_running = w->state == ST_WORKER_RUNNING;
    worker_move(w, WORKER_T_CLOSE); /* new submits fail from here on */
    while (w->live_runs > 0 || w->building || w->broadcasting) {
        uint32_t seen = atomic_load(&w->admit_ev.value);
        st_engine_wait(w, &w->admit_ev, seen, UINT64_MAX);
    }
    st_engine_unlock(w);
    /* A thread that helped a retired run may still be looking at the sub
     * workers for a moment (core/helping.c). */
    while (atomic_load(&w->lingering_helpers) > 0)
        sched_yield();
    int nnext = w->nnext; /* fixed since init; detached below, once no thread polls it */
    if (!was_running) {
        detach_next_level(w);
        /* Never initialised: endpoints added but never started. */
        for (int i = 0; i < nnext; i++) {
            w->next[i].ep->ops->stop(w->next[i].ep);
            w->next[i].ep->ops->destroy(w->next[i].ep);
        }
        return STRATA_OK;
    }
    for (int i = 0; i < w->nsubs; i++)
        w->subs[i].ep->ops->stop(w->subs[i].ep);
    for (int i = 0; i < nnext; i++)
        w->next[i].ep->ops->stop(w->next[i].ep);
    st_sched_stop(w);
    st_trace_finish(w); /* every child stopped: nothing records any more */
    detach_next_level(w);
    for (int i = 0; i < w->nsubs; i++)
        w->subs[i].ep->ops->destroy(w->subs[i].ep);
    for (int i = 0; i < nnext; i++)
        w->next[i].ep->ops->destroy(w->next[i].ep);
    w->nsubs = 0;
    return STRATA_OK;
}

void strata_worker_destroy(strata_worker *w) {
    if (!w)
        return;
    /* Freeing the worker under a running orchestration function or task body
     * would pull the engine out from under it: refuse, and leave it intact. */
    if (refuse_close_from_within(w, "strata_worker_destroy") != STRATA_OK)
        return;
    strata_worker_close(w);
    for (uint32_t i = 0; i < st_registry_count(&w->callables); i++)
        st_free(st_registry_get(&w->callables, (int32_t)i));
    st_free(w->subs);
    st_free(w->idle_subs);
    st_free(w->reserved);
    st_free(w->next);
    st_free(w->orch.scope_refs);
    st_heap_destroy(&w->heap);
    st_arena_put(w->arena); /* buffers still alive keep it mapped */
    st_trace_destroy(w);
    st_tmap_destroy(&w->tmap);
    st_slots_destroy(&w->slots);
    st_free(w);
}

/* ---- a run begins ------------------------------------------------------- */

int strata_worker_submit(strata_worker *w, strata_orch_fn fn, void *arg, strata_run **out) {
    return st_worker_submit_task(w, fn, arg, NULL, out);
}

const strata_task_view *strata_orch_task_args(const strata_orch *o) {
    return o && o->run ? o->task_args : NULL;
}

int st_worker_submit_task(strata_worker *w, strata_orch_fn fn, void *arg,
                          const strata_task_view *task_args, strata_run **out) {
    if (!w || !fn || !out)
        return st_fail(STRATA_EINVAL, "strata_worker_submit: worker, fn and out must not be NULL");
    *out = NULL;
    if (tls_orchestrating)
        return st_fail(
            STRATA_ESTATE,
            "strata_worker_submit: called from inside an orchestration function (submit "
            "tasks with strata_orch_submit_sub / strata_orch_submit_next_level instead)");
    if (st_in_task_of(w))
        return st_refuse_in_task("strata_worker_submit",
                                 "a new run cannot execute before the run of this task ends, so "
                                 "waiting for it would never return; submit from the thread that "
                                 "drives the worker");
    st_run *r;
    STRATA_TRY(st_run_begin(w, &r)); /* returns with the lock held */
    strata_orch *o = &w->orch;
    o->run = r;
    o->thread = pthread_self();
    o->depth = 1; /* the run's outer scope */
    o->frame_start[0] = 0;
    o->nscope_refs = 0;
    o->task_args = task_args;
    st_engine_unlock(w);

    tls_orchestrating = w;
    st_clear_error(); /* a failure message must come from this function's own calls */
    st_args_misuse_reset();
    int rc = fn(o, arg);
    tls_orchestrating = NULL;
    if (rc != STRATA_OK && (rc > 0 || rc < STRATA_ECANCELED))
        rc = STRATA_ETASK; /* not a strata_status */
    char misread[STRATA_ERRMSG_MAX];
    if (st_args_misuse_take(misread, sizeof misread) && rc == STRATA_OK) {
        /* A typed read of the task's arguments failed (strata_orch_task_args):
         * the run built its graph from a value it was never given. */
        rc = STRATA_EINVAL;
        st_fail_msg(rc, misread);
    }

    st_engine_lock(w);
    st_orch_close_scopes_to(o, 0); /* the outer scope, and any left open */
    if (rc != STRATA_OK)
        st_run_fail_submission(w, r, rc, strata_error_message());
    else
        st_run_close_submission(w, r);
    o->run = NULL;
    o->task_args = NULL;
    st_sched_pass(w);
    st_engine_unlock(w);
    *out = r;
    return STRATA_OK;
}
