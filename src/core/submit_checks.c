/* core/submit_checks.c - what a submit or strata_orch_alloc checks before it
 * takes the engine lock (DESIGN §5.1).
 *
 * Owns: the handle check (the building run, on its orchestration thread) and
 * the checks of a task's callable, targets and arguments: tags, shapes, views
 * inside their buffers, device memory only for its own chip, runtime memory
 * sizes that fit, no overlapping written arguments within a task or a group.
 * The callable check is static inline in core/orchestrator.h (out of line it
 * costs a submit a call).
 * Must never: take the engine lock or change any state: a check that fails
 * leaves the run as it was, with only the thread's error message set.
 */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "core/footprint.h"
#include "core/heap_ring.h"
#include "core/orchestrator.h"
#include "util/checked.h"
#include "util/error.h"
#include "util/view.h"

int st_orch_check(const strata_orch *o, const char *what) {
    if (!o)
        return st_fail(STRATA_EINVAL, "%s: orch is NULL", what);
    if (!o->run)
        return st_fail(
            STRATA_ESTATE,
            "%s: called outside an orchestration function (the strata_orch "
            "pointer is only valid while the function passed to strata_worker_submit runs)",
            what);
    if (!pthread_equal(o->thread, pthread_self()))
        return st_fail(STRATA_ESTATE,
                       "%s: called from a thread other than the one running the "
                       "orchestration function",
                       what);
    return STRATA_OK;
}

static int tag_writes(uint8_t tag) {
    return tag == STRATA_OUT || tag == STRATA_INOUT || tag == STRATA_OUT_EXISTING;
}

/* dtype, rank and shape of a view; its strides too unless the runtime will
 * provide memory and strides (an OUT tensor given without memory). */
static int check_view_shape(const strata_tensor *t, int with_strides, const char *what, int member,
                            uint32_t i) {
    if (t->rank < 1 || t->rank > STRATA_MAX_RANK)
        return st_fail(STRATA_EINVAL, "%s: member %d tensor %u: rank %u outside 1..%d", what,
                       member, i, t->rank, STRATA_MAX_RANK);
    if (t->dtype >= STRATA_DTYPE_COUNT)
        return st_fail(STRATA_EINVAL, "%s: member %d tensor %u: unknown dtype %u", what, member, i,
                       t->dtype);
    for (int k = 0; k < t->rank; k++) {
        if (t->shape[k] < 1)
            return st_fail(STRATA_EINVAL,
                           "%s: member %d tensor %u: dimension %d is %lld (must be >= 1)", what,
                           member, i, k, (long long)t->shape[k]);
        if (with_strides && t->strides[k] < 1)
            return st_fail(STRATA_EINVAL,
                           "%s: member %d tensor %u: stride %d is %lld (strides must be positive)",
                           what, member, i, k, (long long)t->strides[k]);
    }
    return STRATA_OK;
}

/* "[d0 x d1 x ...] F64" for messages. */
void st_describe_shape(const strata_tensor *t, char *buf, size_t n) {
    size_t used = 0;
    for (int k = 0; k < t->rank && used < n; k++)
        used += (size_t)snprintf(buf + used, n - used, "%s%lld", k ? " x " : "[",
                                 (long long)t->shape[k]);
    if (used < n)
        snprintf(buf + used, n - used, "] of %zu-byte elements",
                 strata_dtype_size((strata_dtype)t->dtype));
}

/* An OUT tensor given without memory gets numel * elem bytes of runtime
 * memory and row-major strides: both must fit in 64 bits. */
static int check_runtime_size(const strata_tensor *t, const char *what, int member, uint32_t i) {
    int64_t numel;
    uint64_t bytes;
    if (st_shape_numel(t->rank, t->shape, &numel) &&
        st_shape_bytes(t->rank, t->shape, strata_dtype_size((strata_dtype)t->dtype), &bytes) &&
        st_round_up_u64(bytes, ST_HEAP_ALIGN, &bytes))
        return STRATA_OK;
    char shape[160];
    st_describe_shape(t, shape, sizeof shape);
    return st_fail(STRATA_EINVAL,
                   "%s: member %d tensor %u: OUT tensor without memory of shape %s needs 2^64 "
                   "bytes or more of runtime memory",
                   what, member, i, shape);
}

