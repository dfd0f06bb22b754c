// label: concurrency
/* tests/unit/test_api_errors.c - bad input to the run handle and tensor view
 * calls through the public API: each call returns the documented status and
 * leaves a non-empty strata_error_message() that names the problem; nothing
 * aborts, hangs or leaks.
 *
 * Owns: the error contract of the run handle calls (strata_run_*,
 * strata_worker_submit / _run with NULL) and of tensor views
 * (strata_tensor_view / _contiguous, strata_tensor_numel, strata_dtype_size).
 * The worker's own checks are in test_worker.c, buffers and task arguments in
 * test_buffer.c, the calls of an orchestration function in
 * test_orchestrator.c.
 * Must never: assert on timing.
 */
#include "test_support.h"

#include <stdlib.h>
#include <string.h>

#include "util/error.h"

#define BUF_BYTES 4096

/* The worker (its "count" task is the no-op whose runs are counted, "gate"
 * holds a sub worker) with one BUF_BYTES buffer. */
typedef struct fixture {
    ts_worker t;
} fixture;

static fixture *make(void) {
    fixture *f = calloc(1, sizeof *f);
    assert_non_null(f);
    ts_worker_opts o;
    ts_worker_opts_init(&o);
    o.buffers[0] = BUF_BYTES;
    ts_worker_open(&f->t, &o);
    return f;
}

static void destroy(fixture *f) {
    ts_worker_close(&f->t);
    free(f);
}

static int orch_noop_task(strata_orch *o, void *arg) {
    fixture *f = arg;
    strata_task_args a;
    strata_args_init(&a);
    return strata_orch_submit_sub(o, f->t.count, &a);
}

static int orch_gated_task(strata_orch *o, void *arg) {
    fixture *f = arg;
    strata_task_args a;
    strata_args_init(&a);
    return strata_orch_submit_sub(o, f->t.gate, &a);
}

static int orch_empty(strata_orch *o, void *arg) {
    (void)o;
    (void)arg;
    return STRATA_OK;
}

/* ==== NULL arguments ======================================================== */

static void null_arguments_to_run_calls_are_einval(void **state) {
    (void)state;
    fixture *f = make();
    strata_run *h = (strata_run *)f;
    assert_fails(STRATA_EINVAL, "NULL", strata_worker_submit(NULL, orch_empty, NULL, &h));
    assert_fails(STRATA_EINVAL, "NULL", strata_worker_submit(f->t.w, NULL, NULL, &h));
    assert_fails(STRATA_EINVAL, "NULL", strata_worker_submit(f->t.w, orch_empty, NULL, NULL));
    assert_fails(STRATA_EINVAL, "NULL", strata_worker_run(NULL, orch_empty, NULL));
    assert_fails(STRATA_EINVAL, "NULL", strata_worker_run(f->t.w, NULL, NULL));
    assert_fails(STRATA_EINVAL, "NULL", strata_run_wait(NULL, 0));
    assert_fails(STRATA_EINVAL, "NULL", strata_run_status(NULL));
    assert_int_equal(strata_run_done(NULL), 0);
    assert_string_equal(strata_run_error(NULL), "");
    assert_int_equal(strata_run_id(NULL), 0);
    strata_run_release(NULL); /* like free(NULL) */
    /* the worker is still usable */
    assert_ok(strata_worker_run(f->t.w, orch_noop_task, f));
    assert_int_equal(atomic_load(&f->t.counter), 1);
    destroy(f);
}

