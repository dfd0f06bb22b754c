/* bench/bench_l3_chip_pipeline.c - chips inside an L3 worker: does the
 * engine keep a chip's lane pipelined, within a run and across runs?
 *
 * Owns: two measurements on one thread-hosted sim chip, every task with
 * prepare P = 1 ms and device time E = 1 ms (sim injection), each compared
 * with the bound N*max(P,E) + min(P,E) (target <= 1.1x) and with the same
 * chip opened at pipeline depth 1, measured alternately in this invocation
 * (target >= 1.8x faster):
 *   - one run of N independent chip tasks (N = 100; 20 with --quick): the
 *     engine hands a chip two head-run tasks at a time, so the lane prepares
 *     the next while one executes;
 *   - N runs of one chip task each (N = 200; 20 with --quick), submitted
 *     back to back at pipeline depth 2: the successor run's task is staged
 *     on the chip (dispatched early, prepared while the head's executes) and
 *     launched once its run is the head.
 * The second measurement is made again with the chip hosted in its own
 * process ("staged runs vs bound (process)", "... vs depth 1 (process)"),
 * same targets.
 * Must never: leave a worker running between measurements.
 */
#include "bench_common.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <strata/sim.h>
#include <strata/strata.h>

#ifndef STRATA_SIM_TEST_KERNELS_PATH
#define STRATA_SIM_TEST_KERNELS_PATH "libstrata_test_kernels.so"
#endif

#define P_NS 1000000ull
#define E_NS 1000000ull

static void check(int rc, const char *what) {
    if (rc != STRATA_OK) {
        fprintf(stderr, "bench_l3_chip_pipeline: %s failed (%s): %s\n", what,
                strata_status_name(rc), strata_error_message());
        exit(1);
    }
}

static int one_kernel(strata_program_ctx *ctx, const strata_task_view *a, void *user) {
    (void)a;
    (void)user;
    return strata_program_launch(ctx, "empty_kernel", 1, NULL, 0);
}

typedef struct job {
    strata_callable prog;
    int chip;
    int ntasks;
} job;

static int orchestrate(strata_orch *o, void *arg) {
    job *j = arg;
    for (int i = 0; i < j->ntasks; i++) {
        strata_task_args a;
        strata_args_init(&a);
        STRATA_TRY(strata_orch_submit_next_level(o, j->prog, &a, NULL, j->chip));
    }
    return STRATA_OK;
}

/* Wall milliseconds of one run of ntasks chip tasks, chip at `depth`. */
static double run_wall_ms(uint32_t depth, int ntasks) {
    strata_worker_config wc;
    strata_worker_config_init(&wc);
    wc.sub_workers = 1;
    strata_worker *w;
    check(strata_worker_create(&wc, &w), "strata_worker_create");
    strata_chip_config cc;
    strata_chip_config_init(&cc);
    cc.kernel_module = STRATA_SIM_TEST_KERNELS_PATH;
    cc.pipeline_depth = depth;
    strata_sim_injection inj = {.prepare_delay_ns = P_NS, .kernel_delay_ns = E_NS};
    cc.sim = &inj;
    job j = {.ntasks = ntasks};
    check(strata_worker_add_chip(w, &cc, &j.chip), "strata_worker_add_chip");
    strata_chip_program_desc d = {.name = "one_kernel", .fn = one_kernel};
    check(strata_worker_register_chip_program(w, &d, &j.prog),
          "strata_worker_register_chip_program");
    check(strata_worker_init(w), "strata_worker_init");
    uint64_t t0 = bench_now_ns();
    check(strata_worker_run(w, orchestrate, &j), "strata_worker_run");
    double ms = (double)(bench_now_ns() - t0) / 1e6;
    strata_worker_destroy(w);
    return ms;
}

static int one_task(strata_orch *o, void *arg) {
    job *j = arg;
    strata_task_args a;
    strata_args_init(&a);
    return strata_orch_submit_next_level(o, j->prog, &a, NULL, j->chip);
}

/* Wall milliseconds of nruns runs of one chip task each, submitted back to
 * back (the worker admits two at a time), chip at `depth`, hosted as `host`. */
