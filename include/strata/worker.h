/* strata/worker.h - the L3+ Worker: configuration, lifecycle, callables, runs
 * and the calls an orchestration function makes.
 *
 * Owns: the public shape of the engine (DESIGN §4, §5).
 * Must never: expose engine internals; everything here is an opaque handle or
 * a plain configuration struct filled by a *_config_init() call.
 */
#ifndef STRATA_WORKER_H
#define STRATA_WORKER_H

#include <stddef.h>
#include <stdint.h>

#include "args.h"
#include "export.h"
#include "status.h"
#include "tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct strata_worker strata_worker; /* one L3+ worker (engine + children) */
typedef struct strata_orch strata_orch;     /* the graph builder of the building run */
typedef struct strata_run strata_run;       /* one run, owned by the caller until released */
typedef int32_t strata_callable;            /* a registered function (>= 0) */

#define STRATA_WAIT_FOREVER UINT64_MAX
#define STRATA_MAX_GROUP 64        /* members of one group task */
#define STRATA_MAX_SCOPE_DEPTH 64  /* open scopes in one run, the run's outer scope included */
#define STRATA_MAX_SUB_WORKERS 256 /* sub workers of one worker */
#define STRATA_MAX_NEXT_LEVEL 256  /* next-level workers (chips, ...) of one worker */

/* How a child worker is hosted. THREAD: a thread of this process. PROCESS: a
 * forked process of the same program, reached through a shared-memory
 * mailbox; a crash in it (a signal, exit()) fails only its tasks. The same
 * program gives the same results either way. A sub function runs in the
 * child: its `user` pointer must point to memory that existed before
 * strata_worker_init (the child sees it as it was then) or to shared memory
 * (a strata_buffer); tensors of strata_buffer_create memory are seen at the
 * same address without copies. */
/* MPI: another MPI rank of the same program (strata/mpi.h, docs/guide.md
 * "Multi-host"); valid only as a strata_child_config's host, never for sub
 * workers or chips (refused with STRATA_EINVAL). */
typedef enum strata_host_mode {
    STRATA_HOST_THREAD = 0,
    STRATA_HOST_PROCESS = 1,
    STRATA_HOST_MPI = 2
} strata_host_mode;

typedef struct strata_worker_config {
    int level;                    /* label only (default 3); behaviour never depends on it */
    uint32_t sub_workers;         /* host-function workers (default: one per CPU the calling
                                     thread may run on, at most STRATA_MAX_SUB_WORKERS; 0: the
                                     worker takes no sub tasks) */
    strata_host_mode sub_mode;    /* default STRATA_HOST_THREAD */
    uint32_t task_window;         /* live task slots, power of two (default 4096) */
    uint32_t pipeline_depth;      /* runs admitted at once, 1 or 2 (default 2) */
    uint64_t heap_ring_bytes;     /* bytes of each of the 4 heap rings (default 64 MiB) */
    uint64_t capacity_timeout_ns; /* bound on waiting for a slot or heap space (default 10 s) */
    uint32_t spin_ns;             /* busy-wait before parking a waiting thread (default 20 us) */
    int help_while_waiting;       /* 1: a thread in an unbounded strata_run_wait / strata_worker_run
                                     runs sub tasks no sub worker has started yet (default 1);
                                     0: sub task bodies only ever run on sub worker threads */
    uint64_t startup_timeout_ns;  /* bound on starting process children at strata_worker_init
                                     (default 30 s): one that fails, exits or hangs fails init */
    uint64_t shared_arena_bytes;  /* virtual size of each shared arena region
                                     strata_buffer_create takes buffers from (default 1 GiB;
                                     reserved at strata_worker_create, not committed). More
                                     regions are added as needed until the worker's process
                                     children exist; then a full arena fails STRATA_ENOMEM */
    const char *trace_path;       /* record a trace and write it here at strata_worker_close
                                     (copied at create; NULL: off, unless STRATA_TRACE is set,
                                     see docs/api.md "Tracing and statistics") */
    uint32_t trace_events_per_lane; /* fixed events per trace lane (default 65536): a full lane
                                       drops events and counts them, never blocks */
    int collect_stats;              /* 1: time every task for strata_worker_stats /
                                       strata_run_stats without tracing (default 0: counts
                                       only, unless tracing) */
} strata_worker_config;

