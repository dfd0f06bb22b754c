/* examples/demo.c - the engine demo: a tiled matrix multiplication whose
 * tiles accumulate through INOUT chains, followed by a reduction through
 * runtime-allocated intermediates, submitted as several pipelined runs and
 * verified against a direct computation.
 *
 * Owns: nothing but the demo. Must never: skip the verification.
 *
 *   usage: demo [--n 256] [--tile 64] [--runs 4] [--workers 2] [--help]
 */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "strata/strata.h"

#define MAX_RUNS 64
#define MAX_N 16384 /* n * n stays an int */

typedef struct demo {
    int n, tile, nt; /* matrix size, tile size, tiles per side */
    strata_buffer *a[MAX_RUNS], *b[MAX_RUNS], *c[MAX_RUNS], *sum[MAX_RUNS];
    strata_callable zero, zero_total, mma, tile_sum, add;
} demo;

typedef struct run_arg {
    demo *d;
    int r;
} run_arg;

/* C_tile = 0 */
static int zero_fn(const strata_task_view *args, void *user) {
    (void)user;
    const strata_tensor *t = strata_args_tensor(args, 0);
    float *c = strata_args_data(args, 0);
    for (int64_t i = 0; i < t->shape[0]; i++)
        memset(c + i * t->strides[0], 0, sizeof(float) * (size_t)t->shape[1]);
    return 0;
}

/* total = 0 */
static int zero_total_fn(const strata_task_view *args, void *user) {
    (void)user;
    *(double *)strata_args_data(args, 0) = 0.0;
    return 0;
}

/* C_tile += A_tile x B_tile (row-major tiles inside full matrices) */
static int mma_fn(const strata_task_view *args, void *user) {
    (void)user;
    const strata_tensor *ta = strata_args_tensor(args, 0);
    const strata_tensor *tb = strata_args_tensor(args, 1);
    const strata_tensor *tc = strata_args_tensor(args, 2);
    const float *a = strata_args_data(args, 0), *b = strata_args_data(args, 1);
    float *c = strata_args_data(args, 2);
    int64_t m = tc->shape[0], n = tc->shape[1], k = ta->shape[1];
    for (int64_t i = 0; i < m; i++)
        for (int64_t p = 0; p < k; p++) {
            float av = a[i * ta->strides[0] + p];
            const float *brow = b + p * tb->strides[0];
            float *crow = c + i * tc->strides[0];
            for (int64_t j = 0; j < n; j++)
                crow[j] += av * brow[j];
        }
    return 0;
}

/* out[0] = sum of the tile (double) */
static int tile_sum_fn(const strata_task_view *args, void *user) {
    (void)user;
    const strata_tensor *tc = strata_args_tensor(args, 0);
    const float *c = strata_args_data(args, 0);
    double s = 0;
    for (int64_t i = 0; i < tc->shape[0]; i++)
        for (int64_t j = 0; j < tc->shape[1]; j++)
            s += c[i * tc->strides[0] + j];
    *(double *)strata_args_data(args, 1) = s;
    return 0;
}

/* out += in (scalars, double) */
static int add_fn(const strata_task_view *args, void *user) {
    (void)user;
    *(double *)strata_args_data(args, 1) += *(const double *)strata_args_data(args, 0);
    return 0;
}

static int tile_view(strata_buffer *m, demo *d, int ti, int tj, strata_tensor *out) {
    int64_t shape[2] = {d->tile, d->tile}, strides[2] = {d->n, 1};
    uint64_t off = ((uint64_t)ti * d->tile * d->n + (uint64_t)tj * d->tile) * sizeof(float);
    return strata_tensor_view(m, off, STRATA_F32, 2, shape, strides, out);
}

