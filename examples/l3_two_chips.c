/* examples/l3_two_chips.c - an L3 worker with two sim chips and two sub
 * workers: a layer Y = relu(X * W) split by rows across the chips. The chips
 * and sub workers are threads of this process (--host thread, the default)
 * or processes of their own (--host process): the same program either way.
 *
 * Owns: a complete L3 program: the weights W are loaded once into device
 * memory of each chip and persist across runs; every run, a sub task makes
 * the input X (host memory), each chip multiplies its half of X by its copy
 * of W (one kernel block per output tile), and a second sub task applies
 * relu and sums Y. Dependencies come from the tensors alone. The result of
 * every run is checked against a host computation.
 * Must never: depend on anything but the public API.
 *
 * Usage: l3_two_chips [--host thread|process] [kernel_module.so]
 *        (default: thread-hosted, the build tree's test kernels)
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "strata/chip.h"
#include "strata/strata.h"

#ifndef STRATA_SIM_TEST_KERNELS_PATH
#define STRATA_SIM_TEST_KERNELS_PATH "libstrata_test_kernels.so"
#endif

enum { M = 128, K = 96, N = 64, TILE = 32, HALF = M / 2, RUNS = 3 };

typedef struct layer {
    int chip[2];
    strata_callable matmul, make_x, relu_sum;
    strata_buffer *X, *Y, *sum; /* host memory every child sees */
    strata_buffer *W[2];        /* the weights, on each chip */
    uint64_t run;
} layer;

/* Chip program: tensors X, W, Y; scalars rows, N, K, T. One block per tile of Y. */
static int matmul_program(strata_program_ctx *ctx, const strata_task_view *a, void *user) {
    uint64_t rows = strata_args_u64(a, 0), n = strata_args_u64(a, 1);
    uint64_t k = strata_args_u64(a, 2), t = strata_args_u64(a, 3);
    uint64_t words[7] = {strata_program_arg_ptr(a, 0),
                         strata_program_arg_ptr(a, 1),
                         strata_program_arg_ptr(a, 2),
                         rows,
                         n,
                         k,
                         t};
    uint32_t tiles = (uint32_t)(((rows + t - 1) / t) * ((n + t - 1) / t));
    return strata_program_launch(ctx, "gemm_tile", tiles, words, 7);
}

static float x_value(uint64_t run, int i) {
    return (float)((i * 11 + (int)run * 5) % 31) / 15.0f - 1.0f;
}

static float w_value(int i) {
    return (float)((i * 7) % 23) / 11.0f - 1.0f;
}

/* Sub task: X (OUT) for run scalar 0. */
static int make_x(const strata_task_view *a, void *user) {
    float *X = strata_args_data(a, 0);
    for (int i = 0; i < M * K; i++)
        X[i] = x_value(strata_args_u64(a, 0), i);
    return 0;
}

/* Sub task: sum (OUT) = sum of relu(Y) (IN). */
static int relu_sum(const strata_task_view *a, void *user) {
    const float *Y = strata_args_data(a, 0);
    double s = 0;
    for (int i = 0; i < M * N; i++)
        s += Y[i] > 0 ? Y[i] : 0;
    *(double *)strata_args_data(a, 1) = s;
    return 0;
}

/* Chip c's half: rows [c*HALF, (c+1)*HALF) of X and Y, on chip c. */
static int submit_half(strata_orch *o, strata_worker *w, layer *L, int c) {
    int64_t x_shape[2] = {HALF, K}, w_shape[2] = {K, N}, y_shape[2] = {HALF, N};
    strata_tensor tx, tw, ty;
    STRATA_TRY(strata_tensor_view(L->X, (uint64_t)c * HALF * K * sizeof(float), STRATA_F32, 2,
                                  x_shape, NULL, &tx));
    STRATA_TRY(strata_worker_chip_tensor(w, L->W[c], 0, STRATA_F32, 2, w_shape, NULL, &tw));
    STRATA_TRY(strata_tensor_view(L->Y, (uint64_t)c * HALF * N * sizeof(float), STRATA_F32, 2,
                                  y_shape, NULL, &ty));
    return strata_orch_next_level(o, L->matmul, NULL, L->chip[c], STRATA_IN(tx), STRATA_IN(tw),
                                  STRATA_OUT_EXISTING(ty), STRATA_U64(HALF), STRATA_U64(N),
                                  STRATA_U64(K), STRATA_U64(TILE));
}

typedef struct orch_arg {
    strata_worker *w;
    layer *L;
} orch_arg;

/* make_x -> matmul on chip 0 and chip 1 -> relu_sum */
static int layer_orch(strata_orch *o, void *p) {
    orch_arg *oa = p;
    layer *L = oa->L;
    int64_t x_shape[2] = {M, K}, y_shape[2] = {M, N}, one[1] = {1};
    strata_tensor tx, ty, ts;
    STRATA_TRY(strata_tensor_contiguous(L->X, STRATA_F32, 2, x_shape, &tx));
    STRATA_TRY(strata_tensor_contiguous(L->Y, STRATA_F32, 2, y_shape, &ty));
    STRATA_TRY(strata_tensor_contiguous(L->sum, STRATA_F64, 1, one, &ts));

    STRATA_TRY(strata_orch_sub(o, L->make_x, STRATA_OUT_EXISTING(tx), STRATA_U64(L->run)));
    for (int c = 0; c < 2; c++)
        STRATA_TRY(submit_half(o, oa->w, L, c));
    return strata_orch_sub(o, L->relu_sum, STRATA_IN(ty), STRATA_OUT_EXISTING(ts));
}

