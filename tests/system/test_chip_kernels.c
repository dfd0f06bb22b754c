// label: concurrency
/* tests/system/test_chip_kernels.c - real kernels on a sim chip through the
 * public L2 API, and faults injected at every phase.
 *
 * Owns: vector add, a tiled GEMM and a two-stage reduction compared with
 * host results (also pipelined, and at depth one); a fault at each of
 * prepare, launch, poll, wait, finalize and inside a kernel, with the run's
 * error naming the chip, the run, the phase, the program, and for a kernel
 * the kernel and block; which faults poison the chip; bad input of every
 * kind on the public calls; the program registry's limit and reuse of a
 * freed id.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_support.h"

#include "strata/chip.h"
#include "strata/sim.h"

/* ---- Programs -------------------------------------------------------------------------- */

/* tensors a, b, c; scalar n; blocks = the call's block_dim */
static int vadd_program(strata_program_ctx *ctx, const strata_task_view *a, void *user) {
    uint64_t args[4] = {strata_program_arg_ptr(a, 0), strata_program_arg_ptr(a, 1),
                        strata_program_arg_ptr(a, 2), strata_args_scalar(a, 0)};
    return strata_program_launch(ctx, "vector_add", 0, args, 4);
}

/* tensors A, B, C; scalars M, N, K, T: one block per T x T tile of C */
static int gemm_program(strata_program_ctx *ctx, const strata_task_view *a, void *user) {
    uint64_t M = strata_args_scalar(a, 0), N = strata_args_scalar(a, 1),
             K = strata_args_scalar(a, 2), T = strata_args_scalar(a, 3);
    uint64_t args[7] = {strata_program_arg_ptr(a, 0),
                        strata_program_arg_ptr(a, 1),
                        strata_program_arg_ptr(a, 2),
                        M,
                        N,
                        K,
                        T};
    uint32_t tiles = (uint32_t)(((M + T - 1) / T) * ((N + T - 1) / T));
    return strata_program_launch(ctx, "gemm_tile", tiles, args, 7);
}

/* tensors in, partial, out; scalars n, parts: two launches, in order */
static int reduce_program(strata_program_ctx *ctx, const strata_task_view *a, void *user) {
    uint64_t n = strata_args_scalar(a, 0), parts = strata_args_scalar(a, 1);
    uint64_t stage1[3] = {strata_program_arg_ptr(a, 0), strata_program_arg_ptr(a, 1), n};
    uint64_t stage2[3] = {strata_program_arg_ptr(a, 1), strata_program_arg_ptr(a, 2), parts};
    STRATA_TRY(strata_program_launch(ctx, "reduce_partial", (uint32_t)parts, stage1, 3));
    return strata_program_launch(ctx, "reduce_final", 1, stage2, 3);
}

static int failing_kernel_program(strata_program_ctx *ctx, const strata_task_view *a, void *u) {
    uint64_t args[2] = {5, (uint64_t)(int64_t)-42};
    return strata_program_launch(ctx, "fail_block", 8, args, 2);
}

static int refusing_program(strata_program_ctx *ctx, const strata_task_view *a, void *u) {
    strata_program_fail(ctx, "expected %d tensors, got %u", 3, a->ntensors);
    return -1;
}

/* ---- Fixture ----------------------------------------------------------------------------- */

typedef struct chip_fixture {
    strata_chip *chip;
    strata_chip_program vadd, gemm, reduce;
} chip_fixture;

static void open_chip(chip_fixture *f, const strata_sim_injection *inj, uint32_t depth) {
    strata_chip_config cfg;
    strata_chip_config_init(&cfg);
    cfg.kernel_module = STRATA_SIM_TEST_KERNELS_PATH;
    cfg.pipeline_depth = depth;
    cfg.sim = inj; /* copied at open */
    assert_ok(strata_chip_open(&cfg, &f->chip));
    strata_chip_program_desc d = {.name = "vadd", .fn = vadd_program};
    assert_ok(strata_chip_register_program(f->chip, &d, &f->vadd));
    d = (strata_chip_program_desc){.name = "gemm", .fn = gemm_program};
    assert_ok(strata_chip_register_program(f->chip, &d, &f->gemm));
    d = (strata_chip_program_desc){.name = "reduce", .fn = reduce_program};
    assert_ok(strata_chip_register_program(f->chip, &d, &f->reduce));
}

