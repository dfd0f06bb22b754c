/* bench/bench_engine_overhead.c - per-task overhead of empty task graphs in
 * strata, StarPU and libgomp, measured side by side in one invocation.
 *
 * Owns: the four graphs (independent tasks, 2 and 64 INOUT chains, a 1-D
 * stencil of width = worker count) written once for each runtime, and their
 * timing (total wall time of building and running the graph / tasks); and,
 * strata only, the first run of a fresh worker over freshly created 16-byte
 * tile buffers against the warm run after it (per-task time, minor faults).
 * Must never: subtract anything from a measurement, or let one runtime's idle
 * threads run while another is measured (StarPU is paused in between).
 *
 * bench-needs: starpu openmp
 */
#include "bench_common.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include <strata/strata.h>

#ifdef _OPENMP
#include <omp.h>
#endif
#if BENCH_HAVE_STARPU
#include <starpu.h>
#endif

#define MAX_CHAINS 64
#define DEFAULT_TASKS 20000
#define QUICK_TASKS 2000

typedef enum graph_kind { GRAPH_INDEPENDENT, GRAPH_CHAINS, GRAPH_STENCIL } graph_kind;

/* One graph shape; all three runtimes build exactly this graph. */
typedef struct graph_spec {
    const char *metric;
    graph_kind kind;
    int width;            /* chains: number of chains; stencil: cells per row */
    int ntasks;           /* a multiple of width */
    double starpu_target; /* strata/StarPU ratio to stay under (0 = none) */
    double gomp_target;   /* strata/libgomp ratio to stay under (0 = none) */
} graph_spec;

/* Stencil cell range read by cell i: i-1, i, i+1 clipped to the row. */
static int stencil_lo(int i) {
    return i > 0 ? i - 1 : 0;
}

static int stencil_hi(int i, int width) {
    return i + 1 < width ? i + 1 : width - 1;
}

/* ---- strata -------------------------------------------------------------------- */

typedef struct strata_side {
    strata_worker *w;
    strata_callable empty;
    strata_buffer *chain_buf[MAX_CHAINS];
    strata_tensor chain[MAX_CHAINS]; /* one INOUT buffer per chain */
    strata_buffer *row_buf[2];
    strata_tensor cell[2][BENCH_MAX_WORKERS]; /* stencil rows, one f64 view per cell */
} strata_side;

typedef struct strata_graph_call {
    const strata_side *side;
    const graph_spec *graph;
} strata_graph_call;

static int empty_task(const strata_task_view *args, void *user) {
    return 0;
}

static int submit_independent(strata_orch *o, const strata_side *s, int ntasks) {
    for (int i = 0; i < ntasks; i++) {
        strata_task_args a;
        strata_args_init(&a);
        STRATA_TRY(strata_orch_submit_sub(o, s->empty, &a));
    }
    return STRATA_OK;
}

/* Task i extends chain i % width: the chains advance round-robin. */
static int submit_chains(strata_orch *o, const strata_side *s, int ntasks, int width) {
    for (int i = 0; i < ntasks; i++) {
        strata_task_args a;
        strata_args_init(&a);
        STRATA_TRY(strata_args_add_tensor(&a, &s->chain[i % width], STRATA_INOUT));
        STRATA_TRY(strata_orch_submit_sub(o, s->empty, &a));
    }
    return STRATA_OK;
}

/* Two rows used alternately, so writing a row also waits for the readers of
 * its previous contents (write-after-read). */
static int submit_stencil(strata_orch *o, const strata_side *s, int ntasks, int width) {
    for (int step = 0; step < ntasks / width; step++) {
        int src = step & 1, dst = src ^ 1;
        for (int i = 0; i < width; i++) {
            strata_task_args a;
            strata_args_init(&a);
            for (int j = stencil_lo(i); j <= stencil_hi(i, width); j++)
                STRATA_TRY(strata_args_add_tensor(&a, &s->cell[src][j], STRATA_IN));
            STRATA_TRY(strata_args_add_tensor(&a, &s->cell[dst][i], STRATA_OUT));
            STRATA_TRY(strata_orch_submit_sub(o, s->empty, &a));
        }
    }
    return STRATA_OK;
}

