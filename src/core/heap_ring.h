/* core/heap_ring.h - runtime-owned intermediate memory (OUT tensors without
 * memory), carved from ST_HEAP_RINGS bump-allocated rings.
 *
 * Owns: one MAP_SHARED|MAP_ANONYMOUS mapping holding every ring, made at
 * creation so children forked later see it at the same address; per ring
 * the FIFO of allocation records that decides when space comes back and
 * says which task owns a live allocation; the buffer identities of runtime
 * memory, which name the allocation they were carved from.
 * Must never: block (a full ring is reported, the caller waits), lock (the
 * engine calls it under its own lock), or malloc per allocation in steady
 * state (the record FIFO grows by doubling).
 */
#ifndef STRATA_CORE_HEAP_RING_H
#define STRATA_CORE_HEAP_RING_H

#include <stdint.h>

#define ST_HEAP_RINGS 4
#define ST_HEAP_ALIGN 1024

/* Internal layout (embedded by the engine; treat as opaque). */
typedef struct st_heap_rec {
    uint64_t start, end; /* byte offsets in the ring, [start, end) */
    uint64_t released;   /* 1 once released (space returns in FIFO order) */
    uint64_t owner;      /* task reference set by st_heap_set_owner (0 = none yet) */
} st_heap_rec;

typedef struct st_heap_ring {
    char *base;        /* first byte of the ring */
    uint64_t top;      /* next allocation starts here (or wraps to 0) */
    uint64_t tail;     /* start of the oldest unreclaimed allocation */
    int wrapped;       /* live region is [tail, size) + [0, top) */
    st_heap_rec *fifo; /* circular, indexed by seq & (fifo_cap - 1) */
    uint64_t fifo_cap; /* power of two */
    uint64_t head_seq; /* oldest unreclaimed allocation */
    uint64_t next_seq; /* sequence number of the next allocation */
} st_heap_ring;

typedef struct st_heap {
    char *base;          /* the mapping (NULL when heaps are disabled) */
    uint64_t ring_bytes; /* per ring; 0 = heaps disabled */
    st_heap_ring rings[ST_HEAP_RINGS];
} st_heap;

/* ring_bytes 0 = heaps disabled (every allocation fails with
 * STRATA_ECAPACITY naming heap_ring_bytes). STRATA_EINVAL if ring_bytes is
 * not a multiple of ST_HEAP_ALIGN, STRATA_ENOMEM if the mapping fails. */
int st_heap_init(st_heap *h, uint64_t ring_bytes);
void st_heap_destroy(st_heap *h);

/* Take `bytes` (rounded up to ST_HEAP_ALIGN; 0 counts as 1) from ring r.
 * STRATA_OK: *addr (ST_HEAP_ALIGN-aligned) and *ticket (never 0) are set.
 * STRATA_ECAPACITY: the ring is full right now (wait for releases, retry), or
 * heaps are disabled. STRATA_EINVAL: bytes > heap_ring_bytes, or r out of
 * range. STRATA_ENOMEM: the record FIFO could not grow. Never blocks. */
int st_heap_try_alloc(st_heap *h, int r, uint64_t bytes, void **addr, uint64_t *ticket);

/* Release by ticket, in any order; a ring's space comes back once every
 * older allocation of that ring is released too. Ticket 0 is ignored. */
void st_heap_release(st_heap *h, uint64_t ticket);

/* Record the task that owns a live allocation (its runtime memory). */
void st_heap_set_owner(st_heap *h, uint64_t ticket, uint64_t owner);

/* The owner of the allocation `ticket` names while it is live; 0 once it is
 * released, and for a ticket this heap never handed out. */
static inline uint64_t st_heap_owner(const st_heap *h, uint64_t ticket) {
    if (h->ring_bytes == 0)
        return 0;
    const st_heap_ring *g = &h->rings[ticket & (ST_HEAP_RINGS - 1)];
    uint64_t seq = (ticket >> 2) - 1; /* ticket 0 wraps to a seq never handed out */
    if (seq < g->head_seq || seq >= g->next_seq)
        return 0;
    const st_heap_rec *rec = &g->fifo[seq & (g->fifo_cap - 1)];
    return rec->released ? 0 : rec->owner;
}

/* ---- buffer identities of runtime memory ----
 * A piece of runtime memory is named by the allocation it was carved from and
 * its index in it, with the top bit set: user buffers count their ids up from
 * 1 and never reach it. So a tensor says by one bit whether it is runtime
 * memory, and the submit path finds the owner of such a piece in its
 * allocation's record, with no table to fill or clear: the record lives
 * exactly as long as the memory. Ids are never reused (tickets only grow). */
#define ST_RUNTIME_ID_BIT (UINT64_C(1) << 63)
#define ST_RUNTIME_PIECE_BITS 12 /* pieces of one allocation: tensors x group members */
/* Allocations one ring may make before its tickets no longer fit an id. */
#define ST_HEAP_MAX_SEQ ((UINT64_C(1) << (63 - ST_RUNTIME_PIECE_BITS - 2)) - 1)

static inline int st_is_runtime_id(uint64_t id) {
    return (id & ST_RUNTIME_ID_BIT) != 0;
}

static inline uint64_t st_runtime_id(uint64_t ticket, uint32_t piece) {
    return ST_RUNTIME_ID_BIT | ticket << ST_RUNTIME_PIECE_BITS | piece;
}

static inline uint64_t st_runtime_ticket(uint64_t id) {
    return (id & ~ST_RUNTIME_ID_BIT) >> ST_RUNTIME_PIECE_BITS;
}

uint64_t st_heap_ring_bytes(const st_heap *h);
uint64_t st_heap_used(const st_heap *h, int r); /* bytes between tail and top (for tests) */

#endif