/* A device buffer holding `host` (or zeros), as a 1-D f32 tensor. */
static void *device_floats(strata_chip *chip, const float *host, size_t n, strata_tensor *t) {
    void *dev = NULL;
    assert_ok(strata_chip_malloc(chip, n * sizeof(float), &dev));
    if (host)
        assert_ok(strata_chip_copy_to(chip, dev, host, n * sizeof(float)));
    int64_t shape[1] = {(int64_t)n};
    assert_ok(strata_chip_tensor(dev, n * sizeof(float), STRATA_F32, 1, shape, t));
    return dev;
}

typedef struct vadd_case {
    size_t n;
    float *a, *b, *c;
    void *da, *db, *dc;
    strata_task_args args;
} vadd_case;

static void vadd_setup(strata_chip *chip, vadd_case *v, size_t n, float seed) {
    v->n = n;
    v->a = malloc(n * sizeof(float));
    v->b = malloc(n * sizeof(float));
    v->c = calloc(n, sizeof(float));
    for (size_t i = 0; i < n; i++) {
        v->a[i] = seed + (float)i;
        v->b[i] = 2.0f * (float)(i % 17);
    }
    strata_tensor ta, tb, tc;
    v->da = device_floats(chip, v->a, n, &ta);
    v->db = device_floats(chip, v->b, n, &tb);
    v->dc = device_floats(chip, NULL, n, &tc);
    strata_args_init(&v->args);
    assert_ok(strata_args_add_tensor(&v->args, &ta, STRATA_IN));
    assert_ok(strata_args_add_tensor(&v->args, &tb, STRATA_IN));
    assert_ok(strata_args_add_tensor(&v->args, &tc, STRATA_OUT_EXISTING));
    assert_ok(strata_args_add_scalar(&v->args, n));
}

static void vadd_check(strata_chip *chip, vadd_case *v) {
    assert_ok(strata_chip_copy_from(chip, v->c, v->dc, v->n * sizeof(float)));
    for (size_t i = 0; i < v->n; i++)
        if (v->c[i] != v->a[i] + v->b[i])
            fail_msg("c[%zu] = %f, expected %f", i, v->c[i], v->a[i] + v->b[i]);
}

static void vadd_free(strata_chip *chip, vadd_case *v) {
    assert_ok(strata_chip_free(chip, v->da));
    assert_ok(strata_chip_free(chip, v->db));
    assert_ok(strata_chip_free(chip, v->dc));
    free(v->a);
    free(v->b);
    free(v->c);
}

static const strata_call_config eight_blocks = {.block_dim = 8};

/* ---- Correctness --------------------------------------------------------------------------- */

static void vector_add_matches_the_host(void **state) {
    chip_fixture f;
    open_chip(&f, NULL, 0);
    vadd_case v;
    vadd_setup(f.chip, &v, 10007, 1.5f);
    assert_ok(strata_chip_run_sync(f.chip, f.vadd, &v.args, &eight_blocks));
    vadd_check(f.chip, &v);
    vadd_free(f.chip, &v);
    assert_int_equal(strata_chip_committed_bytes(f.chip), 0);
    assert_ok(strata_chip_close(f.chip));
    strata_chip_destroy(f.chip);
}

