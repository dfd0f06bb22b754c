/* bench/bench_run_cost.c - fixed cost of a strata run, and its per-task cost,
 * from a sweep of tasks per run fitted with a line.
 *
 * Owns: the empty-run and one-task-run timings (through strata_worker_run() and
 * through strata_worker_submit() + strata_run_wait() + strata_run_release()), the
 * 1..256 tasks-per-run sweep with its least-squares fit, and the same sweep on
 * StarPU (insert + starpu_task_wait_for_all) and libgomp (one parallel region
 * per run). Upstream figures are quoted (bench/README.md, "Quoted upstream
 * figures", names their source), never measured here.
 * Must never: mix the fixed and the per-task cost into one figure.
 *
 * bench-needs: starpu openmp
 */
#include "bench_common.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <strata/strata.h>

#ifdef _OPENMP
#include <omp.h>
#endif
#if BENCH_HAVE_STARPU
#include <starpu.h>
#endif

/* Upstream L3 figures (Worker.run() with sub tasks, linear fit over 1..256). */
#define UPSTREAM_FIXED_US 43.3
#define UPSTREAM_PER_TASK_US 8.08
#define UPSTREAM_ONE_TASK_US 51.4 /* the 1-task point of the same sweep */
#define TARGET_RUN_US 5.0

#define NSWEEP 9
static const int sweep_tasks[NSWEEP] = {1, 2, 4, 8, 16, 32, 64, 128, 256};

/* How a strata run is driven. */
typedef enum run_style { STYLE_RUN, STYLE_SUBMIT_WAIT_RELEASE } run_style;

/* ---- strata -------------------------------------------------------------------- */

typedef struct strata_side {
    strata_worker *w;
    strata_callable empty;
    strata_buffer *input_buf;
    strata_tensor input; /* read (IN) by every task: no dependencies between tasks */
} strata_side;

typedef struct strata_run_call {
    const strata_side *side;
    int ntasks;
} strata_run_call;

static int empty_task(const strata_task_view *args, void *user) {
    return 0;
}

static int orchestrate_tasks(strata_orch *o, void *arg) {
    const strata_run_call *call = arg;
    for (int i = 0; i < call->ntasks; i++) {
        strata_task_args a;
        strata_args_init(&a);
        STRATA_TRY(strata_args_add_tensor(&a, &call->side->input, STRATA_IN));
        STRATA_TRY(strata_orch_submit_sub(o, call->side->empty, &a));
    }
    return STRATA_OK;
}

static int strata_fail(const char *what, int rc) {
    fprintf(stderr, "strata: %s failed: %s: %s\n", what, strata_status_name(rc),
            strata_error_message());
    return rc;
}

static int strata_start(strata_side *s, int workers) {
    strata_worker_config cfg;
    int64_t one = 1;
    memset(s, 0, sizeof *s);
    strata_worker_config_init(&cfg);
    cfg.sub_workers = (uint32_t)workers;
    int rc = strata_worker_create(&cfg, &s->w);
    if (rc)
        return strata_fail("strata_worker_create", rc);
    if ((rc = strata_worker_register_sub(s->w, "empty", empty_task, NULL, &s->empty)) != 0)
        return strata_fail("strata_worker_register_sub", rc);
    if ((rc = strata_worker_init(s->w)) != 0)
        return strata_fail("strata_worker_init", rc);
    if ((rc = strata_buffer_create(s->w, sizeof(double), &s->input_buf)) != 0)
        return strata_fail("strata_buffer_create", rc);
    if ((rc = strata_tensor_contiguous(s->input_buf, STRATA_F64, 1, &one, &s->input)) != 0)
        return strata_fail("strata_tensor_contiguous", rc);
    return 0;
}

static void strata_stop(strata_side *s) {
    if (s->w)
        strata_worker_close(s->w);
    strata_buffer_destroy(s->input_buf);
    strata_worker_destroy(s->w);
    s->w = NULL;
}

static int strata_one_run(const strata_side *s, const strata_run_call *call, run_style style) {
    if (style == STYLE_RUN) {
        int rc = strata_worker_run(s->w, orchestrate_tasks, (void *)call);
        return rc ? strata_fail("strata_worker_run", rc) : 0;
    }
    strata_run *h = NULL;
    int rc = strata_worker_submit(s->w, orchestrate_tasks, (void *)call, &h);
    if (rc)
        return strata_fail("strata_worker_submit", rc);
    rc = strata_run_wait(h, STRATA_WAIT_FOREVER);
    if (rc) {
        strata_fail("strata_run_wait", rc);
        strata_run_release(h);
        return rc;
    }
    strata_run_release(h);
    return 0;
}

