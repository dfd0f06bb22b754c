/* core/runtime_memory.c - runtime memory for OUT tensors given without memory
 * (DESIGN §5.3).
 *
 * Owns: carving a task's runtime memory (one heap-ring allocation) into
 * 1 KiB-aligned pieces, one view per such tensor, written back to the
 * caller's arguments so later tasks can name them. Its size, computed on
 * every submit, is static inline in core/orchestrator.h (its runtime memory
 * section): out of line it costs a submit a call.
 * Must never: take heap space itself (capacity.c does) or size a piece whose
 * bytes were not checked to fit in 64 bits (submit_checks.c does).
 */
#include "core/heap_ring.h"
#include "core/orchestrator.h"
#include "core/slot.h"
#include "util/assert.h"
#include "util/view.h"

_Static_assert((STRATA_MAX_TENSORS * STRATA_MAX_GROUP) <= (1 << ST_RUNTIME_PIECE_BITS),
               "a piece's index within its task's allocation fits its buffer identity");

/* Point every memory-less OUT tensor of s into `base` (the heap allocation of
 * s->heap_ticket), name each piece after that allocation, and write the new
 * views back into the caller's args so later tasks can use them. */
void st_carve_out_memory(strata_worker *w, st_slot *s, strata_task_args *user_args, char *base) {
    uint64_t off = 0;
    uint32_t piece = 0;
    st_heap_set_owner(&w->heap, s->heap_ticket, st_ref_of(s));
    for (int m = 0; m < s->nmembers; m++)
        for (uint32_t i = 0; i < s->args[m].ntensors; i++) {
            strata_tensor *t = &s->args[m].tensors[i];
            if (!st_needs_memory(t, s->args[m].tags[i]))
                continue;
            uint64_t piece_bytes = st_out_piece_bytes(t);
            st_view_memory mem = {base + off,
                                  st_out_bytes(t),
                                  {st_runtime_id(s->heap_ticket, piece++), 1, -1},
                                  STRATA_MEM_HOST};
            int rc = st_view_build(&mem, 0, (strata_dtype)t->dtype, t->rank, t->shape, NULL,
                                   "runtime memory", t);
            ST_ASSERT(rc == STRATA_OK, "a checked runtime view failed to build");
            (void)rc;
            user_args[m].tensors[i] = *t;
            off += piece_bytes;
        }
}
