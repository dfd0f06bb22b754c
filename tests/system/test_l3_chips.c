// label: concurrency
/* tests/system/test_l3_chips.c - sim chips inside an L3 worker, hosted as
 * threads (TS_CHIP_HOST; test_l3_chips_process.c builds this source again
 * with the chips in processes of their own: the same scenarios and checks).
 *
 * Owns: a GEMM split across two chips with weights loaded once into device
 * buffers that persist across runs, checked by a sub task and on the host;
 * the same as a next-level group; a device buffer dispatched to the wrong
 * chip rejected at submit; a kernel fault on one chip failing the run with
 * the whole path in its message while the other chip keeps working; bad
 * input on every worker-level chip call.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "test_support.h"

#include "core/endpoint.h"
#include "strata/chip.h"
#include "strata/sim.h"

#ifndef TS_CHIP_HOST
#define TS_CHIP_HOST STRATA_HOST_THREAD
#endif

enum { M = 64, N = 32, K = 48, T = 16, HALF = M / 2 };

/* ---- Callables ----------------------------------------------------------------------- */

/* tensors A, B, C; scalars rows, N, K, T: one block per tile of C */
static int gemm_program(strata_program_ctx *ctx, const strata_task_view *a, void *user) {
    uint64_t m = strata_args_scalar(a, 0), n = strata_args_scalar(a, 1);
    uint64_t k = strata_args_scalar(a, 2), t = strata_args_scalar(a, 3);
    uint64_t words[7] = {strata_program_arg_ptr(a, 0),
                         strata_program_arg_ptr(a, 1),
                         strata_program_arg_ptr(a, 2),
                         m,
                         n,
                         k,
                         t};
    return strata_program_launch(ctx, "gemm_tile",
                                 (uint32_t)(((m + t - 1) / t) * ((n + t - 1) / t)), words, 7);
}

static float a_value(uint64_t seed, int i) {
    return (float)((i * 13 + (int)seed * 7) % 29) / 14.0f - 1.0f;
}

/* tensor A (OUT); scalar seed */
static int fill_a(const strata_task_view *a, void *user) {
    float *A = strata_args_data(a, 0);
    for (int i = 0; i < M * K; i++)
        A[i] = a_value(strata_args_scalar(a, 0), i);
    return 0;
}

/* tensors A, C (IN); user = host copy of B: C must equal A * B */
static int check_c(const strata_task_view *a, void *user) {
    const float *A = strata_args_data(a, 0), *C = strata_args_data(a, 1), *B = user;
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            float acc = 0;
            for (int p = 0; p < K; p++)
                acc += A[i * K + p] * B[p * N + j];
            if (fabsf(acc - C[i * N + j]) > 1e-4f * (1.0f + fabsf(acc))) {
                strata_task_set_error("C[%d][%d] = %f, expected %f", i, j, C[i * N + j], acc);
                return 1;
            }
        }
    return 0;
}

/* ---- Fixture ---------------------------------------------------------------------------- */

typedef struct l3 {
    strata_worker *w;
    int chip[2];
    strata_callable gemm, fill, check;
    float B[K * N];
    strata_buffer *dB[2]; /* the weights, on each chip */
    strata_buffer *A, *C; /* host memory */
    uint64_t seed;
    int use_group;
    int wrong_owner;
} l3;

static void open_worker(l3 *f, const strata_sim_injection *chip1_inj) {
    memset(f, 0, sizeof *f);
    strata_worker_config wc;
    strata_worker_config_init(&wc);
    wc.sub_workers = 2;
    assert_ok(strata_worker_create(&wc, &f->w));
    for (int c = 0; c < 2; c++) {
        strata_chip_config cc;
        strata_chip_config_init(&cc);
        cc.host = TS_CHIP_HOST;
        cc.device_id = c;
        cc.kernel_module = STRATA_SIM_TEST_KERNELS_PATH;
        if (c == 1)
            cc.sim = chip1_inj; /* copied when the chip opens */
        assert_ok(strata_worker_add_chip(f->w, &cc, &f->chip[c]));
    }
    strata_chip_program_desc d = {.name = "gemm", .fn = gemm_program};
    assert_ok(strata_worker_register_chip_program(f->w, &d, &f->gemm));
    assert_ok(strata_worker_register_sub(f->w, "fill_a", fill_a, NULL, &f->fill));
    assert_ok(strata_worker_register_sub(f->w, "check_c", check_c, f->B, &f->check));
    assert_ok(strata_worker_init(f->w));

    for (int i = 0; i < K * N; i++)
        f->B[i] = (float)((i * 3) % 17) / 8.0f - 1.0f;
    for (int c = 0; c < 2; c++) { /* the weights are loaded once */
        assert_ok(strata_worker_chip_malloc(f->w, f->chip[c], sizeof f->B, &f->dB[c]));
        assert_ok(strata_worker_chip_copy_to(f->w, f->dB[c], 0, f->B, sizeof f->B));
    }
    assert_ok(strata_buffer_create(f->w, sizeof(float) * M * K, &f->A));
    assert_ok(strata_buffer_create(f->w, sizeof(float) * M * N, &f->C));
}

