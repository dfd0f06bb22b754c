/* examples/cholesky.c - a tiled Cholesky factorisation (A = L L^T, lower)
 * written in the one-call submit form: one strata_orch_sub per tile kernel,
 * dependencies inferred from the IN / INOUT tiles, verified against a direct
 * (untiled) factorisation of the same matrix.
 *
 * Owns: nothing but the example. Must never: skip the verification (the
 * CTest test example_cholesky runs it and needs exit status 0).
 *
 *   usage: cholesky [tiles per side, default 6] [tile size, default 32]
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "strata/strata.h"

#define MAX_TILES 16

typedef struct chol {
    int nt, ts, n;
    strata_tensor tile[MAX_TILES][MAX_TILES]; /* views of one buffer, lower triangle */
    strata_callable potrf, trsm, syrk, gemm;
} chol;

/* Element (i, j) of tile argument k of a body. */
#define AT(v, k, i, j) (((double *)strata_args_data(v, k))[(i)*row(v, k) + (j)])

static int64_t row(const strata_task_view *v, uint32_t k) {
    return strata_args_tensor(v, k)->strides[0];
}

static int64_t edge(const strata_task_view *v) {
    return strata_args_tensor(v, 0)->shape[0];
}

/* A_kk = L_kk, in place (lower). Fails on a matrix that is not positive definite. */
static int potrf(const strata_task_view *v, void *user) {
    (void)user;
    int64_t ts = edge(v);
    for (int64_t j = 0; j < ts; j++) {
        double d = AT(v, 0, j, j);
        for (int64_t p = 0; p < j; p++)
            d -= AT(v, 0, j, p) * AT(v, 0, j, p);
        if (d <= 0) {
            strata_task_set_error("potrf: pivot %lld is %g", (long long)j, d);
            return 1;
        }
        AT(v, 0, j, j) = sqrt(d);
        for (int64_t i = j + 1; i < ts; i++) {
            double s = AT(v, 0, i, j);
            for (int64_t p = 0; p < j; p++)
                s -= AT(v, 0, i, p) * AT(v, 0, j, p);
            AT(v, 0, i, j) = s / AT(v, 0, j, j);
        }
    }
    return 0;
}

/* A_ik = A_ik L_kk^-T (tensor 0: L_kk, tensor 1: A_ik). */
static int trsm(const strata_task_view *v, void *user) {
    (void)user;
    int64_t ts = edge(v);
    for (int64_t i = 0; i < ts; i++)
        for (int64_t j = 0; j < ts; j++) {
            double s = AT(v, 1, i, j);
            for (int64_t p = 0; p < j; p++)
                s -= AT(v, 1, i, p) * AT(v, 0, j, p);
            AT(v, 1, i, j) = s / AT(v, 0, j, j);
        }
    return 0;
}

/* C -= A B^T over the lower triangle (syrk: tensors A, C) or all of it (gemm: A, B, C). */
static void update(const strata_task_view *v, uint32_t a, uint32_t b, uint32_t c, int lower) {
    int64_t ts = edge(v);
    for (int64_t i = 0; i < ts; i++)
        for (int64_t j = 0; j <= (lower ? i : ts - 1); j++) {
            double s = 0;
            for (int64_t p = 0; p < ts; p++)
                s += AT(v, a, i, p) * AT(v, b, j, p);
            AT(v, c, i, j) -= s;
        }
}

static int syrk(const strata_task_view *v, void *user) {
    (void)user;
    update(v, 0, 0, 1, 1);
    return 0;
}

static int gemm(const strata_task_view *v, void *user) {
    (void)user;
    update(v, 0, 1, 2, 0);
    return 0;
}

/* The graph: right-looking tiled Cholesky. */
static int factor(strata_orch *o, void *arg) {
    chol *c = arg;
    for (int k = 0; k < c->nt; k++) {
        STRATA_TRY(strata_orch_sub(o, c->potrf, STRATA_INOUT(c->tile[k][k])));
        for (int i = k + 1; i < c->nt; i++)
            STRATA_TRY(
                strata_orch_sub(o, c->trsm, STRATA_IN(c->tile[k][k]), STRATA_INOUT(c->tile[i][k])));
        for (int i = k + 1; i < c->nt; i++) {
            STRATA_TRY(
                strata_orch_sub(o, c->syrk, STRATA_IN(c->tile[i][k]), STRATA_INOUT(c->tile[i][i])));
            for (int j = k + 1; j < i; j++)
                STRATA_TRY(strata_orch_sub(o, c->gemm, STRATA_IN(c->tile[i][k]),
                                           STRATA_IN(c->tile[j][k]), STRATA_INOUT(c->tile[i][j])));
        }
    }
    return STRATA_OK;
}

