/* core/stats.c - strata_worker_stats and strata_run_stats: copies of the
 * counts and times the engine keeps at each task's end (core/trace.c).
 *
 * Owns: the public statistics calls, the derived figures (means, elapsed
 * time), the trace write status call.
 * Must never: read the engine's figures without the engine lock, or change
 * them.
 */
#include <string.h>

#include "core/engine.h"
#include "core/run.h"
#include "core/trace.h"
#include "util/stamp.h"
#include "util/error.h"

/* The engine keeps durations in stamps (core/trace.h): nanoseconds here. */
static void lane_to_ns(const st_stamp_scale *sc, strata_lane_stats *l) {
    l->busy_ns = st_stamp_span_ns(sc, l->busy_ns);
}

static void worker_stats_to_ns(strata_worker_statistics *out) {
    st_stamp_scale sc = st_stamp_scale_now();
    for (uint32_t i = 0; i < STRATA_MAX_SUB_WORKERS; i++)
        lane_to_ns(&sc, &out->sub[i]);
    lane_to_ns(&sc, &out->helper);
    for (uint32_t j = 0; j < STRATA_MAX_NEXT_LEVEL; j++)
        lane_to_ns(&sc, &out->next[j]);
    out->elapsed_ns = st_stamp_span_ns(&sc, out->elapsed_ns);
    out->overhead_mean_ns = st_stamp_span_ns(&sc, out->overhead_mean_ns);
    out->overhead_max_ns = st_stamp_span_ns(&sc, out->overhead_max_ns);
}

int strata_worker_stats(const strata_worker *cw, strata_worker_statistics *out) {
    if (!cw || !out)
        return st_fail(STRATA_EINVAL, "strata_worker_stats: worker and out must not be NULL");
    strata_worker *w = (strata_worker *)cw; /* the lock is taken, nothing changed */
    st_engine_lock(w);
    *out = w->stats;
    if (!w->trace.t0) { /* not initialised: the tables as they are (init stores them) */
        out->sub_workers = (uint32_t)w->nsubs;
        out->next_level = (uint32_t)w->nnext;
    }
    uint64_t t0 = w->trace.t0;
    uint64_t end = w->trace.t1 ? w->trace.t1 : st_stamp();
    out->elapsed_ns = t0 && end > t0 ? end - t0 : 0; /* in stamps until converted below */
    out->trace_events = st_trace_lane_count(w->trace.lane);
    out->trace_dropped = w->trace.lane->dropped;
    st_engine_unlock(w);
    /* The engine keeps the sum in the mean's place. */
    out->overhead_mean_ns = out->overhead_tasks ? out->overhead_mean_ns / out->overhead_tasks : 0;
    worker_stats_to_ns(out);
    return STRATA_OK;
}

int strata_run_stats(const strata_run *cr, strata_run_statistics *out) {
    if (!cr || !out)
        return st_fail(STRATA_EINVAL, "strata_run_stats: run and out must not be NULL");
    st_run *r = (st_run *)cr;
    strata_worker *w = r->w;
    /* The worker outlives a run's engine reference, not a held handle: a
     * done run's figures are final and read without the lock (its terminal
     * phase was stored after them, and is observed here first). */
    uint32_t phase = atomic_load_explicit(&r->phase.value, memory_order_acquire);
    int done = phase == ST_RUN_COMPLETED || phase == ST_RUN_FAILED;
    if (!done)
        st_engine_lock(w);
    memset(out, 0, sizeof *out);
    out->timed = r->st_timed;
    out->tasks_run = r->st_run;
    out->tasks_failed = r->st_failed;
    out->tasks_not_run = r->st_not_run;
    out->overhead_mean_ns = r->st_ov_n ? r->st_ov_sum / r->st_ov_n : 0;
    out->overhead_max_ns = r->st_ov_max;
    out->critical_path_ns = r->st_crit;
    if (!done)
        st_engine_unlock(w);
    st_stamp_scale sc = st_stamp_scale_now();
    out->overhead_mean_ns = st_stamp_span_ns(&sc, out->overhead_mean_ns);
    out->overhead_max_ns = st_stamp_span_ns(&sc, out->overhead_max_ns);
    out->critical_path_ns = st_stamp_span_ns(&sc, out->critical_path_ns);
    return STRATA_OK;
}

int strata_worker_trace_status(const strata_worker *w) {
    if (!w)
        return st_fail(STRATA_EINVAL, "strata_worker_trace_status: worker is NULL");
    return st_error_raise(&w->trace.status);
}
