/* core/endpoint.h - the parent's handle on one child worker (DESIGN §6).
 *
 * Owns: the endpoint interface the engine calls and every kind of child
 * implements (thread-hosted sub workers, chips, the tests' scriptable
 * endpoint, later process mailboxes), and the completion records endpoints
 * hand back to the engine. The engine owns this interface and knows no
 * concrete endpoint; endpoints see the engine only through the calls below.
 * Must never: let an endpoint fail loudly. A rejected dispatch is completed as
 * an endpoint failure through st_endpoint_complete(), exactly once.
 */
#ifndef STRATA_CORE_ENDPOINT_H
#define STRATA_CORE_ENDPOINT_H

#include <stdatomic.h>
#include <stdint.h>

#include "strata/worker.h"
#include "util/digest.h"
#include "util/error.h"
#include "util/futex.h"
#include "util/lease.h"

typedef struct strata_worker st_engine; /* the engine is the worker */
typedef struct st_endpoint st_endpoint;

/* What a callable is, as the engine and the endpoints see it. */
/* ORCH: a next-level callable a child Worker runs as one whole run of its own
 * (strata_worker_register_orch); it goes where NEXT callables go. */
typedef enum st_callable_kind {
    ST_CALLABLE_SUB = 0,
    ST_CALLABLE_NEXT = 1,
    ST_CALLABLE_ORCH = 2
} st_callable_kind;

/* Callables of one worker: their ids are 0 .. ST_MAX_CALLABLES-1, so an
 * endpoint may index its own per-callable state by id. */
#define ST_MAX_CALLABLES 1024

typedef struct st_callable_info {
    strata_callable id; /* its id in the worker's registry */
    char name[64];
    st_callable_kind kind;
    strata_sub_fn fn; /* SUB callables (and test next-level callables); valid in process
                         children too: they are forks of the same binary */
    void *user;       /* passed to fn; a process child sees the memory as it was at its fork
                         (or shared memory, e.g. a strata_buffer), never later private writes */
    void *program;    /* NEXT callables backed by a chip program (owned by the chip layer) */
    st_digest digest; /* st_digest_callable(kind, name), computed at registration: how a
                         process child finds its own entry */
} st_callable_info;

/* The function of an ORCH callable: kept in `program` (as a chip program's is). */
static inline strata_orch_fn st_callable_orch(const st_callable_info *ci) {
    strata_orch_fn fn = NULL;
    _Static_assert(sizeof fn == sizeof ci->program, "a function fits a pointer");
    if (ci->kind == ST_CALLABLE_ORCH)
        __builtin_memcpy(&fn, &ci->program, sizeof fn);
    return fn;
}

/* One unit of work handed to an endpoint: a whole task or one group member. */
typedef struct st_dispatch {
    uint64_t ref; /* task reference: slot index | generation << 32 */
    uint64_t run_id;
    st_lease lease;       /* the run's pipeline lease: a child recognises a stale holder by
                             it (a chip's lane filters on it; DESIGN §6 frame trailer) */
    uint32_t member;      /* group member index (0 for a single task) */
    uint32_t dispatch_id; /* per-endpoint sequence number, from 1 */
    int caller_cpu;       /* CPU of a dispatching caller that waits (not a sub worker), or -1:
                             a worker on the same CPU yields early instead of spinning */
    uint8_t lendable;     /* a single task (not a group member): a waiting thread may run
                             it if the endpoint has not started it (ops->lend) */
    uint8_t staged;       /* 1: its run is not the head yet (a staged successor): the
                             endpoint may take, validate and prepare it, never launch it
                             before activate(run_id); 0: its run is the head (see
                             "Staging" below). Bytes, so the record stays 72 bytes */
    uint8_t timed;        /* 1: the endpoint reads the clock around the body (tracing or
                             collect_stats) into the completion's t_start / t_end */
    const st_callable_info *callable;
    const strata_task_args *args;  /* valid until the completion is posted; only up to
                                      its last used tensor: copy with strata_args_copy */
    const strata_call_config *cfg; /* never NULL */
} st_dispatch;