static int orchestrate(strata_orch *o, void *vp) {
    run_arg *ra = vp;
    demo *d = ra->d;
    int r = ra->r;
    strata_tensor total;
    int64_t one = 1;
    STRATA_TRY(strata_tensor_contiguous(d->sum[r], STRATA_F64, 1, &one, &total));
    STRATA_TRY(strata_orch_sub(o, d->zero_total, STRATA_OUT_EXISTING(total)));
    for (int i = 0; i < d->nt; i++)
        for (int j = 0; j < d->nt; j++) {
            strata_tensor c;
            STRATA_TRY(tile_view(d->c[r], d, i, j, &c));
            STRATA_TRY(strata_orch_sub(o, d->zero, STRATA_OUT_EXISTING(c)));
            for (int k = 0; k < d->nt; k++) { /* an INOUT chain per tile */
                strata_tensor ta, tb;
                STRATA_TRY(tile_view(d->a[r], d, i, k, &ta));
                STRATA_TRY(tile_view(d->b[r], d, k, j, &tb));
                STRATA_TRY(
                    strata_orch_sub(o, d->mma, STRATA_IN(ta), STRATA_IN(tb), STRATA_INOUT(c)));
            }
            /* Reduction: the tile's sum goes to a runtime intermediate, then into the total. */
            STRATA_TRY(strata_orch_scope_begin(o));
            strata_tensor part;
            STRATA_TRY(strata_orch_alloc(o, 1, &one, STRATA_F64, &part));
            STRATA_TRY(strata_orch_sub(o, d->tile_sum, STRATA_IN(c), STRATA_OUT(part)));
            STRATA_TRY(strata_orch_sub(o, d->add, STRATA_IN(part), STRATA_INOUT(total)));
            STRATA_TRY(strata_orch_scope_end(o));
        }
    return STRATA_OK;
}

static void fill(float *m, int n, unsigned seed) {
    for (int i = 0; i < n * n; i++) {
        seed = seed * 1103515245u + 12345u;
        m[i] = (float)((seed >> 16) % 17) / 8.0f - 1.0f;
    }
}

static double elapsed_ms(struct timespec a, struct timespec b) {
    return (double)(b.tv_sec - a.tv_sec) * 1e3 + (double)(b.tv_nsec - a.tv_nsec) / 1e6;
}

static int check(const char *what, int rc) {
    if (rc != STRATA_OK)
        fprintf(stderr, "demo: %s failed: %s: %s\n", what, strata_status_name(rc),
                strata_error_message());
    return rc;
}

static void print_usage(FILE *f) {
    fprintf(f,
            "usage: demo [--n N] [--tile T] [--runs R] [--workers W] [--help]\n"
            "  --n N        matrix size, 1..%d (default 256)\n"
            "  --tile T     tile size, divides N (default 64)\n"
            "  --runs R     pipelined runs, 1..%d (default 4)\n"
            "  --workers W  sub workers, 1..%d (default 2)\n"
            "  -h, --help   print this and exit\n",
            MAX_N, MAX_RUNS, STRATA_MAX_SUB_WORKERS);
}

/* A wrong command line is the user's to fix: say what is wrong, then how to
 * call the demo. */
__attribute__((format(printf, 1, 2))) static int usage_error(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "demo: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    print_usage(stderr);
    return 2;
}

/* The whole of `text` must be a decimal integer in lo..hi. */
static int parse_int_in(const char *text, long lo, long hi, int *out) {
    char *end;
    errno = 0;
    long v = strtol(text, &end, 10);
    if (errno || end == text || *end || v < lo || v > hi)
        return -1;
    *out = (int)v;
    return 0;
}

typedef struct int_option {
    const char *name;
    long lo, hi;
    int *value;
} int_option;

/* Returns -1 to go on, otherwise the exit status. */
static int parse_args(int argc, char **argv, demo *d, int *runs, int *workers) {
    int_option opts[] = {{"--n", 1, MAX_N, &d->n},
                         {"--tile", 1, MAX_N, &d->tile},
                         {"--runs", 1, MAX_RUNS, runs},
                         {"--workers", 1, STRATA_MAX_SUB_WORKERS, workers}};
    const int nopts = (int)(sizeof opts / sizeof opts[0]);
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            print_usage(stdout);
            return 0;
        }
        int k = 0;
        while (k < nopts && strcmp(argv[i], opts[k].name))
            k++;
        if (k == nopts)
            return usage_error("unknown argument '%s'", argv[i]);
        if (i + 1 == argc)
            return usage_error("%s needs a value", argv[i]);
        if (parse_int_in(argv[i + 1], opts[k].lo, opts[k].hi, opts[k].value))
            return usage_error("bad value for %s: '%s' (an integer in %ld..%ld)", argv[i],
                               argv[i + 1], opts[k].lo, opts[k].hi);
        i++;
    }
    if (d->n % d->tile)
        return usage_error("--tile %d does not divide --n %d", d->tile, d->n);
    return -1;
}

