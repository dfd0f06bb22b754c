/* bench/bench_idle_cpu.c - CPU used by an initialised, idle strata Worker.
 *
 * Owns: the idle measurement (process user+system CPU time across a sleep,
 * as a percentage of one core) for strata with 4 process-hosted sub workers
 * (the parent and its children, from /proc/<pid>/stat) and the latency of
 * its first task after 1 s idle, then for strata with thread-hosted sub
 * workers, then for a libgomp thread pool after its last parallel region,
 * then for StarPU's unpaused CPU workers.
 * Must never: measure two runtimes at once: strata's Worker is destroyed
 * before the libgomp pool exists, and StarPU starts only after the libgomp
 * pool has parked (its threads sleep on a futex and use no CPU).
 *
 * bench-needs: starpu openmp
 */
#include "bench_common.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <strata/strata.h>

#ifdef _OPENMP
#include <omp.h>
#endif
#if BENCH_HAVE_STARPU
#include <starpu.h>
#endif

#define TARGET_IDLE_PERCENT 1.0
#define WINDOW_S 10.0
#define QUICK_WINDOW_S 1.0
/* StarPU's idle workers busy-poll; a short window shows it without burning
 * the shared machine's cores for long. */
#define STARPU_WINDOW_S 1.0
#define STARPU_QUICK_WINDOW_S 0.2

#define PROCESS_SUBS 4

/* The parent pid and user + system CPU seconds of process `pid`, from
 * /proc/<pid>/stat; 0 if it is gone. */
static int pid_stat(int pid, int *ppid, double *cpu_s) {
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%d/stat", pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    const char *p = strrchr(buf, ')'); /* the command name may hold spaces */
    unsigned long long utime = 0, stime = 0;
    if (!p || sscanf(p + 2, "%*c %d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", ppid, &utime,
                     &stime) != 3)
        return 0;
    *cpu_s = (double)(utime + stime) / (double)sysconf(_SC_CLK_TCK);
    return 1;
}

/* The children of this process, found once before a window (scanning /proc
 * inside it would count the scan as idle CPU). */
static int child_pids[64], nchild_pids;

static void find_children(void) {
    int me = (int)getpid();
    nchild_pids = 0;
    DIR *d = opendir("/proc");
    if (!d)
        return;
    struct dirent *e;
    while ((e = readdir(d)) != NULL && nchild_pids < 64) {
        int pid = atoi(e->d_name), ppid = 0;
        double c = 0;
        if (pid > 0 && pid != me && pid_stat(pid, &ppid, &c) && ppid == me)
            child_pids[nchild_pids++] = pid;
    }
    closedir(d);
}

/* This process plus the children find_children saw. */
static double process_tree_cpu_s(void) {
    double cpu = bench_process_cpu_s();
    for (int i = 0; i < nchild_pids; i++) {
        int ppid = 0;
        double c = 0;
        if (pid_stat(child_pids[i], &ppid, &c))
            cpu += c;
    }
    return cpu;
}

/* Split `window_s` into `slices` sleeps; one CPU percentage per slice. The
 * whole window's percentage goes to *whole_percent. `cpu_s` says what counts. */
static void measure_idle_of(double (*cpu_s)(void), double window_s, int slices,
                            bench_series *per_slice, double *whole_percent) {
    double cpu_start = cpu_s();
    uint64_t t_start = bench_now_ns();
    for (int i = 0; i < slices; i++) {
        double cpu0 = cpu_s();
        uint64_t t0 = bench_now_ns();
        bench_sleep_s(window_s / slices);
        double cpu1 = cpu_s();
        uint64_t t1 = bench_now_ns();
        bench_series_add(per_slice, 100.0 * (cpu1 - cpu0) / ((double)(t1 - t0) / 1e9));
    }
    double wall = (double)(bench_now_ns() - t_start) / 1e9;
    *whole_percent = 100.0 * (cpu_s() - cpu_start) / wall;
}

static void measure_idle(double window_s, int slices, bench_series *per_slice,
                         double *whole_percent) {
    measure_idle_of(bench_process_cpu_s, window_s, slices, per_slice, whole_percent);
}

/* ---- strata -------------------------------------------------------------------- */

typedef struct warm_call {
    strata_callable empty;
    int ntasks;
} warm_call;

static int empty_task(const strata_task_view *args, void *user) {
    return 0;
}

