/* bench/bench_chip_pipeline.c - the chip level (L2) on the sim backend:
 * pipelining, the cost of waiting, and the latency of an empty run.
 *
 * Owns: three measurements, each in this one invocation.
 *  1. N runs (200; 20 with --quick), each with prepare P = 1 ms and device
 *     time E = 1 ms (sim injection), submitted back to back: depth-2 wall
 *     against the bound N*max(P,E) + min(P,E) (target <= 1.1x) and against
 *     depth one measured alternately with it (target >= 1.8x faster).
 *  2. One unbounded wait on a 200 ms run: CPU time of the waiting thread as
 *     a share of the run (target <= 2 %) and the polls it made (<= 1),
 *     counted by a proxy around the sim's function table.
 *  3. submit -> wait of an empty program (no kernel launch) and of one
 *     empty kernel over one block, per run in microseconds, next to the
 *     upstream's published L2 figures (quoted, not measured here).
 * Must never: run two measurements at once, or leave threads spinning.
 */
#include "bench_common.h"

#include <dlfcn.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <strata/backend.h>
#include <strata/sim.h>
#include <strata/strata.h>

#ifndef STRATA_SIM_BACKEND_PATH
#define STRATA_SIM_BACKEND_PATH "libstrata_sim.so"
#endif
#ifndef STRATA_SIM_TEST_KERNELS_PATH
#define STRATA_SIM_TEST_KERNELS_PATH "libstrata_test_kernels.so"
#endif

#define P_NS 1000000ull /* prepare time of every run */
#define E_NS 1000000ull /* device time of every run */
#define WAIT_RUN_NS 200000000ull
#define LATENCY_RUNS 2000
#define QUICK_LATENCY_RUNS 200

/* Upstream L2 figures and the L3 fixed cost per run (bench/README.md, "Quoted
 * upstream figures"). */
#define UPSTREAM_L2_HOST_US 468000.0 /* example --rounds 100: host time per run (with Python) */
#define UPSTREAM_L2_DEVICE_US 9000.0 /* same example: device wall per run */
#define UPSTREAM_RUN_FIXED_US 43.3   /* fixed cost of one run() (L3, sub tasks) */

/* ---- A counting proxy around the sim backend's table ------------------------------- */

static const strata_backend_ops *sim_ops;
static strata_backend_ops counting_ops;
static _Atomic int polls;
static _Atomic int waits;

static int counting_poll(void *dev, strata_native_run *run, uint64_t epoch, strata_backend_msg *m) {
    atomic_fetch_add(&polls, 1);
    return sim_ops->poll(dev, run, epoch, m);
}

static int counting_wait(void *dev, strata_native_run *run, uint64_t epoch, uint64_t deadline,
                         strata_backend_msg *m) {
    atomic_fetch_add(&waits, 1);
    return sim_ops->wait(dev, run, epoch, deadline, m);
}

static const strata_backend_ops *counting_entry(uint32_t loader, uint32_t *mine) {
    *mine = STRATA_BACKEND_ABI_VERSION;
    return loader == STRATA_BACKEND_ABI_VERSION ? &counting_ops : NULL;
}

static int load_counting_sim(void) {
    void *lib = dlopen(STRATA_SIM_BACKEND_PATH, RTLD_NOW | RTLD_LOCAL);
    void *sym = lib ? dlsym(lib, STRATA_BACKEND_ENTRY_SYMBOL) : NULL;
    if (!sym) {
        fprintf(stderr, "cannot load %s: %s\n", STRATA_SIM_BACKEND_PATH, dlerror());
        return -1;
    }
    strata_backend_entry_fn entry;
    memcpy(&entry, &sym, sizeof entry);
    uint32_t v = 0;
    sim_ops = entry(STRATA_BACKEND_ABI_VERSION, &v);
    if (!sim_ops)
        return -1;
    counting_ops = *sim_ops;
    counting_ops.poll = counting_poll;
    counting_ops.wait = counting_wait;
    return 0; /* the library stays loaded for the process */
}

/* ---- Programs ------------------------------------------------------------------------ */

