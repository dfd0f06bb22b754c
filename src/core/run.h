/* core/run.h - runs: identity, phases, the completion fence, the first error,
 * FIFO admission with leases (DESIGN §5.4).
 *
 * Owns: the run record (which is also the public strata_run) and the
 * phase state machine; the caller's calls on it (strata_run_*) are
 * core/run_handle.c.
 * Must never: fail loudly on calls that come from the scheduler side
 * (task accounting on an unknown or finished run is ignored or recorded as the
 * run's error, never an abort).
 */
#ifndef STRATA_CORE_RUN_H
#define STRATA_CORE_RUN_H

#include <stdatomic.h>
#include <stdint.h>

#include "core/ready_queue.h"
#include "util/error.h"
#include "util/futex.h"
#include "util/lease.h"

typedef enum st_run_phase {
    ST_RUN_BUILDING = 1, /* the orchestration function is running; not yet the head */
    ST_RUN_PREPARED,     /* built, waiting to become the head */
    ST_RUN_EXECUTING,    /* the head: its tasks are dispatched (may still be building) */
    ST_RUN_COMPLETED,
    ST_RUN_FAILED
} st_run_phase;

const char *st_run_phase_name(uint32_t phase);

struct st_slot;
struct strata_worker;

/* The run record. Engine-lock protected except: `phase` (an event word read
 * by waiters without the lock; error fields are written before the terminal
 * phase is stored and read after it is observed) and `refs`. */
typedef struct strata_run {
    uint64_t id;
    st_event phase;                 /* st_run_phase; waiters park on it */
    _Atomic int caller_shares_core; /* a sub task went to a worker on the caller's CPU */
    _Atomic int refs;               /* the caller's handle + the engine's until retirement */
    _Atomic uint32_t help_state;    /* waiting threads inside a help attempt | retired bit
                                       (core/helping.c) */
    struct strata_worker *w;
    uint32_t spin_ns;       /* waiters spin this long before parking (the worker's setting) */
    int help_while_waiting; /* the worker's setting: waiters read it, not the worker, which
                               may be gone once the run retired */
    st_lease lease;
    int64_t active_tasks; /* slots of this run not yet consumed: the fence */
    uint64_t next_seq;    /* task numbers within the run */
    int submission_closed;
    int is_head;
    struct st_slot *live; /* live slots (intrusive list, for cancellation) */
    struct strata_run *fifo_next;
    /* Ready work of this run, partitioned by target. */
    st_ready_queue sub_q;
    st_ready_queue group_q;
    st_ready_queue *directed_q; /* one per next-level worker */
    int ndirected;
    /* Statistics (core/trace.c): counts always, times while tasks are timed. */
    uint64_t st_run, st_failed, st_not_run, st_ov_n, st_ov_sum, st_ov_max, st_crit;
    int st_timed;
    /* The first error. Last, and only its status is set when the record is
     * made (st_run_begin zeroes the fields above): a run that never fails
     * never touches its 512-byte message, which made an empty run ~20% dearer
     * when it was cleared. Kept in the record because recording an
     * out-of-memory failure must not need memory. */
    st_error error;
} st_run;

/* Record the run's error if it has none yet (first error wins, st_error).
 * Never fails and never allocates (a message that does not fit is cut and
 * marked; the context the caller puts first is kept). */
void st_run_record_error(st_run *r, int status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static inline int st_run_failed(const st_run *r) {
    return st_error_status(&r->error) != STRATA_OK;
}

static inline int st_run_terminal_phase(uint32_t p) {
    return p == ST_RUN_COMPLETED || p == ST_RUN_FAILED;
}

/* Drop one reference; frees the record at zero. */
void st_run_unref(st_run *r);

/* ---- the engine's calls on runs (run.c) ---- */
/* Admit a new run (waits for capacity). Returns with the lock held. */
int st_run_begin(struct strata_worker *w, st_run **out);
/* Close submission (ok) or fail it with the orchestration error. Lock held. */
void st_run_close_submission(struct strata_worker *w, st_run *r);
void st_run_fail_submission(struct strata_worker *w, st_run *r, int status, const char *msg);
/* A slot of r was consumed. Lock held. */
void st_run_task_consumed(struct strata_worker *w, st_run *r);
/* Terminal transition + retirement if the fence is reached. Lock held. */
void st_run_finish_if_ready(struct strata_worker *w, st_run *r);
/* Cancel every unstarted task of r. Lock held. */
void st_run_cancel_unstarted(struct strata_worker *w, st_run *r);
void st_run_link_slot(st_run *r, struct st_slot *s);
void st_run_unlink_slot(st_run *r, struct st_slot *s);

#endif