STRATA_API void strata_worker_config_init(strata_worker_config *cfg);

/* Create a worker from cfg (copied). Children are added before
 * strata_worker_init(); callables may be registered before or after it. */
STRATA_API int strata_worker_create(const strata_worker_config *cfg, strata_worker **out);

/* Start the children and the scheduler. After this, runs may be submitted. */
STRATA_API int strata_worker_init(strata_worker *w);

/* Refuse new runs, wait for every admitted run to finish, then stop the
 * children and the scheduler. Idempotent: every call returns STRATA_OK (the
 * runs' own errors belong to the runs). The handle stays valid: queries
 * still answer, submits and registrations fail with STRATA_ECLOSED. */
STRATA_API int strata_worker_close(strata_worker *w);

/* Ctrl-C for a worker: every live run fails with STRATA_ECANCELED
 * ("interrupted"), its unstarted tasks are cancelled, and every process
 * child (sub worker, chip or child Worker in a process) that is running a
 * task is killed, so that task fails with STRATA_EENDPOINT at once instead of
 * running to its end. A task running on a thread (thread-hosted sub workers
 * and chips, the helping caller) runs to its end: a thread cannot be stopped
 * safely. The worker is meant to be closed next (strata_worker_close then
 * waits only for those threads' tasks); a killed child is not replaced, so
 * later tasks on it fail with STRATA_EENDPOINT. Returns STRATA_OK (also on a
 * worker not running: nothing to stop), STRATA_EINVAL for NULL, or
 * STRATA_ESTATE from inside a task body of w. Not async-signal-safe: call it
 * from the thread that caught the signal's flag, not from the handler; and
 * not while another thread is inside strata_worker_close or _destroy of w
 * (close frees the children it walks). */
STRATA_API int strata_worker_interrupt(strata_worker *w);

/* Close (if needed) and free. NULL is a no-op. Run handles still held by the
 * caller stay readable until released. */
STRATA_API void strata_worker_destroy(strata_worker *w);

/* ---- Tracing and statistics ------------------------------------------------ */

/* What one sub worker, the helper or one next-level worker did. */
typedef struct strata_lane_stats {
    uint64_t tasks_run;    /* tasks (group members) it ran to an end, failed ones included */
    uint64_t tasks_failed; /* of those, the ones that failed */
    uint64_t busy_ns;      /* summed start..end of its tasks (timed workers only) */
} strata_lane_stats;

typedef struct strata_worker_statistics {
    int timed;            /* 1: the times below were measured (tracing or collect_stats) */
    uint32_t sub_workers; /* entries of sub[] in use */
    uint32_t next_level;  /* entries of next[] in use */
    uint64_t elapsed_ns;  /* since strata_worker_init (until close): idle = elapsed - busy */
    strata_lane_stats sub[STRATA_MAX_SUB_WORKERS];
    strata_lane_stats helper; /* tasks a waiting caller ran */
    strata_lane_stats next[STRATA_MAX_NEXT_LEVEL];
    uint64_t overhead_tasks;                /* tasks the overhead figures cover */
    uint64_t overhead_mean_ns;              /* ready -> start, mean */
    uint64_t overhead_max_ns;               /* ready -> start, max */
    uint32_t window_high_water;             /* most task slots in use at once */
    uint64_t heap_ring_high_water_bytes[4]; /* most bytes in use per heap ring */
    uint64_t trace_events;                  /* events recorded (tracing only) */
    uint64_t trace_dropped;                 /* events dropped by full lanes */
} strata_worker_statistics;

typedef struct strata_run_statistics {
    int timed;
    uint64_t tasks_run;
    uint64_t tasks_failed;
    uint64_t tasks_not_run;    /* cancelled or poisoned before they started */
    uint64_t overhead_mean_ns; /* ready -> start over the run's tasks */
    uint64_t overhead_max_ns;
    uint64_t critical_path_ns; /* longest dependency chain of measured task durations */
} strata_run_statistics;

/* The worker's statistics so far (counts always; times when timed). */
STRATA_API int strata_worker_stats(const strata_worker *w, strata_worker_statistics *out);

/* One run's statistics; complete once the run is done. */
STRATA_API int strata_run_stats(const strata_run *r, strata_run_statistics *out);