/* µs per run over `runs` back-to-back runs of `ntasks` tasks each. */
static int strata_sample(const strata_side *s, int ntasks, int runs, run_style style,
                         double *us_per_run) {
    strata_run_call call = {s, ntasks};
    uint64_t t0 = bench_now_ns();
    for (int r = 0; r < runs; r++)
        if (strata_one_run(s, &call, style))
            return -1;
    *us_per_run = (double)(bench_now_ns() - t0) / 1e3 / runs;
    return 0;
}

/* ---- StarPU -------------------------------------------------------------------- */

#if BENCH_HAVE_STARPU
static void starpu_empty(void *buffers[], void *arg) {}

static struct starpu_codelet cl_read = {
    .cpu_funcs = {starpu_empty}, .nbuffers = 1, .modes = {STARPU_R}};

/* A StarPU "run": insert the tasks, then starpu_task_wait_for_all(). */
static int starpu_sample(starpu_data_handle_t input, int ntasks, int runs, double *us_per_run) {
    int rc = 0;
    starpu_resume();
    uint64_t t0 = bench_now_ns();
    for (int r = 0; r < runs && !rc; r++) {
        for (int i = 0; i < ntasks && !rc; i++)
            rc = starpu_task_insert(&cl_read, STARPU_R, input, 0);
        rc = rc ? rc : starpu_task_wait_for_all();
    }
    uint64_t t1 = bench_now_ns();
    starpu_pause();
    if (rc) {
        fprintf(stderr, "starpu: run of %d tasks failed (%d)\n", ntasks, rc);
        return -1;
    }
    *us_per_run = (double)(t1 - t0) / 1e3 / runs;
    return 0;
}
#endif

/* ---- libgomp ------------------------------------------------------------------- */

#ifdef _OPENMP
__attribute__((noinline)) static void gomp_empty(const void *in) {
    __asm__ volatile("" : : "r"(in) : "memory");
}

/* A libgomp "run": one parallel region whose single thread creates the tasks;
 * the region's end waits for them. */
static double gomp_sample(int ntasks, int runs, int workers) {
    static double input;
    double *x = &input;
    uint64_t t0 = bench_now_ns();
    for (int r = 0; r < runs; r++) {
#pragma omp parallel num_threads(workers)
#pragma omp single
        for (int i = 0; i < ntasks; i++) {
#pragma omp task depend(in : x[0])
            gomp_empty(x);
        }
    }
    return (double)(bench_now_ns() - t0) / 1e3 / runs;
}
#endif

/* ---- Driver -------------------------------------------------------------------- */

typedef struct sides {
    const bench_options *opt;
    strata_side strata;
    int workers;
    int starpu_ok;
    char starpu_why[128];
#if BENCH_HAVE_STARPU
    double starpu_input_mem;
    starpu_data_handle_t starpu_input;
#endif
} sides;

/* The three runtimes' samples of one figure. */
typedef struct triple {
    bench_series strata, starpu, gomp;
} triple;

/* One repetition of `ntasks`-task runs on every runtime (strata in `style`). */
static int measure_once(sides *sd, int ntasks, int runs, run_style style, triple *out) {
    double v;
    if (bench_wants(sd->opt, "strata")) {
        bench_settle();
        if (strata_sample(&sd->strata, ntasks, runs, style, &v))
            return -1;
        bench_series_add(&out->strata, v);
    }
#if BENCH_HAVE_STARPU
    if (sd->starpu_ok) {
        bench_settle();
        if (starpu_sample(sd->starpu_input, ntasks, runs, &v))
            return -1;
        bench_series_add(&out->starpu, v);
    }
#endif
#ifdef _OPENMP
    if (bench_wants(sd->opt, "libgomp")) {
        bench_settle();
        bench_series_add(&out->gomp, gomp_sample(ntasks, runs, sd->workers));
    }
#endif
    return 0;
}

static bench_value starpu_value(const sides *sd, const bench_series *s) {
    if (sd->starpu_ok)
        return bench_measured(s);
    return bench_unavailable(sd->starpu_why[0] ? sd->starpu_why : BENCH_STARPU_MISSING);
}

static bench_value gomp_value(const bench_series *s) {
#ifdef _OPENMP
    return bench_measured(s);
#else
    return bench_unavailable("built without OpenMP");
#endif
}

static void add_triple_row(bench_table *t, const sides *sd, const char *metric, const char *unit,
                           const triple *s, double target_max, double upstream) {
    bench_row *row = bench_table_row(t, metric, unit, &s->strata, target_max);
    bench_row_compare(row, "upstream", bench_quoted(upstream), 0);
    bench_row_compare(row, "starpu", starpu_value(sd, &s->starpu), 0);
    bench_row_compare(row, "libgomp", gomp_value(&s->gomp), 0);
}

