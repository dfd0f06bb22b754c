/* core/hooks.c - the test seams of the engine (DESIGN §10).
 *
 * Owns: setting a hook, the seam a sub worker thread calls before it claims a
 * task, and the slot a hook's task reference names.
 * Must never: be reached on a per-task path unless a test set the hook (the
 * engine checks the table inline, core/hooks.h; sub workers read once whether
 * the before-claim hook is set).
 */
#include "core/endpoint.h"
#include "core/engine.h"
#include "core/hooks.h"
#include "core/slot.h"

void st_worker_set_hook(strata_worker *w, st_hook_point at, st_hook_fn fn, void *ctx) {
    st_engine_lock(w);
    w->hooks[at] = fn;
    w->hook_ctx[at] = ctx;
    st_engine_unlock(w);
}

void st_endpoint_before_claim(st_endpoint *ep) {
    st_hook(ep->engine, ST_HOOK_SUB_BEFORE_CLAIM, 0);
}

st_slot *st_hook_slot(strata_worker *w, uint64_t ref) {
    return st_slots_get(&w->slots, ref);
}