/* STRATA_OK, or why the trace file could not be written at close (the
 * message in strata_error_message() on the calling thread). */
STRATA_API int strata_worker_trace_status(const strata_worker *w);

/* ---- Callables ------------------------------------------------------------- */

/* A host function run by a sub worker. args is valid until it returns (a
 * copy of *args is too). Returns 0 on success; any other value fails the
 * task. strata_task_set_error() attaches a message to the failure. */
typedef int (*strata_sub_fn)(const strata_task_view *args, void *user);

/* Register a sub function under a unique name (before or after init). */
STRATA_API int strata_worker_register_sub(strata_worker *w, const char *name, strata_sub_fn fn,
                                          void *user, strata_callable *out);

/* From inside a task body: describe why the task is about to fail. */
STRATA_API void strata_task_set_error(const char *fmt, ...) STRATA_PRINTF_LIKE(1, 2);

/* ---- Runs ------------------------------------------------------------------- */

/* Builds one run's graph. Runs on the thread that called strata_worker_submit().
 * Returning non-zero fails the run: unstarted tasks are cancelled, started
 * ones drained, and this function's error is the run's error (unless a task
 * failed first). Return a strata_status; any other value counts as
 * STRATA_ETASK. The message is strata_error_message() as left by the function
 * (a strata call that failed inside it), if any. */
typedef int (*strata_orch_fn)(strata_orch *o, void *arg);

/* Admit a run (waits while pipeline_depth runs are live), call fn to build its
 * graph, and return once the graph is built; tasks may still be executing. */
STRATA_API int strata_worker_submit(strata_worker *w, strata_orch_fn fn, void *arg,
                                    strata_run **out);

/* Wait until the run is finished. STRATA_OK if it completed; the run's error
 * status if it failed (message in strata_error_message()); STRATA_ETIMEDOUT if
 * timeout_ns passed first (the run goes on). With STRATA_WAIT_FOREVER and
 * help_while_waiting set, the waiting thread may run single sub tasks (never
 * group members) of this run, or of runs ahead of it, that a sub worker has not
 * started yet. */
STRATA_API int strata_run_wait(strata_run *h, uint64_t timeout_ns);
/* Same with an absolute CLOCK_MONOTONIC deadline (UINT64_MAX = forever). */
STRATA_API int strata_run_wait_until(strata_run *h, uint64_t deadline_ns);

/* 1 if finished (completed or failed), 0 if not. */
STRATA_API int strata_run_done(const strata_run *h);

/* STRATA_OK while running or completed; the error status once failed. */
STRATA_API int strata_run_status(const strata_run *h);

/* The run's first error, naming level, worker and task; "" if none. Valid until release. */
STRATA_API const char *strata_run_error(const strata_run *h);

STRATA_API uint64_t strata_run_id(const strata_run *h);

/* Drop the caller's handle. NULL is a no-op. A live run is not stopped: it
 * still finishes, unobserved, and strata_worker_close still waits for it. */
STRATA_API void strata_run_release(strata_run *h);

/* submit + wait + release. Returns the run's status. */
STRATA_API int strata_worker_run(strata_worker *w, strata_orch_fn fn, void *arg);

/* ---- Inside an orchestration function ------------------------------------- */

/* strata_call_config and STRATA_CALL_DIAGNOSTICS (next-level task settings) are in types.h. */

/* Submit one task for any idle sub worker. An OUT tensor without memory gets
 * runtime memory; the new view is written back into args. */
STRATA_API int strata_orch_submit_sub(strata_orch *o, strata_callable fn, strata_task_args *args);

/* Submit one task for next-level worker `worker_id` (placement is explicit). */
STRATA_API int strata_orch_submit_next_level(strata_orch *o, strata_callable fn,
                                             strata_task_args *args, const strata_call_config *cfg,
                                             int worker_id);

/* One task executed by n members at once on n distinct sub workers; args[i]
 * is member i's arguments. One aggregate completion. */
STRATA_API int strata_orch_submit_sub_group(strata_orch *o, strata_callable fn,
                                            strata_task_args *args, int n);

/* One task executed by n members on next-level workers worker_ids[0..n)
 * (distinct), launched all together or not at all. */
