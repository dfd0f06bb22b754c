/* core/capacity.c - the capacity one submit takes: a task slot and heap-ring
 * space, waiting for them (DESIGN §5.1), and the admission checks made before
 * and after any wait.
 *
 * Owns: the capacity deadline of a submit (capacity_timeout_ns from its first
 * wait), the waits for a slot or heap space, and the checks that the run has
 * not failed and that runtime memory named by the arguments is live and of
 * this run.
 * Must never: build anything in the slot it takes, or return a slot after a
 * wait without repeating the admission checks (the lock was dropped: the run
 * may have failed, runtime memory may have been reclaimed).
 */
#include <stdatomic.h>

#include "core/engine.h"
#include "core/heap_ring.h"
#include "core/hooks.h"
#include "core/orchestrator.h"
#include "core/run.h"
#include "core/slot.h"
#include "util/clock.h"
#include "util/stamp.h"
#include "util/error.h"

/* The capacity deadline of one submit, started by its first wait. */
static uint64_t capacity_deadline(strata_worker *w, uint64_t *deadline) {
    if (*deadline == 0)
        *deadline = st_deadline_after(w->cfg.capacity_timeout_ns);
    return *deadline;
}

static st_slot *take_slot(strata_worker *w, uint64_t *deadline_io, const char *what) {
    for (;;) {
        st_slot *s = st_slots_take(&w->slots);
        if (s) {
            uint32_t used = w->slots.capacity - w->slots.nfree;
            if (used > w->stats.window_high_water)
                w->stats.window_high_water = used;
            return s;
        }
        uint64_t began = ST_TRACING(w) ? st_stamp() : 0;
        uint64_t deadline = capacity_deadline(w, deadline_io);
        /* Woken in batches (see consume(), release.c); re-check every millisecond anyway. */
        uint32_t seen = atomic_load(&w->space_ev.value);
        st_hook(w, ST_HOOK_CAPACITY_WAIT, 0);
        w->slot_waiters++;
        uint64_t slice = st_deadline_after(1000000);
        st_engine_wait(w, &w->space_ev, seen, slice < deadline ? slice : deadline);
        w->slot_waiters--;
        if (ST_TRACING(w))
            st_trace_wait(w, began, 0);
        if (w->slots.nfree == 0 && st_now_ns() >= deadline) {
            st_fail(STRATA_ECAPACITY,
                    "%s: task window full for %.1f s (task_window = %u): raise "
                    "strata_worker_config.task_window, or end scopes earlier so finished "
                    "tasks are released",
                    what, (double)w->cfg.capacity_timeout_ns / 1e9, w->cfg.task_window);
            return NULL;
        }
    }
}

static int heap_ring_of(const strata_orch *o) {
    return o->depth - 1 < ST_HEAP_RINGS - 1 ? o->depth - 1 : ST_HEAP_RINGS - 1;
}

static void note_heap_high_water(strata_worker *w, int ring) {
    const st_heap_ring *hr = &w->heap.rings[ring];
    uint64_t used = hr->wrapped ? w->heap.ring_bytes - hr->tail + hr->top : hr->top - hr->tail;
    if (used > w->stats.heap_ring_high_water_bytes[ring])
        w->stats.heap_ring_high_water_bytes[ring] = used;
}

static int take_heap(strata_worker *w, int ring, uint64_t bytes, uint64_t *deadline_io, void **addr,
                     uint64_t *ticket, const char *what) {
    if (st_heap_ring_bytes(&w->heap) == 0)
        return st_fail(STRATA_ECAPACITY,
                       "%s: runtime memory is disabled (heap_ring_bytes = 0): set "
                       "strata_worker_config.heap_ring_bytes",
                       what);
    for (;;) {
        int rc = st_heap_try_alloc(&w->heap, ring, bytes, addr, ticket);
        if (rc == STRATA_OK)
            note_heap_high_water(w, ring);
        if (rc != STRATA_ECAPACITY)
            return rc;
        uint64_t began = ST_TRACING(w) ? st_stamp() : 0;
        uint64_t deadline = capacity_deadline(w, deadline_io);
        uint32_t seen = atomic_load(&w->space_ev.value);
        st_hook(w, ST_HOOK_CAPACITY_WAIT, 0);
        w->heap_waiters++;
        int wrc = st_engine_wait(w, &w->space_ev, seen, deadline);
        w->heap_waiters--;
        if (ST_TRACING(w))
            st_trace_wait(w, began, 1);
        if (wrc < 0 && st_now_ns() >= deadline)
            return st_fail(STRATA_ECAPACITY,
                           "%s: heap ring %d exhausted after %.1f s: raise heap_ring_bytes (now "
                           "%llu bytes), or end scopes earlier so intermediates are reclaimed",
                           what, ring, (double)w->cfg.capacity_timeout_ns / 1e9,
                           (unsigned long long)w->cfg.heap_ring_bytes);
    }
}

