/* core/arena.c - sub-allocation of the shared arenas (core/arena.h).
 *
 * Owns: the regions of an arena, their extent lists, the small-size free
 * lists, faulting fresh memory in ahead of use, and the arena's lock.
 * Must never: touch a region's bytes except to zero memory handed out again
 * or to fault in memory no one has been handed yet, or take another lock
 * under its own.
 */
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "core/arena.h"
#include "strata/status.h"
#include "util/alloc.h"
#include "util/checked.h"
#include "util/error.h"
#include "util/growable.h"

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23 /* Linux 5.14; older kernels answer EINVAL: pages are touched */
#endif

static int region_init(st_arena_region *r, uint64_t bytes) {
    void *p = st_map_anon((size_t)bytes, MAP_SHARED | MAP_NORESERVE);
    st_arena_extent *ex = st_malloc(sizeof *ex * 8);
    if (!p || !ex) {
        if (p)
            st_unmap(p, (size_t)bytes);
        st_free(ex);
        return STRATA_ENOMEM;
    }
    *r = (st_arena_region){.base = p, .bytes = bytes, .free = ex, .nfree = 1, .cap_free = 8};
    r->free[0] = (st_arena_extent){0, bytes};
    return STRATA_OK;
}

int st_arena_create(uint64_t bytes, st_arena **out) {
    *out = NULL;
    uint64_t len = 0;
    if (bytes == 0 || !st_round_up_u64(bytes, 4096, &len) || len > (1ull << 46))
        return st_fail(STRATA_EINVAL, "shared arena: shared_arena_bytes = %llu (1 .. 2^46)",
                       (unsigned long long)bytes);
    st_arena *a = st_calloc(1, sizeof *a);
    if (!a)
        return st_fail_nomem("shared arena: its record", sizeof *a);
    if (region_init(&a->regions[0], len) != STRATA_OK) {
        st_free(a);
        return st_fail(STRATA_ENOMEM,
                       "shared arena: cannot reserve shared_arena_bytes = %llu of shared "
                       "memory (out of memory): lower shared_arena_bytes",
                       (unsigned long long)bytes);
    }
    a->nregions = 1;
    a->region_bytes = len;
    a->owner = getpid();
    atomic_init(&a->lock.word, 0);
    atomic_init(&a->refs, 1);
    *out = a;
    return STRATA_OK;
}

void st_arena_get(st_arena *a) {
    atomic_fetch_add_explicit(&a->refs, 1, memory_order_relaxed);
}

void st_arena_put(st_arena *a) {
    if (!a || atomic_fetch_sub_explicit(&a->refs, 1, memory_order_acq_rel) != 1)
        return;
    for (uint32_t i = 0; i < a->nregions; i++) {
        st_unmap(a->regions[i].base, (size_t)a->regions[i].bytes);
        st_free(a->regions[i].free);
    }
    for (uint32_t c = 0; c < ST_ARENA_SMALL_CLASSES; c++)
        st_free(a->small[c].items);
    st_free(a);
}

static void set_sealed(st_arena *a, int sealed) {
    st_mutex_lock(&a->lock);
    a->sealed = sealed;
    st_mutex_unlock(&a->lock);
}

void st_arena_seal(st_arena *a) {
    set_sealed(a, 1);
}

void st_arena_unseal(st_arena *a) {
    set_sealed(a, 0);
}

int st_arena_is_owner(const st_arena *a) {
    return a->owner == getpid();
}

uint64_t st_arena_used(st_arena *a) {
    st_mutex_lock(&a->lock);
    uint64_t u = a->used;
    st_mutex_unlock(&a->lock);
    return u;
}

/* First fit in r: the offset of len bytes taken, or UINT64_MAX. The front of
 * the list is nearly always big enough, so a scan is short in practice; it is
 * bounded by the region's extents, and small sizes never come back here. */
static uint64_t extent_take(st_arena_region *r, uint64_t len) {
    uint32_t i = 0;
    while (i < r->nfree && r->free[i].len < len)
        i++;
    if (i == r->nfree)
        return UINT64_MAX;
    uint64_t off = r->free[i].off;
    r->free[i].off += len;
    r->free[i].len -= len;
    if (r->free[i].len == 0) {
        memmove(&r->free[i], &r->free[i + 1], sizeof r->free[0] * (r->nfree - i - 1));
        r->nfree--;
    }
    return off;
}