/* Empty and one-task runs, both ways of driving strata. */
static int measure_fixed(sides *sd, const bench_options *opt, bench_report *report) {
    int runs = opt->quick ? 100 : 2000;
    static triple empty_run, empty_swr, one_run, one_swr;
    triple warm;
    memset(&warm, 0, sizeof warm);
    if (measure_once(sd, 1, runs / 10, STYLE_RUN, &warm))
        return -1;
    for (int r = 0; r < opt->reps; r++) {
        if (measure_once(sd, 0, runs, STYLE_RUN, &empty_run) ||
            measure_once(sd, 0, runs, STYLE_SUBMIT_WAIT_RELEASE, &empty_swr) ||
            measure_once(sd, 1, runs, STYLE_RUN, &one_run) ||
            measure_once(sd, 1, runs, STYLE_SUBMIT_WAIT_RELEASE, &one_swr))
            return -1;
    }
    bench_table *t = bench_report_table(report,
                                        "fixed cost per run: %d workers, %d runs per sample, "
                                        "median of %d",
                                        opt->workers, runs, opt->reps);
    add_triple_row(t, sd, "empty run: strata_worker_run", "us/run", &empty_run, TARGET_RUN_US,
                   UPSTREAM_FIXED_US);
    add_triple_row(t, sd, "empty run: submit+wait+release", "us/run", &empty_swr, TARGET_RUN_US,
                   UPSTREAM_FIXED_US);
    add_triple_row(t, sd, "1-task run: strata_worker_run", "us/run", &one_run, TARGET_RUN_US,
                   UPSTREAM_ONE_TASK_US);
    add_triple_row(t, sd, "1-task run: submit+wait+release", "us/run", &one_swr, TARGET_RUN_US,
                   UPSTREAM_ONE_TASK_US);
    bench_table_print(t);
    return 0;
}

/* One runtime's line through its sweep. */
typedef struct sweep_fit {
    bench_value intercept, slope;
    double r2; /* of the line through the medians */
} sweep_fit;

/* The line through the per-size medians is the figure; the line through the
 * per-size minimums (the least disturbed samples) goes in brackets. Fitting
 * each repetition on its own and taking the median was dropped: the noise of
 * one 256-task point swings that repetition's intercept by tens of µs. */
static sweep_fit fit_sweep(const bench_series *const per_k[NSWEEP]) {
    double x[NSWEEP], med[NSWEEP], low[NSWEEP], a, b, r2, a_low, b_low, r2_low;
    sweep_fit f;
    for (int k = 0; k < NSWEEP; k++) {
        bench_stats st = bench_series_stats(per_k[k]);
        x[k] = sweep_tasks[k];
        med[k] = st.median;
        low[k] = st.min;
    }
    bench_linear_fit(x, med, NSWEEP, &a, &b, &r2);
    bench_linear_fit(x, low, NSWEEP, &a_low, &b_low, &r2_low);
    f.intercept = bench_derived(a, a_low, per_k[0]->n);
    f.slope = bench_derived(b, b_low, per_k[0]->n);
    f.r2 = r2;
    return f;
}

/* The fit of one runtime, or `unavailable` (with why) when it was not measured. */
static sweep_fit fit_runtime(const triple per_k[NSWEEP], int which, bench_value unavailable) {
    const bench_series *series[NSWEEP];
    for (int k = 0; k < NSWEEP; k++)
        series[k] = which == 0 ? &per_k[k].strata : which == 1 ? &per_k[k].starpu : &per_k[k].gomp;
    if (series[0]->n == 0) {
        sweep_fit none = {unavailable, unavailable, 0};
        return none;
    }
    return fit_sweep(series);
}

static void add_fit_rows(bench_table *t, const sides *sd, const triple per_k[NSWEEP]) {
    sweep_fit strata = fit_runtime(per_k, 0, bench_unavailable("skipped (--only)"));
    sweep_fit starpu = fit_runtime(per_k, 1, starpu_value(sd, &per_k[0].starpu));
    sweep_fit gomp = fit_runtime(per_k, 2, gomp_value(&per_k[0].gomp));
    bench_row *row = bench_table_row(t, "fixed cost per run (intercept)", "us/run",
                                     &per_k[0].strata, TARGET_RUN_US);
    row->strata = strata.intercept;
    bench_row_compare(row, "upstream", bench_quoted(UPSTREAM_FIXED_US), 0);
    bench_row_compare(row, "starpu", starpu.intercept, 0);
    bench_row_compare(row, "libgomp", gomp.intercept, 0);
    row = bench_table_row(t, "cost per task (slope)", "us/task", &per_k[0].strata, 0);
    row->strata = strata.slope;
    bench_row_compare(row, "upstream", bench_quoted(UPSTREAM_PER_TASK_US), 0);
    bench_row_compare(row, "starpu", starpu.slope, 0);
    bench_row_compare(row, "libgomp", gomp.slope, 0);
    snprintf(t->title + strlen(t->title), sizeof t->title - strlen(t->title),
             " (r2 strata %.3f, starpu %.3f, libgomp %.3f)", strata.r2, starpu.r2, gomp.r2);
}

