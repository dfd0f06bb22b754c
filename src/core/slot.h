/* core/slot.h - task slots: the task window, generations and the task state
 * machine (DESIGN §5.1).
 *
 * Owns: the fixed-capacity slot store, task references (index | gen << 32),
 * the free list and every state transition of a task.
 * Must never: be touched without the engine lock held (all fields are
 * protected by it; `state` is atomic only so that debug checks and tests can
 * read it from other threads).
 */
#ifndef STRATA_CORE_SLOT_H
#define STRATA_CORE_SLOT_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "strata/worker.h"
#include "util/state_machine.h"

typedef enum st_task_state {
    ST_FREE = 0,
    ST_BUILDING,
    ST_PENDING,
    ST_READY,
    ST_RUNNING,
    ST_COMPLETED,
    ST_FAILED,
    ST_CONSUMED,
    ST_STATE_COUNT
} st_task_state;

/* Named transitions; st_slot_transition() asserts each against the table. */
typedef enum st_transition {
    ST_T_CLAIM,         /* FREE -> BUILDING: submit or alloc took the slot */
    ST_T_PUBLISH_WAIT,  /* BUILDING -> PENDING: live producers remain */
    ST_T_PUBLISH_READY, /* BUILDING -> READY: nothing to wait for */
    ST_T_ALLOC_DONE,    /* BUILDING -> COMPLETED: a runtime allocation slot */
    ST_T_RELEASED,      /* PENDING -> READY: the last live producer completed */
    ST_T_FAIL_CLAIM,    /* BUILDING|PENDING|READY -> FAILED: poison or cancellation */
    ST_T_DISPATCH,      /* READY -> RUNNING: the scheduler's claim at dispatch */
    ST_T_SUCCEED,       /* RUNNING -> COMPLETED */
    ST_T_FAIL,          /* RUNNING -> FAILED */
    ST_T_CONSUME,       /* COMPLETED|FAILED -> CONSUMED: last reference released */
    ST_T_RECYCLE,       /* CONSUMED -> FREE: generation advances */
    ST_T_UNCLAIM,       /* BUILDING -> FREE: a submit gives back a slot it never built */
    ST_TRANSITION_COUNT
} st_transition;

const char *st_state_name(st_task_state s);

typedef enum st_slot_kind { ST_SLOT_SUB = 0, ST_SLOT_NEXT = 1, ST_SLOT_ALLOC = 2 } st_slot_kind;

/* A small vector of task references with 4 inline entries. */
typedef struct st_reflist {
    uint32_t n, cap;
    uint64_t *v; /* == inl until it grows */
    uint64_t inl[4];
} st_reflist;

void st_reflist_init(st_reflist *l);
int st_reflist_push(st_reflist *l, uint64_t ref);
void st_reflist_free(st_reflist *l);
/* Empty the list for the slot's next task, keeping a grown array of up to
 * ST_REFLIST_KEEP entries: a slot reused by tasks of the same shape (a tile
 * read by every task of the next layer) then grows its list once, not once
 * per task. */
#define ST_REFLIST_KEEP 64
void st_reflist_clear(st_reflist *l);

/* Group member states (single tasks are groups of one). */
enum {
    ST_MEMBER_WAITING = 0,
    ST_MEMBER_RUNNING,
    ST_MEMBER_DONE,
    ST_MEMBER_FAILED,
    ST_MEMBER_SKIPPED
};

struct strata_run;

/* Tensors of a single task's args stored inside the slot; more go to the heap. */
#define ST_INLINE_TENSORS 4
/* Largest heap block of a single task's args a slot keeps for its next task
 * (about 31 tensors): with the default window of 4096 slots at most 16 MiB. */
#define ST_SPARE_ARGS_MAX 4096u
#define ST_INLINE_ARGS_BYTES                                                                       \
    (offsetof(strata_task_args, tensors) + ST_INLINE_TENSORS * sizeof(strata_tensor))