/* The first extent at or after off (binary search: the list is sorted). */
static uint32_t extent_after(const st_arena_region *r, uint64_t off) {
    uint32_t lo = 0, hi = r->nfree;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (r->free[mid].off < off)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* 0 if there was no room to record it: the extent is lost, never handed out twice. */
static int extent_give(st_arena_region *r, uint64_t off, uint64_t len) {
    uint32_t i = extent_after(r, off);
    int joins_prev = i > 0 && r->free[i - 1].off + r->free[i - 1].len == off;
    int joins_next = i < r->nfree && off + len == r->free[i].off;
    if (joins_prev && joins_next) {
        r->free[i - 1].len += len + r->free[i].len;
        memmove(&r->free[i], &r->free[i + 1], sizeof r->free[0] * (r->nfree - i - 1));
        r->nfree--;
    } else if (joins_prev) {
        r->free[i - 1].len += len;
    } else if (joins_next) {
        r->free[i].off = off;
        r->free[i].len += len;
    } else {
        if (r->nfree == r->cap_free) {
            size_t bytes = 0;
            st_arena_extent *g =
                st_grow_raw(r->free, &r->cap_free, r->nfree + 1, sizeof *g, 8, NULL, &bytes);
            if (!g)
                return 0;
            r->free = g;
        }
        memmove(&r->free[i + 1], &r->free[i], sizeof r->free[0] * (r->nfree - i));
        r->free[i] = (st_arena_extent){off, len};
        r->nfree++;
    }
    return 1;
}

/* Fault in, once, the step of fresh memory an allocation reaching past the
 * high water starts: a run then writes its tiles without a page fault each.
 * Only memory no one holds is touched ([off, off + len) is the caller's,
 * past it nothing was handed out), and a write of zero over zero memory. */
static void fault_ahead(st_arena_region *r, uint64_t off, uint64_t len) {
    if (len >= ST_ARENA_FAULT_STEP || off + len <= r->populated)
        return; /* a large buffer is faulted by its own first touch */
    uint64_t from = off > r->populated ? off : r->populated;
    uint64_t to = (off + len + ST_ARENA_FAULT_STEP - 1) & ~(ST_ARENA_FAULT_STEP - 1);
    if (to > r->bytes)
        to = r->bytes;
    /* madvise wants a page boundary; it never changes a byte, so the part of
     * the first page below `from` (another buffer's, perhaps) is safe. */
    uint64_t page = from & ~(uint64_t)4095;
    if (madvise(r->base + page, (size_t)(to - page), MADV_POPULATE_WRITE) != 0)
        for (uint64_t p = page; p < to; p += 4096) /* one write per page, only in ours */
            ((volatile uint8_t *)r->base)[p < from ? from : p] = 0;
    r->populated = to;
}

/* len bytes out of the regions, a region added if none has room and the
 * arena is not sealed; NULL with the error set. Called with the lock held. */
static uint8_t *take_locked(st_arena *a, uint64_t len, uint64_t *dirty) {
    st_arena_region *r = NULL;
    uint64_t off = UINT64_MAX;
    for (uint32_t i = 0; i < a->nregions && off == UINT64_MAX; i++)
        off = extent_take(r = &a->regions[i], len);
    if (off == UINT64_MAX) {
        if (a->sealed || a->nregions == ST_ARENA_MAX_REGIONS) {
            st_fail(STRATA_ENOMEM,
                    "the shared arena has no room for %llu bytes (%llu bytes in use in %u "
                    "regions of %llu, or too fragmented): raise shared_arena_bytes (%s)",
                    (unsigned long long)len, (unsigned long long)a->used, a->nregions,
                    (unsigned long long)a->region_bytes,
                    a->sealed ? "no region can be added once the worker's process children "
                                "exist: they would not see it"
                              : "every region is in use");
            return NULL;
        }
        uint64_t bytes = len > a->region_bytes ? len : a->region_bytes;
        r = &a->regions[a->nregions];
        if (region_init(r, bytes) != STRATA_OK) {
            st_fail_nomem("the shared arena: a new region", (size_t)bytes);
            return NULL;
        }
        a->nregions++;
        off = extent_take(r, len);
    }
    *dirty = off < r->high_water ? r->high_water - off : 0; /* handed out before */
    if (*dirty > len)
        *dirty = len;
    if (off + len > r->high_water) {
        r->high_water = off + len;
        fault_ahead(r, off, len);
    }
    return r->base + off;
}

static st_arena_stack *small_stack(st_arena *a, uint64_t len) {
    return len <= ST_ARENA_SMALL_MAX ? &a->small[len / ST_ARENA_GRANULE - 1] : NULL;
}

void *st_arena_alloc(st_arena *a, size_t n, size_t *own_map) {
    *own_map = 0;
    uint64_t len = 0;
    if (n == 0 || !st_round_up_u64(n, ST_ARENA_GRANULE, &len) || len > (1ull << 46)) {
        st_fail(STRATA_ENOMEM, "the shared arena cannot hold %zu bytes", n);
        return NULL;
    }
    uint8_t *p = NULL;
    uint64_t dirty = 0;
    st_mutex_lock(&a->lock);
    st_arena_stack *s = small_stack(a, len);
    if (s && s->n > 0) {
        p = s->items[--s->n];
        dirty = len;
    } else if (!a->sealed && len >= ST_ARENA_OWN_MAP_MIN) {
        /* Under the lock: a seal (and so a fork) cannot come between the check and the map. */
        p = st_map_anon(n, MAP_SHARED);
        st_mutex_unlock(&a->lock);
        if (!p)
            st_fail_nomem("the buffer's own mapping", n);
        else
            *own_map = n;
        return p;
    } else {
        p = take_locked(a, len, &dirty);
    }
    if (p)
        a->used += len;
    st_mutex_unlock(&a->lock);
    if (dirty)
        memset(p, 0, (size_t)dirty); /* outside the lock: the block is ours alone */
    return p;
}

static st_arena_region *region_of(st_arena *a, const uint8_t *p) {
    for (uint32_t i = 0; i < a->nregions; i++)
        if (p >= a->regions[i].base && p < a->regions[i].base + a->regions[i].bytes)
            return &a->regions[i];
    return NULL;
}

void st_arena_free(st_arena *a, void *p, size_t n) {
    uint64_t len = 0;
    if (!p || !st_round_up_u64(n, ST_ARENA_GRANULE, &len))
        return;
    st_mutex_lock(&a->lock);
    st_arena_stack *s = small_stack(a, len);
    if (s) {
        int kept = 1;
        if (s->n == s->cap) {
            size_t bytes = 0;
            uint8_t **g = st_grow_raw(s->items, &s->cap, s->n + 1, sizeof *g, 64, NULL, &bytes);
            if (g)
                s->items = g;
            else
                kept = 0; /* no room to record it: lost, never handed out twice */
        }
        if (kept)
            s->items[s->n++] = p;
    } else {
        st_arena_region *r = region_of(a, p);
        if (r)
            extent_give(r, (uint64_t)((uint8_t *)p - r->base), len);
    }
    a->used -= len;
    st_mutex_unlock(&a->lock);
}