/* Runs of 1..256 tasks; each repetition sweeps every size on every runtime,
 * so slow phases of the shared machine spread over all sizes. */
static int measure_sweep(sides *sd, const bench_options *opt, bench_report *report) {
    int budget = opt->quick ? 512 : 8192; /* tasks per sample */
    int min_runs = opt->quick ? 5 : 20;
    static triple per_k[NSWEEP];
    for (int r = 0; r < opt->reps; r++)
        for (int k = 0; k < NSWEEP; k++) {
            int runs = budget / sweep_tasks[k] > min_runs ? budget / sweep_tasks[k] : min_runs;
            if (measure_once(sd, sweep_tasks[k], runs, STYLE_RUN, &per_k[k]))
                return -1;
        }
    bench_table *t = bench_report_table(report,
                                        "tasks-per-run sweep (strata_worker_run, independent empty "
                                        "tasks with one IN tensor): %d workers, median of %d",
                                        opt->workers, opt->reps);
    for (int k = 0; k < NSWEEP; k++) {
        char metric[48];
        snprintf(metric, sizeof metric, "run of %d tasks", sweep_tasks[k]);
        bench_row *row = bench_table_row(t, metric, "us/run", &per_k[k].strata, 0);
        bench_row_compare(row, "starpu", starpu_value(sd, &per_k[k].starpu), 0);
        bench_row_compare(row, "libgomp", gomp_value(&per_k[k].gomp), 0);
    }
    bench_table_print(t);
    t = bench_report_table(report, "least-squares line through the sweep's medians "
                                   "(min: through its minimums)");
    add_fit_rows(t, sd, per_k);
    bench_table_print(t);
    return 0;
}

static void start_starpu(sides *sd) {
#if BENCH_HAVE_STARPU
    if (!bench_wants(sd->opt, "starpu")) {
        snprintf(sd->starpu_why, sizeof sd->starpu_why, "skipped (--only)");
        return;
    }
    sd->starpu_ok = bench_starpu_start(sd->workers, sd->starpu_why, sizeof sd->starpu_why) == 0;
    if (sd->starpu_ok)
        starpu_variable_data_register(&sd->starpu_input, STARPU_MAIN_RAM,
                                      (uintptr_t)&sd->starpu_input_mem, sizeof(double));
    else
        fprintf(stderr, "starpu anchor skipped: %s\n", sd->starpu_why);
#endif
}

static void start_anchors(sides *sd) {
    start_starpu(sd);
#ifdef _OPENMP
    omp_set_num_threads(sd->workers);
#endif
}

static void stop_anchors(sides *sd) {
#if BENCH_HAVE_STARPU
    if (sd->starpu_ok) {
        starpu_resume();
        starpu_data_unregister(sd->starpu_input);
        starpu_pause();
        bench_starpu_stop();
    }
#endif
}

int main(int argc, char **argv) {
    bench_options opt;
    int prc = bench_parse_args(argc, argv,
                               "Fixed cost of a strata run and its per-task cost (linear fit), "
                               "vs StarPU, libgomp and the upstream figures.",
                               &opt);
    if (prc)
        return prc > 0 ? 0 : 2;
    static bench_report report;
    static sides sd;
    bench_report_init(&report, &opt);
    sd.workers = opt.workers;
    sd.opt = &opt;
    if (strata_start(&sd.strata, opt.workers)) {
        strata_stop(&sd.strata);
        return 1;
    }
    start_anchors(&sd);
    int rc = measure_fixed(&sd, &opt, &report);
    if (!rc)
        rc = measure_sweep(&sd, &opt, &report);
    stop_anchors(&sd);
    strata_stop(&sd.strata);
    if (rc)
        return 1;
    printf("  upstream: quoted, see bench/README.md \"Quoted upstream figures\" (its "
           "1-task figure is the 1-task point of its sweep)\n");
    bench_report_print_verdict(&report);
    return bench_report_write_json(&report) ? 1 : 0;
}
