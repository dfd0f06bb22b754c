/* core/trace_child.h - a process child's own trace: a region of shared
 * memory the parent maps before the fork, that the child records into, and
 * that the parent merges into its file at close (docs/tracing.md, "Child
 * processes record their own events").
 *
 * Owns: the region's layout (a lane of the recorder's events, the child's
 * pid, and for a child Worker the names its events refer to, and the name
 * records of its own child Workers), for core only.
 * Must never: block or allocate on a record call, or be read by the parent
 * before the child stopped (close stops every child before the file).
 */
#ifndef STRATA_CORE_TRACE_CHILD_H
#define STRATA_CORE_TRACE_CHILD_H

#include <stdatomic.h>
#include <stdint.h>

#include "core/endpoint.h"
#include "strata/worker.h"
#include "util/trace_buffer.h"

/* What a worker's events refer to by number: written by a child Worker at
 * its close (the parent builds its own at write time). */
typedef struct st_trace_names {
    int32_t level;
    int32_t pid; /* the process of the worker's engine */
    int32_t nsubs, nnext;
    uint32_t ncallables;
    int32_t sub_pid[STRATA_MAX_SUB_WORKERS];
    int32_t next_pid[STRATA_MAX_NEXT_LEVEL];
    char next_label[STRATA_MAX_NEXT_LEVEL][64];
    char callable[ST_MAX_CALLABLES][64];
} st_trace_names;

/* A child Worker's own child Workers' names travel in its lane, as
 * ST_TEV_NAME records of their origin (core/trace.h), the header first: the
 * region's table holds one worker's names. Each record carries ST_NM_BYTES
 * of payload in ts, t[0..3] and run (in that order, as 64-bit words); status
 * is the entry, a its index, worker the ST_NM_BYTES chunk of a string.
 *   ST_NM_HEAD:       int32 level, pid, nsubs, nnext, ncallables
 *   ST_NM_SUB_PIDS:   int32 sub_pid[a ..], up to ST_NM_BYTES / 4 of them
 *   ST_NM_NEXT_PIDS:  int32 next_pid[a ..], likewise
 *   ST_NM_NEXT_LABEL, ST_NM_CALLABLE: bytes [48 worker, ...) of the 64-byte
 *                     string a, the second chunk only for a longer string */
enum { ST_NM_HEAD = 0, ST_NM_SUB_PIDS, ST_NM_NEXT_PIDS, ST_NM_NEXT_LABEL, ST_NM_CALLABLE };
enum { ST_NM_BYTES = 48, ST_NM_PIDS = ST_NM_BYTES / 4, ST_NM_STR = 64 };

typedef struct st_trace_region {
    st_trace_lane lane;     /* ev: the records after this header, in the same mapping */
    uint32_t kind;          /* st_trace_region_kind */
    uint32_t depth;         /* the recorder's st_trace.depth (set by the mapper) */
    _Atomic int32_t pid;    /* the child's, stored when it starts recording */
    _Atomic uint32_t named; /* 1 once names is complete (a child Worker's close) */
    uint64_t t_ready;       /* ST_REGION_WORKER: the inner worker's init (its ts 0) */
    uint64_t dropped_ts;    /* copied from the lane at the child's close */
    uint64_t times_rejected;
    st_trace_msgs msgs;
    st_trace_names names;
} st_trace_region;

/* Parent, at write time: region j of w as a reader may use it. Everything in
 * the region is the child's to scribble on, so nothing of it is trusted: the
 * records' address and the cap are the parent's own, the count and every
 * table size are clamped, the names and messages are copied and terminated.
 * STRATA_OK with v->ev NULL when there is nothing to read; STRATA_ENOMEM. */
typedef struct st_trace_region_view {
    uint32_t kind;
    const st_trace_event *ev;
    uint32_t n;
    uint64_t dropped, full_ts, times_rejected;
    int named;             /* names and msgs are filled (a child Worker that finished init) */
    int32_t pid;           /* names.pid, for a named one */
    st_trace_names *names; /* the copies: freed with st_trace_region_view_free */
    st_trace_msgs *msgs;
} st_trace_region_view;
int st_trace_region_read(const strata_worker *w, int j, st_trace_region_view *v);
void st_trace_region_view_free(st_trace_region_view *v);

/* The calls the exec layer makes on either side of the fork are declared in
 * core/endpoint.h ("Process children's own traces"). */

#endif
