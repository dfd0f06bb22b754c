/* bench/bench_process_subs.c - what process-hosted sub workers cost: per
 * task and per run, beside thread-hosted sub workers measured in the same
 * invocation.
 *
 * Owns: a sweep of runs of N = 1, 10, 100, 1000 independent trivial sub
 * tasks (one IN tensor each) on two workers that differ only in sub_mode,
 * and the least-squares line through the per-size medians (as
 * bench_run_cost.c does): the slope is the cost per task, the intercept the
 * fixed cost per run. The two modes alternate inside every repetition, so a
 * noisy phase of the shared machine hits both.
 * Must never: mix the fixed and the per-task cost into one figure, or let
 * the worker not being measured spin (both exist; the idle one parks).
 */
#include "bench_common.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <strata/strata.h>

#define TARGET_TASK_US 3.0
#define TARGET_RUN_US 10.0
#define TARGET_RATIO 3.0

#define NSWEEP 4
static const int sweep_tasks[NSWEEP] = {1, 10, 100, 1000};

typedef struct side {
    strata_worker *w;
    strata_callable empty;
    strata_buffer *buf;
    strata_tensor input;
} side;

typedef struct call {
    const side *s;
    int ntasks;
} call;

static int empty_task(const strata_task_view *args, void *user) {
    (void)args;
    (void)user;
    return 0;
}

static int orchestrate(strata_orch *o, void *arg) {
    const call *c = arg;
    for (int i = 0; i < c->ntasks; i++) {
        strata_task_args a;
        strata_args_init(&a);
        STRATA_TRY(strata_args_add_tensor(&a, &c->s->input, STRATA_IN));
        STRATA_TRY(strata_orch_submit_sub(o, c->s->empty, &a));
    }
    return STRATA_OK;
}

static int fail(const char *what, int rc) {
    fprintf(stderr, "strata: %s failed: %s: %s\n", what, strata_status_name(rc),
            strata_error_message());
    return rc;
}

static int start(side *s, strata_host_mode mode, int workers) {
    strata_worker_config cfg;
    int64_t one = 1;
    memset(s, 0, sizeof *s);
    strata_worker_config_init(&cfg);
    cfg.sub_workers = (uint32_t)workers;
    cfg.sub_mode = mode;
    int rc = strata_worker_create(&cfg, &s->w);
    if (rc)
        return fail("strata_worker_create", rc);
    if ((rc = strata_worker_register_sub(s->w, "empty", empty_task, NULL, &s->empty)) != 0)
        return fail("strata_worker_register_sub", rc);
    if ((rc = strata_worker_init(s->w)) != 0)
        return fail("strata_worker_init", rc);
    if ((rc = strata_buffer_create(s->w, sizeof(double), &s->buf)) != 0)
        return fail("strata_buffer_create", rc);
    if ((rc = strata_tensor_contiguous(s->buf, STRATA_F64, 1, &one, &s->input)) != 0)
        return fail("strata_tensor_contiguous", rc);
    return 0;
}

static void stop(side *s) {
    if (s->w)
        strata_worker_close(s->w);
    strata_buffer_destroy(s->buf);
    strata_worker_destroy(s->w);
    s->w = NULL;
}

/* µs per run over `runs` runs of `ntasks` tasks. */
static int sample(const side *s, int ntasks, int runs, double *us) {
    call c = {s, ntasks};
    uint64_t t0 = bench_now_ns();
    for (int r = 0; r < runs; r++) {
        int rc = strata_worker_run(s->w, orchestrate, &c);
        if (rc)
            return fail("strata_worker_run", rc);
    }
    *us = (double)(bench_now_ns() - t0) / 1e3 / runs;
    return 0;
}

typedef struct fit {
    bench_value intercept, slope;
    double r2;
} fit;

static fit fit_sweep(const bench_series per_k[NSWEEP]) {
    double x[NSWEEP], med[NSWEEP], low[NSWEEP], a, b, r2, a_low, b_low, r2_low;
    for (int k = 0; k < NSWEEP; k++) {
        bench_stats st = bench_series_stats(&per_k[k]);
        x[k] = sweep_tasks[k];
        med[k] = st.median;
        low[k] = st.min;
    }
    bench_linear_fit(x, med, NSWEEP, &a, &b, &r2);
    bench_linear_fit(x, low, NSWEEP, &a_low, &b_low, &r2_low);
    fit f = {bench_derived(a, a_low, per_k[0].n), bench_derived(b, b_low, per_k[0].n), r2};
    return f;
}

int main(int argc, char **argv) {
    bench_options opt;
    int prc = bench_parse_args(argc, argv,
                               "Cost per task and per run of process-hosted sub workers "
                               "(linear fit over 1..1000 tasks per run), vs thread-hosted.",
                               &opt);
    if (prc)
        return prc > 0 ? 0 : 2;
    static bench_report report;
    bench_report_init(&report, &opt);
    static side proc, thr;
    /* The process worker first: its children are forked before any other
     * worker's threads exist. */
    if (start(&proc, STRATA_HOST_PROCESS, opt.workers) ||
        start(&thr, STRATA_HOST_THREAD, opt.workers)) {
        stop(&thr);
        stop(&proc);
        return 1;
    }
    int budget = opt.quick ? 2000 : 20000; /* tasks per sample */
    int min_runs = opt.quick ? 5 : 20;
    static bench_series per_proc[NSWEEP], per_thr[NSWEEP];
    int rc = 0;
    double v;
    for (int k = 0; k < NSWEEP && !rc; k++) /* warm-up */
        rc = sample(&proc, sweep_tasks[k], 3, &v) || sample(&thr, sweep_tasks[k], 3, &v);
    for (int r = 0; r < opt.reps && !rc; r++)
        for (int k = 0; k < NSWEEP && !rc; k++) {
            int runs = budget / sweep_tasks[k] > min_runs ? budget / sweep_tasks[k] : min_runs;
            bench_settle();
            if ((rc = sample(&proc, sweep_tasks[k], runs, &v)) != 0)
                break;
            bench_series_add(&per_proc[k], v);
            bench_settle();
            if ((rc = sample(&thr, sweep_tasks[k], runs, &v)) != 0)
                break;
            bench_series_add(&per_thr[k], v);
        }
    stop(&thr);
    stop(&proc);
    if (rc)
        return 1;
    fit fp = fit_sweep(per_proc), ft = fit_sweep(per_thr);
    bench_table *t = bench_report_table(&report,
                                        "process-hosted sub tasks (independent empty tasks, one "
                                        "IN tensor; runs of 1..1000): %d sub workers, median of "
                                        "%d (r2 process %.3f, thread %.3f)",
                                        opt.workers, opt.reps, fp.r2, ft.r2);
    bench_row *row = bench_table_row(t, "per task", "us", &per_proc[0], TARGET_TASK_US);
    row->strata = fp.slope;
    bench_row_compare(row, "thread-hosted", ft.slope, TARGET_RATIO);
    row = bench_table_row(t, "per run", "us", &per_proc[0], TARGET_RUN_US);
    row->strata = fp.intercept;
    bench_row_compare(row, "thread-hosted", ft.intercept, TARGET_RATIO);
    bench_table_print(t);
    printf("  us per run of N tasks (median), process | thread-hosted:");
    for (int k = 0; k < NSWEEP; k++)
        printf(" N=%d %.2f | %.2f;", sweep_tasks[k], bench_series_stats(&per_proc[k]).median,
               bench_series_stats(&per_thr[k]).median);
    printf("\n");
    bench_report_print_verdict(&report);
    return bench_report_write_json(&report) ? 1 : 0;
}
