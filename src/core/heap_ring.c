/* core/heap_ring.c - bump allocation with wrap-around over ST_HEAP_RINGS
 * rings in one shared mapping, reclaimed in FIFO order per ring.
 *
 * Owns: the mapping and the per-ring record FIFOs. Must never: block, lock,
 * or let a full ring look empty (emptiness is head_seq == next_seq, never
 * top == tail).
 *
 * A ring is empty (top = tail = 0), linear (live bytes [tail, top)), or
 * wrapped (live bytes [tail, size) and [0, top), top <= tail; the bytes
 * between the last record before the wrap and the end are skipped and come
 * back when the frontier passes them). Releasing marks a record; the
 * frontier (tail) then advances over every released record at the head.
 */
#include "core/heap_ring.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "strata/status.h"
#include "util/alloc.h"
#include "util/error.h"

#define HEAP_FIFO_INIT 64u

/* A ticket is ((seq + 1) << 2) | ring: never 0, two bits of ring. */
_Static_assert(ST_HEAP_RINGS == 4, "the ticket encoding keeps the ring in two bits");

int st_heap_init(st_heap *h, uint64_t ring_bytes) {
    memset(h, 0, sizeof *h);
    if (ring_bytes % ST_HEAP_ALIGN != 0)
        return st_fail(STRATA_EINVAL, "heap_ring_bytes (%llu) must be a multiple of %d",
                       (unsigned long long)ring_bytes, ST_HEAP_ALIGN);
    if (ring_bytes == 0)
        return STRATA_OK; /* heaps disabled */
    if (ring_bytes > (uint64_t)SIZE_MAX / ST_HEAP_RINGS)
        return st_fail(STRATA_ENOMEM, "heap_ring_bytes (%llu) is too large to map",
                       (unsigned long long)ring_bytes);
    size_t total = (size_t)ring_bytes * ST_HEAP_RINGS;
    void *p = st_map_anon(total, MAP_SHARED | MAP_NORESERVE);
    if (!p)
        return st_fail(STRATA_ENOMEM,
                       "the heap rings: cannot map %d rings of %llu bytes (%zu bytes; out of "
                       "memory)",
                       ST_HEAP_RINGS, (unsigned long long)ring_bytes, total);
    h->base = p;
    h->ring_bytes = ring_bytes;
    for (int r = 0; r < ST_HEAP_RINGS; r++) {
        st_heap_ring *g = &h->rings[r];
        g->base = h->base + (uint64_t)r * ring_bytes;
        g->fifo = st_malloc(HEAP_FIFO_INIT * sizeof *g->fifo);
        g->fifo_cap = HEAP_FIFO_INIT;
        if (!g->fifo) {
            st_heap_destroy(h);
            return st_fail_nomem("a heap ring's record queue", HEAP_FIFO_INIT * sizeof *g->fifo);
        }
    }
    return STRATA_OK;
}

void st_heap_destroy(st_heap *h) {
    for (int r = 0; r < ST_HEAP_RINGS; r++)
        st_free(h->rings[r].fifo);
    st_unmap(h->base, (size_t)h->ring_bytes * ST_HEAP_RINGS);
    memset(h, 0, sizeof *h);
}

uint64_t st_heap_ring_bytes(const st_heap *h) {
    return h->ring_bytes;
}

uint64_t st_heap_used(const st_heap *h, int r) {
    if (r < 0 || r >= ST_HEAP_RINGS || h->ring_bytes == 0)
        return 0;
    const st_heap_ring *g = &h->rings[r];
    if (g->head_seq == g->next_seq)
        return 0;
    return g->wrapped ? h->ring_bytes - g->tail + g->top : g->top - g->tail;
}

static int grow_fifo(st_heap_ring *g) {
    uint64_t nc = g->fifo_cap * 2;
    st_heap_rec *nf = st_malloc(nc * sizeof *nf);
    if (!nf)
        return st_fail_nomem("growing a heap ring's record queue", nc * sizeof *nf);
    for (uint64_t s = g->head_seq; s != g->next_seq; s++)
        nf[s & (nc - 1)] = g->fifo[s & (g->fifo_cap - 1)];
    st_free(g->fifo);
    g->fifo = nf;
    g->fifo_cap = nc;
    return STRATA_OK;
}

