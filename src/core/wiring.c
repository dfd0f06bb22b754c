/* core/wiring.c - a submitted task's dependencies (DESIGN §5.2): inference
 * through the tensor map, the edges to its producers, and publication.
 *
 * Owns: the two calls the tensor map makes back: the footprint of one of its
 * entries (st_orch_fp_of) and collecting a producer into the submit's list
 * (st_add_dep). The steps each submit runs, inference, wiring (an edge is one
 * transaction on both ends) and publication (BUILDING -> READY | PENDING, or
 * the poisoned path when a producer failed), are static inline in
 * core/orchestrator.h, in its wiring section: out of line they cost a submit
 * a call each.
 * Must never: wire a dependency across runs (the map holds only the building
 * run's entries), wait on the task itself, or leave a slot BUILDING.
 */
#include <string.h>

#include "core/footprint.h"
#include "core/orchestrator.h"
#include "core/slot.h"
#include "util/alloc.h"
#include "util/assert.h"
#include "util/error.h"
#include "util/growable.h"

void st_orch_fp_of(void *ctx, uint64_t ref, uint32_t argpos, st_footprint *out) {
    strata_worker *w = ctx;
    st_slot *s = st_slots_get(&w->slots, ref);
    ST_ASSERT(s != NULL, "footprint asked for a task that is gone");
    if (!s || (argpos >> 8) >= s->nmembers || (argpos & 0xff) >= s->args[argpos >> 8].ntensors) {
        st_footprint_whole(UINT64_MAX, out); /* overlaps everything, covered by nothing */
        return;
    }
    st_footprint_of(&s->args[argpos >> 8].tensors[argpos & 0xff], out);
}

int st_add_dep(void *vctx, uint64_t ref) {
    st_dep_ctx *d = vctx;
    st_slot *p = st_slots_get(&d->w->slots, ref);
    if (!p || p == d->self || p->visit_stamp == d->stamp)
        return 0;
    p->visit_stamp = d->stamp;
    if (d->n == d->cap) {
        uint64_t *nv = st_grow(d->refs, &d->cap, d->n + 1, sizeof *nv, 64, d->inline_buf,
                               "the task's producer list");
        if (!nv)
            return STRATA_ENOMEM;
        d->refs = nv;
    }
    d->refs[d->n++] = ref;
    return 0;
}