/* An observer of every dispatch the engine makes (strata_worker's
 * dispatch_observer): called under the engine lock just before
 * ep->ops->dispatch(ep, d), with the same record; it must not block or call
 * back into the engine. The MPI layer sets one (mpi_endpoint.c) to learn the
 * host tensors written by tasks that do not go to its children, so the
 * copies its ranks keep of those bytes are dropped. NULL when none: the
 * engine pays one load and a branch per dispatch. */
typedef void (*st_dispatch_observer_fn)(void *ctx, st_endpoint *ep, const st_dispatch *d);

/* A completion record. Endpoints own these (one per task they can hold at
 * once) and fill one per dispatch or rejection; the engine links them into its
 * completion list. A record is reused only once `queued` is back to
 * ST_COMP_FREE: the engine's capacity check counts every dispatch (a rejection
 * too) until its completion is handled, so an endpoint with `capacity` records
 * always finds a free one at dispatch as long as each rejection takes a record
 * of its own instead of the first one not busy (two rejections in one pass on
 * one record pushed it twice: a cycle in the completion list). */
typedef enum st_comp_state {
    ST_COMP_FREE = 0, /* the endpoint's to fill */
    ST_COMP_HELD,     /* filled under the endpoint's lock; its push is to follow */
    ST_COMP_QUEUED,   /* pushed (st_endpoint_complete); free again once the drain handled it */
} st_comp_state;

typedef struct st_completion {
    struct st_completion *next; /* engine-owned link */
    /* st_comp_state. Set by st_endpoint_complete (and st_completion_hold),
     * cleared by the engine's drain after handling the record, next read first. */
    _Atomic int queued;
    st_endpoint *ep;
    uint64_t ref;
    uint32_t member;
    uint64_t t_start, t_end; /* where the body ran, if timed; 0: not measured */
    int32_t ran_on;          /* the worker index the body saw (a helper's is nsubs), or -1 */
    /* A timed chip task's native phases (chip_driver.c), monotonic ns: prepare
     * start and end, launch, device completion, finalize end; 0: none. */
    uint64_t native[5];
    int status; /* STRATA_OK, STRATA_ETASK (the task failed), STRATA_EENDPOINT or
                   STRATA_ENOMEM (the endpoint could not allocate what the task needed) */
    /* The library's one message size: a record is reused per endpoint, not per
     * task, so the size costs memory per endpoint only. */
    char msg[STRATA_ERRMSG_MAX];
} st_completion;

/* ---- Staging: tasks of the successor run (DESIGN §5.4) ------------------------------------
 * With pipeline_depth 2 the engine may dispatch tasks of the successor run
 * (second in the FIFO, BUILDING or PREPARED, not failed) before it is the
 * head, to a next-level endpoint whose `staging` is above 0:
 *   - only READY single next-level tasks: never a group, a sub task or a task
 *     with STRATA_CALL_DIAGNOSTICS (its setup may touch state shared with the
 *     running task); only after the head's own work was dispatched, and never
 *     to an endpoint a blocked head group reserved;
 *   - at most min(staging, capacity - 1) per endpoint per successor run, so
 *     at least one of the endpoint's records is always left to head-run
 *     work: a head task that becomes ready later waits at most for the head's
 *     own tasks there, never for a staged one;
 *   - such a dispatch has staged = 1, its run's run_id, lease and the next
 *     dispatch_id of the endpoint (dispatch ids of an endpoint only grow,
 *     staged or not).
 * The endpoint's side of the contract:
 *   1. Never launch a staged task before activate(ep, run_id) named its run
 *      (activate(ep, id) activates every task of runs <= id). It may ship,
 *      validate and natively prepare it meanwhile, where the chip allows.
 *   2. Order its lane "activated first, then dispatch id": a head task
 *      dispatched after a staged one runs before it (hazard H1: else the head
 *      could never finish, and the staged task would never be activated). A
 *      staged task never takes the last place a head task needs (a chip of
 *      depth 1 keeps it out of its lane until activation).
 *   3. Never block on a staged task (no device wait before activation).
 *   4. At activation, check the identity it holds for the task (run id,
 *      lease slot and generation, dispatch id) against the dispatch; on a
 *      mismatch poison itself: fail that task and every later one as
 *      STRATA_EENDPOINT with a message naming both identities, and reject
 *      every later dispatch as STRATA_EENDPOINT.
 *   5. Complete a staged task exactly once, like any task, and release what
 *      it prepared exactly once. The engine activates a staged task's run
 *      even when that run failed meanwhile (it becomes the head once the
 *      head retires, and its running tasks finish), so a staged task is not
 *      left behind by a failure; on stop, a staged task not yet activated is
 *      released unlaunched and completed as STRATA_EENDPOINT.
 * The engine's side: activate(ep, run_id) is called on every next-level
 * endpoint when a run becomes the head, before any dispatch of that run
 * with staged = 0. */

