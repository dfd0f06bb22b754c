/* bench/bench_patterns.c - layered task-graph patterns (stencil, fft,
 * all_to_all, no_comm, tree) in strata, libgomp and StarPU, measured side by
 * side in one invocation: per-task cost of empty tasks, and the minimum
 * effective task granularity (METG) from a sweep of task sizes.
 *
 * Owns: the pattern definitions (which tiles of the previous layer a task
 * reads), the task body every runtime runs (a dependent floating-point spin
 * plus a check that each input holds what its producer wrote), the three
 * runtimes' builders of the same graphs and the METG computation.
 * Must never: time buffer creation or registration, subtract anything from a
 * run's wall time, let a wrong dependency pass (a failed check exits non-zero)
 * or let one runtime's idle threads run while another is measured.
 *
 * bench-needs: starpu openmp
 */
#include "bench_common.h"

#include <stdarg.h>
#include <stdatomic.h>
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

#define DEFAULT_LAYERS 1000
#define QUICK_LAYERS 40
/* METG is swept at the graphs' own T (DEFAULT_LAYERS, the default),
 * and again over short graphs (METG_SHORT_LAYERS, a row without a target):
 * per-run costs weigh 10 x more there, and libgomp is at its best there (its
 * METG is 4-8 x higher at T = 1000 on four of the five patterns here), so
 * the two tables show both ends. --metg-layers N sweeps the main table at
 * T = N. */
#define METG_SHORT_LAYERS 100
#define QUICK_METG_LAYERS 20
#define METG_TOP_US 100.0 /* task size the sweep starts at (where the peak rate is taken) */
#define QUICK_METG_TOP_US 25.0
#define METG_BEST_OF 3
#define METG_MAX_POINTS 64
#define METG_STOP_BELOW 2 /* the sweep ends after this many sizes in a row under 50 % */
#define MAX_WIDTH (4 * BENCH_MAX_WORKERS)
#define MAX_WIDTHS 3

/* ---- Patterns ---------------------------------------------------------------- */

typedef enum pattern_kind {
    PAT_STENCIL,
    PAT_FFT,
    PAT_ALL_TO_ALL,
    PAT_NO_COMM,
    PAT_TREE,
    PAT_COUNT
} pattern_kind;

static const char *const pattern_names[PAT_COUNT] = {"stencil", "fft", "all_to_all", "no_comm",
                                                     "tree"};

/* One graph: `layers` layers of `width` tasks; task x of layer t writes tile
 * (t mod 2, x) and reads tiles (t-1 mod 2, deps) of the layer before. */
typedef struct graph {
    pattern_kind pattern;
    int width;
    int layers;
    uint64_t iters;  /* spin iterations of every task body */
    uint32_t epoch;  /* distinguishes this run's records from an earlier run's */
    const char *sys; /* runtime running it, for failure messages */
    struct failure *fail;
} graph;

/* The first failed check of any task, written once by whichever body saw it. */
typedef struct failure {
    atomic_int set;
    char msg[256];
} failure;

static int ceil_log2(int w) {
    int l = 0;
    while ((1 << l) < w)
        l++;
    return l;
}

static int stencil_deps(int w, int x, int *dep) {
    int n = 0;
    for (int d = x - 1; d <= x + 1; d++)
        if (d >= 0 && d < w)
            dep[n++] = d;
    return n;
}

/* Butterfly: the partner at distance 2^(t mod log2 W); clipped when W is
 * not a power of two. */
static int fft_deps(int w, int t, int x, int *dep) {
    int partner = x ^ (1 << (t % ceil_log2(w)));
    dep[0] = x;
    if (partner < w)
        dep[1] = partner;
    return partner < w ? 2 : 1;
}

/* A binary-tree reduction to tile 0 followed by a broadcast from it, period
 * 2 log2 W layers. Reduction step s (stride d = 2^s): x with x mod 2d == 0
 * also reads x + d. Broadcast step s (stride d = 2^(L-1-s)): x with
 * x mod 2d == d also reads x - d, its parent. Every task reads its own tile. */
static int tree_deps(int w, int t, int x, int *dep) {
    int l = ceil_log2(w), s = t % (2 * l);
    dep[0] = x;
    if (s < l) {
        int d = 1 << s;
        if (x % (2 * d) == 0 && x + d < w) {
            dep[1] = x + d;
            return 2;
        }
        return 1;
    }
    int d = 1 << (2 * l - 1 - s);
    if (x % (2 * d) == d) {
        dep[1] = x - d;
        return 2;
    }
    return 1;
}

/* The tiles of layer t-1 that task x of layer t reads, in the order it is
 * handed them; none for layer 0. */
static int pattern_deps(const graph *g, int t, int x, int *dep) {
    if (t == 0)
        return 0;
    switch (g->pattern) {
    case PAT_STENCIL:
        return stencil_deps(g->width, x, dep);
    case PAT_FFT:
        return fft_deps(g->width, t, x, dep);
    case PAT_ALL_TO_ALL:
        for (int d = 0; d < g->width; d++)
            dep[d] = d;
        return g->width;
    case PAT_NO_COMM:
        dep[0] = x;
        return 1;
    case PAT_TREE:
    case PAT_COUNT:
        break;
    }
    return tree_deps(g->width, t, x, dep);
}

/* The most inputs one task of the pattern has at width w. */
static int pattern_max_inputs(pattern_kind p, int w) {
    switch (p) {
    case PAT_STENCIL:
        return w < 3 ? w : 3;
    case PAT_ALL_TO_ALL:
        return w;
    case PAT_NO_COMM:
        return 1;
    case PAT_FFT:
    case PAT_TREE:
    case PAT_COUNT:
        break;
    }
    return 2;
}

/* ---- The task body ----------------------------------------------------------- */

/* What a producer leaves in its tile: 16 bytes. */
typedef struct tile_rec {
    int32_t layer;
    int32_t x;
    uint32_t epoch;
    uint32_t check;
} tile_rec;

