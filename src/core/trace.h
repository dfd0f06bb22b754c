/* core/trace.h - the engine's tracing and run statistics: its state, the
 * points the engine records at, and the statistics kept at a task's end.
 *
 * Owns: st_trace (is tracing on, are tasks timed, the file, the lane the
 * engine writes under its lock, the write status), the event kinds, the
 * record calls (trace.c) and the file writer's entry (trace_json.c).
 * Every time it keeps is a stamp (util/stamp.h), converted to nanoseconds
 * only where it leaves: the statistics calls and the file.
 * Must never: read the clock or record anything when neither tracing nor
 * collect_stats is on (every point is one test of `timed` or `on`), block,
 * or allocate on the record path. All record calls run under the engine
 * lock: the engine lane's one writer is whoever holds it.
 */
#ifndef STRATA_CORE_TRACE_H
#define STRATA_CORE_TRACE_H

#include <stdint.h>

#include "strata/worker.h"
#include "util/error.h"
#include "util/trace_buffer.h"

enum {
    ST_TEV_TASK = 1, /* a task (member) ran: ts end, t[] submit/ready/dispatch/start, a seq,
                        b callable (bits 0-15; callables are < ST_MAX_CALLABLES), member
                        (bits 16-30) and bit 31 set for a group's member, worker, status,
                        flags ST_TEVF_* */
    ST_TEV_NOT_RUN,  /* a task settled unstarted: t[0] submit, a seq, b callable, status */
    ST_TEV_EDGE,     /* a dependency: a producer seq, b consumer seq (recorded at its end) */
    ST_TEV_PHASE,    /* a run phase began: a st_run_phase */
    ST_TEV_WAIT,     /* a capacity wait: t[0] began, ts ended, a 0 window / 1 heap ring */
    ST_TEV_CHIP,     /* a chip task's native phases: t[] prepare start, prepare end, launch,
                        device completion; ts finalize end; a seq, b callable, worker */
    ST_TEV_ERROR,    /* a failed task's message, recorded right after its TASK event: a seq,
                        b member, t[0] its slot in st_trace_msgs */
    ST_TEV_NAME,     /* one entry of a child Worker's child's names (trace_child.c) */
    ST_TEV_DROPS,    /* a child Worker's child dropped t[0] more events, the first at ts */
};
/* A child Worker copies its own child Workers' records into its lane with
 * their origin in the kind's high bits: 0 its own, 1 + k its next-level
 * child k's (ST_TRACE_ORIGINS - 1 of them). The file's writer draws each
 * origin as a worker of its own. */
#define ST_TEV_KIND(k) ((unsigned)(k)&0xfu)
#define ST_TEV_ORIGIN(k) ((unsigned)(k) >> 4)
#define ST_TEV_FROM(kind, origin) ((uint16_t)((kind) | (origin) << 4))
#define ST_TRACE_ORIGINS (STRATA_MAX_NEXT_LEVEL + 1)
_Static_assert(ST_TRACE_ORIGINS << 4 <= 0xffff, "an origin fits the kind's high bits");
_Static_assert(ST_TEV_DROPS <= 0xf, "a kind fits the low bits");
/* The deepest worker that records: a top-level worker is 0, its child Workers
 * 1, theirs 2 (copied up by the depth-1 worker). A worker at this depth maps
 * no region for a child Worker of its own. */
#define ST_TRACE_MAX_DEPTH 2u
enum { ST_TEVF_MEASURED = 1 }; /* start/end were read where the body ran */
/* The phase value of an ST_TEV_PHASE event that ends the building span: the
 * orchestration function returned (the run's own phases are st_run_phase). */
#define ST_TRACE_BUILT 0u

/* 0: the recording and timing hooks are compiled out (CMake
 * STRATA_TRACE_COMPILED=OFF, and bench_trace's "no tracing" anchor): every
 * point below folds to nothing and tracing cannot be switched on. */
#ifndef STRATA_TRACE_COMPILED
#define STRATA_TRACE_COMPILED 1
#endif
/* The engine's tests at its record points: tracing on, tasks timed. */
#define ST_TRACING(w) (STRATA_TRACE_COMPILED && (w)->trace.on)
#define ST_TIMED(w) (STRATA_TRACE_COMPILED && (w)->trace.timed)

/* Worker numbers in a task event: sub i is i, the helper is nsubs, next-level
 * worker j is ST_TRACE_NEXT + j. */