static void close_worker(l3 *f) {
    assert_ok(strata_worker_chip_free(f->w, f->dB[0]));
    strata_buffer_destroy(f->A);
    strata_buffer_destroy(f->C);
    strata_worker_destroy(f->w); /* dB[1] is left to the worker: freed with its chip */
}

/* Arguments of the chip task computing rows [row0, row0+HALF) of C on chip c. */
static int half_args(l3 *f, int c, int row0, int weights_of, strata_task_args *a) {
    int64_t a_shape[2] = {HALF, K}, b_shape[2] = {K, N}, c_shape[2] = {HALF, N};
    strata_tensor tA, tB, tC;
    STRATA_TRY(strata_tensor_view(f->A, (uint64_t)row0 * K * sizeof(float), STRATA_F32, 2, a_shape,
                                  NULL, &tA));
    STRATA_TRY(
        strata_worker_chip_tensor(f->w, f->dB[weights_of], 0, STRATA_F32, 2, b_shape, NULL, &tB));
    STRATA_TRY(strata_tensor_view(f->C, (uint64_t)row0 * N * sizeof(float), STRATA_F32, 2, c_shape,
                                  NULL, &tC));
    strata_args_init(a);
    STRATA_TRY(strata_args_add_tensor(a, &tA, STRATA_IN));
    STRATA_TRY(strata_args_add_tensor(a, &tB, STRATA_IN));
    STRATA_TRY(strata_args_add_tensor(a, &tC, STRATA_OUT_EXISTING));
    const uint64_t dims[4] = {HALF, N, K, T};
    for (int i = 0; i < 4; i++)
        STRATA_TRY(strata_args_add_scalar(a, dims[i]));
    (void)c;
    return STRATA_OK;
}

/* fill A -> two chip halves -> check C */
static int gemm_orch(strata_orch *o, void *arg) {
    l3 *f = arg;
    int64_t a_shape[2] = {M, K}, c_shape[2] = {M, N};
    strata_tensor tA, tC;
    STRATA_TRY(strata_tensor_contiguous(f->A, STRATA_F32, 2, a_shape, &tA));
    STRATA_TRY(strata_tensor_contiguous(f->C, STRATA_F32, 2, c_shape, &tC));
    strata_task_args fa;
    strata_args_init(&fa);
    STRATA_TRY(strata_args_add_tensor(&fa, &tA, STRATA_OUT_EXISTING));
    STRATA_TRY(strata_args_add_scalar(&fa, f->seed));
    STRATA_TRY(strata_orch_submit_sub(o, f->fill, &fa));

    strata_task_args halves[2];
    for (int c = 0; c < 2; c++)
        STRATA_TRY(half_args(f, c, c * HALF, f->wrong_owner ? 0 : c, &halves[c]));
    strata_call_config cfg = {0};
    if (f->use_group)
        STRATA_TRY(strata_orch_submit_next_level_group(o, f->gemm, halves, &cfg, f->chip, 2));
    else
        for (int c = 0; c < 2; c++)
            STRATA_TRY(strata_orch_submit_next_level(o, f->gemm, &halves[c], &cfg, f->chip[c]));

    strata_task_args ca;
    strata_args_init(&ca);
    STRATA_TRY(strata_args_add_tensor(&ca, &tA, STRATA_IN));
    STRATA_TRY(strata_args_add_tensor(&ca, &tC, STRATA_IN));
    return strata_orch_submit_sub(o, f->check, &ca);
}

/* Only the half on chip 0. */
static int chip0_orch(strata_orch *o, void *arg) {
    l3 *f = arg;
    strata_task_args a;
    STRATA_TRY(half_args(f, 0, 0, 0, &a));
    return strata_orch_submit_next_level(o, f->gemm, &a, NULL, f->chip[0]);
}

/* ---- Tests -------------------------------------------------------------------------------- */