/* A symmetric, diagonally dominant (so positive definite) matrix. */
static void fill(double *a, int n) {
    for (int i = 0; i < n; i++)
        for (int j = 0; j <= i; j++)
            a[i * n + j] = a[j * n + i] =
                i == j ? n + 1.0 : 1.0 / (1 + i + j) + ((i * j) % 7) / 10.0;
}

/* The direct factorisation of the whole matrix, in place (lower). */
static void direct(double *a, int n) {
    for (int j = 0; j < n; j++) {
        for (int p = 0; p < j; p++)
            a[j * n + j] -= a[j * n + p] * a[j * n + p];
        a[j * n + j] = sqrt(a[j * n + j]);
        for (int i = j + 1; i < n; i++) {
            for (int p = 0; p < j; p++)
                a[i * n + j] -= a[i * n + p] * a[j * n + p];
            a[i * n + j] /= a[j * n + j];
        }
    }
}

static int fail(const char *what, int rc) {
    fprintf(stderr, "cholesky: %s failed (%s): %s\n", what, strata_status_name(rc),
            strata_error_message());
    return 1;
}

static int make_tiles(chol *c, strata_buffer *buf) {
    int64_t shape[2] = {c->ts, c->ts}, strides[2] = {c->n, 1};
    for (int i = 0; i < c->nt; i++)
        for (int j = 0; j <= i; j++) {
            uint64_t off = ((uint64_t)i * c->ts * c->n + (uint64_t)j * c->ts) * sizeof(double);
            STRATA_TRY(strata_tensor_view(buf, off, STRATA_F64, 2, shape, strides, &c->tile[i][j]));
        }
    return STRATA_OK;
}

static int setup(strata_worker *w, chol *c) {
    STRATA_TRY(strata_worker_register_sub(w, "potrf", potrf, NULL, &c->potrf));
    STRATA_TRY(strata_worker_register_sub(w, "trsm", trsm, NULL, &c->trsm));
    STRATA_TRY(strata_worker_register_sub(w, "syrk", syrk, NULL, &c->syrk));
    STRATA_TRY(strata_worker_register_sub(w, "gemm", gemm, NULL, &c->gemm));
    return strata_worker_init(w);
}

/* Largest difference between the lower triangles of the tiled and direct results. */
static double max_error(const double *a, const double *ref, int n) {
    double err = 0;
    for (int i = 0; i < n; i++)
        for (int j = 0; j <= i; j++)
            err = fmax(err, fabs(a[i * n + j] - ref[i * n + j]));
    return err;
}

int main(int argc, char **argv) {
    static chol c;
    c.nt = argc > 1 ? atoi(argv[1]) : 6;
    c.ts = argc > 2 ? atoi(argv[2]) : 32;
    if (c.nt < 1 || c.nt > MAX_TILES || c.ts < 1 || c.ts > 256) {
        fprintf(stderr, "usage: cholesky [tiles per side 1..%d] [tile size 1..256]\n", MAX_TILES);
        return 2;
    }
    c.n = c.nt * c.ts;
    size_t bytes = sizeof(double) * (size_t)c.n * (size_t)c.n;
    strata_worker_config cfg;
    strata_worker_config_init(&cfg);
    strata_worker *w;
    strata_buffer *buf = NULL;
    int rc = strata_worker_create(&cfg, &w);
    if (rc)
        return fail("strata_worker_create", rc);
    if ((rc = setup(w, &c)) || (rc = strata_buffer_create(w, bytes, &buf)) ||
        (rc = make_tiles(&c, buf)))
        return fail("setup", rc);
    double *a = strata_buffer_data(buf), *ref = malloc(bytes);
    fill(a, c.n);
    memcpy(ref, a, bytes);
    if ((rc = strata_worker_run(w, factor, &c)))
        return fail("the factorisation", rc);
    direct(ref, c.n);
    double err = max_error(a, ref, c.n);
    int ok = err <= 1e-9 * c.n;
    printf("cholesky %dx%d in %dx%d tiles: max |L - L_direct| = %.2e: %s\n", c.n, c.n, c.ts, c.ts,
           err, ok ? "OK" : "WRONG");
    free(ref);
    strata_buffer_destroy(buf);
    strata_worker_destroy(w);
    return ok ? 0 : 1;
}
