/* core/slot.c - the task window and the task state machine.
 *
 * Owns: slot storage, the free list, generations and the transition table.
 * Must never: decide *when* a transition happens (the scheduler and the
 * orchestrator do); it only applies and checks them. Caller holds the engine lock.
 */
#include "core/slot.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "util/alloc.h"
#include "util/assert.h"
#include "util/error.h"
#include "util/growable.h"
#include "strata/status.h"

static const char *const state_names[ST_STATE_COUNT] = {
    "FREE", "BUILDING", "PENDING", "READY", "RUNNING", "COMPLETED", "FAILED", "CONSUMED"};

const char *st_state_name(st_task_state s) {
    return s < ST_STATE_COUNT ? state_names[s] : "?";
}

/* Legal source states and the target of every named transition. */
#define BIT ST_SM_BIT
static const st_sm_rule slot_rules[ST_TRANSITION_COUNT] = {
    [ST_T_CLAIM] = {BIT(ST_FREE), ST_BUILDING, "claim"},
    [ST_T_PUBLISH_WAIT] = {BIT(ST_BUILDING), ST_PENDING, "publish-wait"},
    [ST_T_PUBLISH_READY] = {BIT(ST_BUILDING), ST_READY, "publish-ready"},
    [ST_T_ALLOC_DONE] = {BIT(ST_BUILDING), ST_COMPLETED, "alloc-done"},
    [ST_T_RELEASED] = {BIT(ST_PENDING), ST_READY, "released"},
    [ST_T_FAIL_CLAIM] = {BIT(ST_BUILDING) | BIT(ST_PENDING) | BIT(ST_READY), ST_FAILED,
                         "fail-claim"},
    [ST_T_DISPATCH] = {BIT(ST_READY), ST_RUNNING, "dispatch"},
    [ST_T_SUCCEED] = {BIT(ST_RUNNING), ST_COMPLETED, "succeed"},
    [ST_T_FAIL] = {BIT(ST_RUNNING), ST_FAILED, "fail"},
    [ST_T_CONSUME] = {BIT(ST_COMPLETED) | BIT(ST_FAILED), ST_CONSUMED, "consume"},
    [ST_T_RECYCLE] = {BIT(ST_CONSUMED), ST_FREE, "recycle"},
    [ST_T_UNCLAIM] = {BIT(ST_BUILDING), ST_FREE, "unclaim"},
};

const st_sm st_slot_machine = {"task", state_names, ST_STATE_COUNT, slot_rules,
                               ST_TRANSITION_COUNT};

st_task_state st_slot_fail_claim(st_slot *s) {
    st_task_state from = st_slot_state(s);
    if (!st_sm_allows(&st_slot_machine, from, ST_T_FAIL_CLAIM))
        return ST_STATE_COUNT;
    atomic_store_explicit(&s->state, ST_FAILED, memory_order_release);
    return from;
}

int st_slot_dispatch_claim(st_slot *s) {
    if (st_slot_state(s) != ST_READY)
        return 0;
    atomic_store_explicit(&s->state, ST_RUNNING, memory_order_release);
    return 1;
}

void st_reflist_init(st_reflist *l) {
    l->n = 0;
    l->cap = 4;
    l->v = l->inl;
}

void st_reflist_clear(st_reflist *l) {
    if (l->v != l->inl && l->cap > ST_REFLIST_KEEP) {
        st_reflist_free(l);
        return;
    }
    l->n = 0;
}

int st_reflist_push(st_reflist *l, uint64_t ref) {
    if (l->n == l->cap) {
        uint64_t *nv =
            st_grow(l->v, &l->cap, l->n + 1, sizeof *nv, 4, l->inl, "a task's dependency list");
        if (!nv)
            return STRATA_ENOMEM;
        l->v = nv;
    }
    l->v[l->n++] = ref;
    return STRATA_OK;
}

void st_reflist_free(st_reflist *l) {
    if (l->v != l->inl)
        st_free(l->v);
    st_reflist_init(l);
}