typedef struct st_endpoint_ops {
    /* Start executing d. Must not block for long. On rejection, complete d as
     * STRATA_EENDPOINT through st_endpoint_complete (never return an error). */
    void (*dispatch)(st_endpoint *ep, const st_dispatch *d);
    /* Poll-driven endpoints deliver at most one event per call and return 1 if
     * they did; push-driven ones set this to NULL. */
    int (*progress)(st_endpoint *ep);
    /* Run `run_id` became the head: staged work of it may launch. May be NULL. */
    void (*activate)(st_endpoint *ep, uint64_t run_id);
    /* Stop: reject new dispatches, let in-flight work finish. Must not block. */
    void (*stop)(st_endpoint *ep);
    /* Join threads and free. Called once after stop, when nothing is in flight. */
    void (*destroy)(st_endpoint *ep);
    /* Run a lendable task that was dispatched to ep but not started yet on the
     * calling thread (a thread waiting for its run), and complete it as ep
     * would. Only tasks of runs up to max_run_id are taken; the body reads
     * `worker` as its worker index (strata_task_view). 1 if a task ran.
     * A process endpoint cannot run a task on another process's thread:
     * instead it hands back a result its child finished (the caller completes
     * it, saving the endpoint thread's wake-up); 1 if it did.
     * May be NULL (the endpoint never lends: chips). Any thread,
     * no lock held. */
    int (*lend)(st_endpoint *ep, uint64_t max_run_id, uint32_t worker);
    /* A callable was registered on the running worker (strata_worker_register_sub,
     * st_register_next_level after init): an endpoint whose child keeps its own
     * table (a process child) makes it known there. Blocks until the child
     * answered; returns its status with a message naming the child. Called with
     * no lock held, from the registering thread. May be NULL. */
    int (*registered)(st_endpoint *ep, const st_callable_info *callable);
    /* strata_worker_interrupt: stop the work in flight now, failing it (a
     * process child running a task is killed; its death fails the task as
     * any crash does). Must not block. NULL: the endpoint's work cannot be
     * stopped from outside (a thread runs its task to the end). */
    void (*interrupt)(st_endpoint *ep);
    /* strata_worker_init brings the tree up in two phases, so no process is
     * ever forked while a thread of the tree runs (a thread inside an
     * allocator or holding any lock at a fork leaves the child a lock no one
     * releases). A child that hosts children of its own in this process (a
     * thread-hosted child Worker) takes part through these three; NULL for
     * the others (a process child is forked and awaited by the parent's
     * phase 1 itself).
     * start_forks: phase 1, after the parent's shared arena was reserved and
     * its own process children were forked: fork every process of the subtree
     * below ep and wait (bounded) until they are ready; start no thread.
     * start_threads: phase 2, once every process of the whole tree is forked
     * and ready: start every thread of the subtree (ep's own included).
     * unstart: the parent's init failed: undo whatever the two did (every
     * thread joined, every process reaped). After a failure in phase 1 the
     * child is as added and init may be retried; a child whose phase 2 had
     * completed is closed for good, and a retry's start_forks fails
     * STRATA_ESTATE naming it. Idempotent. */
    int (*start_forks)(st_endpoint *ep);
    int (*start_threads)(st_endpoint *ep);
    void (*unstart)(st_endpoint *ep);
} st_endpoint_ops;