static double staged_runs_wall_ms(uint32_t depth, int nruns, strata_host_mode host) {
    strata_worker_config wc;
    strata_worker_config_init(&wc);
    wc.sub_workers = 1;
    wc.pipeline_depth = 2;
    strata_worker *w;
    check(strata_worker_create(&wc, &w), "strata_worker_create");
    strata_chip_config cc;
    strata_chip_config_init(&cc);
    cc.kernel_module = STRATA_SIM_TEST_KERNELS_PATH;
    cc.pipeline_depth = depth;
    cc.host = host;
    strata_sim_injection inj = {.prepare_delay_ns = P_NS, .kernel_delay_ns = E_NS};
    cc.sim = &inj;
    job j = {.ntasks = 1};
    check(strata_worker_add_chip(w, &cc, &j.chip), "strata_worker_add_chip");
    strata_chip_program_desc d = {.name = "one_kernel", .fn = one_kernel};
    check(strata_worker_register_chip_program(w, &d, &j.prog),
          "strata_worker_register_chip_program");
    check(strata_worker_init(w), "strata_worker_init");
    strata_run **runs = calloc((size_t)nruns, sizeof *runs);
    if (!runs) {
        fprintf(stderr, "bench_l3_chip_pipeline: out of memory\n");
        exit(1);
    }
    uint64_t t0 = bench_now_ns();
    for (int i = 0; i < nruns; i++)
        check(strata_worker_submit(w, one_task, &j, &runs[i]), "strata_worker_submit");
    for (int i = 0; i < nruns; i++) {
        check(strata_run_wait(runs[i], UINT64_MAX), "strata_run_wait");
        strata_run_release(runs[i]);
    }
    double ms = (double)(bench_now_ns() - t0) / 1e6;
    free(runs);
    strata_worker_destroy(w);
    return ms;
}

int main(int argc, char **argv) {
    bench_options opt;
    int rc = bench_parse_args(argc, argv, "Chips inside an L3 worker: pipelining of a chip's lane",
                              &opt);
    if (rc != 0)
        return rc > 0 ? 0 : 2;
    bench_report rep;
    bench_report_init(&rep, &opt);
    int ntasks = opt.quick ? 20 : 100;
    bench_series d2, d1;
    memset(&d2, 0, sizeof d2);
    memset(&d1, 0, sizeof d1);
    for (int r = 0; r < opt.reps; r++) { /* alternate, so noise hits both alike */
        bench_series_add(&d2, run_wall_ms(2, ntasks));
        bench_series_add(&d1, run_wall_ms(1, ntasks));
    }
    double p = (double)P_NS / 1e6, e = (double)E_NS / 1e6;
    double bound = ntasks * (p > e ? p : e) + (p < e ? p : e);
    bench_table *t = bench_report_table(
        &rep,
        "L3 chip tasks on one sim chip (a run of %d; runs of 1), prepare %.0f ms, device %.0f ms",
        ntasks, p, e);
    bench_row *row = bench_table_row(t, "chip depth 2: wall vs bound", "ms", &d2, 0);
    bench_row_compare(row, "N*max(P,E)+min", bench_quoted(bound), 1.1);
    row = bench_table_row(t, "chip depth 2 vs depth 1", "ms", &d2, 0);
    bench_row_compare(row, "depth 1", bench_measured(&d1), 1.0 / 1.8);

    /* Staging across runs, thread-hosted chip. */
    int nruns = opt.quick ? 20 : 200;
    bench_series s2, s1;
    memset(&s2, 0, sizeof s2);
    memset(&s1, 0, sizeof s1);
    for (int r = 0; r < opt.reps; r++) {
        bench_series_add(&s2, staged_runs_wall_ms(2, nruns, STRATA_HOST_THREAD));
        bench_series_add(&s1, staged_runs_wall_ms(1, nruns, STRATA_HOST_THREAD));
    }
    double sbound = nruns * (p > e ? p : e) + (p < e ? p : e);
    row = bench_table_row(t, "staged runs vs bound (thread)", "ms", &s2, 0);
    bench_row_compare(row, "bound", bench_quoted(sbound), 1.1);
    row = bench_table_row(t, "staged runs vs depth 1 (thread)", "ms", &s2, 0);
    bench_row_compare(row, "depth 1", bench_measured(&s1), 1.0 / 1.8);
    /* Staging across runs, process-hosted chip: the task frames of the
     * chip's mailbox carry the staged successor (PREPARE_READY, staged in the
     * chip's process, activated when its run is the head). */
    bench_series p2, p1;
    memset(&p2, 0, sizeof p2);
    memset(&p1, 0, sizeof p1);
    for (int r = 0; r < opt.reps; r++) {
        bench_series_add(&p2, staged_runs_wall_ms(2, nruns, STRATA_HOST_PROCESS));
        bench_series_add(&p1, staged_runs_wall_ms(1, nruns, STRATA_HOST_PROCESS));
    }
    row = bench_table_row(t, "staged runs vs bound (process)", "ms", &p2, 0);
    bench_row_compare(row, "bound", bench_quoted(sbound), 1.1);
    row = bench_table_row(t, "staged runs vs depth 1 (process)", "ms", &p2, 0);
    bench_row_compare(row, "depth 1", bench_measured(&p1), 1.0 / 1.8);
    bench_table_print(t);
    bench_report_print_verdict(&rep);
    if (bench_report_write_json(&rep) != 0)
        return 1;
    return 0;
}