static void null_arguments_to_tensor_calls_are_einval(void **state) {
    (void)state;
    fixture *f = make();
    strata_tensor t;
    int64_t n = 4;
    assert_fails(STRATA_EINVAL, "NULL", strata_tensor_view(NULL, 0, STRATA_I32, 1, &n, NULL, &t));
    assert_fails(STRATA_EINVAL, "NULL",
                 strata_tensor_view(f->t.buf[0], 0, STRATA_I32, 1, NULL, NULL, &t));
    assert_fails(STRATA_EINVAL, "NULL",
                 strata_tensor_view(f->t.buf[0], 0, STRATA_I32, 1, &n, NULL, NULL));
    assert_fails(STRATA_EINVAL, "NULL", strata_tensor_contiguous(NULL, STRATA_I32, 1, &n, &t));
    assert_fails(STRATA_EINVAL, "NULL",
                 strata_tensor_contiguous(f->t.buf[0], STRATA_I32, 1, NULL, &t));
    assert_fails(STRATA_EINVAL, "NULL",
                 strata_tensor_contiguous(f->t.buf[0], STRATA_I32, 1, &n, NULL));
    assert_int_equal(strata_tensor_numel(NULL), 0);
    assert_int_equal(strata_dtype_size(STRATA_DTYPE_COUNT), 0);
    assert_int_equal(strata_dtype_size((strata_dtype)-1), 0);
    assert_non_null(strata_status_name(12345));
    assert_non_null(strata_status_name(STRATA_EINVAL));
    destroy(f);
}

/* ==== runs =================================================================== */

static void expired_wait_leaves_unfinished_run_alone(void **state) {
    (void)state;
    fixture *f = make();
    strata_run *h;
    assert_ok(strata_worker_submit(f->t.w, orch_gated_task, f, &h));
    assert_false(strata_run_done(h));
    assert_fails(STRATA_ETIMEDOUT, "still", strata_run_wait(h, 1000));
    assert_false(strata_run_done(h)); /* the expired wait did not disturb the run */
    ts_gate_open(&f->t);
    assert_ok(strata_run_wait(h, STRATA_WAIT_FOREVER));
    strata_run_release(h);
    destroy(f);
}

/* ==== tensor views ============================================================ */

static void view_rank_outside_1_to_5_is_einval(void **state) {
    (void)state;
    fixture *f = make();
    strata_tensor t;
    int64_t shape[6] = {2, 2, 2, 2, 2, 2};
    assert_fails(STRATA_EINVAL, "rank",
                 strata_tensor_view(f->t.buf[0], 0, STRATA_U8, 0, shape, NULL, &t));
    assert_fails(STRATA_EINVAL, "rank",
                 strata_tensor_view(f->t.buf[0], 0, STRATA_U8, 6, shape, NULL, &t));
    assert_fails(STRATA_EINVAL, "rank",
                 strata_tensor_view(f->t.buf[0], 0, STRATA_U8, -1, shape, NULL, &t));
    assert_fails(STRATA_EINVAL, "rank",
                 strata_tensor_contiguous(f->t.buf[0], STRATA_U8, 6, shape, &t));
    assert_ok(strata_tensor_view(f->t.buf[0], 0, STRATA_U8, 5, shape, NULL, &t));
    assert_int_equal(t.rank, 5);
    destroy(f);
}

static void view_with_unknown_dtype_is_einval(void **state) {
    (void)state;
    fixture *f = make();
    strata_tensor t;
    int64_t n = 4;
    assert_fails(STRATA_EINVAL, "dtype",
                 strata_tensor_view(f->t.buf[0], 0, STRATA_DTYPE_COUNT, 1, &n, NULL, &t));
    assert_fails(STRATA_EINVAL, "dtype",
                 strata_tensor_view(f->t.buf[0], 0, (strata_dtype)-3, 1, &n, NULL, &t));
    destroy(f);
}

static void view_with_non_positive_dimension_is_einval(void **state) {
    (void)state;
    fixture *f = make();
    strata_tensor t;
    int64_t zero[2] = {4, 0}, neg[2] = {-2, 4};
    assert_fails(STRATA_EINVAL, "dimension",
                 strata_tensor_view(f->t.buf[0], 0, STRATA_I32, 2, zero, NULL, &t));
    assert_fails(STRATA_EINVAL, "dimension",
                 strata_tensor_view(f->t.buf[0], 0, STRATA_I32, 2, neg, NULL, &t));
    assert_fails(STRATA_EINVAL, "dimension",
                 strata_tensor_contiguous(f->t.buf[0], STRATA_I32, 2, zero, &t));
    destroy(f);
}