/* Endpoint header: concrete endpoints embed this as their first member. */
struct st_endpoint {
    const st_endpoint_ops *ops;
    st_engine *engine;
    int is_sub;           /* 1: interchangeable sub worker; 0: next-level (directed) */
    int worker_id;        /* next-level worker id, or sub worker index */
    int capacity;         /* tasks it may hold at once (0 means 1); next-level only */
    int staging;          /* staged tasks it takes at once (0: none); next-level only; the
                             engine uses at most capacity - 1 of them (see "Staging") */
    _Atomic int last_cpu; /* sub workers: the CPU they last waited on (-1 unknown) */
    _Atomic int gone;     /* 1 once the child is known dead (st_endpoint_gone): the engine
                             hands a gone sub worker no more tasks while another one lives */
    char label[64];       /* e.g. "sub 1", "chip sim:0"; used in error messages */
    int pid;              /* the process its task bodies run in; 0: this one (the trace) */
};

/* ---- What an endpoint may ask of the engine -------------------------------------------
 * Endpoints see the engine only through these calls (the engine stays an
 * incomplete type to them): they never include core/engine.h. */

/* Hand a filled completion record to the engine (any thread, any time).
 * The record must stay untouched until st_completion_free(c) says so again
 * (debug builds abort on a record pushed while it is queued). */
void st_endpoint_complete(st_endpoint *ep, st_completion *c);

/* 1 if c may be filled for a new task or rejection (not held, not queued). */
static inline int st_completion_free(st_completion *c) {
    return atomic_load_explicit(&c->queued, memory_order_acquire) == ST_COMP_FREE;
}

/* Claim c for a completion whose push comes later (the endpoint fills c and
 * frees its own record under its lock, then pushes c after dropping it): no
 * dispatch picks c in between. c must be free. */
void st_completion_hold(st_completion *c);

/* Give a held record back unpushed (its owner reported the result some other
 * way: a process child writes it into its frame). */
static inline void st_completion_release(st_completion *c) {
    atomic_store_explicit(&c->queued, ST_COMP_FREE, memory_order_release);
}

/* Convenience: fill `c` for dispatch d with status/message and complete it. */
void st_endpoint_complete_with(st_endpoint *ep, st_completion *c, const st_dispatch *d, int status,
                               const char *fmt, ...) __attribute__((format(printf, 5, 6)));

/* The child behind ep is gone for good (a process that died): set ep->gone.
 * A gone sub worker is taken off the idle stack and never handed a task again
 * while any other sub worker is alive (if none is, tasks still go to it and it
 * rejects them at once with its reason). Any thread, no lock held. */
void st_endpoint_gone(st_endpoint *ep);

/* Endpoint i of e (its sub workers, then its next-level children; NULL past
 * the last). For a forked child reading its copy of the engine. */
st_endpoint *st_engine_endpoint(st_engine *e, int i);

/* The callables registered on e so far: count and the entry of id (NULL past
 * the count). Entries are never removed, so these read without the engine
 * lock; a process endpoint copies them into its child's table at fork. */
uint32_t st_engine_callable_count(st_engine *e);
const st_callable_info *st_engine_callable(st_engine *e, uint32_t id);