static int check_tensor(const strata_tensor *t, uint8_t tag, int next_target, const char *what,
                        int member, uint32_t i) {
    if (tag > STRATA_NO_DEP)
        return st_fail(STRATA_EINVAL, "%s: member %d tensor %u: unknown tag %u", what, member, i,
                       tag);
    if (st_needs_memory(t, tag)) { /* the runtime provides memory */
        STRATA_TRY(check_view_shape(t, 0, what, member, i));
        return check_runtime_size(t, what, member, i);
    }
    STRATA_TRY(check_view_shape(t, 1, what, member, i));
    if (!t->base || t->ident.id == 0)
        return st_fail(STRATA_EINVAL,
                       "%s: member %d tensor %u has no buffer (only an OUT tensor may be "
                       "given without memory)",
                       what, member, i);
    uint64_t elem = strata_dtype_size((strata_dtype)t->dtype);
    uint64_t end;
    if (!st_view_end(t->offset, t->rank, t->shape, t->strides, elem, &end))
        return st_fail(STRATA_EINVAL,
                       "%s: member %d tensor %u: the view's extent does not fit in 64 bits "
                       "(outside its buffer of %llu bytes)",
                       what, member, i, (unsigned long long)t->buffer_bytes);
    if (end > t->buffer_bytes)
        return st_fail(STRATA_EINVAL,
                       "%s: member %d tensor %u: view ends at byte %llu, outside its buffer of "
                       "%llu bytes",
                       what, member, i, (unsigned long long)end,
                       (unsigned long long)t->buffer_bytes);
    if (t->mem == STRATA_MEM_DEVICE) {
        if (next_target < 0)
            return st_fail(STRATA_EINVAL,
                           "%s: member %d tensor %u is device memory of worker %d; sub tasks "
                           "take host memory only",
                           what, member, i, t->ident.owner);
        if (t->ident.owner != next_target)
            return st_fail(STRATA_EINVAL,
                           "%s: member %d tensor %u is device memory of worker %d, but the "
                           "task goes to worker %d",
                           what, member, i, t->ident.owner, next_target);
    }
    return STRATA_OK;
}

static int tracked_memory(const strata_task_args *a, uint32_t i) {
    return a->tags[i] != STRATA_NO_DEP && !st_needs_memory(&a->tensors[i], a->tags[i]);
}

/* 1 if argument i of a and argument j of b touch a common byte where either
 * writes. The tests run cheapest first: most pairs have no writer (a task
 * reading many tiles and writing one), and most of the rest differ in buffer;
 * only a pair that passes both pays for the footprints. */
static inline int args_conflict(const strata_task_args *a, uint32_t i, const strata_task_args *b,
                                uint32_t j) {
    if (!tag_writes(a->tags[i]) && !tag_writes(b->tags[j]))
        return 0;
    const strata_tensor *ti = &a->tensors[i], *tj = &b->tensors[j];
    if (memcmp(&ti->ident, &tj->ident, sizeof ti->ident) != 0)
        return 0;
    if (!tracked_memory(a, i) || !tracked_memory(b, j))
        return 0;
    return st_views_overlap(ti, tj);
}

/* Bit i set: argument i of a is tracked memory (tracked), and written (writers). */
static void tracked_masks(const strata_task_args *a, uint64_t *tracked, uint64_t *writers) {
    _Static_assert(STRATA_MAX_TENSORS <= 64, "one bit per tensor");
    uint64_t t = 0, wr = 0;
    for (uint32_t i = 0; i < a->ntensors; i++)
        if (tracked_memory(a, i)) {
            t |= 1ull << i;
            wr |= (uint64_t)tag_writes(a->tags[i]) << i;
        }
    *tracked = t;
    *writers = wr;
}

/* Up to this many tensors, a single task's arguments are checked pair by pair
 * (cheapest for the common 2-4); past it, each writer against the rest (a task
 * reading 16 tiles and writing one: 16 comparisons instead of 136). */
#define ST_PAIRWISE_MAX_TENSORS 8

/* Arguments of one task that overlap where either writes are rejected: within
 * a member, and across the members of a group (members run at the same time). */
/* Tensors i and j of member m overlap where one writes: the error, naming the
 * pair in index order. */
