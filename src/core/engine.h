/* core/engine.h - the worker's engine state, shared by the core modules.
 *
 * Owns: the definition of struct strata_worker (the engine), the types of its
 * members no other module owns (hook points and hook functions, the
 * orchestration handle, the per-endpoint bookkeeping), and the calls on the
 * engine lock (engine_lock.c). Other modules' calls are declared in the
 * headers named after them (core/scheduler.h, release.h, dispatch.h,
 * hooks.h, orchestrator.h, run.h, worker.h, ...).
 * Must never: be included by public headers or by endpoints (src/exec/),
 * which reach the engine only through core/endpoint.h.
 *
 * Locking. One engine lock (`lock`, an st_mutex) protects every slot, run,
 * ready queue, the tensor map, the heaps, the scope stack and the endpoint
 * busy/idle bookkeeping. Lock order: the engine lock, then an endpoint's own
 * leaf lock (endpoint dispatch/activate run under the engine lock and may take
 * theirs; no endpoint takes the engine lock while holding its own: completions
 * are pushed without it). Completions arrive lock-free (a Treiber stack) from any thread;
 * whoever holds the lock drains them. Every unlock goes through
 * st_engine_unlock(), which re-checks the completion stack after releasing
 * the lock so a completion pushed while the lock was held is never stranded
 * (the combining scheduler: any thread that finds work and the lock free
 * runs a scheduler pass).
 */
#ifndef STRATA_CORE_ENGINE_H
#define STRATA_CORE_ENGINE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "core/arena.h"
#include "core/endpoint.h"
#include "core/heap_ring.h"
#include "core/run.h"
#include "core/slot.h"
#include "core/tensormap.h"
#include "core/trace.h"
#include "strata/worker.h"
#include "util/futex.h"
#include "util/lease.h"
#include "util/registry.h"

typedef enum st_worker_state {
    ST_WORKER_CREATED = 0,
    ST_WORKER_RUNNING,
    ST_WORKER_CLOSED
} st_worker_state;

/* Named points where tests may inject an action (DESIGN §10). Hooks run on
 * the engine's thread with the engine lock held (they may call the st_hook_*
 * helpers of core/hooks.h), except where noted. Set them before strata_worker_init. */
typedef enum st_hook_point {
    ST_HOOK_BEFORE_DISPATCH_CLAIM = 0, /* a READY task was picked; not yet claimed */
    ST_HOOK_AFTER_WIRING,              /* a task's edges are wired; not yet published */
    ST_HOOK_SUB_BEFORE_CLAIM,          /* a sub worker thread found a task in its mailbox
                                          and has not claimed it (no lock held; ref 0) */
    ST_HOOK_CAPACITY_WAIT,             /* a submit or alloc is about to drop the lock to
                                          wait for a slot or heap space (ref 0) */
    ST_HOOK_COUNT
} st_hook_point;

typedef void (*st_hook_fn)(strata_worker *w, st_hook_point at, uint64_t ref, void *ctx);

/* The graph builder of the building run (one per worker). */
struct strata_orch {
    strata_worker *w;
    st_run *run;      /* the building run, NULL outside an orchestration function */
    pthread_t thread; /* the thread running the orchestration function */
    int depth;        /* open scopes, the outer one included */
    uint32_t frame_start[STRATA_MAX_SCOPE_DEPTH];
    uint64_t *scope_refs; /* references held by open scopes, innermost last */
    uint32_t nscope_refs, cap_scope_refs;

    /* The parent's task this run executes (strata_orch_task_args), or NULL. */
    const strata_task_view *task_args;
};

typedef struct st_next_state {
    st_endpoint *ep;
    int inflight; /* tasks dispatched and not yet completed */
    int capacity; /* the endpoint's capacity (>= 1), fixed when added */
    uint32_t dispatched;
    uint64_t staged_run; /* the successor run nstaged counts for (core/dispatch.c) */
    int nstaged;         /* tasks of staged_run dispatched staged (never decreases: a bound) */
} st_next_state;