/* The calling thread hosts sub worker ep from now on (its endpoint thread says
 * so once, before it waits for work). A scheduler pass on such a thread hands
 * it the next sub task itself (a chain stays on one thread), and a wait on it
 * never helps (core/helping.c). */
void st_endpoint_bind_thread(st_endpoint *ep);

/* A sub worker thread found a task in its mailbox and has not claimed it yet:
 * the tests' seam ST_HOOK_SUB_BEFORE_CLAIM (no lock held). Called only when
 * st_sub_port.before_claim_hook says a test set it. */
void st_endpoint_before_claim(st_endpoint *ep);

/* ---- Creating endpoints: the exec layer names them, the engine starts them ---- */

/* The settings the engine hands a sub worker endpoint it creates, fixed by
 * then (hooks are set before strata_worker_init): read once at creation, so
 * the per-task path needs no call into the engine. */
typedef struct st_sub_port {
    uint32_t spin_ns;            /* spin this long waiting for work before parking */
    int before_claim_hook;       /* a test seam is set: call st_endpoint_before_claim per claim */
    uint64_t startup_timeout_ns; /* bound on a process child's start (config) */
    int timed;                   /* tasks are timed (core/trace.h): a child reads its clock */
} st_sub_port;

/* Create sub worker `index` of engine e (set ops, engine, is_sub = 1,
 * worker_id = index, last_cpu = -1 and the label) and start it. */
typedef int (*st_sub_endpoint_create_fn)(st_engine *e, int index, const st_sub_port *port,
                                         st_endpoint **out);

/* One phase of bringing up the children other than the sub workers (subs,
 * nsubs: the sub workers created so far, process children among them).
 * Phase 1 (fork_children): fork every process next-level child, run each
 * thread-hosted child's start_forks, then wait (one deadline) until every
 * process child, the sub workers included, is ready; start no thread.
 * Phase 2 (thread_children): each thread-hosted child's start_threads, then
 * the parent-side thread of every process endpoint. */
typedef int (*st_children_start_fn)(st_engine *e, st_endpoint *const *subs, int nsubs,
                                    const st_sub_port *port);

/* How strata_worker_init brings up a worker's children (exec/worker_init.c). */
typedef struct st_start_plan {
    st_sub_endpoint_create_fn create_sub; /* one sub worker endpoint */
    st_children_start_fn fork_children;   /* phase 1; may be NULL: nothing else to fork */
    st_children_start_fn thread_children; /* phase 2; may be NULL */
    void (*undo_children)(st_engine *e);  /* undo both (every next-level child as added:
                                             threads joined, processes reaped); may be NULL */
    int subs_fork;                        /* 1: create_sub forks a process (and starts no
                                             thread): the subs are made in phase 1; 0: they
                                             start threads, so in phase 2 */
    int shared_arena;                     /* 1: the worker has process children: seal the
                                             shared arena (strata_buffer_create) first */
} st_start_plan;

/* strata_worker_init's body in its two phases, with the endpoints left open
 * (exec/worker_init.c is the only caller). Phase 1 (st_worker_start_forks):
 * seal the shared arena if asked (no region added after a fork), create the process sub workers,
 * then plan->fork_children: every fork of the subtree, no thread. Phase 2
 * (st_worker_start_threads): plan->thread_children, the thread sub workers,
 * the scheduler thread; w is RUNNING. Every phase 1 of the whole tree runs
 * before any phase 2. On failure either phase undoes everything (as
 * st_worker_start_undo) and w stays CREATED. */
int st_worker_start_forks(strata_worker *w, const st_start_plan *plan);
int st_worker_start_threads(strata_worker *w, const st_start_plan *plan);
/* Undo st_worker_start_forks (and a failed phase 2) on a CREATED worker:
 * sub workers destroyed, plan->undo_children, tables freed (the arena stays).
 * Init may be retried. Idempotent. */
void st_worker_start_undo(strata_worker *w, const st_start_plan *plan);