int st_slots_init(st_slot_store *st, uint32_t capacity) {
    memset(st, 0, sizeof *st);
    /* Mapped (zeroed) with transparent huge pages allowed: a large window is
     * touched all over, and 4 KiB pages would make every slot a TLB miss.
     * Nothing reads past a slot's compact args: task bodies get a view of the
     * used part (strata_task_view), never the struct. */
    st->map_bytes = sizeof *st->slots * capacity;
    st->slots = st_map_anon(st->map_bytes, MAP_PRIVATE);
    if (!st->slots) {
        size_t bytes = st->map_bytes;
        st_slots_destroy(st);
        return st_fail_nomem("the task window's slots", bytes);
    }
    if (st->map_bytes >= (2u << 20))
        madvise(st->slots, st->map_bytes, MADV_HUGEPAGE);
    st->free_stack = st_malloc(sizeof *st->free_stack * capacity);
    if (!st->free_stack) {
        st_slots_destroy(st);
        return st_fail_nomem("the task window's free list", sizeof *st->free_stack * capacity);
    }
    st->capacity = capacity;
    /* Lowest indices on top of the stack: recently used slots stay warm. */
    for (uint32_t i = 0; i < capacity; i++) {
        st->slots[i].index = i;
        st->slots[i].gen = 1;
        st_reflist_init(&st->slots[i].consumers);
        st_reflist_init(&st->slots[i].producers);
        st->free_stack[i] = capacity - 1 - i;
    }
    st->nfree = capacity;
    st->keep_spares = 1;
    return STRATA_OK;
}

void st_slots_destroy(st_slot_store *st) {
    if (st->slots) {
        for (uint32_t i = 0; i < st->capacity; i++) {
            st_reflist_free(&st->slots[i].consumers);
            st_reflist_free(&st->slots[i].producers);
            st_free(st->slots[i].spare_args);
        }
    }
    st_unmap(st->slots, st->map_bytes);
    st_free(st->free_stack);
    memset(st, 0, sizeof *st);
}

/* Header, args header and two tensors: what a typical submit writes. */
#define ST_SLOT_PREFETCH_BYTES (offsetof(st_slot, inline_args) + 512)
#define ST_SLOT_PREFETCH_AHEAD 4 /* slots ahead of the one taken now */

st_slot *st_slots_take(st_slot_store *st) {
    if (st->nfree == 0)
        return NULL;
    st_slot *s = &st->slots[st->free_stack[--st->nfree]];
    st_slot_transition(s, ST_T_CLAIM);
    if (st->nfree > ST_SLOT_PREFETCH_AHEAD) {
        /* A submit a few tasks later writes this free slot: start fetching its
         * lines now, so a cold window costs less than a miss per line per
         * task. One slot ahead left most of the miss latency exposed (a
         * submit takes about as long as a miss); four hid most of it
         * (20 000-task gated build: ~0.20 -> ~0.17 us/task); eight or
         * sixteen measured no better. */
        const char *next =
            (const char *)&st->slots[st->free_stack[st->nfree - ST_SLOT_PREFETCH_AHEAD]];
        for (size_t off = 0; off < ST_SLOT_PREFETCH_BYTES; off += 64)
            __builtin_prefetch(next + off, 1, 3);
    }
    return s;
}

void st_slots_recycle(st_slot_store *st, st_slot *s) {
    st_slot_transition(s, ST_T_RECYCLE);
    s->gen++;
    if (s->gen == 0) /* generation 0 never names a live slot */
        s->gen = 1;
    if (st->keep_spares) {
        st_reflist_clear(&s->consumers);
        st_reflist_clear(&s->producers);
    } else {
        st_reflist_free(&s->consumers);
        st_reflist_free(&s->producers);
    }
    st->free_stack[st->nfree++] = s->index;
}

void st_slots_set_keep_spares(st_slot_store *st, int keep) {
    st->keep_spares = keep;
    for (uint32_t i = 0; !keep && i < st->capacity; i++) {
        st_slot *s = &st->slots[i];
        st_reflist_free(&s->consumers);
        st_reflist_free(&s->producers);
        st_free(s->spare_args);
        s->spare_args = NULL;
        s->spare_bytes = 0;
    }
}

void st_slots_give_back(st_slot_store *st, st_slot *s) {
    st_slot_transition(s, ST_T_UNCLAIM);
    st->free_stack[st->nfree++] = s->index;
}
