/* bench/bench_trace.c - what tracing costs: per task with tracing compiled in
 * but off, per task with tracing on, and per recorded event.
 *
 * Owns: the per-task configurations, measured interleaved on fresh workers so
 * each repetition's drift hits all alike: the anchor "no tracing" (this file
 * built as bench_trace_notrace, against a library whose trace points are
 * compiled out, bench/CMakeLists.txt; run as a child process per repetition,
 * which prints its figure), tracing compiled in but off (no trace_path, no
 * collect_stats), and on (a trace_path); and the recorder's tight loop (one
 * clock read and one 64-byte record per event, as the engine records them).
 * Must never: time the file write (strata_worker_close) or a full lane (a
 * lane is sized for every event of a sample, so nothing is dropped), or let
 * STRATA_TRACE from the environment switch a configuration on (unset first).
 *
 * bench-needs: internals
 */
#include "bench_common.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <strata/strata.h>

#include "util/stamp.h"
#include "util/trace_buffer.h"

#define TARGET_OFF_RATIO 1.02
#define TARGET_EVENT_US 0.030

enum { CFG_ANCHOR, CFG_OFF, CFG_ON, NCFG };

#define SAMPLE_ARG "--sample" /* a child's one figure (sample_main) */

typedef struct loop {
    strata_callable empty;
    int ntasks;
} loop;

static int empty_task(const strata_task_view *a, void *user) {
    (void)a;
    (void)user;
    return 0;
}

static int submit_independent(strata_orch *o, void *arg) {
    const loop *l = arg;
    strata_task_args a;
    strata_args_init(&a);
    for (int i = 0; i < l->ntasks; i++)
        STRATA_TRY(strata_orch_submit_sub(o, l->empty, &a));
    return STRATA_OK;
}

static int failed(const char *what, int rc) {
    fprintf(stderr, "strata: %s failed: %s: %s\n", what, strata_status_name(rc),
            strata_error_message());
    return -1;
}

/* One sample: a fresh worker in configuration cfg runs ntasks independent
 * empty tasks; returns µs per task, or -1. */
static double sample(int cfg, int workers, int ntasks, const char *trace_path) {
    strata_worker_config c;
    strata_worker_config_init(&c);
    c.sub_workers = (uint32_t)workers;
    if (cfg == CFG_OFF || cfg == CFG_ANCHOR) /* what a caller writes to keep tracing off */
        c.trace_path = NULL, c.collect_stats = 0;
    if (cfg == CFG_ON) {
        c.trace_path = trace_path;
        c.trace_events_per_lane = (uint32_t)ntasks + 1024; /* a task event each, and the runs' */
    }
    strata_worker *w = NULL;
    loop l = {.ntasks = ntasks};
    int rc = strata_worker_create(&c, &w);
    if (rc)
        return failed("strata_worker_create", rc);
    if ((rc = strata_worker_register_sub(w, "empty", empty_task, NULL, &l.empty)) ||
        (rc = strata_worker_init(w))) {
        strata_worker_destroy(w);
        return failed("worker setup", rc);
    }
    bench_settle();
    uint64_t t0 = bench_now_ns();
    rc = strata_worker_run(w, submit_independent, &l);
    uint64_t t1 = bench_now_ns();
    strata_worker_close(w); /* writes the trace: outside the timed part */
    int trc = strata_worker_trace_status(w);
    strata_worker_destroy(w);
    if (rc)
        return failed("strata_worker_run", rc);
    if (trc)
        return failed("writing the trace", trc);
    return (double)(t1 - t0) / 1e3 / ntasks;
}

/* A child's figure: --sample CFG WORKERS NTASKS prints µs per task. A first
 * sample warms what a fresh process lacks (the allocator's arenas, code
 * pages); the second is the figure. Every per-task sample runs this way, the
 * anchor in bench_trace_notrace and the others in bench_trace itself, so all
 * three are measured alike. */
static int sample_main(int argc, char **argv) {
    unsetenv("STRATA_TRACE");
    if (argc != 5) {
        fprintf(stderr, "usage: %s " SAMPLE_ARG " CFG WORKERS NTASKS (run by bench_trace)\n",
                argv[0]);
        return 2;
    }
    int cfg = atoi(argv[2]), workers = atoi(argv[3]), ntasks = atoi(argv[4]);
#ifdef BENCH_TRACE_ANCHOR
    if (cfg != CFG_ANCHOR) {
        fprintf(stderr, "%s: built without trace points: configuration %d only\n", argv[0],
                CFG_ANCHOR);
        return 2;
    }
#endif
    char path[128];
    snprintf(path, sizeof path, "/tmp/strata-bench-trace-%ld.json", (long)getpid());
    double us = sample(cfg, workers, ntasks, path);
    if (us >= 0)
        us = sample(cfg, workers, ntasks, path);
    unlink(path);
    if (us < 0)
        return 1;
    printf("%.6f\n", us);
    return 0;
}

