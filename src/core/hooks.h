/* core/hooks.h - the engine's test seams (DESIGN §10): setting a hook, and
 * firing one.
 *
 * Owns: the calls tests use (st_worker_set_hook, st_hook_slot) and st_hook,
 * which the engine calls at each named point (st_hook_point, core/engine.h,
 * where the hook table lives). Hooks run with the engine lock held, except
 * where st_hook_point says otherwise.
 * Must never: cost more than a load and a branch when no hook is set: st_hook
 * stays inline.
 */
#ifndef STRATA_CORE_HOOKS_H
#define STRATA_CORE_HOOKS_H

#include <stdint.h>

#include "core/engine.h"
#include "core/slot.h"

void st_worker_set_hook(strata_worker *w, st_hook_point at, st_hook_fn fn, void *ctx);

static inline void st_hook(strata_worker *w, st_hook_point at, uint64_t ref) {
    if (w->hooks[at])
        w->hooks[at](w, at, ref, w->hook_ctx[at]);
}

/* The slot a hook's reference names (NULL if stale). Hooks may also call
 * st_poison, st_run_record_error and st_sched_pass: the lock is held. */
st_slot *st_hook_slot(strata_worker *w, uint64_t ref);

#endif