static void gemm_split_across_two_chips_with_weights_loaded_once(void **state) {
    l3 f;
    open_worker(&f, NULL);
    for (uint64_t r = 1; r <= 4; r++) { /* the device weights persist across runs */
        f.seed = r;
        assert_ok(strata_worker_run(f.w, gemm_orch, &f));
        const float *C = strata_buffer_data(f.C);
        float expect = 0;
        for (int p = 0; p < K; p++)
            expect += a_value(r, (M - 1) * K + p) * f.B[p * N + (N - 1)];
        assert_float_equal(C[M * N - 1], expect, 1e-4);
    }
    float back[K * N];
    assert_ok(strata_worker_chip_copy_from(f.w, f.dB[1], 0, back, sizeof back));
    assert_memory_equal(back, f.B, sizeof back);
    close_worker(&f);
}

static void gemm_as_a_next_level_group(void **state) {
    l3 f;
    open_worker(&f, NULL);
    f.use_group = 1;
    for (uint64_t r = 1; r <= 2; r++) {
        f.seed = r + 10;
        assert_ok(strata_worker_run(f.w, gemm_orch, &f));
    }
    close_worker(&f);
}

static void a_device_buffer_on_the_wrong_chip_is_rejected_at_submit(void **state) {
    l3 f;
    open_worker(&f, NULL);
    f.wrong_owner = 1; /* chip 1's task names chip 0's weights */
    f.seed = 1;
    int rc = strata_worker_run(f.w, gemm_orch, &f);
    assert_int_equal(rc, STRATA_EINVAL);
    assert_non_null(strstr(strata_error_message(), "device memory of worker 0"));
    f.wrong_owner = 0;
    assert_ok(strata_worker_run(f.w, gemm_orch, &f)); /* the worker is unharmed */
    close_worker(&f);
}

static void a_device_buffer_is_not_freed_by_strata_buffer_destroy(void **state) {
    l3 f;
    open_worker(&f, NULL);
    strata_buffer_destroy(f.dB[0]); /* refused: the chip owns it */
    assert_non_null(strstr(strata_error_message(), "strata_worker_chip_free"));
    /* The buffer is intact and still usable: a run on its weights succeeds. */
    f.seed = 3;
    assert_ok(strata_worker_run(f.w, gemm_orch, &f));
    close_worker(&f); /* frees it once, through the chip */
}

static void device_views_carry_their_owner(void **state) {
    l3 f;
    open_worker(&f, NULL);
    strata_tensor t;
    int64_t n = 4;
    assert_ok(strata_tensor_view(f.dB[1], 0, STRATA_F32, 1, &n, NULL, &t));
    assert_int_equal(t.mem, STRATA_MEM_DEVICE);
    assert_int_equal(t.ident.owner, f.chip[1]);
    close_worker(&f);
}

static void a_kernel_fault_on_one_chip_names_its_path_and_spares_the_other(void **state) {
    l3 f;
    strata_sim_injection inj = {
        .fault = STRATA_SIM_FAULT_KERNEL, .fault_code = -5, .fault_block = 2};
    open_worker(&f, &inj);
    f.seed = 3;
    strata_run *h;
    assert_ok(strata_worker_submit(f.w, gemm_orch, &f, &h));
    assert_int_equal(strata_run_wait(h, STRATA_WAIT_FOREVER), STRATA_ETASK);
    const char *err = strata_run_error(h);
    const char *needles[] = {"L3 worker 1 (chip sim:1)", "task 'gemm'", "program 'gemm'",
                             "kernel 'gemm_tile'",       "block 2 of",  "injected kernel fault"};
    for (size_t i = 0; i < sizeof needles / sizeof needles[0]; i++)
        if (!strstr(err, needles[i]))
            fail_msg("'%s' missing from: %s", needles[i], err);
    strata_run_release(h);

    assert_ok(strata_worker_run(f.w, chip0_orch, &f)); /* chip 0 goes on working */
    int rc = strata_worker_run(f.w, gemm_orch, &f);    /* chip 1 is poisoned by its device fault */
    assert_int_equal(rc, STRATA_EENDPOINT);
    assert_non_null(strstr(strata_error_message(), "poisoned"));
    close_worker(&f);
}

static int not_a_program(const strata_task_view *a, void *user) {
    return 0;
}

static int plain_next_level_orch(strata_orch *o, void *arg) {
    l3 *f = arg;
    strata_task_args a;
    strata_args_init(&a);
    return strata_orch_submit_next_level(o, f->check /* reused as the callable id holder */, &a,
                                         NULL, f->chip[0]);
}

