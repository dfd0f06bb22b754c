/* util/trace_buffer.h - fixed-size trace event records and the fixed-capacity
 * lane buffer they go into.
 *
 * Owns: the 64-byte event record, a lane (one buffer, one writer), its drop
 * count and the time it filled.
 * Must never: grow, block, or take a lock: a full lane counts the event as
 * dropped and returns. A lane has exactly one writer at a time (its owner:
 * a thread, or whoever holds the lock that guards it); readers read it only
 * after that writer stopped.
 */
#ifndef STRATA_UTIL_TRACE_BUFFER_H
#define STRATA_UTIL_TRACE_BUFFER_H

#include <stdatomic.h>
#include <stdint.h>

/* One recorded event. The meaning of t[] and the ids depends on kind (see
 * core/trace.h); names are never copied in: ids are resolved when the file
 * is written. */
typedef struct st_trace_event {
    uint64_t ts;   /* monotonic ns when it was recorded */
    uint64_t t[4]; /* kind-specific times (monotonic ns) */
    uint64_t run;  /* run id */
    uint32_t a, b; /* kind-specific ids (task index, callable, producer index...) */
    int32_t worker;
    uint16_t kind;
    uint8_t status;
    uint8_t flags;
} st_trace_event;

_Static_assert(sizeof(st_trace_event) == 64, "a trace event is one cache line");

typedef struct st_trace_lane {
    st_trace_event *ev;
    uint32_t cap;
    _Atomic uint32_t count; /* stored with release by the writer, after the record */
    uint64_t dropped;
    uint64_t full_ts; /* when the first event was dropped */
} st_trace_lane;

/* A lane of cap events (cap >= 1). STRATA_ENOMEM naming the size if the
 * buffer cannot be mapped. */
int st_trace_lane_init(st_trace_lane *l, uint32_t cap);
void st_trace_lane_free(st_trace_lane *l);

/* The next free record, or NULL (the event counts as dropped). Commit it
 * with st_trace_lane_commit once filled. */
static inline st_trace_event *st_trace_lane_next(st_trace_lane *l, uint64_t now) {
    uint32_t n = atomic_load_explicit(&l->count, memory_order_relaxed);
    if (__builtin_expect(n >= l->cap, 0)) {
        if (l->dropped++ == 0)
            l->full_ts = now;
        return 0;
    }
    return &l->ev[n];
}

/* A release store: a reader in another process may copy the records below
 * the count while the writer goes on (a child Worker draining its chips'
 * regions, core/trace_child.c). On x86 it is the same plain store. */
static inline void st_trace_lane_commit(st_trace_lane *l) {
    uint32_t n = atomic_load_explicit(&l->count, memory_order_relaxed);
    atomic_store_explicit(&l->count, n + 1, memory_order_release);
}

/* Drops counted elsewhere (another lane's, copied in): n more, the first at ts. */
static inline void st_trace_lane_count_drops(st_trace_lane *l, uint64_t n, uint64_t ts) {
    if (l->dropped == 0)
        l->full_ts = ts;
    l->dropped += n;
}

static inline uint32_t st_trace_lane_count(const st_trace_lane *l) {
    return atomic_load_explicit(&((st_trace_lane *)l)->count, memory_order_relaxed);
}

#endif