/* How w's sub workers are hosted (its config's sub_mode). */
strata_host_mode st_worker_sub_mode(const strata_worker *w);

/* Internal registration of a next-level endpoint on a worker before init
 * (chips and the test endpoint use this). The worker takes ownership. */
int st_worker_add_endpoint(strata_worker *w, st_endpoint *ep, int *worker_id_out);

/* Set (fn) or clear (NULL) w's dispatch observer (st_dispatch_observer_fn):
 * before init, or once w dispatches no more (takes the engine lock). */
void st_worker_set_dispatch_observer(strata_worker *w, st_dispatch_observer_fn fn, void *ctx);

/* Set (bell) or clear (NULL) the event w bumps each time one of its runs
 * ends (completes or fails), after the run's phase is final: a host that
 * polls w's runs without blocking in them (an MPI rank's serve loop) parks
 * on its own bell and is woken by a run's end too. The bell must outlive
 * w's runs, or be cleared first (takes the engine lock). */
void st_worker_set_run_end_bell(strata_worker *w, st_event *bell);

/* Next-level endpoint `worker_id` of w, or NULL if there is none (takes the engine lock). */
st_endpoint *st_worker_next_endpoint(strata_worker *w, int worker_id);

/* A run of w built by fn(o, arg) for a next-level task of a parent worker
 * whose arguments are *task_args (strata_orch_task_args answers them while fn
 * runs; NULL: none). Otherwise strata_worker_submit. */
/* strata_worker_create for a child Worker (top_level 0): STRATA_TRACE does
 * not apply to it (core/trace.h). */
int st_worker_create(const strata_worker_config *cfg, int top_level, strata_worker **out);

int st_worker_submit_task(strata_worker *w, strata_orch_fn fn, void *arg,
                          const strata_task_view *task_args, strata_run **out);

/* Register a next-level callable (a test function, or a chip program). */
int st_register_next_level(strata_worker *w, const char *name, strata_sub_fn fn, void *user,
                           void *program, strata_callable *out);

/* What a body's typed argument reads (strata_args_i64, ..., core/args_read.c)
 * left behind on this thread: the runner of a body resets it before the body
 * and takes it after, failing the task with the first failed read's message
 * (1 and the message in msg) even when the body returned 0. */
void st_args_misuse_reset(void);
int st_args_misuse_take(char *msg, size_t cap);

/* ---- Process children's own traces (core/trace_child.c) ------------------------------------
 * A traced worker maps one shared region per process child before the fork;
 * the child records its own events there and the worker merges them into its
 * file at close (docs/tracing.md). None of these blocks or allocates in the
 * child. */
typedef struct st_trace_region st_trace_region;
typedef enum st_trace_region_kind {
    ST_REGION_CHIP = 1, /* a process chip: its native phases (under its driver's lock) */
    ST_REGION_WORKER,   /* a process child Worker: its inner engine's events, and names */
} st_trace_region_kind;

/* Parent, at add time: a region for next-level child `worker_id` of e, kept
 * by e until destroyed; NULL when e records no trace (or the mapping failed:
 * that child's own events are then missing, nothing else). */
st_trace_region *st_trace_region_new(st_engine *e, int worker_id, st_trace_region_kind kind);
/* Child: a process chip's native phases of one task (as st_completion.native),
 * on the lane of next-level worker `worker_id`; one caller at a time (the
 * chip driver's lock). */
void st_trace_region_chip(st_trace_region *r, int worker_id, uint64_t run, uint32_t callable,
                          const uint64_t native[5]);
/* Child: the inner worker of a child Worker records into r instead of a
 * file (between create and init), and leaves the names its events refer to
 * right after its init (st_trace_region_named). No-ops for r NULL. */
void st_trace_record_into(st_engine *inner, st_trace_region *r);
void st_trace_region_named(st_engine *inner);

#endif