static int one_empty_kernel(strata_program_ctx *ctx, const strata_task_view *a, void *user) {
    return strata_program_launch(ctx, "empty_kernel", 1, NULL, 0);
}

static int no_launch(strata_program_ctx *ctx, const strata_task_view *a, void *user) {
    return 0;
}

static int check(int rc, const char *what) {
    if (rc != STRATA_OK) {
        fprintf(stderr, "bench_chip_pipeline: %s failed (%s): %s\n", what, strata_status_name(rc),
                strata_error_message());
        exit(1);
    }
    return rc;
}

static strata_chip *open_chip(uint32_t depth, uint64_t prepare_ns, uint64_t kernel_ns, int counting,
                              strata_chip_program *prog, strata_program_fn fn) {
    strata_chip_config cfg;
    strata_chip_config_init(&cfg);
    cfg.kernel_module = STRATA_SIM_TEST_KERNELS_PATH;
    cfg.pipeline_depth = depth;
    strata_sim_injection inj = {.prepare_delay_ns = prepare_ns, .kernel_delay_ns = kernel_ns};
    cfg.sim = &inj;
    if (counting)
        cfg.backend_entry = counting_entry;
    strata_chip *chip;
    check(strata_chip_open(&cfg, &chip), "strata_chip_open");
    strata_chip_program_desc d = {.name = "bench", .fn = fn};
    check(strata_chip_register_program(chip, &d, prog), "register");
    return chip;
}

/* ---- 1. Pipelining ------------------------------------------------------------------- */

/* Wall seconds for `runs` runs submitted back to back at `depth`. */
static double pipeline_wall_s(uint32_t depth, int runs) {
    strata_chip_program prog;
    strata_chip *chip = open_chip(depth, P_NS, E_NS, 0, &prog, one_empty_kernel);
    strata_task_args args;
    strata_args_init(&args);
    uint64_t t0 = bench_now_ns();
    for (int i = 0; i < runs; i++) {
        strata_chip_run *run;
        check(strata_chip_submit(chip, prog, &args, NULL, &run), "submit");
        strata_chip_run_release(run); /* the chip still finishes it */
    }
    check(strata_chip_drain(chip), "drain");
    double wall = (double)(bench_now_ns() - t0) / 1e9;
    check(strata_chip_close(chip), "close");
    strata_chip_destroy(chip);
    return wall;
}

static void measure_pipelining(bench_report *rep, const bench_options *opt) {
    int runs = opt->quick ? 20 : 200;
    bench_series d2, d1;
    memset(&d2, 0, sizeof d2);
    memset(&d1, 0, sizeof d1);
    for (int r = 0; r < opt->reps; r++) { /* alternate, so noise hits both alike */
        bench_series_add(&d2, pipeline_wall_s(2, runs) * 1e3);
        bench_series_add(&d1, pipeline_wall_s(1, runs) * 1e3);
    }
    double p = (double)P_NS / 1e6, e = (double)E_NS / 1e6;
    double bound = runs * (p > e ? p : e) + (p < e ? p : e);
    bench_table *t = bench_report_table(
        rep, "Pipelining: %d runs, prepare %.0f ms, device %.0f ms (sim), depth 2", runs, p, e);
    bench_row *row = bench_table_row(t, "depth-2 wall vs bound", "ms", &d2, 0);
    bench_row_compare(row, "N*max(P,E)+min", bench_quoted(bound), 1.1);
    row = bench_table_row(t, "depth-2 wall vs depth 1", "ms", &d2, 0);
    bench_row_compare(row, "depth 1", bench_measured(&d1), 1.0 / 1.8);
    bench_table_print(t);
}

/* ---- 2. Waiting ------------------------------------------------------------------------ */