/* Runtime memory is valid only inside the run (and scope) that created it:
 * refuse a tensor whose memory belongs to another run, or was already
 * reclaimed, before anything is taken (the run is left alone). Lock held. */
static int check_runtime_memory(strata_worker *w, st_run *r, const strata_task_args *args, int n,
                                const char *what) {
    for (int m = 0; m < n; m++)
        for (uint32_t i = 0; i < args[m].ntensors; i++) {
            const strata_tensor *t = &args[m].tensors[i];
            if (!st_is_runtime_id(t->ident.id) || st_needs_memory(t, args[m].tags[i]))
                continue;
            uint64_t holder = st_runtime_holder(w, t);
            st_slot *h = holder ? st_slots_get(&w->slots, holder) : NULL;
            if (!h)
                return st_fail(STRATA_ESTALE,
                               "%s: member %d tensor %u is runtime memory that was already "
                               "reclaimed (its scope ended and its last user finished)",
                               what, m, i);
            if (h->run != r)
                return st_fail(STRATA_EINVAL,
                               "%s: member %d tensor %u is runtime memory of run %llu; runtime "
                               "memory never crosses runs (use a strata_buffer)",
                               what, m, i, (unsigned long long)h->run->id);
        }
    return STRATA_OK;
}

static int fail_fast(st_run *r, const char *what) {
    if (!st_run_failed(r))
        return STRATA_OK;
    return st_fail(st_error_status(&r->error), "%s: %s", what, st_error_msg(&r->error));
}

/* What a submit checks under the lock before it takes anything. A capacity
 * wait drops the lock, and meanwhile the run may fail (its poisoned tasks are
 * then consumed and recycled: wiring would find no producer and add no edge,
 * so a task would run beside an earlier writer) and runtime memory the
 * arguments name may be reclaimed. So after any wait the checks are made
 * again, before the slot is built. */
static int admission_checks(strata_worker *w, st_run *r, const strata_task_args *args, int n,
                            const char *what) {
    STRATA_TRY(fail_fast(r, what));
    return args ? check_runtime_memory(w, r, args, n, what) : STRATA_OK;
}

/* Slot and heap space for one submit (lock held; waits drop it). On success
 * the run is still as admission_checks found it. */
st_slot *st_take_capacity(strata_orch *o, const strata_task_args *args, int n, uint64_t heap_bytes,
                          void **heap, uint64_t *ticket, int *rc_out, const char *what) {
    strata_worker *w = o->w;
    uint64_t deadline = 0; /* set by the first capacity wait, if any */
    *heap = NULL;
    int rc = admission_checks(w, o->run, args, n, what);
    if (rc == STRATA_OK && heap_bytes)
        rc = take_heap(w, heap_ring_of(o), heap_bytes, &deadline, heap, ticket, what);
    st_slot *s = rc ? NULL : take_slot(w, &deadline, what);
    if (!s && rc == STRATA_OK)
        rc = STRATA_ECAPACITY;
    if (s && deadline != 0) { /* the lock was dropped at least once */
        rc = admission_checks(w, o->run, args, n, what);
        if (rc != STRATA_OK) {
            st_slots_give_back(&w->slots, s);
            s = NULL;
        }
    }
    if (!s && *heap) {
        st_heap_release(&w->heap, *ticket);
        *heap = NULL;
    }
    *rc_out = rc;
    return s;
}