static int fail(const char *what, int rc) {
    fprintf(stderr, "l3_two_chips: %s failed (%s): %s\n", what, strata_status_name(rc),
            strata_error_message());
    return 1;
}

/* The host's answer for run `run`. */
static double host_relu_sum(uint64_t run, const float *W) {
    double s = 0;
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            float acc = 0;
            for (int p = 0; p < K; p++)
                acc += x_value(run, i * K + p) * W[p * N + j];
            s += acc > 0 ? acc : 0;
        }
    return s;
}

static int usage(void) {
    fprintf(stderr, "usage: l3_two_chips [--host thread|process] [kernel_module.so]\n");
    return 2;
}

int main(int argc, char **argv) {
    const char *kernels = STRATA_SIM_TEST_KERNELS_PATH;
    strata_host_mode host = STRATA_HOST_THREAD;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--host") == 0 && i + 1 < argc) {
            const char *h = argv[++i];
            if (strcmp(h, "thread") == 0)
                host = STRATA_HOST_THREAD;
            else if (strcmp(h, "process") == 0)
                host = STRATA_HOST_PROCESS;
            else
                return usage();
        } else if (argv[i][0] == '-') {
            return usage();
        } else {
            kernels = argv[i];
        }
    }
    strata_worker_config wc;
    strata_worker_config_init(&wc);
    wc.sub_workers = 2;
    wc.sub_mode = host;
    strata_worker *w;
    int rc = strata_worker_create(&wc, &w);
    if (rc != STRATA_OK)
        return fail("strata_worker_create", rc);

    layer L;
    memset(&L, 0, sizeof L);
    for (int c = 0; c < 2; c++) {
        strata_chip_config cc;
        strata_chip_config_init(&cc); /* sim */
        cc.host = host;
        cc.device_id = c;
        cc.kernel_module = kernels;
        if ((rc = strata_worker_add_chip(w, &cc, &L.chip[c])) != STRATA_OK)
            return fail("strata_worker_add_chip", rc);
    }
    strata_chip_program_desc desc = {.name = "matmul", .fn = matmul_program};
    if ((rc = strata_worker_register_chip_program(w, &desc, &L.matmul)) != STRATA_OK ||
        (rc = strata_worker_register_sub(w, "make_x", make_x, NULL, &L.make_x)) != STRATA_OK ||
        (rc = strata_worker_register_sub(w, "relu_sum", relu_sum, NULL, &L.relu_sum)) != STRATA_OK)
        return fail("register", rc);
    if ((rc = strata_worker_init(w)) != STRATA_OK)
        return fail("strata_worker_init", rc);

    /* Load the weights once into each chip's memory. */
    float *W = malloc(sizeof(float) * K * N);
    for (int i = 0; i < K * N; i++)
        W[i] = w_value(i);
    for (int c = 0; c < 2; c++)
        if ((rc = strata_worker_chip_malloc(w, L.chip[c], sizeof(float) * K * N, &L.W[c])) !=
                STRATA_OK ||
            (rc = strata_worker_chip_copy_to(w, L.W[c], 0, W, sizeof(float) * K * N)) != STRATA_OK)
            return fail("loading the weights", rc);
    if ((rc = strata_buffer_create(w, sizeof(float) * M * K, &L.X)) != STRATA_OK ||
        (rc = strata_buffer_create(w, sizeof(float) * M * N, &L.Y)) != STRATA_OK ||
        (rc = strata_buffer_create(w, sizeof(double), &L.sum)) != STRATA_OK)
        return fail("strata_buffer_create", rc);

    printf("l3_two_chips: Y = relu(X[%dx%d] * W[%dx%d]), rows split over 2 sim chips, "
           "W loaded once per chip\n"
           "  chips and sub workers hosted as %s\n",
           M, K, K, N,
           host == STRATA_HOST_PROCESS ? "processes of their own" : "threads of this process");
    int ok = 1;
    orch_arg oa = {.w = w, .L = &L};
    for (uint64_t r = 1; r <= RUNS; r++) {
        L.run = r;
        if ((rc = strata_worker_run(w, layer_orch, &oa)) != STRATA_OK)
            return fail("run", rc);
        double got = *(double *)strata_buffer_data(L.sum), want = host_relu_sum(r, W);
        int match = fabs(got - want) <= 1e-3 * (1.0 + fabs(want));
        ok &= match;
        printf("  run %llu: sum(relu(Y)) = %.4f, host %.4f: %s\n", (unsigned long long)r, got, want,
               match ? "OK" : "MISMATCH");
    }
    for (int c = 0; c < 2; c++)
        strata_worker_chip_free(w, L.W[c]);
    strata_buffer_destroy(L.X);
    strata_buffer_destroy(L.Y);
    strata_buffer_destroy(L.sum);
    free(W);
    strata_worker_destroy(w);
    return ok ? 0 : 1;
}