typedef struct st_slot {
    _Atomic uint32_t state; /* st_task_state */
    uint32_t gen;           /* generation; a reference is valid while it matches */
    uint32_t index;
    uint8_t kind;              /* st_slot_kind */
    uint8_t has_heap;          /* holds a heap-ring allocation (heap_ticket) */
    uint8_t scope_ref;         /* 1 while a scope still holds its reference */
    uint8_t poisoned_in_build; /* a failure claimed it while it was BUILDING */
    struct strata_run *run;
    struct st_slot *run_prev, *run_next; /* the run's list of live slots */
    uint64_t seq;                        /* task number within its run, from 1 (messages) */
    strata_callable callable;
    uint16_t nmembers; /* 1 for a single task */
    uint16_t members_terminal;
    uint8_t group_failed;
    uint32_t fanin_count;     /* live producers at publication */
    uint32_t fanin_released;  /* producers that completed since */
    uint32_t fanout_total;    /* references: scope (0/1) + one per wired consumer */
    uint32_t fanout_released; /* releases received, the terminal self release included */
    st_reflist consumers;     /* tasks wired to this one */
    st_reflist producers;     /* tasks this one holds a reference on */
    uint64_t heap_ticket;
    uint64_t visit_stamp; /* dependency collection of the submit in progress */
    strata_call_config cfg;
    strata_task_args *args; /* nmembers entries: the inline area or a heap array */
    uint32_t args_bytes;    /* bytes of args when it is a single task's heap block, else 0 */
    uint32_t spare_bytes;   /* bytes of spare_args */
    /* A single task's heap block kept from an earlier task of this slot (up
     * to ST_SPARE_ARGS_MAX bytes), reused by the next one that fits: tasks
     * with more than ST_INLINE_TENSORS tensors then cost no malloc/free
     * each. At most one per slot, so what is kept is bounded by the window. */
    strata_task_args *spare_args;
    int32_t *targets;      /* next-level worker per member: &inline_target or heap */
    uint8_t *member_state; /* per member: &inline_member or heap */
    int32_t inline_target;
    uint8_t inline_member;
    int fail_status; /* status of the failure (ETASK, EENDPOINT, ECANCELED) */
    /* Set only while tasks are timed (core/trace.h): monotonic ns. */
    uint64_t t_submit, t_ready, t_dispatch;
    uint64_t path_ns; /* longest chain of measured durations ending here */
    /* A single task's args with up to ST_INLINE_TENSORS tensors live here: only
     * the used prefix of a strata_task_args is ever read or written (a body
     * reads it through a strata_task_view), so the slot stays small (a full
     * strata_task_args is 2.2 KiB). */
    _Alignas(strata_task_args) unsigned char inline_args[ST_INLINE_ARGS_BYTES];
} st_slot;

static inline strata_task_args *st_slot_inline_args(st_slot *s) {
    return (strata_task_args *)(void *)s->inline_args;
}

typedef struct st_slot_store {
    st_slot *slots; /* mapped: capacity slots */
    size_t map_bytes;
    uint32_t capacity; /* power of two */
    uint32_t *free_stack;
    uint32_t nfree;
    /* 1 (st_slots_init): slots keep a task's heap-stored args and grown
     * dependency lists for their next task. 0 only in tests that count a
     * run's allocations on a reused worker: with it, the count depends on
     * which slots earlier runs left warm. */
    int keep_spares;
} st_slot_store;

static inline uint64_t st_ref_of(const st_slot *s) {
    return (uint64_t)s->index | (uint64_t)s->gen << 32;
}

int st_slots_init(st_slot_store *st, uint32_t capacity);
void st_slots_destroy(st_slot_store *st);

/* Take a FREE slot (FREE -> BUILDING), or NULL if the window is full. */
st_slot *st_slots_take(st_slot_store *st);

/* Return a CONSUMED slot to the free list (CONSUMED -> FREE, generation++). */
void st_slots_recycle(st_slot_store *st, st_slot *s);
/* keep_spares on or off; off also frees what free slots kept. For tests that
 * count allocations; only while no task is live. */
void st_slots_set_keep_spares(st_slot_store *st, int keep);

/* Return a slot just taken and never referenced (no generation change: no
 * reference to it was ever handed out). */
void st_slots_give_back(st_slot_store *st, st_slot *s);

/* The slot a reference names, or NULL if the reference is stale. */
static inline st_slot *st_slots_get(st_slot_store *st, uint64_t ref) {
    uint32_t idx = (uint32_t)ref;
    if (idx >= st->capacity)
        return NULL;
    st_slot *s = &st->slots[idx];
    return s->gen == (uint32_t)(ref >> 32) ? s : NULL;
}

/* Failure claim: BUILDING|PENDING|READY -> FAILED. Returns the prior state if
 * claimed, or ST_STATE_COUNT if the slot was not claimable. */
st_task_state st_slot_fail_claim(st_slot *s);

/* Dispatch claim: READY -> RUNNING. 1 if claimed. */
int st_slot_dispatch_claim(st_slot *s);

static inline st_task_state st_slot_state(const st_slot *s) {
    return (st_task_state)atomic_load_explicit(&s->state, memory_order_relaxed);
}

/* The task state machine: states st_task_state, transitions st_transition. */
extern const st_sm st_slot_machine;

/* Apply a named transition; checks (debug builds) that the source state is legal. */
static inline void st_slot_transition(st_slot *s, st_transition t) {
    uint32_t to = st_sm_next(&st_slot_machine, st_slot_state(s), t, "task slot");
    atomic_store_explicit(&s->state, to, memory_order_release);
}

static inline int st_state_terminal(st_task_state s) {
    return s == ST_COMPLETED || s == ST_FAILED;
}

#endif