static void gemm_tiles_match_the_host(void **state) {
    chip_fixture f;
    open_chip(&f, NULL, 0);
    enum { M = 64, N = 48, K = 40, T = 16 };
    float *A = malloc(M * K * sizeof(float)), *B = malloc(K * N * sizeof(float));
    float *C = malloc(M * N * sizeof(float)), *ref = malloc(M * N * sizeof(float));
    uint64_t seed = 7;
    for (int i = 0; i < M * K; i++)
        A[i] = (float)(ts_rand(&seed) % 100) / 50.0f - 1.0f;
    for (int i = 0; i < K * N; i++)
        B[i] = (float)(ts_rand(&seed) % 100) / 50.0f - 1.0f;
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            float acc = 0;
            for (int p = 0; p < K; p++)
                acc += A[i * K + p] * B[p * N + j];
            ref[i * N + j] = acc;
        }
    strata_tensor ta, tb, tc;
    void *dA = device_floats(f.chip, A, M * K, &ta);
    void *dB = device_floats(f.chip, B, K * N, &tb);
    void *dC = device_floats(f.chip, NULL, M * N, &tc);
    strata_task_args args;
    strata_args_init(&args);
    assert_ok(strata_args_add_tensor(&args, &ta, STRATA_IN));
    assert_ok(strata_args_add_tensor(&args, &tb, STRATA_IN));
    assert_ok(strata_args_add_tensor(&args, &tc, STRATA_OUT_EXISTING));
    uint64_t dims[4] = {M, N, K, T};
    for (int i = 0; i < 4; i++)
        assert_ok(strata_args_add_scalar(&args, dims[i]));
    assert_ok(strata_chip_run_sync(f.chip, f.gemm, &args, NULL));
    assert_ok(strata_chip_copy_from(f.chip, C, dC, M * N * sizeof(float)));
    for (int i = 0; i < M * N; i++)
        if (fabsf(C[i] - ref[i]) > 1e-4f * (1.0f + fabsf(ref[i])))
            fail_msg("C[%d] = %f, expected %f", i, C[i], ref[i]);
    strata_chip_free(f.chip, dA);
    strata_chip_free(f.chip, dB);
    strata_chip_free(f.chip, dC);
    free(A);
    free(B);
    free(C);
    free(ref);
    assert_ok(strata_chip_close(f.chip));
    strata_chip_destroy(f.chip);
}

static void a_two_stage_reduction_matches_the_host(void **state) {
    chip_fixture f;
    open_chip(&f, NULL, 0);
    enum { N = 4099, PARTS = 6 };
    float *in = malloc(N * sizeof(float));
    double expect = 0;
    for (int i = 0; i < N; i++) {
        in[i] = (float)((i * 37) % 101) * 0.25f;
        expect += in[i];
    }
    strata_tensor tin, tpart, tout;
    device_floats(f.chip, in, N, &tin);
    device_floats(f.chip, NULL, PARTS, &tpart);
    void *dout = device_floats(f.chip, NULL, 1, &tout);
    strata_task_args args;
    strata_args_init(&args);
    assert_ok(strata_args_add_tensor(&args, &tin, STRATA_IN));
    assert_ok(strata_args_add_tensor(&args, &tpart, STRATA_OUT_EXISTING));
    assert_ok(strata_args_add_tensor(&args, &tout, STRATA_OUT_EXISTING));
    assert_ok(strata_args_add_scalar(&args, N));
    assert_ok(strata_args_add_scalar(&args, PARTS));
    assert_ok(strata_chip_run_sync(f.chip, f.reduce, &args, NULL));
    float got = 0;
    assert_ok(strata_chip_copy_from(f.chip, &got, dout, sizeof got));
    assert_float_equal(got, (float)expect, 1e-6 * expect + 1e-3);
    free(in);
    assert_ok(strata_chip_close(f.chip)); /* frees the device buffers still allocated */
    strata_chip_destroy(f.chip);
}

static void pipelined_runs_are_prepared_early_and_all_correct(void **state) {
    chip_fixture f;
    open_chip(&f, NULL, 0);
    enum { RUNS = 12 };
    vadd_case v[RUNS];
    strata_chip_run *runs[RUNS];
    for (int i = 0; i < RUNS; i++)
        vadd_setup(f.chip, &v[i], 3001, (float)i * 10.0f);
    for (int i = 0; i < RUNS; i++) {
        assert_ok(strata_chip_submit(f.chip, f.vadd, &v[i].args, &eight_blocks, &runs[i]));
        assert_int_equal(strata_chip_run_id(runs[i]), (uint64_t)i + 1);
        if (i == 1) /* submitted behind a launched run: prepared while it executes */
            assert_int_equal(strata_chip_run_disposition(runs[i]), STRATA_CHIP_NATIVE_PREPARED);
    }
    for (int i = RUNS - 1; i >= 0; i--) { /* waiting on a later run drives the earlier ones */
        assert_ok(strata_chip_run_wait(runs[i], STRATA_WAIT_FOREVER));
        assert_int_equal(strata_chip_run_launched(runs[i]), 1);
    }
    for (int i = 0; i < RUNS; i++) {
        vadd_check(f.chip, &v[i]);
        strata_chip_run_release(runs[i]);
        vadd_free(f.chip, &v[i]);
    }
    assert_ok(strata_chip_close(f.chip));
    strata_chip_destroy(f.chip);
}

