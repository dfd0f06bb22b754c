/* core/arena.h - the shared arena strata_buffer_create takes memory from.
 *
 * Owns: one MAP_SHARED | MAP_NORESERVE anonymous region, reserved before a
 * worker forks its process children (so every child sees it at the same
 * address), and its sub-allocation in 64-byte granules: a first-fit free list
 * of extents, sorted by offset, coalesced on free, kept in this process's heap
 * (never inside the region: a child may scribble on shared memory, never on
 * the parent's bookkeeping).
 * Must never: hand out memory twice, hand out memory that is not zero-filled,
 * be reserved after a fork (a child would not see it), or be sub-allocated
 * in any process but the one that reserved it (a forked child holds a stale
 * copy of the free list: what it handed out, the owner would hand out again).
 */
#ifndef STRATA_CORE_ARENA_H
#define STRATA_CORE_ARENA_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "util/futex.h"

#define ST_ARENA_GRANULE 64u

typedef struct st_arena_extent {
    uint64_t off, len; /* bytes, multiples of the granule */
} st_arena_extent;

typedef struct st_arena {
    uint8_t *base; /* NULL: not reserved */
    uint64_t bytes;
    pid_t owner; /* the process that reserved it: the only one that may alloc / free */
    /* Protects everything below. A leaf lock: taken by strata_buffer_create /
     * _destroy with no other lock held, and nothing is taken under it. */
    st_mutex lock;
    st_arena_extent *free; /* sorted by off, never adjacent (coalesced) */
    uint32_t nfree, cap_free;
    uint64_t high_water; /* bytes past it were never handed out: still zero */
    uint64_t used;
    _Atomic uint32_t refs; /* the worker's, plus one per live buffer: a buffer may outlive
                              its worker, the arena lives until the last one is gone */
} st_arena;

/* Reserve `bytes` (rounded up to a page) of shared virtual memory; the
 * caller holds the one reference. STRATA_OK; STRATA_ENOMEM naming
 * shared_arena_bytes. */
int st_arena_create(uint64_t bytes, st_arena **out);
/* Take / drop a reference; the last drop unmaps and frees (NULL: no-op). */
void st_arena_get(st_arena *a);
void st_arena_put(st_arena *a);
/* `n` zero-filled bytes, 64-byte aligned; NULL with STRATA_ENOMEM set (the
 * arena is full: the message names shared_arena_bytes). */
void *st_arena_alloc(st_arena *a, size_t n);
/* 1 if the calling process reserved a (and so may alloc / free), 0 in a
 * forked child: the free list there is a stale copy. Callers refuse first. */
int st_arena_is_owner(const st_arena *a);
/* Give back what st_arena_alloc(a, n) returned. */
void st_arena_free(st_arena *a, void *p, size_t n);

#endif
