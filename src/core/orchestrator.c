/* core/orchestrator.c - building a run's graph: submit, dependency
 * inference, runtime allocations and scopes (DESIGN §5.1-§5.3).
 *
 * Owns: everything an orchestration function calls (strata_orch_submit_*,
 * strata_orch_alloc, strata_orch_scope_*).
 * Must never: run outside the orchestration function of the building run,
 * wire a dependency across runs, or leave a slot without an owner when a
 * submit fails part-way.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/engine.h"
#include "core/footprint.h"
#include "core/hooks.h"
#include "core/release.h"
#include "core/scheduler.h"
#include "core/worker.h"
#include "util/alloc.h"
#include "util/assert.h"
#include "util/clock.h"
#include "util/checked.h"
#include "util/error.h"
#include "util/view.h"

/* ---- validation (no lock) ------------------------------------------------ */

static int orch_check(const strata_orch *o, const char *what) {
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

static int needs_memory(const strata_tensor *t, uint8_t tag) {
    return tag == STRATA_OUT && t->base == NULL;
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
static void describe_shape(const strata_tensor *t, char *buf, size_t n) {
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
    describe_shape(t, shape, sizeof shape);
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
    if (needs_memory(t, tag)) { /* the runtime provides memory */
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
    return a->tags[i] != STRATA_NO_DEP && !needs_memory(&a->tensors[i], a->tags[i]);
}

/* 1 if argument i of a and argument j of b touch a common byte where either writes. */
static int args_conflict(const strata_task_args *a, uint32_t i, const strata_task_args *b,
                         uint32_t j) {
    if (!tracked_memory(a, i) || !tracked_memory(b, j))
        return 0;
    if (!tag_writes(a->tags[i]) && !tag_writes(b->tags[j]))
        return 0;
    const strata_tensor *ti = &a->tensors[i], *tj = &b->tensors[j];
    if (memcmp(&ti->ident, &tj->ident, sizeof ti->ident) != 0)
        return 0;
    st_footprint fi, fj;
    st_footprint_of(ti, &fi);
    st_footprint_of(tj, &fj);
    return st_footprint_overlap(&fi, &fj);
}

/* Arguments of one task that overlap where either writes are rejected: within
 * a member, and across the members of a group (members run at the same time). */
static int check_no_self_overlap(const strata_task_args *args, int m, const char *what) {
    const strata_task_args *a = &args[m];
    for (uint32_t i = 0; i < a->ntensors; i++) {
        for (uint32_t j = i + 1; j < a->ntensors; j++)
            if (args_conflict(a, i, a, j))
                return st_fail(STRATA_EINVAL,
                               "%s: member %d tensors %u and %u overlap and at least one is "
                               "written; split the task or use disjoint views",
                               what, m, i, j);
        for (int p = 0; p < m; p++)
            for (uint32_t j = 0; j < args[p].ntensors; j++)
                if (args_conflict(a, i, &args[p], j))
                    return st_fail(STRATA_EINVAL,
                                   "%s: member %d tensor %u overlaps member %d tensor %u and at "
                                   "least one is written; group members run at the same time",
                                   what, m, i, p, j);
    }
    return STRATA_OK;
}

static int check_args(strata_task_args *args, int n, const int *targets, const char *what) {
    for (int m = 0; m < n; m++) {
        strata_task_args *a = &args[m];
        if (a->invalid)
            return st_fail(STRATA_EINVAL,
                           "%s: member %d: its args are invalid (an earlier strata_args_add_* "
                           "call failed: too many arguments?)",
                           what, m);
        if (a->ntensors > STRATA_MAX_TENSORS || a->nscalars > STRATA_MAX_SCALARS)
            return st_fail(STRATA_EINVAL,
                           "%s: member %d: args not initialised (call "
                           "strata_args_init)",
                           what, m);
        for (uint32_t i = 0; i < a->ntensors; i++)
            STRATA_TRY(
                check_tensor(&a->tensors[i], a->tags[i], targets ? targets[m] : -1, what, m, i));
        STRATA_TRY(check_no_self_overlap(args, m, what));
    }
    return STRATA_OK;
}

static int check_callable(strata_worker *w, strata_callable fn, st_callable_kind kind,
                          const char *what) {
    if (fn < 0 || fn >= w->ncallables)
        return st_fail(STRATA_EINVAL, "%s: unknown callable %d", what, fn);
    if (w->callables[fn]->kind != kind)
        return st_fail(STRATA_EINVAL, "%s: callable '%s' is a %s callable", what,
                       w->callables[fn]->name, kind == ST_CALLABLE_SUB ? "next-level" : "sub");
    return STRATA_OK;
}

static int check_targets(strata_worker *w, const int *ids, int n, const char *what) {
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

/* ---- capacity waits (lock held) ----------------------------------------- */

/* The capacity deadline of one submit, started by its first wait. */
static uint64_t capacity_deadline(strata_worker *w, uint64_t *deadline) {
    if (*deadline == 0)
        *deadline = st_deadline_after(w->cfg.capacity_timeout_ns);
    return *deadline;
}

static st_slot *take_slot(strata_worker *w, uint64_t *deadline_io, const char *what) {
    for (;;) {
        st_slot *s = st_slots_take(&w->slots);
        if (s)
            return s;
        uint64_t deadline = capacity_deadline(w, deadline_io);
        /* Woken in batches (see consume()); re-check every millisecond anyway. */
        uint32_t seen = atomic_load(&w->space_ev.value);
        st_hook(w, ST_HOOK_CAPACITY_WAIT, 0);
        w->slot_waiters++;
        uint64_t slice = st_deadline_after(1000000);
        st_engine_wait(w, &w->space_ev, seen, slice < deadline ? slice : deadline);
        w->slot_waiters--;
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

static int take_heap(strata_worker *w, int ring, uint64_t bytes, uint64_t *deadline_io, void **addr,
                     uint64_t *ticket, const char *what) {
    if (st_heap_ring_bytes(&w->heap) == 0)
        return st_fail(STRATA_ECAPACITY,
                       "%s: runtime memory is disabled (heap_ring_bytes = 0): set "
                       "strata_worker_config.heap_ring_bytes",
                       what);
    for (;;) {
        int rc = st_heap_try_alloc(&w->heap, ring, bytes, addr, ticket);
        if (rc != STRATA_ECAPACITY)
            return rc;
        uint64_t deadline = capacity_deadline(w, deadline_io);
        uint32_t seen = atomic_load(&w->space_ev.value);
        st_hook(w, ST_HOOK_CAPACITY_WAIT, 0);
        w->heap_waiters++;
        int wrc = st_engine_wait(w, &w->space_ev, seen, deadline);
        w->heap_waiters--;
        if (wrc < 0 && st_now_ns() >= deadline)
            return st_fail(STRATA_ECAPACITY,
                           "%s: heap ring %d exhausted after %.1f s: raise heap_ring_bytes (now "
                           "%llu bytes), or end scopes earlier so intermediates are reclaimed",
                           what, ring, (double)w->cfg.capacity_timeout_ns / 1e9,
                           (unsigned long long)w->cfg.heap_ring_bytes);
    }
}

/* ---- building a slot (lock held) ------------------------------------------ */

/* Storage for n members' args (ntensors0: tensors of member 0). On failure the
 * slot is left as a one-member task on inline storage, so it can be settled. */
static int alloc_member_arrays(st_slot *s, int n, uint32_t ntensors0) {
    s->args = st_slot_inline_args(s);
    s->targets = &s->inline_target;
    s->member_state = &s->inline_member;
    s->inline_member = ST_MEMBER_WAITING;
    if (n == 1 && ntensors0 <= ST_INLINE_TENSORS)
        return STRATA_OK;
    strata_task_args *args = st_malloc(sizeof *args * (size_t)n);
    int32_t *targets = n > 1 ? st_malloc(sizeof *targets * (size_t)n) : &s->inline_target;
    uint8_t *states = n > 1 ? st_malloc((size_t)n) : &s->inline_member;
    if (!args || !targets || !states) {
        size_t bytes = !args      ? sizeof *args * (size_t)n
                       : !targets ? sizeof *targets * (size_t)n
                                  : (size_t)n;
        st_free(args);
        if (targets != &s->inline_target)
            st_free(targets);
        if (states != &s->inline_member)
            st_free(states);
        s->nmembers = 1;
        s->args->ntensors = 0;
        s->args->nscalars = 0;
        return st_fail_nomem(!args ? "the task's arguments" : "the group's member table", bytes);
    }
    s->args = args;
    s->targets = targets;
    s->member_state = states;
    return STRATA_OK;
}

static void init_slot(strata_orch *o, st_slot *s, st_slot_kind kind, strata_callable fn, int n) {
    st_run *r = o->run;
    s->kind = (uint8_t)kind;
    s->has_heap = 0;
    s->scope_ref = 0;
    s->poisoned_in_build = 0;
    s->run = r;
    s->seq = ++r->next_seq;
    s->callable = fn;
    s->nmembers = (uint16_t)n;
    s->members_terminal = 0;
    s->group_failed = 0;
    s->fanin_count = s->fanin_released = 0;
    s->fanout_total = s->fanout_released = 0;
    s->fail_status = 0;
    s->cfg = (strata_call_config){0};
    st_run_link_slot(r, s);
    r->active_tasks++;
}

/* The slot is owned by the run from here on; a scope holds one reference. */
static int hold_in_scope(strata_orch *o, st_slot *s) {
    if (o->nscope_refs == o->cap_scope_refs) {
        uint32_t ncap = o->cap_scope_refs ? o->cap_scope_refs * 2 : 256;
        uint64_t *nv = st_realloc(o->scope_refs, sizeof *nv * ncap);
        if (!nv)
            return st_fail_nomem("growing the scope's task list", sizeof *nv * ncap);
        o->scope_refs = nv;
        o->cap_scope_refs = ncap;
    }
    o->scope_refs[o->nscope_refs++] = st_ref_of(s);
    s->scope_ref = 1;
    s->fanout_total = 1;
    return STRATA_OK;
}

/* Runtime memory for OUT tensors given without memory: one heap allocation
 * per task, carved into 1 KiB-aligned pieces. */
static uint64_t out_bytes(const strata_tensor *t) {
    return (uint64_t)strata_tensor_numel(t) * strata_dtype_size((strata_dtype)t->dtype);
}

/* A piece's size was checked to fit in 64 bits, rounding included
 * (check_runtime_size). */
static uint64_t out_piece_bytes(const strata_tensor *t) {
    return (out_bytes(t) + ST_HEAP_ALIGN - 1) / ST_HEAP_ALIGN * ST_HEAP_ALIGN;
}

/* Runtime memory of one task: the sum of its pieces, which may not fit. */
static int out_memory_bytes(const strata_task_args *args, int n, uint64_t *total_out,
                            const char *what) {
    uint64_t total = 0;
    for (int m = 0; m < n; m++)
        for (uint32_t i = 0; i < args[m].ntensors; i++)
            if (needs_memory(&args[m].tensors[i], args[m].tags[i]) &&
                !st_add_u64(total, out_piece_bytes(&args[m].tensors[i]), &total))
                return st_fail(STRATA_EINVAL,
                               "%s: the OUT tensors without memory need 2^64 bytes or more of "
                               "runtime memory together (member %d tensor %u passes the limit)",
                               what, m, i);
    *total_out = total;
    return STRATA_OK;
}

/* Point every memory-less OUT tensor of s into `base`, and write the new views
 * back into the caller's args so later tasks can use them. */
static void carve_out_memory(strata_worker *w, st_slot *s, strata_task_args *user_args,
                             char *base) {
    uint64_t off = 0;
    for (int m = 0; m < s->nmembers; m++)
        for (uint32_t i = 0; i < s->args[m].ntensors; i++) {
            strata_tensor *t = &s->args[m].tensors[i];
            if (!needs_memory(t, s->args[m].tags[i]))
                continue;
            uint64_t piece = out_piece_bytes(t);
            st_view_memory mem = {base + off,
                                  out_bytes(t),
                                  {atomic_fetch_add(&w->next_buffer_id, 1), 1, -1},
                                  STRATA_MEM_HOST};
            int rc = st_view_build(&mem, 0, (strata_dtype)t->dtype, t->rank, t->shape, NULL,
                                   "runtime memory", t);
            ST_ASSERT(rc == STRATA_OK, "a checked runtime view failed to build");
            (void)rc;
            t->holder_ = st_ref_of(s);
            user_args[m].tensors[i] = *t;
            off += piece;
        }
}

/* ---- dependency inference (lock held) -------------------------------------- */

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

typedef struct dep_ctx {
    strata_worker *w;
    st_slot *self;
    uint64_t stamp; /* marks producers already collected for this submit */
    uint64_t *refs;
    uint32_t n, cap;
    uint64_t inline_buf[64];
} dep_ctx;

static int add_dep(void *vctx, uint64_t ref) {
    dep_ctx *d = vctx;
    st_slot *p = st_slots_get(&d->w->slots, ref);
    if (!p || p == d->self || p->visit_stamp == d->stamp)
        return 0;
    p->visit_stamp = d->stamp;
    if (d->n == d->cap) {
        uint32_t ncap = d->cap * 2;
        uint64_t *nv = st_malloc(sizeof *nv * ncap);
        if (!nv)
            return st_fail_nomem("growing the task's producer list", sizeof *nv * ncap);
        memcpy(nv, d->refs, sizeof *nv * d->n);
        if (d->refs != d->inline_buf)
            st_free(d->refs);
        d->refs = nv;
        d->cap = ncap;
    }
    d->refs[d->n++] = ref;
    return 0;
}

/* Where the tensor map finds a task's argument again (see st_orch_fp_of). */
static uint32_t argpos_of(int member, uint32_t i) {
    return (uint32_t)member << 8 | i;
}

static int infer_member(strata_worker *w, st_slot *s, int member, dep_ctx *d) {
    const strata_task_args *a = &s->args[member];
    st_footprint fps[STRATA_MAX_TENSORS]; /* built once, used for lookup and insert */
    /* Lookups of every argument first, then inserts: a task never waits on itself. */
    for (uint32_t i = 0; i < a->ntensors; i++) {
        const strata_tensor *t = &a->tensors[i];
        if (t->holder_ != 0)
            STRATA_TRY(add_dep(d, t->holder_)); /* keep runtime memory alive (checked live) */
        if (a->tags[i] == STRATA_NO_DEP)
            continue;
        st_footprint_of(t, &fps[i]);
        if (t->holder_ == st_ref_of(s))
            continue; /* memory this task just received: nobody wrote it yet */
        STRATA_TRY(
            st_tmap_lookup(&w->tmap, &t->ident, &fps[i], a->tags[i] != STRATA_IN, add_dep, d));
    }
    for (uint32_t i = 0; i < a->ntensors; i++) {
        const strata_tensor *t = &a->tensors[i];
        if (a->tags[i] == STRATA_NO_DEP)
            continue;
        if (a->tags[i] == STRATA_IN)
            STRATA_TRY(st_tmap_insert_reader(&w->tmap, &t->ident, &fps[i], st_ref_of(s),
                                             argpos_of(member, i)));
        else
            STRATA_TRY(st_tmap_insert_writer(&w->tmap, &t->ident, &fps[i], st_ref_of(s),
                                             argpos_of(member, i)));
    }
    return STRATA_OK;
}

/* Members one after another: members never wait on each other because the
 * producer set excludes the task itself. */
static int infer_dependencies(strata_worker *w, st_slot *s, dep_ctx *d) {
    for (int m = 0; m < s->nmembers; m++)
        STRATA_TRY(infer_member(w, s, m, d));
    return STRATA_OK;
}

/* Wire s to each producer. Returns the number of live (unfinished) producers;
 * sets *poisoned if one failed. An edge is one transaction on both ends. */
static int wire(strata_worker *w, st_slot *s, const dep_ctx *d, uint32_t *live, int *poisoned) {
    *live = 0;
    for (uint32_t i = 0; i < d->n; i++) {
        st_slot *p = st_slots_get(&w->slots, d->refs[i]);
        if (!p)
            continue; /* consumed: no edge */
        if (st_reflist_push(&p->consumers, st_ref_of(s)) != STRATA_OK)
            return STRATA_ENOMEM;
        if (st_reflist_push(&s->producers, d->refs[i]) != STRATA_OK) {
            p->consumers.n--;
            return STRATA_ENOMEM;
        }
        p->fanout_total++;
        st_task_state ps = st_slot_state(p);
        if (ps == ST_FAILED)
            *poisoned = 1;
        else if (ps != ST_COMPLETED)
            (*live)++;
    }
    return STRATA_OK;
}

/* Publication: BUILDING -> READY | PENDING, or the poisoned path. */
static void publish(strata_worker *w, st_slot *s, uint32_t live, int poisoned) {
    if (st_slot_state(s) != ST_BUILDING)
        poisoned = 1; /* a producer's failure claimed it while it was being wired */
    if (poisoned) {
        if (st_slot_state(s) == ST_BUILDING) {
            st_slot_fail_claim(s);
            s->fail_status = STRATA_ETASK;
        }
        st_settle_failed_unstarted(w, s);
        return;
    }
    s->fanin_count = live;
    if (s->fanin_released >= live) {
        st_slot_transition(s, ST_T_PUBLISH_READY);
        st_enqueue_ready(w, s);
    } else {
        st_slot_transition(s, ST_T_PUBLISH_WAIT);
    }
}

/* Runtime memory is valid only inside the run (and scope) that created it:
 * refuse a tensor whose memory belongs to another run, or was already
 * reclaimed, before anything is taken (the run is left alone). Lock held. */
static int check_runtime_memory(strata_worker *w, st_run *r, const strata_task_args *args, int n,
                                const char *what) {
    for (int m = 0; m < n; m++)
        for (uint32_t i = 0; i < args[m].ntensors; i++) {
            uint64_t holder = args[m].tensors[i].holder_;
            if (holder == 0 || needs_memory(&args[m].tensors[i], args[m].tags[i]))
                continue;
            st_slot *h = st_slots_get(&w->slots, holder);
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
    return st_fail(r->error_status, "%s: %s", what, r->error_msg ? r->error_msg : "run failed");
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
static st_slot *take_capacity(strata_orch *o, const strata_task_args *args, int n,
                              uint64_t heap_bytes, void **heap, uint64_t *ticket, int *rc_out,
                              const char *what) {
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

static int submit_common(strata_orch *o, st_slot_kind kind, strata_callable fn,
                         strata_task_args *args, int n, const int *targets,
                         const strata_call_config *cfg, const char *what) {
    STRATA_TRY(orch_check(o, what));
    strata_worker *w = o->w;
    if (!args)
        return st_fail(STRATA_EINVAL, "%s: args is NULL", what);
    if (n < 1 || n > STRATA_MAX_GROUP)
        return st_fail(STRATA_EINVAL, "%s: %d members (1..%d allowed)", what, n, STRATA_MAX_GROUP);
    if (kind == ST_SLOT_SUB && n > w->nsubs)
        return st_fail(STRATA_EINVAL, "%s: a group of %d needs %d sub workers (this worker has %d)",
                       what, n, n, w->nsubs);
    STRATA_TRY(
        check_callable(w, fn, kind == ST_SLOT_SUB ? ST_CALLABLE_SUB : ST_CALLABLE_NEXT, what));
    if (targets)
        STRATA_TRY(check_targets(w, targets, n, what));
    STRATA_TRY(check_args(args, n, targets, what));
    if (cfg && (cfg->flags & ~STRATA_CALL_DIAGNOSTICS))
        return st_fail(STRATA_EINVAL,
                       "%s: unknown call config flags 0x%x (only STRATA_CALL_DIAGNOSTICS is "
                       "defined)",
                       what, cfg->flags & ~STRATA_CALL_DIAGNOSTICS);

    uint64_t heap_bytes = 0;
    STRATA_TRY(out_memory_bytes(args, n, &heap_bytes, what));
    void *heap = NULL;
    uint64_t ticket = 0;
    int rc;
    st_engine_lock(w);
    st_run *r = o->run;
    /* Capacity first (memory, then a slot): failing here leaves the run untouched. */
    st_slot *s = take_capacity(o, args, n, heap_bytes, &heap, &ticket, &rc, what);
    if (!s) {
        st_engine_unlock(w);
        return rc;
    }
    init_slot(o, s, kind, fn, n);
    if (cfg)
        s->cfg = *cfg;
    rc = alloc_member_arrays(s, n, args[0].ntensors);
    if (rc == STRATA_OK) {
        for (int m = 0; m < n; m++) {
            strata_args_copy(&s->args[m], &args[m]);
            s->targets[m] = targets ? targets[m] : -1;
            s->member_state[m] = ST_MEMBER_WAITING;
        }
        if (heap) {
            s->has_heap = 1;
            s->heap_ticket = ticket;
            carve_out_memory(w, s, args, heap);
        }
    } else if (heap) {
        s->has_heap = 1; /* released when the failed slot is consumed */
        s->heap_ticket = ticket;
    }
    /* Only tasks that own runtime memory need the scope's reference: it keeps
     * the memory alive for tasks submitted later in the scope. Others are
     * released as soon as they finish, so the task window bounds unfinished
     * tasks, not the size of a run. */
    if (rc == STRATA_OK && s->has_heap)
        rc = hold_in_scope(o, s);
    dep_ctx d; /* fields set one by one: zeroing the inline buffer costs more than a submit */
    d.w = w;
    d.self = s;
    d.stamp = ++w->visit_stamp;
    d.n = 0;
    d.cap = 64;
    d.refs = d.inline_buf;
    if (rc == STRATA_OK)
        rc = infer_dependencies(w, s, &d);
    uint32_t live = 0;
    int poisoned = 0;
    if (rc == STRATA_OK)
        rc = wire(w, s, &d, &live, &poisoned);
    if (d.refs != d.inline_buf)
        st_free(d.refs);
    if (rc != STRATA_OK) {
        /* The slot belongs to the run: fail it there, so the fence still resolves. */
        if (rc == STRATA_ENOMEM)
            st_fail_prefix(rc, what); /* the allocation said what and how big */
        char label[128];
        st_task_label(w, s, label, sizeof label);
        st_run_record_error(r, rc, "run %llu: %s: submit failed: %s", (unsigned long long)r->id,
                            label, strata_error_message());
        poisoned = 1;
    }
    st_hook(w, ST_HOOK_AFTER_WIRING, st_ref_of(s));
    publish(w, s, live, poisoned);
    st_sched_pass(w);
    st_engine_unlock(w);
    return rc;
}

int strata_orch_submit_sub(strata_orch *o, strata_callable fn, strata_task_args *args) {
    return submit_common(o, ST_SLOT_SUB, fn, args, 1, NULL, NULL, "strata_orch_submit_sub");
}

int strata_orch_submit_sub_group(strata_orch *o, strata_callable fn, strata_task_args *args,
                                 int n) {
    return submit_common(o, ST_SLOT_SUB, fn, args, n, NULL, NULL, "strata_orch_submit_sub_group");
}

int strata_orch_submit_next_level(strata_orch *o, strata_callable fn, strata_task_args *args,
                                  const strata_call_config *cfg, int worker_id) {
    return submit_common(o, ST_SLOT_NEXT, fn, args, 1, &worker_id, cfg,
                         "strata_orch_submit_next_level");
}

int strata_orch_submit_next_level_group(strata_orch *o, strata_callable fn, strata_task_args *args,
                                        const strata_call_config *cfg, const int *worker_ids,
                                        int n) {
    if (!worker_ids)
        return st_fail(STRATA_EINVAL, "strata_orch_submit_next_level_group: worker_ids is NULL");
    return submit_common(o, ST_SLOT_NEXT, fn, args, n, worker_ids, cfg,
                         "strata_orch_submit_next_level_group");
}

/* ---- runtime allocations ---------------------------------------------------- */

int strata_orch_alloc(strata_orch *o, int rank, const int64_t *shape, strata_dtype dtype,
                      strata_tensor *out) {
    const char *what = "strata_orch_alloc";
    STRATA_TRY(orch_check(o, what));
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
        describe_shape(&t, desc, sizeof desc);
        return st_fail(STRATA_EINVAL, "%s: shape %s needs 2^64 bytes or more", what, desc);
    }

    strata_worker *w = o->w;
    void *base = NULL;
    uint64_t ticket = 0;
    int rc;
    st_engine_lock(w);
    st_slot *s = take_capacity(o, NULL, 0, bytes, &base, &ticket, &rc, what);
    if (!s) {
        st_engine_unlock(w);
        return rc;
    }
    init_slot(o, s, ST_SLOT_ALLOC, -1, 1);
    alloc_member_arrays(s, 1, 0); /* inline storage: cannot fail */
    s->args->ntensors = 0;
    s->args->nscalars = 0;
    s->has_heap = 1;
    s->heap_ticket = ticket;
    st_view_memory mem = {
        base, bytes, {atomic_fetch_add(&w->next_buffer_id, 1), 1, -1}, STRATA_MEM_HOST};
    rc = st_view_build(&mem, 0, dtype, rank, shape, NULL, what, &t);
    ST_ASSERT(rc == STRATA_OK, "a checked runtime view failed to build");
    t.holder_ = st_ref_of(s);
    rc = hold_in_scope(o, s);
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

/* ---- scopes ------------------------------------------------------------------- */

int strata_orch_scope_begin(strata_orch *o) {
    STRATA_TRY(orch_check(o, "strata_orch_scope_begin"));
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
    STRATA_TRY(orch_check(o, "strata_orch_scope_end"));
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
