/* examples/l2_gemm.c - a tiled GEMM on one sim chip (L2), checked on the host.
 *
 * Owns: a complete L2 program: open a chip, register a program that
 * enqueues one kernel launch of one block per output tile, copy the inputs
 * in once, submit a few runs back to back (each run is prepared while the
 * previous one executes), copy the results out and compare them with a host
 * computation.
 * Must never: depend on anything but the public API.
 *
 * Usage: l2_gemm [kernel_module.so]   (default: the build tree's test kernels)
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "strata/strata.h"
#include "strata/chip.h"

#ifndef STRATA_SIM_TEST_KERNELS_PATH
#define STRATA_SIM_TEST_KERNELS_PATH "libstrata_test_kernels.so"
#endif

enum { M = 192, N = 160, K = 128, TILE = 32, RUNS = 4 };

/* The program: tensors A, B, C; scalars M, N, K, T. One block per tile of C. */
static int gemm_program(strata_program_ctx *ctx, const strata_task_view *a, void *user) {
    uint64_t m = strata_args_u64(a, 0), n = strata_args_u64(a, 1);
    uint64_t k = strata_args_u64(a, 2), t = strata_args_u64(a, 3);
    uint64_t words[7] = {strata_program_arg_ptr(a, 0),
                         strata_program_arg_ptr(a, 1),
                         strata_program_arg_ptr(a, 2),
                         m,
                         n,
                         k,
                         t};
    uint32_t tiles = (uint32_t)(((m + t - 1) / t) * ((n + t - 1) / t));
    return strata_program_launch(ctx, "gemm_tile", tiles, words, 7);
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int fail(const char *what, int rc) {
    fprintf(stderr, "l2_gemm: %s failed (%s): %s\n", what, strata_status_name(rc),
            strata_error_message());
    return 1;
}

/* A device matrix of rows x cols floats holding `host` (NULL: zeros). */
static int device_matrix(strata_chip *chip, const float *host, int rows, int cols, void **dev,
                         strata_tensor *t) {
    size_t bytes = (size_t)rows * (size_t)cols * sizeof(float);
    int64_t shape[2] = {rows, cols};
    STRATA_TRY(strata_chip_malloc(chip, bytes, dev));
    if (host)
        STRATA_TRY(strata_chip_copy_to(chip, *dev, host, bytes));
    return strata_chip_tensor(*dev, bytes, STRATA_F32, 2, shape, t);
}

int main(int argc, char **argv) {
    strata_chip_config cfg;
    strata_chip_config_init(&cfg); /* backend "sim", device 0, 2 simulated cores */
    cfg.kernel_module = argc > 1 ? argv[1] : STRATA_SIM_TEST_KERNELS_PATH;
    strata_chip *chip;
    int rc = strata_chip_open(&cfg, &chip);
    if (rc != STRATA_OK)
        return fail("strata_chip_open", rc);

    strata_chip_program_desc desc = {.name = "gemm", .fn = gemm_program};
    strata_chip_program gemm;
    if ((rc = strata_chip_register_program(chip, &desc, &gemm)) != STRATA_OK)
        return fail("register", rc);

    /* Inputs: A once (the "weights"), one B and one C per run. */
    float *A = malloc(sizeof(float) * M * K);
    float *B[RUNS], *C = malloc(sizeof(float) * M * N), *ref = malloc(sizeof(float) * M * N);
    for (int i = 0; i < M * K; i++)
        A[i] = (float)((i * 7) % 23) / 11.0f - 1.0f;
    void *dA, *dB[RUNS], *dC[RUNS];
    strata_tensor tA, tB, tC;
    if ((rc = device_matrix(chip, A, M, K, &dA, &tA)) != STRATA_OK)
        return fail("device A", rc);
    strata_task_args args[RUNS];
    for (int r = 0; r < RUNS; r++) {
        B[r] = malloc(sizeof(float) * K * N);
        for (int i = 0; i < K * N; i++)
            B[r][i] = (float)((i * 5 + r) % 19) / 9.0f - 1.0f;
        if ((rc = device_matrix(chip, B[r], K, N, &dB[r], &tB)) != STRATA_OK ||
            (rc = device_matrix(chip, NULL, M, N, &dC[r], &tC)) != STRATA_OK)
            return fail("device B/C", rc);
        /* A chip run takes a builder: fill it from items in one call. */
        const strata_arg items[] = {STRATA_IN(tA),   STRATA_IN(tB), STRATA_OUT_EXISTING(tC),
                                    STRATA_U64(M),   STRATA_U64(N), STRATA_U64(K),
                                    STRATA_U64(TILE)};
        strata_args_init(&args[r]);
        if ((rc = strata_args_add_items(&args[r], items, sizeof items / sizeof items[0])))
            return fail("args", rc);
    }

    /* Submit every run; each is prepared while its predecessor executes. */
    double t0 = now_s();
    strata_chip_run *runs[RUNS];
    int prepared_early = 0;
    for (int r = 0; r < RUNS; r++) {
        if ((rc = strata_chip_submit(chip, gemm, &args[r], NULL, &runs[r])) != STRATA_OK)
            return fail("submit", rc);
        prepared_early +=
            r > 0 && strata_chip_run_disposition(runs[r]) == STRATA_CHIP_NATIVE_PREPARED;
    }
    for (int r = 0; r < RUNS; r++)
        if ((rc = strata_chip_run_wait(runs[r], STRATA_WAIT_FOREVER)) != STRATA_OK)
            return fail("run", rc);
    double elapsed = now_s() - t0;

    /* Check every run against the host. */
    double max_err = 0;
    for (int r = 0; r < RUNS; r++) {
        if ((rc = strata_chip_copy_from(chip, C, dC[r], sizeof(float) * M * N)) != STRATA_OK)
            return fail("copy_from", rc);
        for (int i = 0; i < M; i++)
            for (int j = 0; j < N; j++) {
                float acc = 0;
                for (int p = 0; p < K; p++)
                    acc += A[i * K + p] * B[r][p * N + j];
                ref[i * N + j] = acc;
                double err = fabs((double)C[i * N + j] - (double)acc);
                if (err > max_err)
                    max_err = err;
            }
        strata_chip_run_release(runs[r]);
        strata_chip_free(chip, dB[r]);
        strata_chip_free(chip, dC[r]);
        free(B[r]);
    }
    int ok = max_err < 1e-3;
    int tiles = ((M + TILE - 1) / TILE) * ((N + TILE - 1) / TILE);
    printf("l2_gemm on %s: %d runs of C[%dx%d] = A[%dx%d] * B[%dx%d], %d tiles of %d each\n",
           strata_chip_label(chip), RUNS, M, N, M, K, K, N, tiles, TILE);
    printf("  %d of %d later runs prepared while their predecessor executed\n", prepared_early,
           RUNS - 1);
    printf("  %.1f ms for all runs; max |C - host| = %.2e: %s\n", elapsed * 1e3, max_err,
           ok ? "OK" : "MISMATCH");
    strata_chip_free(chip, dA);
    free(A);
    free(C);
    free(ref);
    rc = strata_chip_close(chip); /* the poison, if a device failure poisoned the chip */
    strata_chip_destroy(chip);
    if (rc != STRATA_OK)
        return fail("close", rc);
    return ok ? 0 : 1;
}
