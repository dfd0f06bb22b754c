/* core/orch_alloc.c - strata_orch_alloc: runtime memory a run allocates for
 * its later tasks (DESIGN §5.3).
 *
 * Owns: the allocation record (a slot of kind ALLOC that never runs, held by
 * its scope) and the writer entry that makes later tasks depend on it.
 * Must never: hand out memory that outlives its scope's last user, or a view
 * whose size was not checked to fit.
 */
#include "core/engine.h"
#include "core/footprint.h"
#include "core/heap_ring.h"
#include "core/orchestrator.h"
#include "core/release.h"
#include "core/run.h"
#include "core/slot.h"
#include "core/tensormap.h"
#include "util/assert.h"
#include "util/error.h"
#include "util/view.h"

int strata_orch_alloc(strata_orch *o, int rank, const int64_t *shape, strata_dtype dtype,
                      strata_tensor *out) {
    const char *what = "strata_orch_alloc";
    STRATA_TRY(st_orch_check(o, what));
    if (!shape || !out)
        return st_fail(STRATA_EINVAL, "%s: shape and out must not be NULL", what);
    if (rank < 1 || rank > STRATA_MAX_RANK)
        return st_fail(STRATA_EINVAL, "%s: rank %d outside 1..%d", what, rank, STRATA_MAX_RANK);
    if ((unsigned)dtype >= STRATA_DTYPE_COUNT)
        return st_fail(STRATA_EINVAL, "%s: unknown dtype %d", what, (int)dtype);
    strata_tensor t = {0};
    t.rank = (uint8_t)rank;
    t.dtype = (uint8_t)dtype;
    for (int k = 0; k < rank; k++) {
        if (shape[k] < 1)
            return st_fail(STRATA_EINVAL, "%s: dimension %d is %lld (must be >= 1)", what, k,
                           (long long)shape[k]);
        t.shape[k] = shape[k];
    }
    int64_t numel;
    uint64_t bytes;
    if (!st_shape_numel(rank, shape, &numel) ||
        !st_shape_bytes(rank, shape, strata_dtype_size(dtype), &bytes)) {
        char desc[160];
        st_describe_shape(&t, desc, sizeof desc);
        return st_fail(STRATA_EINVAL, "%s: shape %s needs 2^64 bytes or more", what, desc);
    }

    strata_worker *w = o->w;
    void *base = NULL;
    uint64_t ticket = 0;
    int rc;
    st_engine_lock(w);
    st_slot *s = st_take_capacity(o, NULL, 0, bytes, &base, &ticket, &rc, what);
    if (!s) {
        st_engine_unlock(w);
        return rc;
    }
    st_init_slot(o, s, ST_SLOT_ALLOC, -1, 1);
    st_alloc_member_arrays(s, 1, NULL); /* inline storage: cannot fail */
    s->args->ntensors = 0;
    s->args->nscalars = 0;
    s->args->payload_bytes = 0;
    s->has_heap = 1;
    s->heap_ticket = ticket;
    st_heap_set_owner(&w->heap, ticket, st_ref_of(s));
    st_view_memory mem = {base, bytes, {st_runtime_id(ticket, 0), 1, -1}, STRATA_MEM_HOST};
    rc = st_view_build(&mem, 0, dtype, rank, shape, NULL, what, &t);
    ST_ASSERT(rc == STRATA_OK, "a checked runtime view failed to build");
    rc = st_hold_in_scope(o, s);
    st_footprint fp;
    st_footprint_whole(bytes, &fp);
    if (rc == STRATA_OK)
        rc = st_tmap_insert_writer(&w->tmap, &t.ident, &fp, st_ref_of(s), ST_TMAP_WHOLE);
    st_slot_transition(s, ST_T_ALLOC_DONE);
    s->fanout_released = 1; /* the terminal self release of a slot that never runs */
    if (rc != STRATA_OK) {
        st_fail_prefix(rc, what); /* the allocation said what and how big */
        st_run_record_error(o->run, rc, "run %llu: %s", (unsigned long long)o->run->id,
                            strata_error_message());
        if (!s->scope_ref)
            st_release_ref(w, s); /* not held by a scope: reclaim now */
    } else {
        *out = t;
    }
    st_engine_unlock(w);
    return rc;
}