static int orchestrate_warm(strata_orch *o, void *arg) {
    const warm_call *call = arg;
    for (int i = 0; i < call->ntasks; i++) {
        strata_task_args a;
        strata_args_init(&a);
        STRATA_TRY(strata_orch_submit_sub(o, call->empty, &a));
    }
    return STRATA_OK;
}

static int strata_fail(const char *what, int rc) {
    fprintf(stderr, "strata: %s failed: %s: %s\n", what, strata_status_name(rc),
            strata_error_message());
    return rc;
}

/* A worker of `workers` sub workers hosted as `mode`, started and warmed by
 * ten runs so every thread (and child) has been active. On failure *out is
 * left for the caller to destroy (NULL if creation failed). */
static int start_warm_worker(int workers, strata_host_mode mode, warm_call *call,
                             strata_worker **out) {
    strata_worker_config cfg;
    strata_worker_config_init(&cfg);
    cfg.sub_workers = (uint32_t)workers;
    cfg.sub_mode = mode;
    *out = NULL;
    int rc = strata_worker_create(&cfg, out);
    if (rc)
        return strata_fail("strata_worker_create", rc);
    call->ntasks = 64 * workers;
    if ((rc = strata_worker_register_sub(*out, "empty", empty_task, NULL, &call->empty)) != 0)
        return strata_fail("strata_worker_register_sub", rc);
    if ((rc = strata_worker_init(*out)) != 0)
        return strata_fail("strata_worker_init", rc);
    for (int i = 0; i < 10; i++)
        if ((rc = strata_worker_run(*out, orchestrate_warm, call)) != 0)
            return strata_fail("strata_worker_run", rc);
    return STRATA_OK;
}

/* A worker with PROCESS_SUBS process-hosted sub workers, warmed like the
 * thread-hosted one, measured idle (parent and children), then `probes`
 * times: 1 s idle, one 1-task run timed. Measured first: its children are
 * forked before any other runtime's threads exist. */
static int process_idle(double window_s, int slices, int probes, bench_series *per_slice,
                        double *whole, bench_series *first_task_us) {
    strata_worker *w;
    warm_call call = {0, 0};
    int rc = start_warm_worker(PROCESS_SUBS, STRATA_HOST_PROCESS, &call, &w);
    if (!rc)
        find_children();
    if (!rc && nchild_pids != PROCESS_SUBS) {
        fprintf(stderr, "process subs: found %d children, expected %d\n", nchild_pids,
                PROCESS_SUBS);
        rc = -1;
    }
    if (!rc)
        measure_idle_of(process_tree_cpu_s, window_s, slices, per_slice, whole);
    warm_call one = {call.empty, 1};
    for (int i = 0; i < probes && !rc; i++) {
        bench_sleep_s(1.0);
        uint64_t t0 = bench_now_ns();
        if ((rc = strata_worker_run(w, orchestrate_warm, &one)) != 0)
            strata_fail("strata_worker_run", rc);
        bench_series_add(first_task_us, (double)(bench_now_ns() - t0) / 1e3);
    }
    strata_worker_destroy(w);
    return rc;
}

/* Start a Worker, run a few runs so every thread has been active, then
 * measure it doing nothing. */
static int strata_idle(int workers, double window_s, int slices, bench_series *per_slice,
                       double *whole) {
    strata_worker *w;
    warm_call call = {0, 0};
    int rc = start_warm_worker(workers, STRATA_HOST_THREAD, &call, &w);
    if (!rc)
        measure_idle(window_s, slices, per_slice, whole);
    strata_worker_destroy(w);
    return rc;
}

/* ---- Anchors ------------------------------------------------------------------- */

#ifdef _OPENMP
__attribute__((noinline)) static void gomp_empty(void) {
    __asm__ volatile("" ::: "memory");
}

/* The pool idles between parallel regions; measured from the region's end, so
 * its spin-before-sleep phase is included. */
static void gomp_idle(int workers, double window_s, int slices, bench_series *per_slice,
                      double *whole) {
    omp_set_num_threads(workers);
#pragma omp parallel num_threads(workers)
#pragma omp single
    for (int i = 0; i < 64 * workers; i++) {
#pragma omp task
        gomp_empty();
    }
    measure_idle(window_s, slices, per_slice, whole);
}
#endif

#if BENCH_HAVE_STARPU
static int starpu_idle(int workers, double window_s, int slices, bench_series *per_slice,
                       double *whole, char *why, size_t len) {
    if (bench_starpu_start(workers, why, len) != 0)
        return -1;
    starpu_resume();
    measure_idle(window_s, slices, per_slice, whole);
    bench_starpu_stop();
    return 0;
}
#endif