static int orchestrate_graph(strata_orch *o, void *arg) {
    const strata_graph_call *call = arg;
    const graph_spec *g = call->graph;
    switch (g->kind) {
    case GRAPH_INDEPENDENT:
        return submit_independent(o, call->side, g->ntasks);
    case GRAPH_CHAINS:
        return submit_chains(o, call->side, g->ntasks, g->width);
    case GRAPH_STENCIL:
        return submit_stencil(o, call->side, g->ntasks, g->width);
    }
    return STRATA_EINVAL;
}

static int strata_fail(const char *what, int rc) {
    fprintf(stderr, "strata: %s failed: %s: %s\n", what, strata_status_name(rc),
            strata_error_message());
    return rc;
}

static int strata_make_cells(strata_side *s, int width) {
    for (int r = 0; r < 2; r++) {
        int rc = strata_buffer_create(s->w, (size_t)width * sizeof(double), &s->row_buf[r]);
        if (rc)
            return strata_fail("strata_buffer_create", rc);
        for (int i = 0; i < width; i++) {
            int64_t one = 1;
            rc = strata_tensor_view(s->row_buf[r], (uint64_t)i * sizeof(double), STRATA_F64, 1,
                                    &one, NULL, &s->cell[r][i]);
            if (rc)
                return strata_fail("strata_tensor_view", rc);
        }
    }
    return 0;
}

static int strata_make_chains(strata_side *s) {
    for (int c = 0; c < MAX_CHAINS; c++) {
        int64_t one = 1;
        int rc = strata_buffer_create(s->w, sizeof(double), &s->chain_buf[c]);
        if (rc)
            return strata_fail("strata_buffer_create", rc);
        rc = strata_tensor_contiguous(s->chain_buf[c], STRATA_F64, 1, &one, &s->chain[c]);
        if (rc)
            return strata_fail("strata_tensor_contiguous", rc);
    }
    return 0;
}

static int strata_start(strata_side *s, int workers) {
    strata_worker_config cfg;
    memset(s, 0, sizeof *s);
    strata_worker_config_init(&cfg);
    cfg.sub_workers = (uint32_t)workers;
    int rc = strata_worker_create(&cfg, &s->w);
    if (rc)
        return strata_fail("strata_worker_create", rc);
    rc = strata_worker_register_sub(s->w, "empty", empty_task, NULL, &s->empty);
    if (rc)
        return strata_fail("strata_worker_register_sub", rc);
    rc = strata_worker_init(s->w);
    if (rc)
        return strata_fail("strata_worker_init", rc);
    if ((rc = strata_make_chains(s)) != 0)
        return rc;
    return strata_make_cells(s, workers);
}

static void strata_stop(strata_side *s) {
    if (s->w)
        strata_worker_close(s->w);
    for (int c = 0; c < MAX_CHAINS; c++)
        strata_buffer_destroy(s->chain_buf[c]);
    for (int r = 0; r < 2; r++)
        strata_buffer_destroy(s->row_buf[r]);
    strata_worker_destroy(s->w);
    s->w = NULL;
}

/* One repetition: µs per task of strata_worker_run() over the whole graph. */
static int strata_sample(const strata_side *s, const graph_spec *g, double *us_per_task) {
    strata_graph_call call = {s, g};
    uint64_t t0 = bench_now_ns();
    int rc = strata_worker_run(s->w, orchestrate_graph, &call);
    uint64_t t1 = bench_now_ns();
    if (rc)
        return strata_fail("strata_worker_run", rc);
    *us_per_task = (double)(t1 - t0) / 1e3 / g->ntasks;
    return 0;
}

/* ---- strata: the first run over fresh tile buffers ------------------------------ */

#define FRESH_TILES 2000

typedef struct fresh_side {
    strata_worker *w;
    strata_callable stamp;
    strata_buffer *buf[FRESH_TILES];
    strata_tensor tile[FRESH_TILES]; /* one OUT tile of 16 bytes per task */
} fresh_side;

