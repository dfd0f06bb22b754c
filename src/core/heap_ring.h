/* core/heap_ring.h - runtime-owned intermediate memory (OUT tensors without
 * memory), carved from ST_HEAP_RINGS bump-allocated rings.
 *
 * Owns: one MAP_SHARED|MAP_ANONYMOUS mapping holding every ring, made at
 * creation so children forked later see it at the same address; per ring
 * the FIFO of allocation records that decides when space comes back.
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

uint64_t st_heap_ring_bytes(const st_heap *h);
uint64_t st_heap_used(const st_heap *h, int r); /* bytes between tail and top (for tests) */

#endif