static int overlap_within(const char *what, int m, uint32_t i, uint32_t j) {
    return st_fail(STRATA_EINVAL,
                   "%s: member %d tensors %u and %u overlap and at least one is written; split "
                   "the task or use disjoint views",
                   what, m, i < j ? i : j, i < j ? j : i);
}

static int check_no_self_overlap(const strata_task_args *args, int m, const char *what) {
    const strata_task_args *a = &args[m];
    if (m == 0 && a->ntensors <= ST_PAIRWISE_MAX_TENSORS) {
        for (uint32_t i = 0; i < a->ntensors; i++)
            for (uint32_t j = i + 1; j < a->ntensors; j++)
                if (args_conflict(a, i, a, j))
                    return overlap_within(what, m, i, j);
        return STRATA_OK;
    }
    uint64_t tracked, writers;
    tracked_masks(a, &tracked, &writers);
    /* Within the member: each writer against every other tracked argument, a
     * pair of writers once (from its lower index). */
    for (uint64_t wl = writers; wl; wl &= wl - 1) {
        uint32_t i = (uint32_t)__builtin_ctzll(wl);
        uint64_t others = tracked & ~(1ull << i) & ~(writers & ((1ull << i) - 1));
        for (uint64_t jl = others; jl; jl &= jl - 1) {
            uint32_t j = (uint32_t)__builtin_ctzll(jl);
            if (args_conflict(a, i, a, j))
                return overlap_within(what, m, i, j);
        }
    }
    /* Across members: each pair with a writer on either side. */
    for (int p = 0; p < m; p++) {
        uint64_t ptracked, pwriters;
        tracked_masks(&args[p], &ptracked, &pwriters);
        for (uint64_t il = tracked; il; il &= il - 1) {
            uint32_t i = (uint32_t)__builtin_ctzll(il);
            for (uint64_t jl = (writers >> i) & 1 ? ptracked : pwriters; jl; jl &= jl - 1) {
                uint32_t j = (uint32_t)__builtin_ctzll(jl);
                if (args_conflict(a, i, &args[p], j))
                    return st_fail(STRATA_EINVAL,
                                   "%s: member %d tensor %u overlaps member %d tensor %u and at "
                                   "least one is written; group members run at the same time",
                                   what, m, i, p, j);
            }
        }
    }
    return STRATA_OK;
}

int st_check_args(strata_task_args *args, int n, const int *targets, const char *what) {
    for (int m = 0; m < n; m++) {
        strata_task_args *a = &args[m];
        if (a->invalid)
            return st_fail(STRATA_EINVAL,
                           "%s: member %d: its args are invalid (an earlier strata_args_add_* "
                           "call failed: too many arguments?)",
                           what, m);
        if (a->ntensors > STRATA_MAX_TENSORS || a->nscalars > STRATA_MAX_SCALARS ||
            a->payload_bytes > STRATA_MAX_PAYLOAD)
            return st_fail(STRATA_EINVAL,
                           "%s: member %d: args not initialised (call "
                           "strata_args_init)",
                           what, m);
        for (uint32_t i = 0; i < a->nscalars; i++)
            if (a->scalar_types[i] >= STRATA_SCALAR_TYPE_COUNT)
                return st_fail(STRATA_EINVAL, "%s: member %d scalar %u: unknown type %u", what, m,
                               i, a->scalar_types[i]);
        for (uint32_t i = 0; i < a->ntensors; i++)
            STRATA_TRY(
                check_tensor(&a->tensors[i], a->tags[i], targets ? targets[m] : -1, what, m, i));
        STRATA_TRY(check_no_self_overlap(args, m, what));
    }
    return STRATA_OK;
}

int st_check_targets(strata_worker *w, const int *ids, int n, const char *what) {
    if (!ids)
        return st_fail(STRATA_EINVAL, "%s: worker_ids is NULL", what);
    for (int m = 0; m < n; m++) {
        if (ids[m] < 0 || ids[m] >= w->nnext)
            return st_fail(STRATA_EINVAL,
                           "%s: member %d: no next-level worker %d (this worker has %d)", what, m,
                           ids[m], w->nnext);
        for (int k = 0; k < m; k++)
            if (ids[k] == ids[m])
                return st_fail(STRATA_EINVAL,
                               "%s: worker %d is named twice; group members need distinct "
                               "workers",
                               what, ids[m]);
    }
    return STRATA_OK;
}
