/* core/arena.c - sub-allocation of the shared arena (core/arena.h).
 *
 * Owns: the free list of the arena and its lock.
 * Must never: touch the region's bytes except to zero memory handed out
 * again, or take another lock under its own.
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

int st_arena_create(uint64_t bytes, st_arena **out) {
    *out = NULL;
    uint64_t len = 0;
    if (bytes == 0 || !st_round_up_u64(bytes, 4096, &len) || len > (1ull << 46))
        return st_fail(STRATA_EINVAL, "shared arena: shared_arena_bytes = %llu (1 .. 2^46)",
                       (unsigned long long)bytes);
    void *p = st_map_anon((size_t)len, MAP_SHARED | MAP_NORESERVE);
    if (!p)
        return st_fail(STRATA_ENOMEM,
                       "shared arena: could not reserve shared_arena_bytes = %llu of shared "
                       "memory: lower shared_arena_bytes",
                       (unsigned long long)bytes);
    st_arena *a = st_calloc(1, sizeof *a);
    st_arena_extent *ex = st_malloc(sizeof *ex * 8);
    if (!a || !ex) {
        st_free(a);
        st_free(ex);
        st_unmap(p, (size_t)len);
        return st_fail_nomem("shared arena: its record and free list", sizeof *a + sizeof *ex * 8);
    }
    a->base = p;
    a->bytes = len;
    a->owner = getpid();
    a->free = ex;
    a->cap_free = 8;
    a->free[0] = (st_arena_extent){0, len};
    a->nfree = 1;
    a->high_water = 0;
    a->used = 0;
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
    st_unmap(a->base, (size_t)a->bytes);
    st_free(a->free);
    st_free(a);
}

int st_arena_is_owner(const st_arena *a) {
    return a->owner == getpid();
}

void *st_arena_alloc(st_arena *a, size_t n) {
    uint64_t len = 0;
    if (n == 0 || !st_round_up_u64(n, ST_ARENA_GRANULE, &len))
        len = UINT64_MAX;
    st_mutex_lock(&a->lock);
    uint32_t i = 0;
    while (i < a->nfree && a->free[i].len < len)
        i++;
    if (i == a->nfree) {
        uint64_t used = a->used, total = a->bytes;
        st_mutex_unlock(&a->lock);
        st_fail(STRATA_ENOMEM,
                "the shared arena has no room for %zu bytes (%llu of %llu bytes in use, or too "
                "fragmented): raise shared_arena_bytes",
                n, (unsigned long long)used, (unsigned long long)total);
        return NULL;
    }
    uint64_t off = a->free[i].off;
    a->free[i].off += len;
    a->free[i].len -= len;
    if (a->free[i].len == 0) {
        memmove(&a->free[i], &a->free[i + 1], sizeof a->free[0] * (a->nfree - i - 1));
        a->nfree--;
    }
    uint64_t dirty = off < a->high_water ? a->high_water - off : 0; /* handed out before */
    if (dirty > len)
        dirty = len;
    if (off + len > a->high_water)
        a->high_water = off + len;
    a->used += len;
    st_mutex_unlock(&a->lock);
    uint8_t *p = a->base + off;
    if (dirty)
        memset(p, 0, (size_t)dirty); /* outside the lock: the extent is ours alone */
    return p;
}

void st_arena_free(st_arena *a, void *p, size_t n) {
    uint64_t len = 0;
    if (!p || !st_round_up_u64(n, ST_ARENA_GRANULE, &len))
        return;
    uint64_t off = (uint64_t)((uint8_t *)p - a->base);
    st_mutex_lock(&a->lock);
    uint32_t i = 0; /* first extent after off */
    while (i < a->nfree && a->free[i].off < off)
        i++;
    int joins_prev = i > 0 && a->free[i - 1].off + a->free[i - 1].len == off;
    int joins_next = i < a->nfree && off + len == a->free[i].off;
    if (joins_prev && joins_next) {
        a->free[i - 1].len += len + a->free[i].len;
        memmove(&a->free[i], &a->free[i + 1], sizeof a->free[0] * (a->nfree - i - 1));
        a->nfree--;
    } else if (joins_prev) {
        a->free[i - 1].len += len;
    } else if (joins_next) {
        a->free[i].off = off;
        a->free[i].len += len;
    } else {
        if (a->nfree == a->cap_free) {
            size_t bytes = 0;
            st_arena_extent *g =
                st_grow_raw(a->free, &a->cap_free, a->nfree + 1, sizeof *g, 8, NULL, &bytes);
            if (!g) { /* no room to record it: the extent is lost, never handed out twice */
                a->used -= len;
                st_mutex_unlock(&a->lock);
                return;
            }
            a->free = g;
        }
        memmove(&a->free[i + 1], &a->free[i], sizeof a->free[0] * (a->nfree - i));
        a->free[i] = (st_arena_extent){off, len};
        a->nfree++;
    }
    a->used -= len;
    st_mutex_unlock(&a->lock);
}
