/* core/scope.c - scopes of the building run (DESIGN §5.3) and the run an
 * orchestration handle builds.
 *
 * Owns: the scope stack of strata_orch (the run's outer scope and the ones
 * the function opens) and the references scopes hold: only on tasks that own
 * runtime memory, to keep it alive for later tasks of the scope.
 * Must never: drop a scope's references before the scope ends, or let the
 * function end the run's outer scope (strata does, when the function returns).
 */
#include "core/engine.h"
#include "core/orchestrator.h"
#include "core/release.h"
#include "core/scheduler.h"
#include "core/slot.h"
#include "util/alloc.h"
#include "util/assert.h"
#include "util/error.h"
#include "util/growable.h"

/* The slot is owned by the run from here on; a scope holds one reference. */
int st_hold_in_scope(strata_orch *o, st_slot *s) {
    if (o->nscope_refs == o->cap_scope_refs) {
        uint64_t *nv = st_grow(o->scope_refs, &o->cap_scope_refs, o->nscope_refs + 1, sizeof *nv,
                               256, NULL, "the scope's task list");
        if (!nv)
            return STRATA_ENOMEM;
        o->scope_refs = nv;
    }
    o->scope_refs[o->nscope_refs++] = st_ref_of(s);
    s->scope_ref = 1;
    s->fanout_total = 1;
    return STRATA_OK;
}

int strata_orch_scope_begin(strata_orch *o) {
    STRATA_TRY(st_orch_check(o, "strata_orch_scope_begin"));
    if (o->depth >= STRATA_MAX_SCOPE_DEPTH)
        return st_fail(STRATA_ECAPACITY,
                       "strata_orch_scope_begin: %d scopes already open (the limit, "
                       "STRATA_MAX_SCOPE_DEPTH, counts the run's outer scope)",
                       o->depth);
    o->frame_start[o->depth++] = o->nscope_refs;
    return STRATA_OK;
}

/* Drop the references of scopes deeper than `depth` (lock held). */
void st_orch_close_scopes_to(strata_orch *o, int depth) {
    strata_worker *w = o->w;
    while (o->depth > depth) {
        uint32_t start = o->frame_start[--o->depth];
        for (uint32_t i = start; i < o->nscope_refs; i++) {
            st_slot *s = st_slots_get(&w->slots, o->scope_refs[i]);
            ST_ASSERT(s != NULL, "a scope-held task vanished");
            if (s) {
                s->scope_ref = 0;
                st_release_ref(w, s);
            }
        }
        o->nscope_refs = start;
    }
}

int strata_orch_scope_end(strata_orch *o) {
    STRATA_TRY(st_orch_check(o, "strata_orch_scope_end"));
    if (o->depth <= 1)
        return st_fail(STRATA_ESTATE, "strata_orch_scope_end: no scope is open (the run's outer "
                                      "scope is closed by strata itself)");
    st_engine_lock(o->w);
    st_orch_close_scopes_to(o, o->depth - 1);
    st_sched_pass(o->w);
    st_engine_unlock(o->w);
    return STRATA_OK;
}

uint64_t strata_orch_run_id(const strata_orch *o) {
    return o && o->run ? o->run->id : 0;
}
