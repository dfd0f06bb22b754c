/* core/helping.c - a thread waiting for a run runs that run's sub tasks.
 *
 * Owns: the waiting loop of an unbounded strata_run_wait() that, while it
 * spins, takes lendable sub tasks a sub worker has not started yet (the
 * endpoint's lend op) and runs them itself; and the handshake that keeps the
 * worker alive while such a thread still looks at its sub workers.
 * Must never: take a task while the waited run is finished (a task of a later
 * run is given back), help from inside a task body or an orchestration
 * function, or touch the worker once the run retired and it left.
 *
 * Why: a parked sub worker needs microseconds to wake, and on a small machine
 * it may wake on the waiter's own core and wait for it. The waiter is idle
 * and hot; running the task itself turns a hand-off into a call (libgomp's
 * taskwait does the same).
 *
 * The handshake. r->help_state counts threads inside a help attempt on r, and
 * its ST_HELP_RETIRED bit is set once by retirement (run.c), which also counts
 * the run in w->lingering_helpers if a helper was inside. A helper only enters
 * while the bit is clear, so each helper inside was seen by retirement; the
 * last one to leave after it uncounts the run, as its last access to the
 * worker. strata_worker_close polls lingering_helpers down to zero before it
 * stops the sub workers (a helper of a retired run is between two checks,
 * never inside a task of it), so the worker and its endpoints outlive every
 * helper. A helper enters once per spell of spinning: a per-check handshake
 * would bounce the run record's cache line against the scheduler.
 *
 * The worker index. A task body reads its worker's index (strata_task_view):
 * a sub worker's, or nsubs for a helper. So that no two bodies running at
 * once share one, only the thread holding w->helper_slot helps; it takes the
 * slot for its spell of spinning (a second waiter spins without helping,
 * trying for the slot, meanwhile) and gives it back before it parks or leaves.
 */
#include <sched.h>

#include "core/endpoint.h"
#include "core/engine.h"
#include "core/helping.h"
#include "util/clock.h"
#include "util/futex.h"
#include "util/thread_role.h"

/* Relax hints between yields once the first burst is over (as util/futex.c). */
#define HELP_SPIN_BURST 32
#define HELP_YIELD_MASK 3

/* Only a thread that serves no worker helps: not a sub worker or chip
 * endpoint thread (they have their own work), and not a thread already
 * running a lent task (help_once marks it while the task runs). */
int st_help_allowed_here(const st_run *r) {
    return r->help_while_waiting && st_thread_served() == NULL;
}

/* Enter a help attempt on r: 0 if r retired (the worker may be gone). */
static int help_enter(st_run *r) {
    uint32_t v = atomic_load(&r->help_state);
    do {
        if (v & ST_HELP_RETIRED)
            return 0;
    } while (!atomic_compare_exchange_weak(&r->help_state, &v, v + 1));
    return 1;
}

/* Leave; after this the worker may be gone. */
static void help_exit(st_run *r) {
    strata_worker *w = r->w;
    if (atomic_fetch_sub(&r->help_state, 1) == (ST_HELP_RETIRED | 1))
        atomic_fetch_sub(&w->lingering_helpers, 1); /* last access: close polls this */
}

/* One pass over the sub workers; 1 if a task ran on this thread. */
static int help_once(strata_worker *w, uint64_t run_id) {
    for (int i = 0; i < w->nsubs; i++) {
        st_endpoint *ep = w->subs[i].ep;
        if (!ep->ops->lend)
            continue;
        st_thread_serve(w); /* a lent task body must not wait on w, nor help */
        int ran = ep->ops->lend(ep, run_id, (uint32_t)w->nsubs);
        st_thread_serve(NULL); /* only a thread that served no worker got here */
        if (ran)
            return 1;
    }
    return 0;
}

/* 1 if this thread now holds w->helper_slot; a load first keeps a waiter
 * that does not hold it from bouncing the line against the one that does. */
static int take_helper_slot(strata_worker *w) {
    return !atomic_load_explicit(&w->helper_slot, memory_order_relaxed) &&
           !atomic_exchange_explicit(&w->helper_slot, 1, memory_order_acquire);
}

void st_wait_helping(st_run *r, uint32_t phase) {
    if (!help_enter(r))
        return; /* retired: the phase has moved on */
    strata_worker *w = r->w;
    int helper = take_helper_slot(w);
    int yield_early = atomic_load_explicit(&r->caller_shares_core, memory_order_relaxed);
    uint64_t spin_end = st_now_ns() + r->spin_ns;
    unsigned n = 1;
    int park = 0;
    while (atomic_load_explicit(&r->phase.value, memory_order_acquire) == phase) {
        if (!helper)
            helper = take_helper_slot(w); /* another waiter may have left meanwhile */
        if (helper && help_once(w, r->id)) {
            spin_end = st_now_ns() + r->spin_ns; /* more may follow: keep looking */
            n = 1;
            continue;
        }
        st_cpu_relax();
        n++;
        if ((!yield_early && n < HELP_SPIN_BURST) || (n & HELP_YIELD_MASK) != 0)
            continue;
        if (st_now_ns() >= spin_end) {
            park = 1; /* nothing to take for a while */
            break;
        }
        sched_yield();
    }
    if (helper)
        atomic_store_explicit(&w->helper_slot, 0, memory_order_release);
    help_exit(r);
    if (park)
        st_event_wait(&r->phase, phase, 0, UINT64_MAX);
}
