/* util/lease.h - the pipeline lease (DESIGN §2, §5.4, §6): {slot, generation}
 * from the pipeline slot pool.
 *
 * Owns: the one lease type, minted by the engine's admission (a run holds
 * one), carried by the dispatch record to a child, and read by a chip's lane
 * and ChipWorker (later also the mailbox frame trailer); the pool that mints
 * leases; the per-slot filter that recognises a stale holder.
 * Must never: hand out a generation that is not greater than every earlier
 * one of its slot (a stale holder is recognised only because generations
 * grow), or depend on a layer above util/ (core and chip both use it).
 *
 * Header only: a lease is copied into every dispatch record and checked at
 * every leased chip submit, so nothing here is a call.
 */
#ifndef STRATA_UTIL_LEASE_H
#define STRATA_UTIL_LEASE_H

#include <stdint.h>

/* The pipeline slot pool: a worker admits at most 2 runs at once
 * (pipeline_depth 1 or 2), each holding one slot. */
#define ST_LEASE_SLOTS 2u

typedef struct st_lease {
    uint32_t slot;       /* < ST_LEASE_SLOTS */
    uint32_t reserved;   /* 0: named so a lease has no padding hole when copied into a frame */
    uint64_t generation; /* != 0; only grows within a slot */
} st_lease;

_Static_assert(sizeof(st_lease) == 16, "a lease is 16 bytes: it is copied per dispatch");

/* A lease a pool could have minted. */
static inline int st_lease_valid(st_lease l) {
    return l.reserved == 0 && l.generation != 0 && l.slot < ST_LEASE_SLOTS;
}

/* Which slots are held, and the last generation minted per slot. Zero it to
 * start (every generation then starts at 1). */
typedef struct st_lease_pool {
    uint64_t generation[ST_LEASE_SLOTS];
    uint8_t held[ST_LEASE_SLOTS];
} st_lease_pool;

/* Take the lowest free slot with its next generation. 0 if every slot is
 * held (the caller admits no more runs than there are slots). */
static inline int st_lease_take(st_lease_pool *p, st_lease *out) {
    for (uint32_t s = 0; s < ST_LEASE_SLOTS; s++)
        if (!p->held[s]) {
            p->held[s] = 1;
            *out = (st_lease){.slot = s, .generation = ++p->generation[s]};
            return 1;
        }
    return 0;
}

/* The holder is done with l; its slot may be taken again (with a newer
 * generation). */
static inline void st_lease_return(st_lease_pool *p, st_lease l) {
    p->held[l.slot] = 0;
}

/* The newest generation seen per slot: an older one is stale, an equal one
 * is admitted (one lease may dispatch several tasks, so several runs on a
 * chip). Zero it (st_lease_filter_reset) to start. */
typedef struct st_lease_filter {
    uint64_t newest[ST_LEASE_SLOTS];
} st_lease_filter;

/* l would pass; nothing is recorded. */
static inline int st_lease_filter_admits(const st_lease_filter *f, st_lease l) {
    return l.slot < ST_LEASE_SLOTS && l.generation >= f->newest[l.slot];
}

/* Re-check and record l as its slot's newest. 0 (nothing recorded) if stale. */
static inline int st_lease_filter_commit(st_lease_filter *f, st_lease l) {
    if (!st_lease_filter_admits(f, l))
        return 0;
    f->newest[l.slot] = l.generation;
    return 1;
}

static inline void st_lease_filter_reset(st_lease_filter *f) {
    for (uint32_t s = 0; s < ST_LEASE_SLOTS; s++)
        f->newest[s] = 0;
}

#endif