STRATA_API int strata_orch_submit_next_level_group(strata_orch *o, strata_callable fn,
                                                   strata_task_args *args,
                                                   const strata_call_config *cfg,
                                                   const int *worker_ids, int n);

/* ---- The one-call form: a task and its arguments in one call --------------
 * strata_orch_sub(o, fn, items...) submits a sub task whose arguments are
 * the items (args.h), in order: tensors become the task's tensors 0, 1, ...,
 * scalars its scalars 0, 1, ..., STRATA_BYTES its payload. For example
 *     strata_orch_sub(o, gemm, STRATA_IN(a), STRATA_IN(b), STRATA_INOUT(c), STRATA_F64(alpha));
 * The items are copied into the task (no builder in between) and an OUT
 * tensor without memory gets its runtime view written back into the
 * caller's variable, as the argument-list form writes it into its builder.
 * Group members are separated by STRATA_NEXT_MEMBER (n = breaks + 1).
 * A bad item that C could not refuse (a hand-made strata_arg) fails with
 * STRATA_EINVAL naming its 0-based position. The macros need C11; the
 * *_items calls they expand to are the same from any language. */
STRATA_API int strata_orch_submit_sub_items(strata_orch *o, strata_callable fn,
                                            const strata_arg *items, size_t n);
STRATA_API int strata_orch_submit_next_level_items(strata_orch *o, strata_callable fn,
                                                   const strata_call_config *cfg, int worker_id,
                                                   const strata_arg *items, size_t n);
STRATA_API int strata_orch_submit_sub_group_items(strata_orch *o, strata_callable fn,
                                                  const strata_arg *items, size_t n);
STRATA_API int strata_orch_submit_next_level_group_items(strata_orch *o, strata_callable fn,
                                                         const strata_call_config *cfg,
                                                         const int *worker_ids,
                                                         const strata_arg *items, size_t n);

#ifndef __cplusplus
/* strata_orch_sub(o, fn, items...) */
#define strata_orch_sub(...) STRATA_ORCH_SUB_(__VA_ARGS__, STRATA_NEXT_MEMBER)
/* strata_orch_next_level(o, fn, cfg, worker_id, items...) */
#define strata_orch_next_level(...) STRATA_ORCH_NEXT_(__VA_ARGS__, STRATA_NEXT_MEMBER)
/* strata_orch_sub_group(o, fn, member 0 items..., STRATA_NEXT_MEMBER, member 1 items...) */
#define strata_orch_sub_group(...) STRATA_ORCH_SUB_GROUP_(__VA_ARGS__, STRATA_NEXT_MEMBER)
/* strata_orch_next_level_group(o, fn, cfg, worker_ids, member items...): worker_ids[m] runs member
 * m */
#define strata_orch_next_level_group(...) STRATA_ORCH_NEXT_GROUP_(__VA_ARGS__, STRATA_NEXT_MEMBER)

#define STRATA_ORCH_SUB_(o, fn, ...)                                                               \
    strata_orch_submit_sub_items((o), (fn), STRATA_ARGS_ITEMS_(__VA_ARGS__),                       \
                                 STRATA_ARGS_COUNT_(__VA_ARGS__))
#define STRATA_ORCH_NEXT_(o, fn, cfg, worker_id, ...)                                              \
    strata_orch_submit_next_level_items((o), (fn), (cfg), (worker_id),                             \
                                        STRATA_ARGS_ITEMS_(__VA_ARGS__),                           \
                                        STRATA_ARGS_COUNT_(__VA_ARGS__))
#define STRATA_ORCH_SUB_GROUP_(o, fn, ...)                                                         \
    strata_orch_submit_sub_group_items((o), (fn), STRATA_ARGS_ITEMS_(__VA_ARGS__),                 \
                                       STRATA_ARGS_COUNT_(__VA_ARGS__))
#define STRATA_ORCH_NEXT_GROUP_(o, fn, cfg, worker_ids, ...)                                       \
    strata_orch_submit_next_level_group_items((o), (fn), (cfg), (worker_ids),                      \
                                              STRATA_ARGS_ITEMS_(__VA_ARGS__),                     \
                                              STRATA_ARGS_COUNT_(__VA_ARGS__))
#endif

/* Runtime-owned intermediate from the heap ring of the current scope depth,
 * row-major. Reclaimed after the last task using it is finished. */