static uint32_t tile_check(uint32_t epoch, int32_t layer, int32_t x) {
    uint32_t h = epoch * 0x9e3779b1u ^ (uint32_t)layer * 0x85ebca77u ^ (uint32_t)x * 0xc2b2ae3du;
    h ^= h >> 15;
    h *= 0x2c1b3c6du;
    return h ^ (h >> 13);
}

static void fail_once(failure *f, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void fail_once(failure *f, const char *fmt, ...) {
    if (atomic_exchange(&f->set, 1))
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(f->msg, sizeof f->msg, fmt, ap);
    va_end(ap);
}

/* A dependent chain of floating-point operations: `iters` steps that cannot
 * overlap, so the time is proportional to the count. */
__attribute__((noinline)) static void spin(uint64_t iters) { /* its own symbol in profiles */
    double v = 1.0;
    for (uint64_t i = 0; i < iters; i++) {
        v = v * 0.9999999 + 1e-7;
        __asm__("" : "+x"(v)); /* opaque: the compiler may neither fold nor drop the chain */
    }
    __asm__ volatile("" : : "x"(v));
}

static int check_record(const graph *g, const tile_rec *r, int t, int x, int producer) {
    if (r->layer == t - 1 && r->x == producer && r->epoch == g->epoch &&
        r->check == tile_check(g->epoch, t - 1, producer))
        return 0;
    const char *found = r->epoch == 0                                      ? "never written"
                        : r->check != tile_check(r->epoch, r->layer, r->x) ? "a torn record"
                        : r->epoch != g->epoch                             ? "an earlier run's"
                                                                           : "this run's";
    fail_once(g->fail,
              "%s %s w=%d: task %d of layer %d read tile (%d, %d): expected the record of layer "
              "%d task %d, found layer %d task %d (%s)",
              g->sys, pattern_names[g->pattern], g->width, x, t, (t - 1) & 1, producer, t - 1,
              producer, r->layer, r->x, found);
    return -1;
}

/* The body every runtime runs, with the three scalars it was handed (t, x,
 * iters): check each input, spin, write the record. 0, or -1 with the
 * failure recorded. */
static int task_body(const graph *g, int t, int x, uint64_t iters, const tile_rec *const *in,
                     int nin, tile_rec *out) {
    int dep[MAX_WIDTH];
    int n = pattern_deps(g, t, x, dep);
    if (n != nin) {
        fail_once(g->fail, "%s %s w=%d: task %d of layer %d got %d inputs, expected %d", g->sys,
                  pattern_names[g->pattern], g->width, x, t, nin, n);
        return -1;
    }
    for (int i = 0; i < n; i++)
        if (check_record(g, in[i], t, x, dep[i]))
            return -1;
    spin(iters);
    *out = (tile_rec){t, x, g->epoch, tile_check(g->epoch, t, x)};
    return 0;
}

/* After a run: the last layer's records are all there. */
static int check_last_layer(const graph *g, const tile_rec *const *row) {
    for (int x = 0; x < g->width; x++)
        if (check_record(g, row[x], g->layers, x, x))
            return -1;
    return 0;
}

/* ---- strata -------------------------------------------------------------------- */

typedef enum tile_layout { LAYOUT_BUFFERS, LAYOUT_VIEWS } tile_layout;

/* The 2 x width tiles, tile[r * width + x] for row r. */
typedef struct strata_tiles {
    int count;
    strata_buffer *buf[2 * MAX_WIDTH]; /* one per tile, or one in all (LAYOUT_VIEWS) */
    int nbufs;
    strata_tensor tile[2 * MAX_WIDTH];
} strata_tiles;

typedef struct strata_side {
    strata_worker *w;
    strata_callable body;
    const graph *g;    /* the graph being run, read by the bodies */
    uint64_t build_ns; /* the last orchestration loop's time */
} strata_side;

static int strata_fail(const char *what, int rc) {
    fprintf(stderr, "strata: %s failed: %s: %s\n", what, strata_status_name(rc),
            strata_error_message());
    return rc;
}

static int strata_task(const strata_task_view *a, void *user) {
    const strata_side *s = user;
    const tile_rec *in[MAX_WIDTH];
    int nin = (int)a->ntensors - 1;
    for (int i = 0; i < nin; i++)
        in[i] = strata_tensor_data(&a->tensors[i]);
    int t = (int)a->scalars[0], x = (int)a->scalars[1];
    if (task_body(s->g, t, x, a->scalars[2], in, nin, strata_tensor_data(&a->tensors[nin]))) {
        strata_task_set_error("%s", s->g->fail->msg);
        return 1;
    }
    return 0;
}

typedef struct strata_call {
    strata_side *side;
    const strata_tiles *tiles;
} strata_call;

static int submit_task(strata_orch *o, const strata_call *c, int t, int x) {
    const graph *g = c->side->g;
    const strata_tensor *prev = &c->tiles->tile[((t + 1) & 1) * g->width];
    int dep[MAX_WIDTH];
    int n = pattern_deps(g, t, x, dep);
    strata_task_args a;
    strata_args_init(&a);
    for (int i = 0; i < n; i++)
        STRATA_TRY(strata_args_add_tensor(&a, &prev[dep[i]], STRATA_IN));
    STRATA_TRY(
        strata_args_add_tensor(&a, &c->tiles->tile[(t & 1) * g->width + x], STRATA_OUT_EXISTING));
    STRATA_TRY(strata_args_add_scalar(&a, (uint64_t)t));
    STRATA_TRY(strata_args_add_scalar(&a, (uint64_t)x));
    STRATA_TRY(strata_args_add_scalar(&a, g->iters));
    return strata_orch_submit_sub(o, c->side->body, &a);
}

static int orchestrate(strata_orch *o, void *arg) {
    strata_call *c = arg;
    const graph *g = c->side->g;
    uint64_t t0 = bench_now_ns();
    for (int t = 0; t < g->layers; t++)
        for (int x = 0; x < g->width; x++)
            STRATA_TRY(submit_task(o, c, t, x));
    c->side->build_ns = bench_now_ns() - t0;
    return STRATA_OK;
}

static void strata_tiles_destroy(strata_tiles *tl) {
    for (int i = 0; i < tl->nbufs; i++)
        strata_buffer_destroy(tl->buf[i]);
    tl->nbufs = 0;
}

/* 2 x width tiles of 16 bytes: separate buffers, or views of one buffer. */
static int strata_tiles_create(strata_worker *w, int width, tile_layout layout, strata_tiles *tl) {
    int64_t shape = sizeof(tile_rec);
    tl->count = 2 * width;
    tl->nbufs = 0;
    for (int i = 0; i < tl->count; i++) {
        int rc = STRATA_OK;
        if (layout == LAYOUT_BUFFERS || i == 0) {
            size_t bytes = sizeof(tile_rec) * (layout == LAYOUT_BUFFERS ? 1 : (size_t)tl->count);
            rc = strata_buffer_create(w, bytes, &tl->buf[tl->nbufs]);
            if (rc)
                return strata_fail("strata_buffer_create", rc);
            tl->nbufs++;
        }
        if (layout == LAYOUT_BUFFERS)
            rc = strata_tensor_contiguous(tl->buf[i], STRATA_U8, 1, &shape, &tl->tile[i]);
        else
            rc = strata_tensor_view(tl->buf[0], (uint64_t)i * sizeof(tile_rec), STRATA_U8, 1,
                                    &shape, NULL, &tl->tile[i]);
        if (rc)
            return strata_fail(
                layout == LAYOUT_BUFFERS ? "strata_tensor_contiguous" : "strata_tensor_view", rc);
    }
    return 0;
}

static int strata_start(strata_side *s, int subs) {
    strata_worker_config cfg;
    memset(s, 0, sizeof *s);
    strata_worker_config_init(&cfg);
    cfg.sub_workers = (uint32_t)subs;
    int rc = strata_worker_create(&cfg, &s->w);
    if (rc)
        return strata_fail("strata_worker_create", rc);
    rc = strata_worker_register_sub(s->w, "pattern_task", strata_task, s, &s->body);
    if (rc)
        return strata_fail("strata_worker_register_sub", rc);
    rc = strata_worker_init(s->w);
    return rc ? strata_fail("strata_worker_init", rc) : 0;
}

static void strata_stop(strata_side *s) {
    strata_worker_destroy(s->w);
    s->w = NULL;
}

/* One run of g: wall µs per task (strata_worker_run only) and the
 * orchestration loop's µs per task. */
static int strata_sample(strata_side *s, const graph *g, const strata_tiles *tl, double *run_us,
                         double *build_us) {
    strata_call c = {s, tl};
    s->g = g;
    uint64_t t0 = bench_now_ns();
    int rc = strata_worker_run(s->w, orchestrate, &c);
    uint64_t t1 = bench_now_ns();
    if (rc) {
        fprintf(stderr, "strata: %s w=%d: strata_worker_run failed: %s: %s\n",
                pattern_names[g->pattern], g->width, strata_status_name(rc),
                strata_error_message());
        return -1;
    }
    const tile_rec *row[MAX_WIDTH];
    for (int x = 0; x < g->width; x++)
        row[x] = strata_tensor_data(&tl->tile[((g->layers - 1) & 1) * g->width + x]);
    if (check_last_layer(g, row))
        return -1;
    double tasks = (double)g->layers * g->width;
    *run_us = (double)(t1 - t0) / 1e3 / tasks;
    if (build_us)
        *build_us = (double)s->build_ns / 1e3 / tasks;
    return 0;
}

/* A first run as a user sees it: new buffers (not timed), one timed run,
 * then the buffers are destroyed (not timed). */
static int strata_sample_fresh(strata_side *s, const graph *g, strata_tiles *tl, double *run_us) {
    int rc = strata_tiles_create(s->w, g->width, LAYOUT_BUFFERS, tl);
    if (!rc)
        rc = strata_sample(s, g, tl, run_us, NULL);
    strata_tiles_destroy(tl);
    return rc;
}

/* ---- StarPU -------------------------------------------------------------------- */

#if BENCH_HAVE_STARPU
typedef struct starpu_side {
    int width;
    tile_rec mem[2 * MAX_WIDTH];
    starpu_data_handle_t h[2 * MAX_WIDTH];
    struct starpu_data_descr d[MAX_WIDTH + 1]; /* one task's data, filled per insert */
} starpu_side;

/* The graph being run; StarPU codelets have no registered user pointer. */
static const graph *starpu_graph;

static void starpu_task_fn(void *buffers[], void *cl_arg) {
    const tile_rec *in[MAX_WIDTH];
    int nin = STARPU_TASK_GET_NBUFFERS(starpu_task_get_current()) - 1;
    int t, x;
    uint64_t iters;
    starpu_codelet_unpack_args(cl_arg, &t, &x, &iters);
    for (int i = 0; i < nin; i++)
        in[i] = (const tile_rec *)STARPU_VECTOR_GET_PTR(buffers[i]);
    task_body(starpu_graph, t, x, iters, in, nin, (tile_rec *)STARPU_VECTOR_GET_PTR(buffers[nin]));
}

static struct starpu_codelet cl_pattern = {.cpu_funcs = {starpu_task_fn},
                                           .nbuffers = STARPU_VARIABLE_NBUFFERS};

static void starpu_tiles_register(starpu_side *s, int width) {
    s->width = width;
    for (int i = 0; i < 2 * width; i++)
        starpu_vector_data_register(&s->h[i], STARPU_MAIN_RAM, (uintptr_t)&s->mem[i], 1,
                                    sizeof(tile_rec));
}

static void starpu_tiles_unregister(starpu_side *s) {
    starpu_resume();
    for (int i = 0; i < 2 * s->width; i++)
        starpu_data_unregister(s->h[i]);
    starpu_pause();
    s->width = 0;
}

static int starpu_insert_graph(starpu_side *s, const graph *g) {
    struct starpu_data_descr *d = s->d;
    int dep[MAX_WIDTH];
    for (int t = 0; t < g->layers; t++) {
        starpu_data_handle_t *prev = &s->h[((t + 1) & 1) * g->width];
        for (int x = 0; x < g->width; x++) {
            int n = pattern_deps(g, t, x, dep);
            for (int i = 0; i < n; i++)
                d[i] = (struct starpu_data_descr){.handle = prev[dep[i]], .mode = STARPU_R};
            d[n] = (struct starpu_data_descr){.handle = s->h[(t & 1) * g->width + x],
                                              .mode = STARPU_W};
            uint64_t iters = g->iters;
            int rc = starpu_task_insert(&cl_pattern, STARPU_DATA_MODE_ARRAY, d, n + 1, STARPU_VALUE,
                                        &t, sizeof t, STARPU_VALUE, &x, sizeof x, STARPU_VALUE,
                                        &iters, sizeof iters, 0);
            if (rc)
                return rc;
        }
    }
    return 0;
}

/* One run: insertion + starpu_task_wait_for_all(), µs per task. */
static int starpu_sample(starpu_side *s, const graph *g, double *us) {
    starpu_graph = g;
    starpu_resume();
    uint64_t t0 = bench_now_ns();
    int rc = starpu_insert_graph(s, g);
    int wrc = starpu_task_wait_for_all();
    uint64_t t1 = bench_now_ns();
    starpu_pause();
    if (rc || wrc) {
        fprintf(stderr, "starpu: %s w=%d failed (insert %d, wait %d)\n", pattern_names[g->pattern],
                g->width, rc, wrc);
        return -1;
    }
    const tile_rec *row[MAX_WIDTH];
    for (int x = 0; x < g->width; x++)
        row[x] = &s->mem[((g->layers - 1) & 1) * g->width + x];
    if (atomic_load(&g->fail->set) || check_last_layer(g, row))
        return -1;
    *us = (double)(t1 - t0) / 1e3 / ((double)g->layers * g->width);
    return 0;
}
#endif

/* ---- libgomp ------------------------------------------------------------------- */

#ifdef _OPENMP
static void gomp_task(const graph *g, int t, int x, uint64_t iters, const tile_rec *prev,
                      tile_rec *out) {
    const tile_rec *in[MAX_WIDTH];
    int dep[MAX_WIDTH];
    int n = pattern_deps(g, t, x, dep);
    for (int i = 0; i < n; i++)
        in[i] = &prev[dep[i]];
    task_body(g, t, x, iters, in, n, out);
}

/* One task, its input dependencies spelled out for the common counts and
 * through an iterator beyond them (libgomp matches dependencies by address,
 * so every input tile is named one by one). */
static void gomp_create(const graph *g, int t, int x, tile_rec *prev, tile_rec *cur) {
    int dep[MAX_WIDTH];
    int n = pattern_deps(g, t, x, dep);
    tile_rec *out = &cur[x];
    uint64_t iters = g->iters; /* the third scalar, copied into the task like t and x */
    switch (n) {
    case 0:
#pragma omp task depend(out : out[0])
        gomp_task(g, t, x, iters, prev, out);
        break;
    case 1:
#pragma omp task depend(in : prev[dep[0]]) depend(out : out[0])
        gomp_task(g, t, x, iters, prev, out);
        break;
    case 2:
#pragma omp task depend(in : prev[dep[0]], prev[dep[1]]) depend(out : out[0])
        gomp_task(g, t, x, iters, prev, out);
        break;
    case 3:
#pragma omp task depend(in : prev[dep[0]], prev[dep[1]], prev[dep[2]]) depend(out : out[0])
        gomp_task(g, t, x, iters, prev, out);
        break;
    default:
#pragma omp task depend(iterator(int k = 0 : n), in : prev[dep[k]]) depend(out : out[0])
        gomp_task(g, t, x, iters, prev, out);
        break;
    }
}

/* One run: a parallel region whose single thread creates the graph; the
 * region's end waits for every task. µs per task. */
static int gomp_sample(const graph *g, tile_rec *tiles, int workers, double *us) {
    uint64_t t0 = bench_now_ns();
#pragma omp parallel num_threads(workers)
#pragma omp single
    for (int t = 0; t < g->layers; t++)
        for (int x = 0; x < g->width; x++)
            gomp_create(g, t, x, &tiles[((t + 1) & 1) * g->width], &tiles[(t & 1) * g->width]);
    uint64_t t1 = bench_now_ns();
    const tile_rec *row[MAX_WIDTH];
    for (int x = 0; x < g->width; x++)
        row[x] = &tiles[((g->layers - 1) & 1) * g->width + x];
    if (atomic_load(&g->fail->set) || check_last_layer(g, row))
        return -1;
    *us = (double)(t1 - t0) / 1e3 / ((double)g->layers * g->width);
    return 0;
}
#endif

/* ---- Driver -------------------------------------------------------------------- */

typedef enum system_kind { SYS_STRATA, SYS_STARPU, SYS_GOMP } system_kind;

typedef struct bench_ctx {
    const bench_options *opt;
    int only_pattern; /* --pattern: index, or -1 for all */
    int only_width;   /* --width: a width, or 0 for the default three */
    int strata_subs;  /* --strata-subs: sub workers of strata's Worker */
    int no_metg;      /* --no-metg: the empty-task tables only (for profiling them) */
    int metg_layers;  /* --metg-layers: T of the main METG table (0: DEFAULT_LAYERS) */
    uint32_t epoch;
    failure fail;
    strata_side ss;
    strata_tiles bufs, views; /* the current width's tiles, both layouts */
    strata_tiles fresh;       /* a first run's tiles, alive for one sample */
    int starpu_ok;
    char starpu_why[128];
#if BENCH_HAVE_STARPU
    starpu_side sp;
#endif
    tile_rec gomp_tiles[2 * MAX_WIDTH];
    double ns_per_iter; /* of spin(), calibrated at start */
} bench_ctx;

static int strata_fits(pattern_kind p, int w) {
    return pattern_max_inputs(p, w) + 1 <= STRATA_MAX_TENSORS;
}

/* A fresh run of the graph for one runtime: a new epoch, so no record of an
 * earlier run can pass a check. */
static graph make_graph(bench_ctx *c, pattern_kind p, int w, int layers, uint64_t iters,
                        const char *sys) {
    graph g = {p, w, layers, iters, ++c->epoch, sys, &c->fail};
    return g;
}

static int report_failure(const bench_ctx *c) {
    if (atomic_load(&c->fail.set))
        fprintf(stderr, "wrong dependency: %s\n", c->fail.msg);
    return -1;
}

/* One run on one runtime (strata: separate buffers): wall µs per task. */
static int sample_system(bench_ctx *c, system_kind sys, const graph *g, double *us) {
    int rc = -1;
    switch (sys) {
    case SYS_STRATA:
        rc = strata_sample(&c->ss, g, &c->bufs, us, NULL);
        break;
    case SYS_STARPU:
#if BENCH_HAVE_STARPU
        rc = starpu_sample(&c->sp, g, us);
#endif
        break;
    case SYS_GOMP:
#ifdef _OPENMP
        rc = gomp_sample(g, c->gomp_tiles, c->opt->workers, us);
#endif
        break;
    }
    return rc ? report_failure(c) : 0;
}

static int system_wanted(const bench_ctx *c, system_kind sys, pattern_kind p, int w) {
    switch (sys) {
    case SYS_STRATA:
        return bench_wants(c->opt, "strata") && strata_fits(p, w);
    case SYS_STARPU:
        return c->starpu_ok;
    case SYS_GOMP:
#ifdef _OPENMP
        return bench_wants(c->opt, "libgomp");
#else
        return 0;
#endif
    }
    return 0;
}

static void teardown_width(bench_ctx *c);

static int setup_width(bench_ctx *c, int w) {
    if (strata_tiles_create(c->ss.w, w, LAYOUT_BUFFERS, &c->bufs) ||
        strata_tiles_create(c->ss.w, w, LAYOUT_VIEWS, &c->views)) {
        teardown_width(c);
        return -1;
    }
#if BENCH_HAVE_STARPU
    if (c->starpu_ok)
        starpu_tiles_register(&c->sp, w);
#endif
    return 0;
}

static void teardown_width(bench_ctx *c) {
    strata_tiles_destroy(&c->bufs);
    strata_tiles_destroy(&c->views);
#if BENCH_HAVE_STARPU
    if (c->starpu_ok && c->sp.width)
        starpu_tiles_unregister(&c->sp);
#endif
}

/* ---- Empty tasks ---------------------------------------------------------------- */

typedef struct empty_series {
    bench_series buffers, views, fresh, build_buffers, build_views, starpu, gomp;
} empty_series;

static int empty_strata_once(bench_ctx *c, pattern_kind p, int w, int layers, empty_series *s) {
    double run, build;
    graph g = make_graph(c, p, w, layers, 0, "strata (buffers)");
    bench_settle();
    if (strata_sample(&c->ss, &g, &c->bufs, &run, &build))
        return report_failure(c);
    bench_series_add(&s->buffers, run);
    bench_series_add(&s->build_buffers, build);
    g = make_graph(c, p, w, layers, 0, "strata (views)");
    bench_settle();
    if (strata_sample(&c->ss, &g, &c->views, &run, &build))
        return report_failure(c);
    bench_series_add(&s->views, run);
    bench_series_add(&s->build_views, build);
    g = make_graph(c, p, w, layers, 0, "strata (first run)");
    bench_settle();
    if (strata_sample_fresh(&c->ss, &g, &c->fresh, &run))
        return report_failure(c);
    bench_series_add(&s->fresh, run);
    return 0;
}

/* One repetition of one graph on every runtime, strata first. */
static int empty_once(bench_ctx *c, pattern_kind p, int w, int layers, empty_series *s) {
    double v;
    if (system_wanted(c, SYS_STRATA, p, w) && empty_strata_once(c, p, w, layers, s))
        return -1;
    static const system_kind anchors[2] = {SYS_STARPU, SYS_GOMP};
    static const char *const names[2] = {"starpu", "libgomp"};
    for (int i = 0; i < 2; i++) {
        if (!system_wanted(c, anchors[i], p, w))
            continue;
        graph g = make_graph(c, p, w, layers, 0, names[i]);
        bench_settle();
        if (sample_system(c, anchors[i], &g, &v))
            return -1;
        bench_series_add(i == 0 ? &s->starpu : &s->gomp, v);
    }
    return 0;
}

static bench_value starpu_value(const bench_ctx *c, const bench_series *s) {
    if (c->starpu_ok)
        return bench_measured(s);
    return bench_unavailable(c->starpu_why[0] ? c->starpu_why : BENCH_STARPU_MISSING);
}

static bench_value gomp_value(const bench_series *s) {
#ifdef _OPENMP
    return bench_measured(s);
#else
    (void)s;
    return bench_unavailable("built without OpenMP");
#endif
}

static void add_anchored_row(bench_table *t, const bench_ctx *c, const char *metric,
                             const char *unit, const bench_series *strata, const bench_series *gomp,
                             const bench_series *starpu, double gomp_target) {
    bench_row *row = bench_table_row(t, metric, unit, strata, 0);
    if (!row)
        return;
    bench_row_compare(row, "libgomp", gomp_value(gomp), gomp_target);
    bench_row_compare(row, "starpu", starpu_value(c, starpu), 0);
}

static void add_layout_row(bench_table *t, const char *metric, const bench_series *views,
                           const bench_series *buffers, int fits) {
    bench_row *row = bench_table_row(t, metric, "us/task", views, 0);
    if (row)
        bench_row_compare(
            row, "buffers",
            fits ? bench_measured(buffers) : bench_unavailable("strata n/a (W+1 tensors)"), 1.2);
}

/* The pattern's table gets the empty rows; the views-vs-buffers table, shared
 * by every pattern, the two layout rows. */
static void add_empty_rows(bench_table *t, bench_table *layout, const bench_ctx *c, pattern_kind p,
                           int w, const empty_series *s) {
    char m[48];
    const char *name = pattern_names[p];
    snprintf(m, sizeof m, "empty %s w=%d", name, w);
    add_anchored_row(t, c, m, "us/task", &s->buffers, &s->gomp, &s->starpu, 1.0);
    snprintf(m, sizeof m, "empty %s w=%d first", name, w);
    add_anchored_row(t, c, m, "us/task", &s->fresh, &s->gomp, &s->starpu, 1.0);
    snprintf(m, sizeof m, "views %s w=%d", name, w);
    add_layout_row(layout, m, &s->views, &s->buffers, strata_fits(p, w));
    snprintf(m, sizeof m, "views build %s w=%d", name, w);
    add_layout_row(layout, m, &s->build_views, &s->build_buffers, strata_fits(p, w));
}

static int default_widths(const bench_ctx *c, int *out) {
    if (c->only_width)
        return out[0] = c->only_width, 1;
    int candidates[MAX_WIDTHS] = {2, 16, 4 * c->opt->workers}, n = 0;
    for (int i = 0; i < MAX_WIDTHS; i++) {
        int seen = 0;
        for (int j = 0; j < n; j++)
            seen |= out[j] == candidates[i];
        if (!seen)
            out[n++] = candidates[i];
    }
    return n;
}

static int empty_graph(bench_ctx *c, bench_table *t, bench_table *layout, pattern_kind p, int w,
                       int layers) {
    static empty_series s;
    memset(&s, 0, sizeof s);
    if (setup_width(c, w))
        return -1;
    int rc = empty_once(c, p, w, layers, &s); /* warm-up, not kept */
    memset(&s, 0, sizeof s);
    for (int r = 0; r < c->opt->reps && !rc; r++)
        rc = empty_once(c, p, w, layers, &s);
    teardown_width(c);
    if (!rc)
        add_empty_rows(t, layout, c, p, w, &s);
    return rc;
}

static int empty_table(bench_ctx *c, bench_report *report, bench_table *layout, pattern_kind p) {
    int widths[MAX_WIDTHS], n = default_widths(c, widths);
    int layers = c->opt->quick ? QUICK_LAYERS : DEFAULT_LAYERS;
    bench_table *t =
        bench_report_table(report, "%s: %d layers of W empty tasks, %d workers, median of %d",
                           pattern_names[p], layers, c->opt->workers, c->opt->reps);
    for (int i = 0; i < n; i++)
        if (empty_graph(c, t, layout, p, widths[i], layers))
            return -1;
    bench_table_print(t);
    for (int i = 0; i < n; i++)
        if (!strata_fits(p, widths[i]))
            printf("  strata w=%d: n/a (needs W+1 = %d tensors, STRATA_MAX_TENSORS = %d)\n",
                   widths[i], widths[i] + 1, STRATA_MAX_TENSORS);
    return 0;
}

/* ---- METG ------------------------------------------------------------------------ */

typedef struct metg_point {
    uint64_t iters;
    double us_per_task; /* best of METG_BEST_OF runs */
} metg_point;

/* The sweep's iteration counts, largest first: top / factor^k, distinct, >= 1. */
static int metg_sizes(uint64_t top, double factor, uint64_t *iters) {
    int n = 0;
    for (double v = (double)top; v >= 1.0 && n < METG_MAX_POINTS; v /= factor) {
        uint64_t i = (uint64_t)(v + 0.5);
        if (n == 0 || i != iters[n - 1])
            iters[n++] = i;
    }
    return n;
}

/* Useful iterations per us at size k. */
static double metg_rate(const metg_point *pt, int k) {
    return (double)pt[k].iters / pt[k].us_per_task;
}

/* Smallest task duration (wall x cores / tasks) whose useful rate is at least
 * half of `peak`; the largest size's duration if none is (then the METG is
 * above the sweep: the figure is a lower bound). */
static double metg_from_points(const metg_point *pt, int n, int cores, double peak) {
    double best = pt[0].us_per_task * cores;
    for (int k = 1; k < n; k++) {
        double duration = pt[k].us_per_task * cores;
        if (metg_rate(pt, k) >= 0.5 * peak && duration < best)
            best = duration;
    }
    return best;
}

/* The sweep of one system: pt[0..*n), largest size first, ending after
 * METG_STOP_BELOW sizes in a row under half of its own largest size's rate
 * (the peak the METG is taken against is at least that rate, so no point
 * that could count is left out). */
static int metg_sweep(bench_ctx *c, system_kind sys, pattern_kind p, int w, int layers,
                      metg_point *pt, int *npoints) {
    static const char *const names[3] = {"strata", "starpu", "libgomp"};
    int quick = c->opt->quick;
    double top_us = quick ? QUICK_METG_TOP_US : METG_TOP_US;
    uint64_t iters[METG_MAX_POINTS];
    int n = metg_sizes((uint64_t)(top_us * 1e3 / c->ns_per_iter), quick ? 2.0 : 1.41421356, iters);
    int k = 0, below = 0;
    for (; k < n && below < METG_STOP_BELOW; k++) {
        pt[k] = (metg_point){iters[k], 0};
        bench_settle();
        for (int b = 0; b < METG_BEST_OF; b++) {
            double us;
            graph g = make_graph(c, p, w, layers, iters[k], names[sys]);
            if (sample_system(c, sys, &g, &us))
                return -1;
            if (b == 0 || us < pt[k].us_per_task)
                pt[k].us_per_task = us;
        }
        below = metg_rate(pt, k) < 0.5 * metg_rate(pt, 0) ? below + 1 : 0;
    }
    *npoints = k;
    return 0;
}

/* The METG rows of pattern p at width w over graphs of `layers` layers;
 * `short_graphs`: the rows of the short-graph table (their own names, no
 * target). Each repetition sweeps every system, then takes each one's METG
 * against the peak: the highest useful rate any of them reached at the
 * largest size in that repetition (as Task Bench defines it: the machine's
 * rate, not the system's own). A second row takes each against its own
 * largest size's rate, which flatters a system that is slow there: libgomp
 * runs all_to_all at T = 1000 at about half of strata's rate at every size
 * (docs: bench/README.md), and against its own top its METG looked 2 x
 * better than strata's. */
static int metg_pattern(bench_ctx *c, bench_table *t, pattern_kind p, int w, int layers,
                        int short_graphs) {
    static bench_series s[3], own[3];
    static metg_point pts[3][METG_MAX_POINTS];
    memset(s, 0, sizeof s);
    memset(own, 0, sizeof own);
    if (setup_width(c, w))
        return -1;
    int rc = 0;
    for (int r = 0; r < c->opt->reps && !rc; r++) {
        int n[3] = {0, 0, 0};
        double peak = 0;
        for (int sys = SYS_STRATA; sys <= SYS_GOMP && !rc; sys++) {
            if (!system_wanted(c, (system_kind)sys, p, w))
                continue;
            rc = metg_sweep(c, (system_kind)sys, p, w, layers, pts[sys], &n[sys]);
            if (!rc && n[sys] > 0 && metg_rate(pts[sys], 0) > peak)
                peak = metg_rate(pts[sys], 0);
        }
        for (int sys = SYS_STRATA; sys <= SYS_GOMP && !rc; sys++) {
            if (n[sys] == 0)
                continue;
            int cores = c->opt->workers;
            bench_series_add(&s[sys], metg_from_points(pts[sys], n[sys], cores, peak));
            bench_series_add(&own[sys],
                             metg_from_points(pts[sys], n[sys], cores, metg_rate(pts[sys], 0)));
        }
    }
    teardown_width(c);
    if (rc)
        return rc;
    char m[64];
    snprintf(m, sizeof m, short_graphs ? "METG short %s" : "METG %s", pattern_names[p]);
    add_anchored_row(t, c, m, "us", &s[SYS_STRATA], &s[SYS_GOMP], &s[SYS_STARPU],
                     short_graphs ? 0 : 0.5);
    snprintf(m, sizeof m, short_graphs ? "METG short %s own top" : "METG %s own top",
             pattern_names[p]);
    add_anchored_row(t, c, m, "us", &own[SYS_STRATA], &own[SYS_GOMP], &own[SYS_STARPU], 0);
    return 0;
}

/* One METG table: every wanted pattern at W = 4 x workers (or --width) over
 * graphs of `layers` layers. */
static int metg_table_of(bench_ctx *c, bench_report *report, int layers, int short_graphs) {
    int quick = c->opt->quick;
    int w = c->only_width ? c->only_width : 4 * c->opt->workers;
    bench_table *t = bench_report_table(
        report,
        "METG%s (us; 50%% of the peak: the best rate at the largest size; 'own top': of its own "
        "there): W=%d, %d layers, %.0f us down by %s, best of %d, median of %d",
        short_graphs ? " of short graphs (no target)" : "", w, layers,
        quick ? QUICK_METG_TOP_US : METG_TOP_US, quick ? "2x" : "sqrt(2)", METG_BEST_OF,
        c->opt->reps);
    for (int p = 0; p < PAT_COUNT; p++)
        if ((c->only_pattern < 0 || c->only_pattern == p) &&
            metg_pattern(c, t, p, w, layers, short_graphs))
            return -1;
    bench_table_print(t);
    for (int p = 0; p < PAT_COUNT; p++)
        if ((c->only_pattern < 0 || c->only_pattern == p) && !strata_fits(p, w))
            printf("  strata %s: n/a (needs W+1 = %d tensors, STRATA_MAX_TENSORS = %d)\n",
                   pattern_names[p], w + 1, STRATA_MAX_TENSORS);
    return 0;
}

/* The METG table at the graphs' T (the target's), then, in a full run, the
 * same sweep over short graphs. */
static int metg_table(bench_ctx *c, bench_report *report) {
    if (c->opt->quick)
        return metg_table_of(c, report, QUICK_METG_LAYERS, 0);
    int layers = c->metg_layers ? c->metg_layers : DEFAULT_LAYERS;
    if (metg_table_of(c, report, layers, 0))
        return -1;
    return layers == METG_SHORT_LAYERS ? 0 : metg_table_of(c, report, METG_SHORT_LAYERS, 1);
}

/* ---- Setup and options --------------------------------------------------------------- */

/* ns per iteration of spin(), best of 5 timings of a few milliseconds. */
static double calibrate_spin(void) {
    const uint64_t n = 1u << 21;
    double best = 0;
    for (int i = 0; i < 5; i++) {
        uint64_t t0 = bench_now_ns();
        spin(n);
        double ns = (double)(bench_now_ns() - t0) / (double)n;
        if (i == 0 || ns < best)
            best = ns;
    }
    return best;
}

static void start_starpu(bench_ctx *c) {
#if BENCH_HAVE_STARPU
    if (!bench_wants(c->opt, "starpu")) {
        snprintf(c->starpu_why, sizeof c->starpu_why, "skipped (--only)");
        return;
    }
    c->starpu_ok = bench_starpu_start(c->opt->workers, c->starpu_why, sizeof c->starpu_why) == 0;
    if (!c->starpu_ok)
        fprintf(stderr, "starpu anchor skipped: %s\n", c->starpu_why);
#else
    (void)c;
#endif
}

static void stop_starpu(bench_ctx *c) {
#if BENCH_HAVE_STARPU
    if (c->starpu_ok)
        bench_starpu_stop();
#else
    (void)c;
#endif
}

static int parse_pattern(const char *name) {
    for (int p = 0; name && p < PAT_COUNT; p++)
        if (!strcmp(name, pattern_names[p]))
            return p;
    fprintf(stderr, "--pattern needs stencil, fft, all_to_all, no_comm or tree (got '%s')\n",
            name ? name : "nothing");
    return -2;
}

static int parse_int(const char *opt, const char *text, int lo, int hi) {
    char *end = NULL;
    long v = text ? strtol(text, &end, 10) : 0;
    if (!text || *end || v < lo || v > hi) {
        fprintf(stderr, "%s needs an integer between %d and %d (got '%s')\n", opt, lo, hi,
                text ? text : "nothing");
        return -1;
    }
    return (int)v;
}

/* Takes this benchmark's own options out of argv (the rest go to
 * bench_parse_args). 0, or -1 on a bad value (message printed). */
static int take_own_options(int *argc, char **argv, bench_ctx *c) {
    int kept = 1;
    c->only_pattern = -1;
    for (int i = 1; i < *argc; i++) {
        const char *next = i + 1 < *argc ? argv[i + 1] : NULL;
        if (!strcmp(argv[i], "--pattern")) {
            if ((c->only_pattern = parse_pattern(next)) < -1)
                return -1;
            i++;
        } else if (!strcmp(argv[i], "--width")) {
            if ((c->only_width = parse_int("--width", next, 2, MAX_WIDTH)) < 0)
                return -1;
            i++;
        } else if (!strcmp(argv[i], "--no-metg")) {
            c->no_metg = 1;
        } else if (!strcmp(argv[i], "--metg-layers")) {
            if ((c->metg_layers = parse_int("--metg-layers", next, 2, DEFAULT_LAYERS * 10)) < 0)
                return -1;
            i++;
        } else if (!strcmp(argv[i], "--strata-subs")) {
            if ((c->strata_subs = parse_int("--strata-subs", next, 1, BENCH_MAX_WORKERS)) < 0)
                return -1;
            i++;
        } else {
            argv[kept++] = argv[i];
        }
    }
    *argc = kept;
    return 0;
}

static void print_footer(const bench_ctx *c) {
    int n = c->opt->workers;
    printf("\nthreads: strata %d sub workers + the calling thread (builds the graph, then runs "
           "unstarted tasks while it waits: help_while_waiting=1) = %d; libgomp %d threads, the "
           "producer among them (it runs tasks too once its queue is long and at the region's "
           "end); starpu %d CPU workers + the inserting thread\n",
           c->strata_subs, c->strata_subs + 1, n, n);
    printf("times: the whole run (strata_worker_run / insertion + starpu_task_wait_for_all / "
           "the parallel region) over its tasks; 'first run': new strata buffers every sample, "
           "created and destroyed outside the timed run (the same Worker); 'build': strata's "
           "orchestration loop only; task bodies check every input record (empty: 0 spin "
           "iterations); spin: %.2f ns per iteration\n",
           c->ns_per_iter);
#if BENCH_HAVE_STARPU
    if (c->starpu_ok)
        printf("starpu: scheduler '%s', one vector handle per tile, STARPU_R inputs, STARPU_W "
               "output, 3 STARPU_VALUE scalars\n",
               bench_starpu_sched_name());
#endif
}

static int run_all(bench_ctx *c, bench_report *report) {
    /* Made first (the pattern tables each add their rows to it), printed after them. */
    bench_table *layout = bench_report_table(
        report, "views vs buffers: strata's tiles as views of one buffer against separate "
                "buffers (anchor 'buffers'), whole run; 'build': the orchestration loop alone");
    for (int p = 0; p < PAT_COUNT; p++)
        if ((c->only_pattern < 0 || c->only_pattern == p) && empty_table(c, report, layout, p))
            return -1;
    bench_table_print(layout);
    if (!c->no_metg && metg_table(c, report))
        return -1;
    print_footer(c);
    return 0;
}

int main(int argc, char **argv) {
    static bench_ctx c;
    static bench_options opt;
    static bench_report report;
    if (take_own_options(&argc, argv, &c))
        return 2;
    int prc = bench_parse_args(
        argc, argv,
        "Layered task-graph patterns (stencil, fft, all_to_all, no_comm, tree): empty-task cost "
        "and METG, strata vs libgomp vs StarPU.\n"
        "  --pattern NAME    only this pattern\n"
        "  --width N         only this width (default 2, 16 and 4 x workers; METG at 4 x workers)\n"
        "  --strata-subs N   sub workers of strata's Worker (default --workers)\n"
        "  --no-metg         skip the METG tables (to profile the empty-task rows)\n"
        "  --metg-layers N   layers of the METG table's graphs (default 1000, the graphs' T;\n"
        "                    a second table, short graphs of 100 layers, follows without a target)",
        &opt);
    if (prc)
        return prc > 0 ? 0 : 2;
    c.opt = &opt;
    if (!c.strata_subs)
        c.strata_subs = opt.workers;
    c.ns_per_iter = calibrate_spin();
    bench_report_init(&report, &opt);
    if (strata_start(&c.ss, c.strata_subs)) {
        strata_stop(&c.ss);
        return 1;
    }
    start_starpu(&c);
#ifdef _OPENMP
    omp_set_num_threads(opt.workers);
#endif
    int rc = run_all(&c, &report);
    stop_starpu(&c);
    strata_stop(&c.ss);
    if (rc)
        return 1;
    bench_report_print_verdict(&report);
    return bench_report_write_json(&report) ? 1 : 0;
}
