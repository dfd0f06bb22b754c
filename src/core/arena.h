/* core/arena.h - the shared arenas strata_buffer_create takes memory from.
 *
 * Owns: a worker's list of MAP_SHARED | MAP_NORESERVE anonymous regions, the
 * first reserved at strata_worker_create (so every buffer, even one made
 * before strata_worker_init, lives in memory every process child forked
 * later sees at the same address), and their sub-allocation in 64-byte
 * granules: small sizes from per-size free lists (O(1) alloc and free),
 * larger ones first fit over each region's sorted, coalesced extent list;
 * memory faulted in 2 MiB at a time as a region's high-water mark advances.
 * All bookkeeping lives in this process's heap, never inside a region: a
 * child may scribble on shared memory, never on the parent's free lists.
 * Must never: hand out memory twice, hand out memory that is not
 * zero-filled, add a region once the worker's process children may have
 * been forked (they would not see it: the arena is sealed first), or be
 * sub-allocated in any process but the one that reserved it (a forked child
 * holds a stale copy of the free lists: what it handed out, the owner would
 * hand out again).
 */
#ifndef STRATA_CORE_ARENA_H
#define STRATA_CORE_ARENA_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "util/futex.h"

#define ST_ARENA_GRANULE 64u
#define ST_ARENA_SMALL_MAX (16u << 10) /* sizes up to this: per-size free lists */
#define ST_ARENA_SMALL_CLASSES (ST_ARENA_SMALL_MAX / ST_ARENA_GRANULE)
#define ST_ARENA_FAULT_STEP (2ull << 20)  /* bytes faulted in at once past the high water */
#define ST_ARENA_OWN_MAP_MIN (2ull << 20) /* unsealed: buffers this big get their own mapping */
#define ST_ARENA_MAX_REGIONS 32

typedef struct st_arena_extent {
    uint64_t off, len; /* bytes, multiples of the granule */
} st_arena_extent;

typedef struct st_arena_region {
    uint8_t *base;
    uint64_t bytes;
    st_arena_extent *free; /* sorted by off, never adjacent (coalesced) */
    uint32_t nfree, cap_free;
    uint64_t high_water; /* bytes past it were never handed out: still zero */
    uint64_t populated;  /* bytes below it (past the high water) were faulted in ahead */
} st_arena_region;

typedef struct st_arena_stack { /* freed blocks of one small size */
    uint8_t **items;
    uint32_t n, cap;
} st_arena_stack;

typedef struct st_arena {
    pid_t owner;           /* the process that reserved it: the only one that may alloc / free */
    uint64_t region_bytes; /* size of each region added (shared_arena_bytes, page-rounded) */
    /* Protects everything below. A leaf lock: taken by strata_buffer_create /
     * _destroy and by the worker's init (st_arena_seal) with no other lock
     * held, and nothing is taken under it. */
    st_mutex lock;
    st_arena_region regions[ST_ARENA_MAX_REGIONS];
    uint32_t nregions;
    int sealed; /* process children may exist: no region may be added, no own mapping made */
    st_arena_stack small[ST_ARENA_SMALL_CLASSES]; /* [len / granule - 1] */
    uint64_t used;                                /* bytes handed out of the regions */
    _Atomic uint32_t refs; /* the worker's, plus one per live buffer: a buffer may outlive
                              its worker, the arena lives until the last one is gone */
} st_arena;

/* Reserve a first region of `bytes` (rounded up to a page) of shared
 * virtual memory; the caller holds the one reference. STRATA_OK; STRATA_EINVAL
 * or STRATA_ENOMEM naming shared_arena_bytes. */
int st_arena_create(uint64_t bytes, st_arena **out);
/* Take / drop a reference; the last drop unmaps and frees (NULL: no-op). */
void st_arena_get(st_arena *a);
void st_arena_put(st_arena *a);
/* From now on no region is added and no buffer gets its own mapping: called
 * before the worker forks its first process child. */
void st_arena_seal(st_arena *a);
/* Undo the seal: only once every process child forked since has been reaped
 * (a failed strata_worker_init), so no process but the owner maps it. */
void st_arena_unseal(st_arena *a);
/* `n` zero-filled bytes, 64-byte aligned. *own_map is set to 0, or to n when
 * the memory is a mapping of its own (a large buffer of an unsealed arena:
 * release it with st_unmap, not st_arena_free). NULL with STRATA_ENOMEM set
 * (no room and no region may be added: the message names shared_arena_bytes;
 * or out of memory). */
void *st_arena_alloc(st_arena *a, size_t n, size_t *own_map);
/* 1 if the calling process reserved a (and so may alloc / free), 0 in a
 * forked child: the free lists there are a stale copy. Callers refuse first. */
int st_arena_is_owner(const st_arena *a);
/* Give back what st_arena_alloc(a, n) returned with *own_map == 0. */
void st_arena_free(st_arena *a, void *p, size_t n);
/* Bytes handed out of the regions and not yet given back (rounded sizes). */
uint64_t st_arena_used(st_arena *a);

#endif