STRATA_API int strata_orch_alloc(strata_orch *o, int rank, const int64_t *shape, strata_dtype dtype,
                                 strata_tensor *out);

/* Scopes bound the lifetime of runtime memory: a task that owns runtime
 * memory (strata_orch_alloc, or an OUT tensor given without memory) keeps it
 * until the scope that submitted it ends and every task using it finished.
 * Other tasks are released as soon as they finish. scope_end never blocks.
 * At most STRATA_MAX_SCOPE_DEPTH scopes are open, the run's outer scope
 * included; scopes still open when the orchestration function returns are
 * closed then. */
STRATA_API int strata_orch_scope_begin(strata_orch *o);
STRATA_API int strata_orch_scope_end(strata_orch *o);

/* The id of the run being built. */
STRATA_API uint64_t strata_orch_run_id(const strata_orch *o);

/* Worker ids of next-level children in registration order. */
STRATA_API int strata_worker_next_level_count(const strata_worker *w);

/* How many distinct worker indices task bodies of w may read
 * (strata_task_view.worker): sub_workers, plus one for a thread that runs
 * sub tasks while it waits when help_while_waiting is on. Size per-worker
 * scratch by it. 0 for NULL. */
STRATA_API uint32_t strata_worker_sub_slots(const strata_worker *w);

/* ---- Child Workers (L4 and up) ------------------------------------------------
 * A Worker's next-level children may be Workers themselves: an L4 Worker whose
 * children are L3 Workers (each with its own chips and sub workers). A task for
 * a child Worker is one whole run on that child: the orchestration callable it
 * names builds the child's graph, and the task succeeds when that run
 * completes; a failed run fails the task with the child run's error, so the
 * message carries the whole path down (DESIGN §8). */

/* Runs where the child lives (its own process when hosted there), before the
 * child's strata_worker_init: add its chips and children, register its callables.
 * Non-zero fails strata_worker_add_child (THREAD) or the parent's init (PROCESS),
 * with strata_error_message() as left by the function. */
typedef int (*strata_child_setup_fn)(strata_worker *child, void *user);

typedef struct strata_child_config {
    strata_worker_config worker; /* the child's own config (its level label: the parent's - 1) */
    strata_host_mode host;       /* STRATA_HOST_THREAD: in this process; _PROCESS: its own */
    strata_child_setup_fn setup; /* may be NULL (a child with sub workers only) */
    void *setup_user;
    const char *name; /* label in messages; NULL: "L<level> child <worker id>" */
    int rank;         /* STRATA_HOST_MPI: the MPI rank (1 .. size - 1) hosting the child */
    uint64_t heartbeat_timeout_ns; /* STRATA_HOST_MPI: a child silent this long is declared
                                      dead (default 2 s; 0 at add_child means the default) */
} strata_child_config;

STRATA_API void strata_child_config_init(strata_child_config *cfg);

/* Before strata_worker_init of the parent: the child becomes next-level worker
 * *worker_id. An MPI child (host = STRATA_HOST_MPI, rank = r) is set up and
 * initialised on rank r by that rank's own strata_worker_init of the same
 * parent config (which never returns there: strata/mpi.h). A THREAD child is created and set up
 * here (a failing setup fails this call) and initialised at the parent's strata_worker_init; a
 * PROCESS child is forked at the parent's strata_worker_init, which fails if the child's setup or
 * init fails. The parent closes (and destroys) its children. */
STRATA_API int strata_worker_add_child(strata_worker *parent, const strata_child_config *cfg,
                                       int *worker_id);

/* A callable a child Worker runs as one whole run: fn(o, user) builds the run's
 * graph on the child (o is the child's). Before or after init; a PROCESS child
 * learns of a callable registered after init before the call returns. */
STRATA_API int strata_worker_register_orch(strata_worker *w, const char *name, strata_orch_fn fn,
                                           void *user, strata_callable *out);

/* In an orchestration function run for a next-level task of a parent: that
 * task's arguments (its host tensors are the parent's buffers, shared at the
 * same address; they may be handed to the child's own tasks as they are). NULL
 * in a run submitted directly, and outside an orchestration function. */
STRATA_API const strata_task_view *strata_orch_task_args(const strata_orch *o);

#ifdef __cplusplus
}
#endif
#endif /* STRATA_WORKER_H */