typedef struct st_sub_state {
    st_endpoint *ep;
    int busy;
    uint32_t dispatched;
} st_sub_state;

struct strata_worker {
    strata_worker_config cfg;
    st_mutex lock; /* the engine lock: see the top of this file */
    st_worker_state state;

    st_slot_store slots;
    st_tensormap tmap;
    st_heap heap;

    /* Registered callables (st_callable_info payloads, ids = strata_callable).
     * Added under the engine lock and never removed, so submitters and
     * endpoints read them without it (util/registry.h). */
    st_registry callables;
    st_registry_entry callable_entries[ST_MAX_CALLABLES];

    st_sub_state *subs;
    int nsubs;
    _Atomic int gone_subs; /* sub workers whose child died (st_endpoint_gone) */
    int *idle_subs;        /* stack of idle sub indices */
    int nidle_subs;
    st_next_state *next;
    int nnext;
    uint32_t cap_next;
    int *reserved; /* per next-level worker: reserved by a blocked group this pass */

    /* Completions pushed by endpoints (lock-free stack, drained by the lock holder). */
    _Atomic(st_completion *) completions;

    /* Runs: FIFO of admitted, unretired runs (head first). */
    st_run *fifo_head, *fifo_tail;
    int live_runs;
    _Atomic int lingering_helpers; /* retired runs a waiting thread still helps (helping.c) */
    _Atomic int helper_slot;       /* 1 while a waiting thread may run sub tasks: one at a
                                      time, so the helper's worker index (nsubs) is its own */
    uint64_t next_run_id;
    int building;         /* a run is being built */
    st_lease_pool leases; /* one per live run (util/lease.h) */
    struct strata_orch orch;

    st_event space_ev; /* bumped when slots or heap space are freed for a waiter */
    int slot_waiters;  /* the orchestrator waits for a free task slot */
    int heap_waiters;  /* the orchestrator waits for heap-ring space */
    st_event admit_ev; /* bumped when a run retires or stops building, or a registration
                          finished telling the children (close waits for those) */
    int broadcasting;  /* registrations telling the children now (under the lock) */
    st_arena *arena;   /* strata_buffer_create's memory, reserved at create */

    pthread_t sched_thread;
    int sched_started;
    st_event sched_ev;         /* wakes the scheduler thread */
    _Atomic int poll_inflight; /* tasks in flight on poll-driven endpoints */
    _Atomic int stopping;

    /* st_worker_set_dispatch_observer (the MPI layer, when it adds a child):
     * written and read under the engine lock (core/endpoint.h). */
    st_dispatch_observer_fn dispatch_observer;
    void *dispatch_observer_ctx;
    /* st_worker_set_run_end_bell (an MPI rank's serve loop, for its L3):
     * bumped as each run retires; written and read under the engine lock. */
    st_event *run_end_bell;

    st_hook_fn hooks[ST_HOOK_COUNT];
    void *hook_ctx[ST_HOOK_COUNT];

    _Atomic uint64_t
        next_buffer_id;   /* of strata_buffers; far below ST_RUNTIME_ID_BIT (heap_ring.h) */
    uint64_t visit_stamp; /* one per submit, for deduplicating producers */

    st_trace trace;                 /* tracing and task timing (core/trace.h) */
    strata_worker_statistics stats; /* counts and times so far (engine lock; core/trace.c) */
};

/* ---- the engine lock (engine_lock.c) ---- */
void st_engine_lock(strata_worker *w);
void st_engine_unlock(strata_worker *w);
/* Run scheduler passes while there is work and the lock is free. */
void st_engine_kick(strata_worker *w);
/* Lock held on entry and exit: unlock, wait for ev to move past `seen` or the
 * deadline, relock. -1 on timeout. */
int st_engine_wait(strata_worker *w, st_event *ev, uint32_t seen, uint64_t deadline_ns);

#endif