#ifdef BENCH_TRACE_ANCHOR
int main(int argc, char **argv) {
    if (argc < 2 || strcmp(argv[1], SAMPLE_ARG) != 0) {
        fprintf(stderr, "%s: the \"no tracing\" anchor of bench_trace, run by it\n", argv[0]);
        return 2;
    }
    return sample_main(argc, argv);
}
#else

/* One sample of configuration cfg in a child process; -1 on failure. */
static double child_sample(int cfg, int workers, int ntasks) {
    char self[1024], cmd[2400];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0)
        return -1;
    self[n] = '\0';
    snprintf(cmd, sizeof cmd, "'%s' " SAMPLE_ARG " %d %d %d",
             cfg == CFG_ANCHOR ? BENCH_TRACE_ANCHOR_EXE : self, cfg, workers, ntasks);
    FILE *p = popen(cmd, "r");
    if (!p) {
        fprintf(stderr, "strata: cannot run %s\n", cmd);
        return -1;
    }
    double us = -1;
    if (fscanf(p, "%lf", &us) != 1)
        us = -1;
    int st = pclose(p);
    if (st != 0 || us < 0) {
        fprintf(stderr, "strata: the sample '%s' failed (status %d)\n", cmd, st);
        return -1;
    }
    return us;
}

static int measure_per_task(const bench_options *opt, bench_report *report) {
    int ntasks = opt->quick ? 2000 : 100000; /* long samples: the three configs differ little */
    static bench_series s[NCFG];
    for (int r = 0; r < opt->reps; r++)
        for (int k = 0; k < NCFG; k++) {
            int cfg = (k + r) % NCFG; /* rotate the order */
            double us = child_sample(cfg, opt->workers, ntasks);
            if (us < 0)
                return -1;
            bench_series_add(&s[cfg], us);
        }
    bench_table *t = bench_report_table(report,
                                        "per task: %d independent empty sub tasks per run, %d "
                                        "workers, fresh process per sample, median of %d; anchor: "
                                        "trace points compiled out",
                                        ntasks, opt->workers, opt->reps);
    bench_row *row = bench_table_row(t, "per task, tracing off", "us", &s[CFG_OFF], 0);
    bench_row_compare(row, "no tracing", bench_measured(&s[CFG_ANCHOR]), TARGET_OFF_RATIO);
    row = bench_table_row(t, "per task, tracing on", "us", &s[CFG_ON], 0);
    bench_row_compare(row, "no tracing", bench_measured(&s[CFG_ANCHOR]), 0);
    bench_table_print(t);
    return 0;
}

/* The recorder alone: each event reads the clock and fills one record, as
 * the engine's record points do (the stamp of util/stamp.h). */
static double per_event_once(st_trace_lane *l) {
    atomic_store_explicit(&l->count, 0, memory_order_relaxed);
    uint64_t t0 = bench_now_ns();
    for (uint32_t i = 0; i < l->cap; i++) {
        uint64_t now = st_stamp();
        st_trace_event *e = st_trace_lane_next(l, now);
        if (!e)
            break;
        *e = (st_trace_event){.ts = now, .run = 1, .a = i, .kind = 1};
        st_trace_lane_commit(l);
    }
    uint64_t t1 = bench_now_ns();
    return (double)(t1 - t0) / 1e3 / l->cap;
}

static int measure_per_event(const bench_options *opt, bench_report *report) {
    st_trace_lane l;
    st_stamp_setup(); /* as strata_worker_create does */
    if (st_trace_lane_init(&l, opt->quick ? 1u << 14 : 1u << 18) != STRATA_OK)
        return failed("st_trace_lane_init", STRATA_ENOMEM);
    static bench_series s;
    per_event_once(&l); /* the lane's pages and the clock's code paths warm */
    for (int r = 0; r < opt->reps; r++)
        bench_series_add(&s, per_event_once(&l));
    st_trace_lane_free(&l);
    bench_table *t = bench_report_table(report,
                                        "per recorded event: clock read + one 64-byte record, "
                                        "tight loop, median of %d",
                                        opt->reps);
    bench_table_row(t, "per event", "us", &s, TARGET_EVENT_US);
    bench_table_print(t);
    return 0;
}

int main(int argc, char **argv) {
    if (argc > 1 && strcmp(argv[1], SAMPLE_ARG) == 0)
        return sample_main(argc, argv);
    bench_options opt;
    int prc = bench_parse_args(argc, argv,
                               "What tracing costs: per task off and on beside a worker "
                               "without tracing, and per recorded event.",
                               &opt);
    if (prc)
        return prc > 0 ? 0 : 2;
    unsetenv("STRATA_TRACE"); /* the configurations say what is traced, not the environment */
    static bench_report report;
    bench_report_init(&report, &opt);
    int rc = measure_per_task(&opt, &report);
    if (!rc)
        rc = measure_per_event(&opt, &report);
    if (rc)
        return 1;
    bench_report_print_verdict(&report);
    return bench_report_write_json(&report) ? 1 : 0;
}
#endif