static void depth_one_runs_one_at_a_time_and_stays_correct(void **state) {
    chip_fixture f;
    open_chip(&f, NULL, 1);
    vadd_case v[3];
    strata_chip_run *runs[3];
    for (int i = 0; i < 3; i++) {
        vadd_setup(f.chip, &v[i], 999, (float)i);
        assert_ok(strata_chip_submit(f.chip, f.vadd, &v[i].args, &eight_blocks, &runs[i]));
    }
    for (int i = 0; i < 3; i++) {
        assert_ok(strata_chip_run_wait(runs[i], STRATA_WAIT_FOREVER));
        vadd_check(f.chip, &v[i]);
        strata_chip_run_release(runs[i]);
        vadd_free(f.chip, &v[i]);
    }
    assert_ok(strata_chip_close(f.chip));
    strata_chip_destroy(f.chip);
}

static void an_expired_wait_leaves_the_run_live(void **state) {
    chip_fixture f;
    strata_sim_injection inj = {.kernel_delay_ns = 300000000}; /* at least 300 ms on device */
    open_chip(&f, &inj, 0);
    vadd_case v;
    vadd_setup(f.chip, &v, 64, 0);
    strata_chip_run *run;
    assert_ok(strata_chip_submit(f.chip, f.vadd, &v.args, &eight_blocks, &run));
    assert_status(STRATA_ETIMEDOUT, strata_chip_run_wait(run, 1000000));
    assert_non_null(strstr(strata_error_message(), "still live"));
    assert_int_equal(strata_chip_run_done(run), 0);
    assert_ok(strata_chip_run_wait(run, STRATA_WAIT_FOREVER));
    assert_int_equal(strata_chip_run_done(run), 1);
    vadd_check(f.chip, &v);
    strata_chip_run_release(run);
    vadd_free(f.chip, &v);
    assert_ok(strata_chip_close(f.chip));
    strata_chip_destroy(f.chip);
}

/* ---- Faults at each phase ------------------------------------------------------------------ */

typedef struct fault_case {
    strata_sim_fault fault;
    const char *phase; /* "<phase> failed with code" */
    const char *detail;
    int poisons;
} fault_case;

static void run_fault_case(const fault_case *c) {
    chip_fixture f;
    strata_sim_injection inj = {.fault = c->fault, .fault_code = -5, .fault_block = 3};
    strcpy(inj.fault_kernel, "vector_add");
    open_chip(&f, &inj, 0);
    vadd_case v;
    vadd_setup(f.chip, &v, 256, 0);
    strata_chip_run *run;
    assert_ok(strata_chip_submit(f.chip, f.vadd, &v.args, &eight_blocks, &run));
    int rc = strata_chip_run_wait(run, STRATA_WAIT_FOREVER);
    const char *err = strata_chip_run_error(run);
    if (rc != STRATA_EDEVICE || !strstr(err, "chip sim:0: ") || !strstr(err, "run_id=1") ||
        !strstr(err, c->phase) || !strstr(err, "program 'vadd'") || !strstr(err, c->detail))
        fail_msg("fault %s: status %s, error: %s", c->phase, strata_status_name(rc), err);
    assert_string_equal(strata_error_message(), err);
    assert_int_equal(strata_chip_poisoned(f.chip), c->poisons);
    strata_chip_run_release(run);

    strata_chip_run *next = NULL;
    int nrc = strata_chip_submit(f.chip, f.vadd, &v.args, &eight_blocks, &next);
    if (c->poisons) {
        assert_int_equal(nrc, STRATA_EPOISONED);
        assert_non_null(strstr(strata_error_message(), c->phase));     /* names the first failure */
        assert_int_equal(strata_chip_close(f.chip), STRATA_EPOISONED); /* frees device memory */
        strata_chip_destroy(f.chip);
        free(v.a);
        free(v.b);
        free(v.c);
    } else { /* the fault hit every run: the chip itself stays usable */
        assert_ok(nrc);
        assert_int_equal(strata_chip_run_wait(next, STRATA_WAIT_FOREVER), STRATA_EDEVICE);
        strata_chip_run_release(next);
        strata_sim_injection none = {0};
        assert_ok(strata_chip_set_sim_injection(f.chip, &none));
        assert_ok(strata_chip_run_sync(f.chip, f.vadd, &v.args, &eight_blocks));
        vadd_check(f.chip, &v);
        vadd_free(f.chip, &v);
        assert_ok(strata_chip_close(f.chip));
        strata_chip_destroy(f.chip);
    }
}

