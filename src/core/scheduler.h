/* core/scheduler.h - the scheduler pass and the scheduler thread.
 *
 * Owns: st_sched_pass, the one step every thread acting as the scheduler runs
 * under the engine lock (drain the completions, then dispatch the head run's
 * ready work), and starting and stopping the scheduler thread (scheduler.c).
 * Must never: be called without the engine lock held (the pass), or by an
 * endpoint (endpoints hand completions to st_endpoint_complete, which runs
 * the pass when it may).
 */
#ifndef STRATA_CORE_SCHEDULER_H
#define STRATA_CORE_SCHEDULER_H

#include "core/dispatch.h"
#include "core/release.h"
#include "strata/worker.h"

/* One pass: drain completions, dispatch ready work. Lock held. Inline: it is
 * on the path of every completion (st_engine_kick) and every submit. */
static inline void st_sched_pass(strata_worker *w) {
    st_drain_completions(w);
    /* Retiring a run inside the drain may have made the next one head. */
    st_dispatch_ready(w);
}

int st_sched_start(strata_worker *w);
void st_sched_stop(strata_worker *w);

#endif