int main(int argc, char **argv) {
    demo d = {.n = 256, .tile = 64};
    int runs = 4, workers = 2;
    int status = parse_args(argc, argv, &d, &runs, &workers);
    if (status >= 0)
        return status;
    d.nt = d.n / d.tile;

    strata_worker_config cfg;
    strata_worker_config_init(&cfg);
    cfg.sub_workers = (uint32_t)workers;
    strata_worker *w;
    if (check("strata_worker_create", strata_worker_create(&cfg, &w)))
        return 1;
    if (check("register", strata_worker_register_sub(w, "zero", zero_fn, NULL, &d.zero)) ||
        check("register",
              strata_worker_register_sub(w, "zero_total", zero_total_fn, NULL, &d.zero_total)) ||
        check("register", strata_worker_register_sub(w, "mma", mma_fn, NULL, &d.mma)) ||
        check("register",
              strata_worker_register_sub(w, "tile_sum", tile_sum_fn, NULL, &d.tile_sum)) ||
        check("register", strata_worker_register_sub(w, "add", add_fn, NULL, &d.add)) ||
        check("strata_worker_init", strata_worker_init(w)))
        return 1;

    size_t bytes = sizeof(float) * (size_t)d.n * (size_t)d.n;
    for (int r = 0; r < runs; r++) {
        if (check("buffer", strata_buffer_create(w, bytes, &d.a[r])) ||
            check("buffer", strata_buffer_create(w, bytes, &d.b[r])) ||
            check("buffer", strata_buffer_create(w, bytes, &d.c[r])) ||
            check("buffer", strata_buffer_create(w, sizeof(double), &d.sum[r])))
            return 1;
        fill(strata_buffer_data(d.a[r]), d.n, 1u + (unsigned)r);
        fill(strata_buffer_data(d.b[r]), d.n, 100u + (unsigned)r);
    }

    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    strata_run *h[MAX_RUNS];
    run_arg ra[MAX_RUNS];
    for (int r = 0; r < runs; r++) { /* run r+1 is built while run r executes */
        ra[r] = (run_arg){&d, r};
        if (check("strata_worker_submit", strata_worker_submit(w, orchestrate, &ra[r], &h[r])))
            return 1;
    }
    int failed = 0;
    for (int r = 0; r < runs; r++) {
        if (check("run", strata_run_wait(h[r], STRATA_WAIT_FOREVER)))
            failed = 1;
        strata_run_release(h[r]);
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);

    /* Verify against a direct computation. */
    int bad = 0;
    float *ref = malloc(bytes);
    for (int r = 0; r < runs && !failed; r++) {
        const float *a = strata_buffer_data(d.a[r]), *b = strata_buffer_data(d.b[r]);
        const float *c = strata_buffer_data(d.c[r]);
        memset(ref, 0, bytes);
        double total = 0;
        for (int i = 0; i < d.n; i++)
            for (int p = 0; p < d.n; p++)
                for (int j = 0; j < d.n; j++)
                    ref[i * d.n + j] += a[i * d.n + p] * b[p * d.n + j];
        for (int i = 0; i < d.n * d.n; i++) {
            total += ref[i];
            if (fabsf(ref[i] - c[i]) > 1e-3f * (1.0f + fabsf(ref[i])))
                bad++;
        }
        double got = *(const double *)strata_buffer_data(d.sum[r]);
        if (fabs(got - total) > 1e-6 * (1.0 + fabs(total)))
            bad++;
    }
    free(ref);
    long tasks_per_run = 1 + (long)d.nt * d.nt * (1 + d.nt + 3); /* incl. allocs */
    printf("strata demo: tiled GEMM %dx%d (tile %d) + reduction\n", d.n, d.n, d.tile);
    printf("  runs: %d (pipelined, depth %u)   tasks: %ld (%ld per run)   sub workers: %d\n", runs,
           cfg.pipeline_depth, tasks_per_run * runs, tasks_per_run, workers);
    printf("  time: %.2f ms   verification: %s\n", elapsed_ms(t0, t1),
           failed ? "RUN FAILED"
           : bad  ? "MISMATCH"
                  : "ok");
    for (int r = 0; r < runs; r++) {
        strata_buffer_destroy(d.a[r]);
        strata_buffer_destroy(d.b[r]);
        strata_buffer_destroy(d.c[r]);
        strata_buffer_destroy(d.sum[r]);
    }
    strata_worker_destroy(w);
    return failed || bad ? 1 : 0;
}