static void a_callable_that_is_not_a_chip_program_fails_on_the_chip(void **state) {
    l3 f;
    open_worker(&f, NULL);
    assert_ok(st_register_next_level(f.w, "plain", not_a_program, NULL, NULL, &f.check));
    int rc = strata_worker_run(f.w, plain_next_level_orch, &f);
    assert_int_equal(rc, STRATA_EENDPOINT);
    assert_non_null(strstr(strata_error_message(), "is not a chip program"));
    close_worker(&f);
}

static void bad_input_on_worker_level_chip_calls(void **state) {
    strata_worker *w;
    strata_worker_config wc;
    strata_worker_config_init(&wc);
    assert_ok(strata_worker_create(&wc, &w));
    strata_chip_config cc;
    strata_chip_config_init(&cc);
    int id = -1;
    cc.backend = "/no/such/backend.so";
    assert_status(STRATA_EINVAL, strata_worker_add_chip(w, &cc, &id));
    assert_non_null(strstr(strata_error_message(), "/no/such/backend.so"));
    cc.backend = "sim";
    cc.host = (strata_host_mode)7; /* THREAD and PROCESS are the modes */
    assert_status(STRATA_EINVAL, strata_worker_add_chip(w, &cc, &id));
    assert_non_null(strstr(strata_error_message(), "unknown host mode"));
    cc.host = TS_CHIP_HOST;
    assert_status(STRATA_EINVAL, strata_worker_add_chip(NULL, &cc, &id));
    assert_ok(strata_worker_add_chip(w, &cc, &id));
    assert_int_equal(id, 0);
    strata_chip_program_desc d = {.name = "p", .fn = NULL};
    strata_callable c;
    assert_status(STRATA_EINVAL, strata_worker_register_chip_program(w, &d, &c));
    assert_ok(strata_worker_init(w));
    assert_status(STRATA_ESTATE, strata_worker_add_chip(w, &cc, &id)); /* after init */

    strata_buffer *b = NULL;
    assert_status(STRATA_EINVAL, strata_worker_chip_malloc(w, 5, 64, &b));
    assert_non_null(strstr(strata_error_message(), "not a chip"));
    assert_status(STRATA_EINVAL, strata_worker_chip_malloc(w, -1, 64, &b));
    assert_status(STRATA_EINVAL, strata_worker_chip_malloc(w, 0, 0, &b));
    assert_ok(strata_worker_chip_malloc(w, 0, 64, &b));
    char host[128] = {0};
    assert_status(STRATA_EINVAL, strata_worker_chip_copy_to(w, b, 60, host, 8));
    assert_non_null(strstr(strata_error_message(), "run past"));
    strata_tensor t;
    int64_t shape[1] = {16};
    assert_ok(strata_worker_chip_tensor(w, b, 0, STRATA_F32, 1, shape, NULL, &t));
    assert_int_equal(t.mem, STRATA_MEM_DEVICE);
    assert_int_equal(t.ident.owner, 0);
    shape[0] = 17;
    assert_status(STRATA_EINVAL,
                  strata_worker_chip_tensor(w, b, 0, STRATA_F32, 1, shape, NULL, &t));
    strata_buffer *host_buf;
    assert_ok(strata_buffer_create(w, 64, &host_buf));
    assert_status(STRATA_EINVAL, strata_worker_chip_free(w, host_buf));
    assert_status(STRATA_EINVAL,
                  strata_worker_chip_tensor(w, host_buf, 0, STRATA_F32, 1, shape, NULL, &t));
    strata_buffer_destroy(host_buf);
    assert_ok(strata_worker_chip_free(w, b));
    assert_status(STRATA_EINVAL, strata_worker_chip_free(w, b)); /* freed already */
    strata_worker_destroy(w);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(gemm_split_across_two_chips_with_weights_loaded_once),
        cmocka_unit_test(gemm_as_a_next_level_group),
        cmocka_unit_test(a_device_buffer_on_the_wrong_chip_is_rejected_at_submit),
        cmocka_unit_test(a_device_buffer_is_not_freed_by_strata_buffer_destroy),
        cmocka_unit_test(device_views_carry_their_owner),
        cmocka_unit_test(a_kernel_fault_on_one_chip_names_its_path_and_spares_the_other),
        cmocka_unit_test(a_callable_that_is_not_a_chip_program_fails_on_the_chip),
        cmocka_unit_test(bad_input_on_worker_level_chip_calls),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
