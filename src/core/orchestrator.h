/* core/orchestrator.h - the orchestration layer: what its files share.
 *
 * Owns: the calls between the files that build a run's graph (submit_checks.c,
 * capacity.c, runtime_memory.c, wiring.c, submit.c, orch_alloc.c, scope.c),
 * the two the rest of the engine makes into it (the tensor map's footprint
 * source, closing a run's scopes), and the producer list of one submit.
 * The steps of those files that every submit runs once are static inline
 * here, each in the section of its file: as calls across files they cost a
 * submit about 5% more instructions (measured with bench_build_cost); only the
 * argument checks, which do far more work than a call, stay out of line.
 * Must never: be included by endpoints (src/exec/) or the scheduler side: all
 * of this runs on the thread of the orchestration function of the building
 * run, or at the end of it.
 */
#ifndef STRATA_CORE_ORCHESTRATOR_H
#define STRATA_CORE_ORCHESTRATOR_H

#include <stddef.h>
#include <stdint.h>

#include "core/endpoint.h"
#include "core/engine.h"
#include "core/footprint.h"
#include "core/heap_ring.h"
#include "core/release.h"
#include "core/slot.h"
#include "core/tensormap.h"
#include "util/checked.h"
#include "util/error.h"
#include "util/registry.h"

/* An OUT tensor given without memory: the runtime provides its memory. */
static inline int st_needs_memory(const strata_tensor *t, uint8_t tag) {
    return tag == STRATA_OUT && t->base == NULL;
}

/* ---- argument checks, no lock (submit_checks.c) ---- */
/* o is the building run's handle and this is its orchestration thread. */
int st_orch_check(const strata_orch *o, const char *what);
int st_check_args(strata_task_args *args, int n, const int *targets, const char *what);
int st_check_targets(strata_worker *w, const int *ids, int n, const char *what);
void st_describe_shape(const strata_tensor *t, char *buf, size_t n);

static inline int st_check_callable(strata_worker *w, strata_callable fn, st_callable_kind kind,
                                    const char *what) {
    const st_callable_info *ci = st_registry_get(&w->callables, fn);
    if (!ci)
        return st_fail(STRATA_EINVAL, "%s: unknown callable %d", what, fn);
    /* An orchestration callable is a next-level one (a child Worker runs it). */
    st_callable_kind k = ci->kind == ST_CALLABLE_ORCH ? ST_CALLABLE_NEXT : ci->kind;
    if (k != kind)
        return st_fail(STRATA_EINVAL, "%s: callable '%s' is a %s callable", what, ci->name,
                       kind == ST_CALLABLE_SUB ? "next-level" : "sub");
    return STRATA_OK;
}

/* ---- capacity, lock held; waits drop it (capacity.c) ---- */
st_slot *st_take_capacity(strata_orch *o, const strata_task_args *args, int n, uint64_t heap_bytes,
                          void **heap, uint64_t *ticket, int *rc_out, const char *what);

/* ---- runtime memory for OUT tensors without memory (runtime_memory.c) ---- */
/* Runtime memory for OUT tensors given without memory: one heap allocation
 * per task, carved into 1 KiB-aligned pieces. */
static inline uint64_t st_out_bytes(const strata_tensor *t) {
    return (uint64_t)strata_tensor_numel(t) * strata_dtype_size((strata_dtype)t->dtype);
}

/* A piece's size was checked to fit in 64 bits, rounding included
 * (check_runtime_size). */
static inline uint64_t st_out_piece_bytes(const strata_tensor *t) {
    return (st_out_bytes(t) + ST_HEAP_ALIGN - 1) / ST_HEAP_ALIGN * ST_HEAP_ALIGN;
}

/* Runtime memory of one task: the sum of its pieces, which may not fit. */
static inline int st_out_memory_bytes(const strata_task_args *args, int n, uint64_t *total_out,
                                      const char *what) {
    uint64_t total = 0;
    for (int m = 0; m < n; m++)
        for (uint32_t i = 0; i < args[m].ntensors; i++)
            if (st_needs_memory(&args[m].tensors[i], args[m].tags[i]) &&
                !st_add_u64(total, st_out_piece_bytes(&args[m].tensors[i]), &total))
                return st_fail(STRATA_EINVAL,
                               "%s: the OUT tensors without memory need 2^64 bytes or more of "
                               "runtime memory together (member %d tensor %u passes the limit)",
                               what, m, i);
    *total_out = total;
    return STRATA_OK;
}

void st_carve_out_memory(strata_worker *w, st_slot *s, strata_task_args *user_args, char *base);

/* The task that owns the runtime memory t names: its allocation's record
 * knows (heap_ring.h). 0 for user memory, and for runtime memory already
 * reclaimed. */
static inline uint64_t st_runtime_holder(strata_worker *w, const strata_tensor *t) {
    if (!st_is_runtime_id(t->ident.id))
        return 0;
    return st_heap_owner(&w->heap, st_runtime_ticket(t->ident.id));
}

