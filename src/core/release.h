/* core/release.h - what follows a task's end: completions, release, poison,
 * consumption, ready routing (release.c).
 *
 * Owns: the calls the orchestrator, runs, the pass and hooks make into
 * release.c.
 * Must never: be called without the engine lock held.
 */
#ifndef STRATA_CORE_RELEASE_H
#define STRATA_CORE_RELEASE_H

#include "core/slot.h"
#include "strata/worker.h"

/* Handle every completion pushed so far, in arrival order. */
void st_drain_completions(strata_worker *w);
/* Route a READY task to its run's queue. */
void st_enqueue_ready(strata_worker *w, st_slot *s);
/* Release one reference on s; consumes it when the last one goes. */
void st_release_ref(strata_worker *w, st_slot *s);
/* Fail s (if not started) and everything downstream of it with `status`
 * (a producer failed: STRATA_ETASK; cancellation: STRATA_ECANCELED). */
void st_poison(strata_worker *w, st_slot *s, int status);
/* Fail an unstarted task (claimed already) and drop its references. */
void st_settle_failed_unstarted(strata_worker *w, st_slot *s);

#endif