static void a_prepare_fault_fails_the_run_only(void **state) {
    fault_case c = {STRATA_SIM_FAULT_PREPARE, "prepare failed with code -5",
                    "injected prepare fault", 0};
    run_fault_case(&c);
}

static void a_launch_fault_is_reclaimed_without_poison(void **state) {
    fault_case c = {STRATA_SIM_FAULT_LAUNCH, "launch failed with code -5",
                    "kernel 'vector_add' (launch 1 of 1) was not started", 0};
    run_fault_case(&c);
}

static void a_poll_fault_poisons_the_chip(void **state) {
    fault_case c = {STRATA_SIM_FAULT_POLL, "poll failed with code -5", "injected poll fault", 1};
    run_fault_case(&c);
}

static void a_wait_fault_poisons_the_chip(void **state) {
    fault_case c = {STRATA_SIM_FAULT_WAIT, "wait failed with code -5", "injected wait fault", 1};
    run_fault_case(&c);
}

static void a_finalize_fault_poisons_the_chip(void **state) {
    fault_case c = {STRATA_SIM_FAULT_FINALIZE, "finalize failed with code -5",
                    "injected finalize fault", 1};
    run_fault_case(&c);
}

static void a_kernel_fault_names_kernel_and_block(void **state) {
    fault_case c = {STRATA_SIM_FAULT_KERNEL, "finalize failed with code -5",
                    "kernel 'vector_add' (launch 1 of 1) block 3 of 8 failed with code -5", 1};
    run_fault_case(&c);
}

static void a_failing_kernel_reports_its_own_message(void **state) {
    chip_fixture f;
    open_chip(&f, NULL, 0);
    strata_chip_program_desc d = {.name = "doomed", .fn = failing_kernel_program};
    strata_chip_program doomed;
    assert_ok(strata_chip_register_program(f.chip, &d, &doomed));
    strata_task_args args;
    strata_args_init(&args);
    assert_status(STRATA_EDEVICE, strata_chip_run_sync(f.chip, doomed, &args, NULL));
    assert_non_null(strstr(strata_error_message(), "program 'doomed': kernel 'fail_block'"));
    assert_non_null(strstr(strata_error_message(), "block 5 of 8 failed with code -42"));
    assert_non_null(strstr(strata_error_message(), "block 5 was asked to fail"));
    assert_int_equal(strata_chip_close(f.chip), STRATA_EPOISONED);
    strata_chip_destroy(f.chip);
}

static void a_program_that_refuses_fails_at_prepare_with_its_reason(void **state) {
    chip_fixture f;
    open_chip(&f, NULL, 0);
    strata_chip_program_desc d = {.name = "picky", .fn = refusing_program};
    strata_chip_program picky;
    assert_ok(strata_chip_register_program(f.chip, &d, &picky));
    strata_task_args args;
    strata_args_init(&args);
    assert_status(STRATA_EDEVICE, strata_chip_run_sync(f.chip, picky, &args, NULL));
    assert_non_null(strstr(strata_error_message(), "prepare failed"));
    assert_non_null(strstr(strata_error_message(), "program 'picky'"));
    assert_non_null(strstr(strata_error_message(), "expected 3 tensors, got 0"));
    assert_int_equal(strata_chip_poisoned(f.chip), 0);
    assert_ok(strata_chip_close(f.chip));
    strata_chip_destroy(f.chip);
}