/* ---- building a slot, lock held (submit.c) ---- */
int st_alloc_member_arrays(st_slot *s, int n, const strata_task_args *args0);

/* A task of n members with args[0..n) (the caller's: OUT tensors without
 * memory get their runtime views written back there), from checks to
 * publication (submit.c). */
int st_submit(strata_orch *o, st_slot_kind kind, strata_callable fn, strata_task_args *args, int n,
              const int *targets, const strata_call_config *cfg, const char *what);

/* ---- argument items (arg_items.c) ---- */
/* Members the items make: 1 unless group, else member breaks + 1 (at most
 * STRATA_MAX_GROUP); < 0 (a status, message set) if refused. */
int st_item_members(const strata_arg *items, size_t n, int group, const char *what);
/* Init args[0..members) and fill them from the items (errors name the
 * item's position); *write_back: an OUT tensor item has no memory. */
int st_items_to_args(strata_task_args *args, int members, const strata_arg *items, size_t n,
                     int *write_back, const char *what);
/* After a submit: each OUT tensor item given without memory gets the view
 * the runtime gave the task. */
void st_items_write_back(const strata_task_args *args, int members, const strata_arg *items,
                         size_t n);
void st_init_slot(strata_orch *o, st_slot *s, st_slot_kind kind, strata_callable fn, int n);

/* ---- dependencies, lock held (wiring.c) ---- */
typedef struct st_dep_ctx {
    strata_worker *w;
    st_slot *self;
    uint64_t stamp; /* marks producers already collected for this submit */
    uint64_t *refs;
    uint32_t n, cap;
    uint64_t inline_buf[64];
} st_dep_ctx;

/* The tensor map's footprint source: argument `argpos` of live task `ref`. */
void st_orch_fp_of(void *ctx, uint64_t ref, uint32_t argpos, st_footprint *out);
/* Collect producer `ref` once per submit (the tensor map's visitor). */
int st_add_dep(void *vctx, uint64_t ref);

/* Where the tensor map finds a task's argument again (see st_orch_fp_of). */
static inline uint32_t st_argpos_of(int member, uint32_t i) {
    return (uint32_t)member << 8 | i;
}

static inline int st_infer_member(strata_worker *w, st_slot *s, int member, st_dep_ctx *d) {
    const strata_task_args *a = &s->args[member];
    st_footprint fps[STRATA_MAX_TENSORS]; /* built once, used for lookup and insert */
    /* Lookups of every argument first, then inserts: a task never waits on itself. */
    for (uint32_t i = 0; i < a->ntensors; i++) {
        const strata_tensor *t = &a->tensors[i];
        uint64_t holder = 0;                 /* user memory has none: one bit of its id says so */
        if (st_is_runtime_id(t->ident.id)) { /* keep runtime memory alive (checked live) */
            holder = st_runtime_holder(w, t);
            STRATA_TRY(st_add_dep(d, holder));
        }
        if (a->tags[i] == STRATA_NO_DEP)
            continue;
        st_footprint_of(t, &fps[i]);
        if (holder == st_ref_of(s))
            continue; /* memory this task just received: nobody wrote it yet */
        STRATA_TRY(
            st_tmap_lookup(&w->tmap, &t->ident, &fps[i], a->tags[i] != STRATA_IN, st_add_dep, d));
    }
    for (uint32_t i = 0; i < a->ntensors; i++) {
        const strata_tensor *t = &a->tensors[i];
        if (a->tags[i] == STRATA_NO_DEP)
            continue;
        if (a->tags[i] == STRATA_IN)
            STRATA_TRY(st_tmap_insert_reader(&w->tmap, &t->ident, &fps[i], st_ref_of(s),
                                             st_argpos_of(member, i)));
        else
            STRATA_TRY(st_tmap_insert_writer(&w->tmap, &t->ident, &fps[i], st_ref_of(s),
                                             st_argpos_of(member, i)));
    }
    return STRATA_OK;
}

/* Members one after another: members never wait on each other because the
 * producer set excludes the task itself. */
static inline int st_infer_dependencies(strata_worker *w, st_slot *s, st_dep_ctx *d) {
    for (int m = 0; m < s->nmembers; m++)
        STRATA_TRY(st_infer_member(w, s, m, d));
    return STRATA_OK;
}

/* Wire s to each producer. Returns the number of live (unfinished) producers;
 * sets *poisoned if one failed. An edge is one transaction on both ends. */
static inline int st_wire(strata_worker *w, st_slot *s, const st_dep_ctx *d, uint32_t *live,
                          int *poisoned) {
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
static inline void st_publish(strata_worker *w, st_slot *s, uint32_t live, int poisoned) {
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

/* ---- scopes, lock held (scope.c) ---- */
int st_hold_in_scope(strata_orch *o, st_slot *s);
/* Drop the references of scopes deeper than `depth`. */
void st_orch_close_scopes_to(strata_orch *o, int depth);

#endif