/* Writes its tile, as a producer of a tiled graph does: the write is where a
 * tile's memory is first touched. */
static int stamp_task(const strata_task_view *args, void *user) {
    double *t = strata_args_data(args, 0);
    t[0] = t[1] + 1.0;
    return 0;
}

static int orchestrate_fresh(strata_orch *o, void *arg) {
    const fresh_side *f = arg;
    for (int i = 0; i < FRESH_TILES; i++) {
        strata_task_args a;
        strata_args_init(&a);
        STRATA_TRY(strata_args_add_tensor(&a, &f->tile[i], STRATA_OUT));
        STRATA_TRY(strata_orch_submit_sub(o, f->stamp, &a));
    }
    return STRATA_OK;
}

static long minor_faults(void) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_minflt;
}

static void fresh_stop(fresh_side *f) {
    for (int i = 0; i < FRESH_TILES; i++)
        strata_buffer_destroy(f->buf[i]);
    strata_worker_destroy(f->w);
}

/* A new worker and FRESH_TILES new buffers (not timed), then its first run
 * and the run after it: µs per task of each, minor faults of the first. */
static int fresh_sample(int workers, double *first_us, double *warm_us, double *faults) {
    static fresh_side f;
    memset(&f, 0, sizeof f);
    strata_worker_config cfg;
    strata_worker_config_init(&cfg);
    cfg.sub_workers = (uint32_t)workers;
    int rc = strata_worker_create(&cfg, &f.w);
    if (!rc)
        rc = strata_worker_register_sub(f.w, "stamp", stamp_task, NULL, &f.stamp);
    if (!rc)
        rc = strata_worker_init(f.w);
    const int64_t two = 2;
    for (int i = 0; i < FRESH_TILES && !rc; i++) {
        rc = strata_buffer_create(f.w, 2 * sizeof(double), &f.buf[i]);
        if (!rc)
            rc = strata_tensor_contiguous(f.buf[i], STRATA_F64, 1, &two, &f.tile[i]);
    }
    bench_settle();
    long flt = minor_faults();
    uint64_t t0 = bench_now_ns();
    if (!rc)
        rc = strata_worker_run(f.w, orchestrate_fresh, &f);
    uint64_t t1 = bench_now_ns();
    flt = minor_faults() - flt;
    if (!rc)
        rc = strata_worker_run(f.w, orchestrate_fresh, &f);
    uint64_t t2 = bench_now_ns();
    if (rc)
        strata_fail("the fresh-tile runs", rc);
    fresh_stop(&f);
    *first_us = (double)(t1 - t0) / 1e3 / FRESH_TILES;
    *warm_us = (double)(t2 - t1) / 1e3 / FRESH_TILES;
    *faults = (double)flt;
    return rc ? -1 : 0;
}

static int run_fresh(const bench_options *opt, bench_report *report) {
    if (!bench_wants(opt, "strata"))
        return 0;
    bench_series first = {0}, warm = {0}, faults = {0};
    for (int r = 0; r < opt->reps; r++) {
        double a, b, c;
        if (fresh_sample(opt->workers, &a, &b, &c))
            return -1;
        bench_series_add(&first, a);
        bench_series_add(&warm, b);
        bench_series_add(&faults, c);
    }
    bench_table *t = bench_report_table(
        report,
        "first run of a new worker over %d fresh 16-byte tile buffers (one OUT tile per "
        "task), %d workers, median of %d",
        FRESH_TILES, opt->workers, opt->reps);
    bench_row *row = bench_table_row(t, "first run, fresh tile buffers", "us/task", &first, 0);
    bench_row_compare(row, "warm run", bench_measured(&warm), 0);
    bench_table_row(t, "first run, minor faults", "faults", &faults, 0);
    bench_table_print(t);
    return 0;
}

/* ---- StarPU -------------------------------------------------------------------- */