#define ST_TRACE_NEXT 0x10000

/* The messages of the first failed tasks of a trace, kept for the file (a
 * fixed table: later failures keep their status, not their text). */
#define ST_TRACE_MSGS 64
#define ST_TRACE_MSG_LEN 256
typedef struct st_trace_msgs {
    uint32_t n;
    char text[ST_TRACE_MSGS][ST_TRACE_MSG_LEN];
} st_trace_msgs;

typedef struct st_trace {
    int on;          /* recording a trace */
    int env_allowed; /* a top-level worker: STRATA_TRACE applies (never a child Worker) */
    int timed;       /* tasks are timed: on || collect_stats */
    char *path;      /* the file, written at close */
    uint64_t t0;     /* the stamp of ts 0 (init; util/stamp.h) */
    uint64_t t1;     /* the stamp at close: the end of elapsed_ns */
    st_trace_lane engine;
    st_trace_lane *lane; /* where the record points write: &engine, or the region of `into` */
    st_trace_msgs *msgs; /* failed tasks' messages: the worker's own, or the region's */
    int msgs_owned;      /* msgs was allocated here (freed at destroy) */
    struct st_trace_region *into; /* a child Worker in a process: its parent's region (no file) */
    /* The parent's regions for its process children (trace_child.c), by next-level id. */
    struct st_trace_region *child[STRATA_MAX_NEXT_LEVEL];
    uint32_t depth; /* 0 a top-level worker; one more for each child Worker level below */
    /* A worker recording `into` a region: how many records, drops and
     * rejected times of each child region it copied into its lane so far, and
     * whether a child Worker's names went there (st_trace_regions_drain). */
    uint32_t drained[STRATA_MAX_NEXT_LEVEL];
    uint64_t drained_drops[STRATA_MAX_NEXT_LEVEL];
    uint64_t drained_rejected[STRATA_MAX_NEXT_LEVEL];
    uint8_t names_sent[STRATA_MAX_NEXT_LEVEL];
    uint64_t times_rejected; /* completions whose start/end failed the bounds (trace.c) */
    st_error status;         /* writing the file */
} st_trace;

struct strata_worker;
struct st_slot;
struct st_completion;
struct strata_run;

/* At create: tracing from cfg->trace_path or STRATA_TRACE (a second worker
 * of the process gets FILE.2, ...). */
int st_trace_create(struct strata_worker *w);
void st_trace_destroy(struct strata_worker *w);
/* At init: ts 0. */
void st_trace_start(struct strata_worker *w);
/* At close, every child stopped: the file. */
void st_trace_finish(struct strata_worker *w);

/* The record points (engine lock held). */
void st_trace_task_end(struct strata_worker *w, struct st_slot *s, const struct st_completion *c);
void st_trace_not_run(struct strata_worker *w, struct st_slot *s);
void st_trace_phase(struct strata_worker *w, struct strata_run *r, uint32_t phase);
void st_trace_wait(struct strata_worker *w, uint64_t began, int heap);
/* Counts every task end, timed or not (engine lock held). */
void st_stats_count(struct strata_worker *w, struct st_slot *s, const struct st_completion *c);

/* The regions of process children (trace_child.c): unmapped at destroy. */
void st_trace_regions_free(struct strata_worker *w);
/* A worker that records into its parent's region (a child Worker) copies its
 * own process chips' and child Workers' new records into its lane: the
 * parent's writer reads only its own regions, never the ones its children
 * mapped. Engine lock held; at each of its runs' ends (st_trace_phase), when
 * the run's next-level tasks have all completed and so recorded theirs. */
void st_trace_regions_drain(struct strata_worker *w);
/* The names a worker's events refer to, from w itself (trace_child.c). */
struct st_trace_names;
void st_trace_names_of(struct strata_worker *w, struct st_trace_names *out);
/* The names of origin `origin` from its ST_TEV_NAME records in ev[0..n)
 * (a region's, untrusted: every size clamped, every string terminated): 1, or
 * 0 when its first entry is missing (dropped, or never written). */
int st_trace_names_decode(const st_trace_event *ev, uint32_t n, unsigned origin,
                          struct st_trace_names *out);

/* The file (trace_json.c): STRATA_OK or the failure, described. */
int st_trace_write(struct strata_worker *w, const char *path);

#endif
