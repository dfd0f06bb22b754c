/* core/scheduler.c - the scheduler thread (DESIGN §5.5); the pass itself is
 * st_sched_pass (core/scheduler.h).
 *
 * Owns: starting and stopping the scheduler thread, and its loop: polling
 * poll-driven endpoints while they have work, sleeping otherwise.
 * Must never: run a pass without the engine lock, or spin while nothing is
 * out on a poll-driven endpoint.
 *
 * The scheduler is a role, not only a thread: a pass runs under the engine
 * lock, and any thread that finds completions pending and the lock free runs
 * one (st_engine_kick). A sub worker that finishes a task usually processes
 * its own completion and picks up the next ready task without any thread
 * hand-off. The scheduler thread drives poll-based endpoints and otherwise
 * sleeps. Passes are mutually exclusive, so "only the scheduler dispatches"
 * holds for whichever thread runs the pass.
 */
#include <pthread.h>
#include <stdatomic.h>

#include "core/endpoint.h"
#include "core/engine.h"
#include "core/scheduler.h"
#include "util/clock.h"
#include "util/error.h"
#include "util/futex.h"

static int poll_endpoints(strata_worker *w) {
    int events = 0;
    for (int i = 0; i < w->nnext; i++) {
        st_endpoint *ep = w->next[i].ep;
        if (ep->ops->progress)
            events += ep->ops->progress(ep);
    }
    return events;
}

static int has_poll_endpoints(strata_worker *w) {
    for (int i = 0; i < w->nnext; i++)
        if (w->next[i].ep->ops->progress)
            return 1;
    return 0;
}

static void *sched_main(void *arg) {
    strata_worker *w = arg;
    const int polling = has_poll_endpoints(w);
    uint32_t seen = atomic_load(&w->sched_ev.value);
    while (!atomic_load(&w->stopping)) {
        if (polling && atomic_load(&w->poll_inflight) > 0) {
            /* Work is out on poll-driven children: poll; when a round finds
             * nothing, wait a little (or until woken) before the next one. */
            if (poll_endpoints(w) == 0)
                st_event_wait(&w->sched_ev, seen, w->cfg.spin_ns, st_deadline_after(200000));
        } else {
            /* Nothing to poll: sleep until a dispatch or stop bumps the word. */
            st_event_wait(&w->sched_ev, seen, 0, UINT64_MAX);
        }
        seen = atomic_load(&w->sched_ev.value);
        st_engine_kick(w);
    }
    return NULL;
}

int st_sched_start(strata_worker *w) {
    atomic_store(&w->stopping, 0);
    if (pthread_create(&w->sched_thread, NULL, sched_main, w) != 0)
        return st_fail(STRATA_ENOMEM, "could not start the scheduler thread");
    w->sched_started = 1;
    return STRATA_OK;
}

void st_sched_stop(strata_worker *w) {
    if (!w->sched_started)
        return;
    atomic_store(&w->stopping, 1);
    st_event_bump(&w->sched_ev);
    pthread_join(w->sched_thread, NULL);
    w->sched_started = 0;
}