#if BENCH_HAVE_STARPU
typedef struct starpu_side {
    double chain_mem[MAX_CHAINS];
    starpu_data_handle_t chain[MAX_CHAINS];
    double cell_mem[2][BENCH_MAX_WORKERS];
    starpu_data_handle_t cell[2][BENCH_MAX_WORKERS];
} starpu_side;

static void starpu_empty(void *buffers[], void *arg) {}

static struct starpu_codelet cl_none = {.cpu_funcs = {starpu_empty}, .nbuffers = 0};
static struct starpu_codelet cl_rw = {
    .cpu_funcs = {starpu_empty}, .nbuffers = 1, .modes = {STARPU_RW}};
static struct starpu_codelet cl_stencil = {.cpu_funcs = {starpu_empty},
                                           .nbuffers = STARPU_VARIABLE_NBUFFERS};

static void starpu_register_all(starpu_side *s, int width) {
    for (int c = 0; c < MAX_CHAINS; c++)
        starpu_variable_data_register(&s->chain[c], STARPU_MAIN_RAM, (uintptr_t)&s->chain_mem[c],
                                      sizeof s->chain_mem[c]);
    for (int r = 0; r < 2; r++)
        for (int i = 0; i < width; i++)
            starpu_variable_data_register(&s->cell[r][i], STARPU_MAIN_RAM,
                                          (uintptr_t)&s->cell_mem[r][i], sizeof(double));
}

static void starpu_unregister_all(starpu_side *s, int width) {
    for (int c = 0; c < MAX_CHAINS; c++)
        starpu_data_unregister(s->chain[c]);
    for (int r = 0; r < 2; r++)
        for (int i = 0; i < width; i++)
            starpu_data_unregister(s->cell[r][i]);
}

static int starpu_insert_stencil(starpu_side *s, int ntasks, int width) {
    for (int step = 0; step < ntasks / width; step++) {
        int src = step & 1, dst = src ^ 1;
        for (int i = 0; i < width; i++) {
            struct starpu_data_descr d[4];
            int n = 0;
            for (int j = stencil_lo(i); j <= stencil_hi(i, width); j++)
                d[n++] = (struct starpu_data_descr){.handle = s->cell[src][j], .mode = STARPU_R};
            d[n++] = (struct starpu_data_descr){.handle = s->cell[dst][i], .mode = STARPU_W};
            int rc = starpu_task_insert(&cl_stencil, STARPU_DATA_MODE_ARRAY, d, n, 0);
            if (rc)
                return rc;
        }
    }
    return 0;
}

static int starpu_insert_graph(starpu_side *s, const graph_spec *g) {
    int rc = 0;
    switch (g->kind) {
    case GRAPH_INDEPENDENT:
        for (int i = 0; i < g->ntasks && !rc; i++)
            rc = starpu_task_insert(&cl_none, 0);
        return rc;
    case GRAPH_CHAINS:
        for (int i = 0; i < g->ntasks && !rc; i++)
            rc = starpu_task_insert(&cl_rw, STARPU_RW, s->chain[i % g->width], 0);
        return rc;
    case GRAPH_STENCIL:
        return starpu_insert_stencil(s, g->ntasks, g->width);
    }
    return -1;
}

/* One repetition: µs per task of submission + starpu_task_wait_for_all(). */
static int starpu_sample(starpu_side *s, const graph_spec *g, double *us_per_task) {
    starpu_resume();
    uint64_t t0 = bench_now_ns();
    int rc = starpu_insert_graph(s, g);
    int wrc = starpu_task_wait_for_all();
    uint64_t t1 = bench_now_ns();
    starpu_pause();
    if (rc || wrc) {
        fprintf(stderr, "starpu: %s failed (insert %d, wait %d)\n", g->metric, rc, wrc);
        return -1;
    }
    *us_per_task = (double)(t1 - t0) / 1e3 / g->ntasks;
    return 0;
}
#endif

/* ---- libgomp ------------------------------------------------------------------- */

#ifdef _OPENMP
/* The same empty body the other runtimes call, handed the task's data like
 * theirs; kept out of line so every task really makes a call. */