/* ---- Bad input ------------------------------------------------------------------------------- */

static void bad_input_returns_a_status_and_a_message(void **state) {
    strata_chip *chip = NULL;
    strata_chip_config cfg;
    strata_chip_config_init(&cfg);
    assert_status(STRATA_EINVAL, strata_chip_open(NULL, &chip));
    cfg.backend = "/no/such/backend.so";
    assert_status(STRATA_EINVAL, strata_chip_open(&cfg, &chip));
    assert_non_null(strstr(strata_error_message(), "/no/such/backend.so"));
    assert_null(chip);
    cfg.backend = "sim";
    cfg.device_id = -2;
    assert_status(STRATA_EINVAL, strata_chip_open(&cfg, &chip));
    cfg.device_id = 0;
    cfg.pipeline_depth = 3;
    assert_status(STRATA_EINVAL, strata_chip_open(&cfg, &chip));
    cfg.pipeline_depth = 0;
    cfg.kernel_module = "/no/such/kernels.so";
    assert_status(STRATA_EDEVICE, strata_chip_open(&cfg, &chip));
    assert_non_null(strstr(strata_error_message(), "kernel module"));
    cfg.kernel_module = STRATA_SIM_TEST_KERNELS_PATH;
    strata_sim_injection bad_fault = {.fault = (strata_sim_fault)99};
    cfg.sim = &bad_fault;
    assert_status(STRATA_EINVAL, strata_chip_open(&cfg, &chip));
    cfg.sim = NULL;
    assert_ok(strata_chip_open(&cfg, &chip));
    assert_string_equal(strata_chip_label(chip), "chip sim:0");

    strata_chip_program_desc d = {.name = "vadd", .fn = vadd_program};
    strata_chip_program prog;
    assert_ok(strata_chip_register_program(chip, &d, &prog));
    assert_status(STRATA_EINVAL, strata_chip_register_program(chip, &d, &prog)); /* dup */
    d.fn = NULL;
    assert_status(STRATA_EINVAL, strata_chip_register_program(chip, &d, &prog));

    strata_task_args args;
    strata_args_init(&args);
    strata_chip_run *run = NULL;
    assert_status(STRATA_EINVAL, strata_chip_submit(chip, 42, &args, NULL, &run));
    assert_non_null(strstr(strata_error_message(), "not registered"));
    args.invalid = 1;
    assert_status(STRATA_EINVAL, strata_chip_submit(chip, prog, &args, NULL, &run));
    args.invalid = 0;
    strata_call_config odd = {.flags = 0x80};
    assert_status(STRATA_EINVAL, strata_chip_submit(chip, prog, &args, &odd, &run));
    assert_null(run);
    assert_status(STRATA_EINVAL, strata_chip_run_wait(NULL, 0));

    void *dev = NULL;
    assert_status(STRATA_EINVAL, strata_chip_malloc(chip, 0, &dev));
    assert_ok(strata_chip_malloc(chip, 64, &dev));
    char host[128] = {0};
    assert_status(STRATA_EDEVICE, strata_chip_copy_to(chip, dev, host, 65));
    assert_non_null(strstr(strata_error_message(), "runs past the end"));
    assert_status(STRATA_EDEVICE, strata_chip_copy_from(chip, host, host + 1, 4));
    strata_tensor t;
    int64_t too_big[1] = {17};
    assert_status(STRATA_EINVAL, strata_chip_tensor(dev, 64, STRATA_F32, 1, too_big, &t));
    assert_status(STRATA_EINVAL, strata_chip_tensor(dev, 64, STRATA_F32, 0, too_big, &t));
    assert_ok(strata_chip_free(chip, dev));
    assert_status(STRATA_EDEVICE, strata_chip_free(chip, dev));
    assert_non_null(strstr(strata_error_message(), "already freed"));

    strata_sim_injection inj = {.prepare_delay_ns = 1};
    assert_ok(strata_chip_set_sim_injection(chip, &inj));
    assert_status(STRATA_EINVAL, strata_chip_unregister_program(chip, 9));
    assert_ok(strata_chip_unregister_program(chip, prog));
    assert_ok(strata_chip_close(chip));
    strata_chip_destroy(chip);
    strata_chip_destroy(NULL); /* like free(NULL) */
}