int st_heap_try_alloc(st_heap *h, int r, uint64_t bytes, void **addr, uint64_t *ticket) {
    if (r < 0 || r >= ST_HEAP_RINGS)
        return st_fail(STRATA_EINVAL, "heap ring %d does not exist", r);
    uint64_t size = h->ring_bytes;
    if (size == 0)
        return st_fail(STRATA_ECAPACITY,
                       "request %llu bytes needs runtime heap memory, but heaps are disabled "
                       "(heap_ring_bytes is 0)",
                       (unsigned long long)bytes);
    if (bytes > size)
        return st_fail(STRATA_EINVAL, "request %llu bytes exceeds heap_ring_bytes (now %llu)",
                       (unsigned long long)bytes, (unsigned long long)size);
    uint64_t n =
        bytes ? (bytes + ST_HEAP_ALIGN - 1) & ~(uint64_t)(ST_HEAP_ALIGN - 1) : ST_HEAP_ALIGN;

    st_heap_ring *g = &h->rings[r];
    uint64_t at;
    int wrap = 0;
    if (g->head_seq == g->next_seq) {
        g->top = g->tail = 0; /* empty: start over at 0 */
        g->wrapped = 0;
        at = 0;
    } else if (!g->wrapped) {
        if (size - g->top >= n)
            at = g->top;
        else if (g->tail >= n)
            at = 0, wrap = 1;
        else
            return STRATA_ECAPACITY;
    } else {
        if (g->tail - g->top >= n)
            at = g->top;
        else
            return STRATA_ECAPACITY;
    }
    if (g->next_seq == ST_HEAP_MAX_SEQ)
        return st_fail(STRATA_ECAPACITY,
                       "heap ring %d made 2^%d allocations: its tickets no longer fit a buffer "
                       "identity (create a new worker)",
                       r, 63 - ST_RUNTIME_PIECE_BITS - 2);
    if (g->next_seq - g->head_seq == g->fifo_cap && grow_fifo(g) != STRATA_OK)
        return STRATA_ENOMEM;
    uint64_t seq = g->next_seq++;
    st_heap_rec *rec = &g->fifo[seq & (g->fifo_cap - 1)];
    rec->start = at;
    rec->end = at + n;
    rec->released = 0;
    rec->owner = 0;
    g->top = at + n;
    if (wrap)
        g->wrapped = 1;
    *addr = g->base + at;
    *ticket = ((seq + 1) << 2) | (uint64_t)r;
    return STRATA_OK;
}

void st_heap_set_owner(st_heap *h, uint64_t ticket, uint64_t owner) {
    st_heap_ring *g = &h->rings[ticket & (ST_HEAP_RINGS - 1)];
    uint64_t seq = (ticket >> 2) - 1;
    if (h->ring_bytes == 0 || seq < g->head_seq || seq >= g->next_seq)
        return; /* not a live ticket */
    g->fifo[seq & (g->fifo_cap - 1)].owner = owner;
}

void st_heap_release(st_heap *h, uint64_t ticket) {
    if (ticket == 0 || h->ring_bytes == 0)
        return;
    st_heap_ring *g = &h->rings[ticket & (ST_HEAP_RINGS - 1)];
    uint64_t seq = (ticket >> 2) - 1;
    if (seq < g->head_seq || seq >= g->next_seq)
        return; /* not a live ticket */
    g->fifo[seq & (g->fifo_cap - 1)].released = 1;
    while (g->head_seq != g->next_seq) {
        const st_heap_rec *head = &g->fifo[g->head_seq & (g->fifo_cap - 1)];
        if (!head->released)
            break;
        uint64_t old_start = head->start;
        g->head_seq++;
        if (g->head_seq == g->next_seq) {
            g->top = g->tail = 0;
            g->wrapped = 0;
            break;
        }
        g->tail = g->fifo[g->head_seq & (g->fifo_cap - 1)].start;
        if (g->tail < old_start)
            g->wrapped = 0; /* the frontier passed the wrap point */
    }
}