__attribute__((noinline)) static void gomp_empty(const void *in, const void *out) {
    __asm__ volatile("" : : "r"(in), "r"(out) : "memory");
}

static void gomp_tasks_independent(int ntasks) {
    for (int i = 0; i < ntasks; i++) {
#pragma omp task
        gomp_empty(NULL, NULL);
    }
}

static void gomp_tasks_chains(double *chain, int ntasks, int width) {
    for (int i = 0; i < ntasks; i++) {
        double *c = &chain[i % width];
#pragma omp task depend(inout : c[0])
        gomp_empty(c, c);
    }
}

static void gomp_tasks_stencil(double (*cell)[BENCH_MAX_WORKERS], int ntasks, int width) {
    for (int step = 0; step < ntasks / width; step++) {
        double *src = cell[step & 1], *dst = cell[(step & 1) ^ 1];
        for (int i = 0; i < width; i++) {
            int lo = stencil_lo(i), hi = stencil_hi(i, width);
#pragma omp task depend(in : src[lo], src[i], src[hi]) depend(out : dst[i])
            gomp_empty(src, dst);
        }
    }
}

/* One repetition: µs per task of a parallel region whose single thread
 * creates the graph; the region's end waits for every task. */
static double gomp_sample(const graph_spec *g, int workers) {
    static double chain[MAX_CHAINS];
    static double cell[2][BENCH_MAX_WORKERS];
    uint64_t t0 = bench_now_ns();
#pragma omp parallel num_threads(workers)
#pragma omp single
    {
        switch (g->kind) {
        case GRAPH_INDEPENDENT:
            gomp_tasks_independent(g->ntasks);
            break;
        case GRAPH_CHAINS:
            gomp_tasks_chains(chain, g->ntasks, g->width);
            break;
        case GRAPH_STENCIL:
            gomp_tasks_stencil(cell, g->ntasks, g->width);
            break;
        }
    }
    uint64_t t1 = bench_now_ns();
    return (double)(t1 - t0) / 1e3 / g->ntasks;
}
#endif

/* ---- Driver -------------------------------------------------------------------- */

typedef struct anchors {
    const bench_options *opt;
    int starpu_ok;
    char starpu_why[128];
#if BENCH_HAVE_STARPU
    starpu_side starpu;
#endif
} anchors;

typedef struct graph_series {
    bench_series strata, starpu, gomp;
} graph_series;

/* One repetition of one graph on every runtime, strata first. */
static int measure_once(const strata_side *ss, anchors *an, const graph_spec *g, int workers,
                        graph_series *out) {
    double v;
    if (bench_wants(an->opt, "strata")) {
        bench_settle();
        if (strata_sample(ss, g, &v))
            return -1;
        if (out)
            bench_series_add(&out->strata, v);
    }
#if BENCH_HAVE_STARPU
    if (an->starpu_ok) {
        bench_settle();
        if (starpu_sample(&an->starpu, g, &v))
            return -1;
        if (out)
            bench_series_add(&out->starpu, v);
    }
#endif
#ifdef _OPENMP
    if (bench_wants(an->opt, "libgomp")) {
        bench_settle();
        v = gomp_sample(g, workers);
        if (out)
            bench_series_add(&out->gomp, v);
    }
#endif
    return 0;
}

static void add_graph_row(bench_table *t, const graph_spec *g, const graph_series *s,
                          const anchors *an) {
    bench_row *row = bench_table_row(t, g->metric, "us/task", &s->strata, 0);
    bench_value starpu = bench_unavailable(BENCH_STARPU_MISSING);
    if (an->starpu_ok)
        starpu = bench_measured(&s->starpu);
    else if (an->starpu_why[0])
        starpu = bench_unavailable(an->starpu_why);
    bench_row_compare(row, "starpu", starpu, g->starpu_target);
#ifdef _OPENMP
    bench_row_compare(row, "libgomp", bench_measured(&s->gomp), g->gomp_target);
#else
    bench_row_compare(row, "libgomp", bench_unavailable("built without OpenMP"), g->gomp_target);
#endif
}