static void a_program_with_queued_runs_cannot_be_unregistered(void **state) {
    chip_fixture f;
    open_chip(&f, NULL, 0);
    vadd_case v;
    vadd_setup(f.chip, &v, 64, 0);
    strata_chip_run *run; /* stays in the lane until someone waits on it (pull model) */
    assert_ok(strata_chip_submit(f.chip, f.vadd, &v.args, &eight_blocks, &run));
    assert_status(STRATA_ESTATE, strata_chip_unregister_program(f.chip, f.vadd));
    assert_ok(strata_chip_run_wait(run, STRATA_WAIT_FOREVER));
    strata_chip_run_release(run);
    assert_ok(strata_chip_unregister_program(f.chip, f.vadd));
    vadd_free(f.chip, &v);
    assert_ok(strata_chip_close(f.chip));
    strata_chip_destroy(f.chip);
}

/* docs/chips.md Limits: a chip holds 64 programs; the 65th is refused with
 * the limit in the message, and an unregistered program's id is given to the
 * next one, which then runs. */
static void the_program_registry_is_full_at_64_and_reuses_a_freed_id(void **state) {
    chip_fixture f;
    open_chip(&f, NULL, 0); /* vadd, gemm and reduce take ids 0..2 */
    char name[32];
    strata_chip_program p = -1;
    for (int i = 3; i < 64; i++) {
        snprintf(name, sizeof name, "filler%d", i);
        strata_chip_program_desc d = {.name = name, .fn = vadd_program};
        assert_ok(strata_chip_register_program(f.chip, &d, &p));
        assert_int_equal(p, i);
    }
    strata_chip_program_desc extra = {.name = "extra", .fn = vadd_program};
    assert_status(STRATA_ECAPACITY, strata_chip_register_program(f.chip, &extra, &p));
    assert_non_null(strstr(strata_error_message(), "at most 64 programs per chip"));
    assert_ok(strata_chip_unregister_program(f.chip, f.gemm));
    assert_ok(strata_chip_register_program(f.chip, &extra, &p));
    assert_int_equal(p, f.gemm);
    vadd_case v;
    vadd_setup(f.chip, &v, 1000, 0.5f);
    assert_ok(strata_chip_run_sync(f.chip, p, &v.args, &eight_blocks)); /* "extra" is a vadd */
    vadd_check(f.chip, &v);
    vadd_free(f.chip, &v);
    assert_ok(strata_chip_close(f.chip));
    strata_chip_destroy(f.chip);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(vector_add_matches_the_host),
        cmocka_unit_test(gemm_tiles_match_the_host),
        cmocka_unit_test(a_two_stage_reduction_matches_the_host),
        cmocka_unit_test(pipelined_runs_are_prepared_early_and_all_correct),
        cmocka_unit_test(depth_one_runs_one_at_a_time_and_stays_correct),
        cmocka_unit_test(an_expired_wait_leaves_the_run_live),
        cmocka_unit_test(a_prepare_fault_fails_the_run_only),
        cmocka_unit_test(a_launch_fault_is_reclaimed_without_poison),
        cmocka_unit_test(a_poll_fault_poisons_the_chip),
        cmocka_unit_test(a_wait_fault_poisons_the_chip),
        cmocka_unit_test(a_finalize_fault_poisons_the_chip),
        cmocka_unit_test(a_kernel_fault_names_kernel_and_block),
        cmocka_unit_test(a_failing_kernel_reports_its_own_message),
        cmocka_unit_test(a_program_that_refuses_fails_at_prepare_with_its_reason),
        cmocka_unit_test(bad_input_returns_a_status_and_a_message),
        cmocka_unit_test(the_program_registry_is_full_at_64_and_reuses_a_freed_id),
        cmocka_unit_test(a_program_with_queued_runs_cannot_be_unregistered),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
