/* core/submit_items.c - the one-call submit form: strata_orch_submit_*_items
 * (and the strata_orch_sub / _next_level / _group macros of worker.h that
 * expand to them).
 *
 * Owns: turning a call's items into the members' arguments, submitting them
 * as the argument-list form does (st_submit), and writing runtime views back
 * into the caller's OUT tensors.
 * Must never: keep an item past the call, or zero a builder: a single task's
 * arguments are built in place on this frame, header and used entries only
 * (its 8.5 KiB are never touched past what the items fill); a group's come
 * from the heap.
 */
#include "core/arg_items.h"
#include "core/orchestrator.h"
#include "util/alloc.h"
#include "util/error.h"

/* A single task: its builder on this frame, header and used entries only.
 * Inlined into each caller: the per-task path is one call shorter. */
static inline __attribute__((always_inline)) int
submit_single(strata_orch *o, st_slot_kind kind, strata_callable fn, const int *targets,
              const strata_call_config *cfg, const strata_arg *items, size_t n, const char *what) {
    if (n && !items)
        return st_fail(STRATA_EINVAL, "%s: items is NULL (%zu items)", what, n);
    strata_task_args a;
    a.ntensors = 0;
    a.nscalars = 0;
    a.invalid = 0;
    a.payload_bytes = 0;
    int write_back = 0;
    for (size_t i = 0; i < n; i++) {
        STRATA_TRY(st_add_item(&a, &items[i], i, what));
        write_back |=
            items[i].kind == STRATA_ARG_TENSOR && st_needs_memory(items[i].v.tensor, items[i].tag);
    }
    int rc = st_submit(o, kind, fn, &a, 1, targets, cfg, what);
    if (write_back)
        st_items_write_back(&a, 1, items, n);
    return rc;
}

/* A group: its members' builders from the heap (n of them would not belong
 * on a stack). */
static int submit_group(strata_orch *o, st_slot_kind kind, strata_callable fn, const int *targets,
                        const strata_call_config *cfg, const strata_arg *items, size_t n,
                        const char *what) {
    int members = st_item_members(items, n, 1, what);
    if (members < 0)
        return members;
    strata_task_args *args = st_malloc(sizeof *args * (size_t)members);
    if (!args)
        return st_fail_nomem("the group's arguments", sizeof *args * (size_t)members);
    int write_back;
    int rc = st_items_to_args(args, members, items, n, &write_back, what);
    if (rc == STRATA_OK) {
        rc = st_submit(o, kind, fn, args, members, targets, cfg, what);
        if (write_back)
            st_items_write_back(args, members, items, n);
    }
    st_free(args);
    return rc;
}

int strata_orch_submit_sub_items(strata_orch *o, strata_callable fn, const strata_arg *items,
                                 size_t n) {
    return submit_single(o, ST_SLOT_SUB, fn, NULL, NULL, items, n, "strata_orch_sub");
}

int strata_orch_submit_next_level_items(strata_orch *o, strata_callable fn,
                                        const strata_call_config *cfg, int worker_id,
                                        const strata_arg *items, size_t n) {
    return submit_single(o, ST_SLOT_NEXT, fn, &worker_id, cfg, items, n, "strata_orch_next_level");
}

int strata_orch_submit_sub_group_items(strata_orch *o, strata_callable fn, const strata_arg *items,
                                       size_t n) {
    return submit_group(o, ST_SLOT_SUB, fn, NULL, NULL, items, n, "strata_orch_sub_group");
}

int strata_orch_submit_next_level_group_items(strata_orch *o, strata_callable fn,
                                              const strata_call_config *cfg, const int *worker_ids,
                                              const strata_arg *items, size_t n) {
    return submit_group(o, ST_SLOT_NEXT, fn, worker_ids, cfg, items, n,
                        "strata_orch_next_level_group");
}