static int round_down(int n, int multiple) {
    int r = n / multiple * multiple;
    return r > 0 ? r : multiple;
}

static void define_graphs(int ntasks, int workers, graph_spec g[4]) {
    g[0] = (graph_spec){"independent", GRAPH_INDEPENDENT, 1, ntasks, 0.5, 0};
    g[1] = (graph_spec){"chains W=2", GRAPH_CHAINS, 2, round_down(ntasks, 2), 0.5, 1.0};
    g[2] = (graph_spec){"chains W=64", GRAPH_CHAINS, 64, round_down(ntasks, 64), 0.5, 1.0};
    g[3] = (graph_spec){
        "stencil width=workers", GRAPH_STENCIL, workers, round_down(ntasks, workers), 0, 0};
}

static void start_starpu(anchors *an, int workers) {
#if BENCH_HAVE_STARPU
    if (!bench_wants(an->opt, "starpu")) {
        snprintf(an->starpu_why, sizeof an->starpu_why, "skipped (--only)");
        return;
    }
    an->starpu_ok = bench_starpu_start(workers, an->starpu_why, sizeof an->starpu_why) == 0;
    if (an->starpu_ok)
        starpu_register_all(&an->starpu, workers);
    else
        fprintf(stderr, "starpu anchor skipped: %s\n", an->starpu_why);
#endif
}

static void start_anchors(anchors *an, const bench_options *opt) {
    memset(an, 0, sizeof *an);
    an->opt = opt;
    start_starpu(an, opt->workers);
#ifdef _OPENMP
    omp_set_num_threads(opt->workers);
#endif
}

static void stop_anchors(anchors *an, int workers) {
#if BENCH_HAVE_STARPU
    if (an->starpu_ok) {
        starpu_resume();
        starpu_unregister_all(&an->starpu, workers);
        starpu_pause();
        bench_starpu_stop();
    }
#endif
}

static int run_all(const bench_options *opt, bench_report *report, strata_side *ss, anchors *an) {
    int ntasks = opt->quick ? QUICK_TASKS : DEFAULT_TASKS;
    graph_spec graphs[4];
    define_graphs(ntasks, opt->workers, graphs);
    bench_table *t = bench_report_table(
        report, "per-task overhead of empty tasks: %d workers, ~%d tasks per rep, median of %d",
        opt->workers, ntasks, opt->reps);
    for (int gi = 0; gi < 4; gi++) {
        static graph_series s;
        memset(&s, 0, sizeof s);
        if (measure_once(ss, an, &graphs[gi], opt->workers, NULL)) /* warm-up */
            return -1;
        for (int r = 0; r < opt->reps; r++)
            if (measure_once(ss, an, &graphs[gi], opt->workers, &s))
                return -1;
        add_graph_row(t, &graphs[gi], &s, an);
    }
    bench_table_print(t);
#if BENCH_HAVE_STARPU
    if (an->starpu_ok)
        printf("  starpu: scheduler '%s', %d CPU workers, data handles per chain/cell\n",
               bench_starpu_sched_name(), opt->workers);
#endif
    printf("  strata: %d sub workers (threads), default window; libgomp: %d threads\n",
           opt->workers, opt->workers);
    return run_fresh(opt, report);
}

int main(int argc, char **argv) {
    bench_options opt;
    int prc = bench_parse_args(
        argc, argv, "Per-task overhead of empty task graphs: strata vs StarPU vs libgomp.", &opt);
    if (prc)
        return prc > 0 ? 0 : 2;
    static bench_report report;
    static strata_side ss;
    static anchors an;
    bench_report_init(&report, &opt);
    if (strata_start(&ss, opt.workers)) {
        strata_stop(&ss);
        return 1;
    }
    start_anchors(&an, &opt);
    int rc = run_all(&opt, &report, &ss, &an);
    stop_anchors(&an, opt.workers);
    strata_stop(&ss);
    if (rc)
        return 1;
    bench_report_print_verdict(&report);
    return bench_report_write_json(&report) ? 1 : 0;
}
