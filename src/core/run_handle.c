/* core/run_handle.c - the run handle: waiting for a run, its outcome, and
 * releasing it (strata_run_*, strata_worker_run).
 *
 * Owns: the caller's side of a run record (strata_run): waits (spinning,
 * parking, or helping with the run's sub tasks while unbounded), the status
 * and message of a finished run, and the caller's reference.
 * Must never: wait where the wait could not end (from a task body of the
 * run's worker, while the run is live), help during a bounded wait (a task
 * could outlast the deadline), or free a run record the caller still holds
 * (a run handle is one of the record's two references, the engine's the
 * other, so releasing a live run frees nothing before it retires).
 */
#include <stdatomic.h>
#include <stdint.h>

#include "core/helping.h"
#include "core/run.h"
#include "core/worker.h"
#include "util/clock.h"
#include "util/error.h"
#include "util/futex.h"

static uint32_t phase_of(const strata_run *h) {
    return atomic_load_explicit(&((strata_run *)h)->phase.value, memory_order_acquire);
}

static int run_result(const strata_run *h) {
    return phase_of(h) == ST_RUN_FAILED ? st_error_raise(&h->error) : STRATA_OK;
}

int strata_run_wait_until(strata_run *h, uint64_t deadline_ns) {
    if (!h)
        return st_fail(STRATA_EINVAL, "strata_run_wait: handle is NULL");
    if (st_in_task_of(h->w) && !st_run_terminal_phase(phase_of(h)))
        return st_refuse_in_task("strata_run_wait",
                                 "only the oldest run executes, so this run cannot end before "
                                 "this task does");
    uint64_t start = st_now_ns();
    /* Only an unbounded wait helps: a task it takes could outlast a deadline. */
    int help = deadline_ns == UINT64_MAX && !st_thread_orchestrating() && st_help_allowed_here(h);
    for (;;) {
        uint32_t p = phase_of(h);
        if (st_run_terminal_phase(p))
            return run_result(h);
        if (help) {
            st_wait_helping(h, p);
            continue;
        }
        /* Spinning would only hold the core the run's worker needs. */
        int yield = atomic_load_explicit(&h->caller_shares_core, memory_order_relaxed);
        int rc = yield ? st_event_wait_yielding(&h->phase, p, h->spin_ns, deadline_ns)
                       : st_event_wait(&h->phase, p, h->spin_ns, deadline_ns);
        if (rc < 0 && !st_run_terminal_phase(phase_of(h)))
            return st_fail(STRATA_ETIMEDOUT,
                           "strata_run_wait: run %llu still %s at the deadline (waited %.3f s; "
                           "the run goes on)",
                           (unsigned long long)h->id, st_run_phase_name(phase_of(h)),
                           (double)(st_now_ns() - start) / 1e9);
    }
}

int strata_run_wait(strata_run *h, uint64_t timeout_ns) {
    return strata_run_wait_until(h, st_deadline_after(timeout_ns));
}

int strata_run_done(const strata_run *h) {
    return h && st_run_terminal_phase(phase_of(h));
}

int strata_run_status(const strata_run *h) {
    if (!h)
        return st_fail(STRATA_EINVAL, "strata_run_status: handle is NULL");
    return phase_of(h) == ST_RUN_FAILED ? st_error_status(&h->error) : STRATA_OK;
}

const char *strata_run_error(const strata_run *h) {
    return h && phase_of(h) == ST_RUN_FAILED ? st_error_msg(&h->error) : "";
}

uint64_t strata_run_id(const strata_run *h) {
    return h ? h->id : 0;
}

void strata_run_release(strata_run *h) {
    if (h)
        st_run_unref(h); /* a live run keeps the engine's reference until it retires */
}

int strata_worker_run(strata_worker *w, strata_orch_fn fn, void *arg) {
    strata_run *h;
    STRATA_TRY(strata_worker_submit(w, fn, arg, &h));
    int rc = strata_run_wait(h, STRATA_WAIT_FOREVER);
    strata_run_release(h);
    return rc;
}