static double thread_cpu_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void measure_waiting(bench_report *rep, const bench_options *opt) {
    uint64_t run_ns = opt->quick ? WAIT_RUN_NS / 4 : WAIT_RUN_NS;
    bench_series cpu, poll_count;
    memset(&cpu, 0, sizeof cpu);
    memset(&poll_count, 0, sizeof poll_count);
    strata_chip_program prog;
    strata_chip *chip = open_chip(2, 0, run_ns, 1, &prog, one_empty_kernel);
    strata_task_args args;
    strata_args_init(&args);
    for (int r = 0; r < opt->reps; r++) {
        strata_chip_run *run;
        check(strata_chip_submit(chip, prog, &args, NULL, &run), "submit");
        atomic_store(&polls, 0);
        atomic_store(&waits, 0);
        double c0 = thread_cpu_s();
        uint64_t t0 = bench_now_ns();
        check(strata_chip_run_wait(run, STRATA_WAIT_FOREVER), "wait");
        double wall = (double)(bench_now_ns() - t0) / 1e9;
        bench_series_add(&cpu, 100.0 * (thread_cpu_s() - c0) / wall);
        bench_series_add(&poll_count, (double)atomic_load(&polls));
        strata_chip_run_release(run);
    }
    check(strata_chip_close(chip), "close");
    strata_chip_destroy(chip);
    bench_table *t = bench_report_table(rep, "Waiting: one unbounded wait on a %.0f ms run",
                                        (double)run_ns / 1e6);
    bench_table_row(t, "waiter CPU / run time", "%", &cpu, 2.0);
    bench_table_row(t, "polls per unbounded wait", "polls", &poll_count, 1.0);
    bench_table_print(t);
}

/* ---- 3. Latency -------------------------------------------------------------------------- */

static double latency_us(strata_program_fn fn, int runs) {
    strata_chip_program prog;
    strata_chip *chip = open_chip(2, 0, 0, 0, &prog, fn);
    strata_task_args args;
    strata_args_init(&args);
    uint64_t t0 = bench_now_ns();
    for (int i = 0; i < runs; i++) {
        strata_chip_run *run;
        check(strata_chip_submit(chip, prog, &args, NULL, &run), "submit");
        check(strata_chip_run_wait(run, STRATA_WAIT_FOREVER), "wait");
        strata_chip_run_release(run);
    }
    double us = (double)(bench_now_ns() - t0) / 1e3 / runs;
    check(strata_chip_close(chip), "close");
    strata_chip_destroy(chip);
    return us;
}

static void add_upstream_anchors(bench_row *row) {
    bench_row_compare(row, "upstream L2 host", bench_quoted(UPSTREAM_L2_HOST_US), 0);
    bench_row_compare(row, "upstream L2 device", bench_quoted(UPSTREAM_L2_DEVICE_US), 0);
    bench_row_compare(row, "upstream run() fixed", bench_quoted(UPSTREAM_RUN_FIXED_US), 0);
}

static void measure_latency(bench_report *rep, const bench_options *opt) {
    int runs = opt->quick ? QUICK_LATENCY_RUNS : LATENCY_RUNS;
    bench_series empty, kernel;
    memset(&empty, 0, sizeof empty);
    memset(&kernel, 0, sizeof kernel);
    for (int r = 0; r < opt->reps; r++) {
        bench_series_add(&empty, latency_us(no_launch, runs));
        bench_series_add(&kernel, latency_us(one_empty_kernel, runs));
    }
    bench_table *t =
        bench_report_table(rep, "Latency per run, submit -> wait (%d runs per repetition)", runs);
    add_upstream_anchors(bench_table_row(t, "empty program (no launch)", "us", &empty, 0));
    add_upstream_anchors(bench_table_row(t, "one empty kernel, 1 block", "us", &kernel, 0));
    bench_table_print(t);
    printf("upstream figures are quoted (doc): an illustrative L2 example with 181 tasks\n"
           "(host time includes Python) and the L3 fixed cost per run(); they are context,\n"
           "not a like-for-like comparison.\n");
}

int main(int argc, char **argv) {
    bench_options opt;
    int prc = bench_parse_args(
        argc, argv, "The chip level on the sim backend: pipelining, waiting, latency.", &opt);
    if (prc != 0)
        return prc > 0 ? 0 : 2;
    if (load_counting_sim() != 0)
        return 1;
    bench_report rep;
    bench_report_init(&rep, &opt);
    measure_pipelining(&rep, &opt);
    measure_waiting(&rep, &opt);
    measure_latency(&rep, &opt);
    if (bench_report_write_json(&rep) != 0)
        return 1;
    bench_report_print_verdict(&rep);
    return 0;
}