static void view_with_non_positive_stride_is_einval(void **state) {
    (void)state;
    fixture *f = make();
    strata_tensor t;
    int64_t shape[2] = {4, 4};
    int64_t zero[2] = {4, 0}, neg[2] = {-4, 1};
    assert_fails(STRATA_EINVAL, "stride",
                 strata_tensor_view(f->t.buf[0], 64, STRATA_I32, 2, shape, zero, &t));
    assert_fails(STRATA_EINVAL, "stride",
                 strata_tensor_view(f->t.buf[0], 64, STRATA_I32, 2, shape, neg, &t));
    int64_t ok[2] = {8, 2}; /* a legal strided view */
    assert_ok(strata_tensor_view(f->t.buf[0], 0, STRATA_I32, 2, shape, ok, &t));
    assert_int_equal(t.strides[0], 8);
    assert_int_equal(t.strides[1], 2);
    destroy(f);
}

static void view_outside_its_buffer_is_einval(void **state) {
    (void)state;
    fixture *f = make();
    strata_tensor t;
    int64_t one = 1, all = BUF_BYTES / 4, two = 2, big_stride = BUF_BYTES / 4;
    /* the last element ends exactly at the buffer's end: fine */
    assert_ok(strata_tensor_view(f->t.buf[0], BUF_BYTES - 4, STRATA_I32, 1, &one, NULL, &t));
    assert_ok(strata_tensor_view(f->t.buf[0], 0, STRATA_I32, 1, &all, NULL, &t));
    /* one byte past it: not */
    assert_fails(STRATA_EINVAL, "buffer",
                 strata_tensor_view(f->t.buf[0], BUF_BYTES - 3, STRATA_I32, 1, &one, NULL, &t));
    assert_fails(STRATA_EINVAL, "buffer",
                 strata_tensor_view(f->t.buf[0], 4, STRATA_I32, 1, &all, NULL, &t));
    int64_t too_many = all + 1;
    assert_fails(STRATA_EINVAL, "buffer",
                 strata_tensor_contiguous(f->t.buf[0], STRATA_I32, 1, &too_many, &t));
    /* a stride that steps over the end */
    assert_fails(STRATA_EINVAL, "buffer",
                 strata_tensor_view(f->t.buf[0], 0, STRATA_I32, 1, &two, &big_stride, &t));
    /* values whose products overflow 64 bits */
    assert_fails(STRATA_EINVAL, "buffer",
                 strata_tensor_view(f->t.buf[0], UINT64_MAX - 1, STRATA_I32, 1, &one, NULL, &t));
    int64_t huge = INT64_MAX;
    assert_fails(STRATA_EINVAL, "buffer",
                 strata_tensor_view(f->t.buf[0], 0, STRATA_F64, 1, &huge, NULL, &t));
    int64_t shp[3] = {2, 2, 4}, wrap[3] = {INT64_MAX, INT64_MAX, 1};
    assert_fails(STRATA_EINVAL, "buffer",
                 strata_tensor_view(f->t.buf[0], 0, STRATA_U8, 3, shp, wrap, &t));
    destroy(f);
}

/* Submit one noop task with `t` under `tag`; record the result. */
/* Submit a task with t0 under tag0 and t1 under tag1; record the result. */
int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(null_arguments_to_run_calls_are_einval),
        cmocka_unit_test(null_arguments_to_tensor_calls_are_einval),
        cmocka_unit_test(expired_wait_leaves_unfinished_run_alone),
        cmocka_unit_test(view_rank_outside_1_to_5_is_einval),
        cmocka_unit_test(view_with_unknown_dtype_is_einval),
        cmocka_unit_test(view_with_non_positive_dimension_is_einval),
        cmocka_unit_test(view_with_non_positive_stride_is_einval),
        cmocka_unit_test(view_outside_its_buffer_is_einval),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