/* ---- Driver -------------------------------------------------------------------- */

typedef struct idle_figures {
    bench_series slices, whole;
} idle_figures;

static void add_compare(bench_row *row, const char *anchor, const idle_figures *f, int ok,
                        const char *why, int use_whole) {
    if (!ok) {
        bench_row_compare(row, anchor, bench_unavailable(why), 0);
        return;
    }
    bench_row_compare(row, anchor, bench_measured(use_whole ? &f->whole : &f->slices), 0);
}

int main(int argc, char **argv) {
    bench_options opt;
    int prc = bench_parse_args(argc, argv,
                               "CPU used by an initialised idle Worker (percent of one core), "
                               "vs an idle libgomp pool and idle StarPU workers.",
                               &opt);
    if (prc)
        return prc > 0 ? 0 : 2;
    double window = opt.quick ? QUICK_WINDOW_S : WINDOW_S;
    double starpu_window = opt.quick ? STARPU_QUICK_WINDOW_S : STARPU_WINDOW_S;
    static bench_report report;
    static idle_figures strata, gomp, starpu, proc;
    static bench_series first_task;
    int gomp_ok = 0, starpu_ok = 0;
    char starpu_why[128] = BENCH_STARPU_MISSING;
    double whole = 0;
    bench_report_init(&report, &opt);

    if (bench_wants(&opt, "strata")) {
        if (process_idle(window, opt.reps, opt.quick ? 2 : opt.reps, &proc.slices, &whole,
                         &first_task))
            return 1;
        bench_series_add(&proc.whole, whole);
        if (strata_idle(opt.workers, window, opt.reps, &strata.slices, &whole))
            return 1;
        bench_series_add(&strata.whole, whole);
    }
#ifdef _OPENMP
    if (bench_wants(&opt, "libgomp")) {
        gomp_idle(opt.workers, window, opt.reps, &gomp.slices, &whole);
        bench_series_add(&gomp.whole, whole);
    }
    gomp_ok = 1;
#endif
#if BENCH_HAVE_STARPU
    if (bench_wants(&opt, "starpu")) {
        starpu_ok = starpu_idle(opt.workers, starpu_window, opt.reps, &starpu.slices, &whole,
                                starpu_why, sizeof starpu_why) == 0;
        if (starpu_ok)
            bench_series_add(&starpu.whole, whole);
    } else {
        starpu_ok = 1; /* its empty series reads "skipped (--only)" */
    }
#endif

    bench_table *t = bench_report_table(&report,
                                        "idle CPU, %% of one core: %d workers, %.0f s window in %d "
                                        "slices (StarPU: %.1f s)",
                                        opt.workers, window, opt.reps, starpu_window);
    bench_row *row = bench_table_row(t, "idle worker, whole window", "%core", &strata.whole,
                                     TARGET_IDLE_PERCENT);
    add_compare(row, "libgomp", &gomp, gomp_ok, "built without OpenMP", 1);
    add_compare(row, "starpu", &starpu, starpu_ok, starpu_why, 1);
    row =
        bench_table_row(t, "idle worker, per slice", "%core", &strata.slices, TARGET_IDLE_PERCENT);
    add_compare(row, "libgomp", &gomp, gomp_ok, "built without OpenMP", 0);
    add_compare(row, "starpu", &starpu, starpu_ok, starpu_why, 0);
    bench_table_print(t);
    bench_table *tp = bench_report_table(&report,
                                         "process-hosted sub workers: %d children, %.0f s window "
                                         "in %d slices; first task after 1 s idle",
                                         PROCESS_SUBS, window, opt.reps);
    bench_table_row(tp, "process children idle CPU", "%", &proc.whole, TARGET_IDLE_PERCENT);
    bench_table_row(tp, "process children idle CPU, per slice", "%", &proc.slices,
                    TARGET_IDLE_PERCENT);
    bench_table_row(tp, "first task after 1 s idle", "us", &first_task, 0);
    bench_table_print(tp);
    printf("  process user+system CPU (getrusage) across sleeps; strata measured after 10 runs, "
           "libgomp from the end of a parallel region, StarPU unpaused\n");
    bench_report_print_verdict(&report);
    return bench_report_write_json(&report) ? 1 : 0;
}
