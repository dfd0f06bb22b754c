// label: concurrency
/* tests/unit/test_buffer.c - buffers and task arguments (core/buffer.c,
 * core/task_args.c, core/args_read.c, core/arg_items.c, include/strata/tensor.h).
 *
 * Owns: strata_buffer_create / _wrap / _destroy / _data / _size (zeroed
 * shared memory of the size asked, the caller's memory used and never freed,
 * a fresh identity per buffer, NULL and zero-size input), the refusal to
 * destroy a chip's device buffer, and the value semantics of strata_args_*
 * (copies, not references; the used part only; limits marking the args
 * invalid; accessors out of range; typed scalars and their refusals outside
 * a body; the payload; items into a builder). Submitting invalid args is the
 * orchestrator's (test_orchestrator.c); views are test_api_errors.c's.
 * Must never: assert on timing.
 */
#include "test_support.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "util/error.h"

/* The accessors read what a task body gets, a view; this makes one of a
 * builder in place. */
#define VIEW(builder) ((strata_task_view[]){strata_args_view(builder)})

/* A worker that is created, not initialised: enough to own buffers, and no
 * thread is running (so the test may fork). */
static strata_worker *created_worker(void) {
    strata_worker_config cfg;
    strata_worker_config_init(&cfg);
    strata_worker *w;
    assert_ok(strata_worker_create(&cfg, &w));
    return w;
}

static strata_tensor whole_u8(const strata_buffer *b) {
    strata_tensor t;
    int64_t n = (int64_t)strata_buffer_size(b);
    assert_ok(strata_tensor_contiguous(b, STRATA_U8, 1, &n, &t));
    return t;
}

/* ---- strata_buffer ------------------------------------------------------------------- */

static void create_gives_zeroed_memory_of_the_size_asked(void **state) {
    (void)state;
    strata_worker *w = created_worker();
    const size_t sizes[] = {1, 7, 4096, (1u << 20) + 3};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        strata_buffer *b = NULL;
        assert_ok(strata_buffer_create(w, sizes[i], &b));
        assert_int_equal(strata_buffer_size(b), sizes[i]);
        unsigned char *p = strata_buffer_data(b);
        assert_non_null(p);
        for (size_t k = 0; k < sizes[i]; k++)
            if (p[k] != 0)
                fail_msg("byte %zu of a %zu-byte buffer is %u", k, sizes[i], p[k]);
        memset(p, 0x5a, sizes[i]); /* all of it is writable */
        strata_buffer_destroy(b);
    }
    strata_worker_destroy(w);
}

static void created_memory_is_shared_with_a_child_process(void **state) {
    (void)state;
    strata_worker *w = created_worker();
    strata_buffer *b;
    assert_ok(strata_buffer_create(w, 4096, &b));
    int *p = strata_buffer_data(b);
    pid_t child = fork();
    assert_true(child >= 0);
    if (child == 0) { /* same address, same memory */
        p[10] = 1234;
        _exit(0);
    }
    int status = 0;
    assert_int_equal(waitpid(child, &status, 0), child);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    assert_int_equal(p[10], 1234);
    strata_buffer_destroy(b);
    strata_worker_destroy(w);
}

static void wrap_uses_the_callers_memory_and_never_frees_it(void **state) {
    (void)state;
    strata_worker *w = created_worker();
    char *heap = malloc(100);
    assert_non_null(heap);
    memset(heap, 'x', 100);
    strata_buffer *b;
    assert_ok(strata_buffer_wrap(w, heap, 100, &b));
    assert_ptr_equal(strata_buffer_data(b), heap);
    assert_int_equal(strata_buffer_size(b), 100);
    assert_int_equal(heap[99], 'x'); /* not cleared either */
    strata_tensor t = whole_u8(b);
    assert_ptr_equal(strata_tensor_data(&t), heap);
    strata_buffer_destroy(b);
    heap[0] = 'y'; /* still ours: a free by strata would be a use after free here */
    free(heap);    /* and a double free here */

    static char fixed[64];
    assert_ok(strata_buffer_wrap(w, fixed, sizeof fixed, &b));
    strata_buffer_destroy(b); /* never handed to free() */
    strata_worker_destroy(w);
}

static void every_buffer_gets_a_fresh_host_identity(void **state) {
    (void)state;
    strata_worker *w = created_worker();
    static char mem[256];
    strata_buffer *b[4];
    assert_ok(strata_buffer_create(w, 64, &b[0]));
    assert_ok(strata_buffer_create(w, 64, &b[1]));
    assert_ok(strata_buffer_wrap(w, mem, sizeof mem, &b[2]));
    assert_ok(strata_buffer_wrap(w, mem, sizeof mem, &b[3])); /* the same memory again */
    uint64_t prev = 0;
    for (int i = 0; i < 4; i++) {
        strata_tensor t = whole_u8(b[i]);
        assert_true(t.ident.id != 0);
        assert_true(t.ident.id > prev); /* never reused within the worker */
        prev = t.ident.id;
        assert_int_equal(t.ident.generation, 1);
        assert_int_equal(t.ident.owner, -1);
        assert_int_equal(t.mem, STRATA_MEM_HOST);
        assert_int_equal(t.buffer_bytes, strata_buffer_size(b[i]));
    }
    for (int i = 0; i < 4; i++)
        strata_buffer_destroy(b[i]);
    strata_worker_destroy(w);
}

/* Moved from test_api_errors.c. */
static void null_arguments_to_buffer_calls_are_einval(void **state) {
    (void)state;
    strata_worker *w = created_worker();
    strata_buffer *b = (strata_buffer *)w;
    char mem[64];
    assert_fails(STRATA_EINVAL, "NULL", strata_buffer_create(NULL, 64, &b));
    assert_fails(STRATA_EINVAL, "NULL", strata_buffer_create(w, 64, NULL));
    assert_fails(STRATA_EINVAL, "NULL", strata_buffer_wrap(NULL, mem, sizeof mem, &b));
    assert_fails(STRATA_EINVAL, "NULL", strata_buffer_wrap(w, NULL, sizeof mem, &b));
    assert_fails(STRATA_EINVAL, "NULL", strata_buffer_wrap(w, mem, sizeof mem, NULL));
    strata_buffer_destroy(NULL);
    assert_null(strata_buffer_data(NULL));
    assert_int_equal(strata_buffer_size(NULL), 0);
    strata_worker_destroy(w);
}

/* Moved from test_api_errors.c. */
static void zero_byte_buffers_are_einval(void **state) {
    (void)state;
    strata_worker *w = created_worker();
    strata_buffer *b = (strata_buffer *)w;
    char mem[8];
    assert_fails(STRATA_EINVAL, "nbytes", strata_buffer_create(w, 0, &b));
    assert_null(b);
    b = (strata_buffer *)w;
    assert_fails(STRATA_EINVAL, "nbytes", strata_buffer_wrap(w, mem, 0, &b));
    assert_null(b);
    strata_worker_destroy(w);
}

static void a_chip_buffer_is_refused_by_strata_buffer_destroy(void **state) {
    (void)state;
    ts_worker t;
    ts_worker_opts o;
    ts_worker_opts_init(&o);
    o.cfg.sub_workers = 0;
    o.chips = 1;
    ts_worker_open(&t, &o);
    strata_worker *w = t.w;
    strata_buffer *b;
    assert_ok(strata_worker_chip_malloc(w, t.chip_id[0], 64, &b));
    const char pattern[8] = "device!";
    assert_ok(strata_worker_chip_copy_to(w, b, 8, pattern, sizeof pattern));

    st_clear_error();
    strata_buffer_destroy(b); /* refused: the chip owns it */
    ts_assert_mentions(strata_error_message(), "device memory of worker 0");
    ts_assert_mentions(strata_error_message(), "strata_worker_chip_free");
    /* the handle is untouched: it still answers and still holds the data */
    assert_int_equal(strata_buffer_size(b), 64);
    assert_non_null(strata_buffer_data(b));
    char back[8] = {0};
    assert_ok(strata_worker_chip_copy_from(w, b, 8, back, sizeof back));
    assert_memory_equal(back, pattern, sizeof pattern);
    assert_ok(strata_worker_chip_free(w, b)); /* the one way to free it */
    ts_worker_close(&t);
}

/* ---- strata_args_* ------------------------------------------------------------------- */

static void args_hold_copies_of_tensors_tags_and_scalars(void **state) {
    (void)state;
    strata_worker *w = created_worker();
    strata_buffer *buf;
    assert_ok(strata_buffer_create(w, 256, &buf));
    strata_tensor x = ts_i32(buf, 0, 8, 1), y = ts_i32(buf, 16, 4, 2);
    strata_task_args a;
    strata_args_init(&a);
    assert_ok(strata_args_add_tensor(&a, &x, STRATA_IN));
    assert_ok(strata_args_add_tensor(&a, &y, STRATA_OUT_EXISTING));
    assert_ok(strata_args_add_scalar(&a, 7));
    assert_ok(strata_args_add_scalar(&a, UINT64_MAX));
    strata_tensor x_before = x;
    x.shape[0] = 1; /* changing the caller's tensor afterwards changes nothing */
    x.offset = 64;
    assert_int_equal(a.ntensors, 2);
    assert_int_equal(a.nscalars, 2);
    assert_int_equal(a.invalid, 0);
    assert_int_equal(a.tags[0], STRATA_IN);
    assert_int_equal(a.tags[1], STRATA_OUT_EXISTING);
    assert_memory_equal(strata_args_tensor(VIEW(&a), 0), &x_before, sizeof x_before);
    assert_memory_equal(strata_args_tensor(VIEW(&a), 1), &y, sizeof y);
    assert_ptr_equal(strata_args_data(VIEW(&a), 1), (char *)strata_buffer_data(buf) + 64);
    assert_int_equal(strata_args_scalar(VIEW(&a), 0), 7);
    assert_int_equal(strata_args_scalar(VIEW(&a), 1), UINT64_MAX);
    /* out of range */
    assert_null(strata_args_tensor(VIEW(&a), 2));
    assert_null(strata_args_data(VIEW(&a), 2));
    assert_int_equal(strata_args_scalar(VIEW(&a), 2), 0);
    strata_buffer_destroy(buf);
    strata_worker_destroy(w);
}

static void args_init_empties_filled_args(void **state) {
    (void)state;
    strata_task_args a;
    memset(&a, 0xab, sizeof a); /* whatever was there */
    strata_args_init(&a);
    assert_int_equal(a.ntensors, 0);
    assert_int_equal(a.nscalars, 0);
    assert_int_equal(a.invalid, 0);
    for (int i = 0; i <= STRATA_MAX_SCALARS; i++)
        strata_args_add_scalar(&a, 1); /* one too many: invalid */
    assert_int_not_equal(a.invalid, 0);
    strata_args_init(&a);
    assert_int_equal(a.nscalars, 0);
    assert_int_equal(a.invalid, 0); /* usable again */
    assert_ok(strata_args_add_scalar(&a, 5));
    assert_int_equal(strata_args_scalar(VIEW(&a), 0), 5);
}

static void args_copy_copies_the_used_part_into_an_independent_value(void **state) {
    (void)state;
    strata_worker *w = created_worker();
    strata_buffer *buf;
    assert_ok(strata_buffer_create(w, 256, &buf));
    strata_tensor x = ts_i32(buf, 0, 8, 1);
    strata_task_args src, dst;
    strata_args_init(&src);
    assert_ok(strata_args_add_tensor(&src, &x, STRATA_INOUT));
    assert_ok(strata_args_add_scalar(&src, 3));
    assert_ok(strata_args_add_scalar(&src, 4));
    memset(&dst, 0xcd, sizeof dst);
    strata_args_copy(&dst, &src);
    assert_int_equal(dst.ntensors, 1);
    assert_int_equal(dst.nscalars, 2);
    assert_int_equal(dst.invalid, 0);
    assert_int_equal(dst.tags[0], STRATA_INOUT);
    assert_memory_equal(&dst.tensors[0], &x, sizeof x);
    assert_int_equal(strata_args_scalar(VIEW(&dst), 1), 4);
    /* a value: adding to the copy leaves the original as it was */
    assert_ok(strata_args_add_scalar(&dst, 5));
    assert_int_equal(src.nscalars, 2);
    /* the invalid mark travels with the copy */
    src.invalid = 1;
    strata_args_copy(&dst, &src);
    assert_int_not_equal(dst.invalid, 0);
    strata_args_copy(NULL, &src); /* ignored */
    strata_args_copy(&dst, NULL);
    strata_buffer_destroy(buf);
    strata_worker_destroy(w);
}

/* A task body's args are stored compactly, up to their last used tensor:
 * strata_args_copy must read nothing past it (ASan sees a read past the end
 * of this allocation). */
static void args_copy_reads_compact_args_only_up_to_their_last_tensor(void **state) {
    (void)state;
    strata_worker *w = created_worker();
    strata_buffer *buf;
    assert_ok(strata_buffer_create(w, 64, &buf));
    strata_tensor x = ts_i32(buf, 0, 4, 1);
    strata_task_args full;
    strata_args_init(&full);
    assert_ok(strata_args_add_tensor(&full, &x, STRATA_IN));
    assert_ok(strata_args_add_scalar(&full, 99));
    size_t compact_bytes = offsetof(strata_task_args, tensors) + sizeof(strata_tensor);
    unsigned char *compact = malloc(compact_bytes); /* exactly the used part */
    assert_non_null(compact);
    memcpy(compact, &full, compact_bytes);
    strata_task_args dst;
    strata_args_copy(&dst, (const strata_task_args *)(void *)compact);
    assert_int_equal(dst.ntensors, 1);
    assert_memory_equal(&dst.tensors[0], &x, sizeof x);
    assert_int_equal(strata_args_scalar(VIEW(&dst), 0), 99);
    free(compact);
    strata_buffer_destroy(buf);
    strata_worker_destroy(w);
}

static void a_full_argument_list_refuses_more_and_marks_the_args_invalid(void **state) {
    (void)state;
    strata_worker *w = created_worker();
    strata_buffer *buf;
    assert_ok(strata_buffer_create(w, 4096, &buf));
    strata_task_args a;
    strata_args_init(&a);
    for (int i = 0; i < STRATA_MAX_TENSORS; i++) {
        strata_tensor t = ts_i32(buf, i, 1, 1);
        assert_ok(strata_args_add_tensor(&a, &t, STRATA_IN));
    }
    assert_int_equal(a.invalid, 0);
    strata_tensor extra = ts_i32(buf, 100, 1, 1);
    assert_fails(STRATA_ECAPACITY, "tensor arguments", strata_args_add_tensor(&a, &extra, 0));
    assert_int_equal(a.ntensors, STRATA_MAX_TENSORS); /* nothing was dropped or overwritten */
    assert_int_not_equal(a.invalid, 0);

    strata_args_init(&a);
    for (int i = 0; i < STRATA_MAX_SCALARS; i++)
        assert_ok(strata_args_add_scalar(&a, (uint64_t)i));
    assert_fails(STRATA_ECAPACITY, "scalar arguments", strata_args_add_scalar(&a, 99));
    assert_int_equal(a.nscalars, STRATA_MAX_SCALARS);
    assert_int_equal(strata_args_scalar(VIEW(&a), STRATA_MAX_SCALARS - 1), STRATA_MAX_SCALARS - 1);
    assert_int_not_equal(a.invalid, 0);
    strata_buffer_destroy(buf);
    strata_worker_destroy(w);
}

static void an_unknown_tag_is_refused_and_marks_the_args_invalid(void **state) {
    (void)state;
    strata_worker *w = created_worker();
    strata_buffer *buf;
    assert_ok(strata_buffer_create(w, 64, &buf));
    strata_tensor t = ts_i32(buf, 0, 4, 1);
    strata_task_args a;
    strata_args_init(&a);
    for (int tag = STRATA_IN; tag <= STRATA_NO_DEP; tag++)
        assert_ok(strata_args_add_tensor(&a, &t, (strata_tag)tag));
    assert_int_equal(a.invalid, 0);
    assert_fails(STRATA_EINVAL, "unknown tag",
                 strata_args_add_tensor(&a, &t, (strata_tag)(STRATA_NO_DEP + 1)));
    assert_int_equal(a.ntensors, STRATA_NO_DEP + 1);
    assert_int_not_equal(a.invalid, 0);
    strata_args_init(&a);
    assert_fails(STRATA_EINVAL, "unknown tag", strata_args_add_tensor(&a, &t, (strata_tag)-1));
    assert_int_not_equal(a.invalid, 0);
    strata_buffer_destroy(buf);
    strata_worker_destroy(w);
}

/* Moved from test_api_errors.c. */
static void null_arguments_to_args_calls_are_einval(void **state) {
    (void)state;
    strata_worker *w = created_worker();
    strata_buffer *buf;
    assert_ok(strata_buffer_create(w, 64, &buf));
    strata_task_args a;
    strata_args_init(NULL); /* no-op */
    strata_args_init(&a);
    strata_tensor t = ts_i32(buf, 0, 4, 1);
    assert_fails(STRATA_EINVAL, "NULL", strata_args_add_tensor(NULL, &t, STRATA_IN));
    assert_fails(STRATA_EINVAL, "NULL", strata_args_add_tensor(&a, NULL, STRATA_IN));
    assert_fails(STRATA_EINVAL, "NULL", strata_args_add_scalar(NULL, 1));
    assert_int_equal(a.ntensors, 0);
    assert_null(strata_args_data(NULL, 0));
    assert_null(strata_args_tensor(NULL, 0));
    assert_int_equal(strata_args_scalar(NULL, 0), 0);
    /* out-of-range accessors */
    assert_null(strata_args_data(VIEW(&a), 0));
    assert_null(strata_args_tensor(VIEW(&a), 3));
    assert_int_equal(strata_args_scalar(VIEW(&a), 0), 0);
    strata_buffer_destroy(buf);
    strata_worker_destroy(w);
}

/* Typed scalars keep their bits and their type; raw reads see the bits. */
static void typed_scalars_read_back_as_the_type_they_were_added_as(void **state) {
    (void)state;
    strata_task_args a;
    strata_args_init(&a);
    assert_ok(strata_args_add_u64(&a, UINT64_MAX));
    assert_ok(strata_args_add_i64(&a, INT64_MIN));
    assert_ok(strata_args_add_f64(&a, -0.1));
    assert_ok(strata_args_add_f32(&a, 3.5f));
    assert_ok(strata_args_add_scalar(&a, 9));
    const strata_task_view *v = VIEW(&a);
    assert_true(strata_args_u64(v, 0) == UINT64_MAX);
    assert_true(strata_args_i64(v, 1) == INT64_MIN);
    assert_true(strata_args_f64(v, 2) == -0.1);
    assert_true(strata_args_f32(v, 3) == 3.5f);
    assert_true(strata_args_u64(v, 4) == 9); /* add_scalar is u64 */
    double d = -0.1;
    uint64_t bits;
    memcpy(&bits, &d, sizeof bits);
    assert_true(strata_args_scalar(v, 2) == bits);
    assert_int_equal(v->scalar_types[1], STRATA_SCALAR_I64);
}

/* Outside a body a failed typed read returns 0 and says why, naming the
 * index and both types (a body's task fails too: test_task_arguments.c). */
static void a_typed_read_of_another_type_or_index_returns_0_and_says_why(void **state) {
    (void)state;
    strata_task_args a;
    strata_args_init(&a);
    assert_ok(strata_args_add_i64(&a, -4));
    const strata_task_view *v = VIEW(&a);
    st_clear_error();
    assert_true(strata_args_f64(v, 0) == 0.0);
    assert_message_mentions("strata_args_f64: scalar 0 is i64, not f64");
    st_clear_error();
    assert_true(strata_args_u64(v, 0) == 0);
    assert_message_mentions("scalar 0 is i64, not u64");
    st_clear_error();
    assert_true(strata_args_i64(v, 1) == 0);
    assert_message_mentions("strata_args_i64: scalar 1 does not exist: the task has 1");
    st_clear_error();
    assert_true(strata_args_f32(NULL, 0) == 0.0f);
    assert_message_mentions("NULL");
}

/* One payload per task, 1..STRATA_MAX_PAYLOAD bytes, copied. */
static void the_payload_is_copied_once_and_bounded(void **state) {
    (void)state;
    uint8_t bytes[STRATA_MAX_PAYLOAD + 1];
    for (int i = 0; i < (int)sizeof bytes; i++)
        bytes[i] = (uint8_t)(i * 3);
    strata_task_args a;
    strata_args_init(&a);
    size_t n = 99;
    assert_null(strata_args_payload(VIEW(&a), &n));
    assert_int_equal(n, 0);
    assert_ok(strata_args_set_payload(&a, bytes, STRATA_MAX_PAYLOAD));
    bytes[0] = 0xff; /* copied: the change is not seen */
    const void *p = strata_args_payload(VIEW(&a), &n);
    assert_int_equal(n, STRATA_MAX_PAYLOAD);
    assert_int_equal(((const uint8_t *)p)[0], 0);
    assert_memory_equal((const uint8_t *)p + 1, bytes + 1, STRATA_MAX_PAYLOAD - 1);
    assert_fails(STRATA_EINVAL, "already has a payload", strata_args_set_payload(&a, bytes, 1));
    assert_true(a.invalid);
    strata_args_init(&a);
    assert_fails(STRATA_ECAPACITY, "257 bytes", strata_args_set_payload(&a, bytes, sizeof bytes));
    assert_true(a.invalid);
    strata_args_init(&a);
    assert_fails(STRATA_EINVAL, "0 bytes", strata_args_set_payload(&a, bytes, 0));
    strata_task_args b;
    strata_args_init(&a);
    assert_ok(strata_args_set_payload(&a, "xyz", 3));
    strata_args_copy(&b, &a);
    assert_int_equal(b.payload_bytes, 3);
    assert_memory_equal(b.payload, "xyz", 3);
}

/* Items into a builder: the same result as the adds, errors by position. */
static void items_fill_a_builder_as_the_adds_do(void **state) {
    (void)state;
    strata_tensor t;
    memset(&t, 0, sizeof t);
    t.rank = 1;
    t.shape[0] = 4;
    const strata_arg items[] = {STRATA_IN(t), STRATA_I64(-2), STRATA_F32(0.5f),
                                STRATA_BYTES("ab", 2), STRATA_OUT(t)};
    strata_task_args a;
    strata_args_init(&a);
    assert_ok(strata_args_add_items(&a, items, 5));
    assert_int_equal(a.ntensors, 2);
    assert_int_equal(a.tags[1], STRATA_OUT);
    assert_int_equal(a.nscalars, 2);
    assert_true(strata_args_i64(VIEW(&a), 0) == -2);
    assert_true(strata_args_f32(VIEW(&a), 1) == 0.5f);
    assert_int_equal(a.payload_bytes, 2);
    const strata_arg bad[] = {STRATA_U64(1), STRATA_NEXT_MEMBER};
    strata_args_init(&a);
    assert_fails(STRATA_EINVAL, "argument 1: a member break", strata_args_add_items(&a, bad, 2));
    assert_true(a.invalid);
    assert_fails(STRATA_EINVAL, "must not be NULL", strata_args_add_items(&a, NULL, 1));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(create_gives_zeroed_memory_of_the_size_asked),
        cmocka_unit_test(created_memory_is_shared_with_a_child_process),
        cmocka_unit_test(wrap_uses_the_callers_memory_and_never_frees_it),
        cmocka_unit_test(every_buffer_gets_a_fresh_host_identity),
        cmocka_unit_test(null_arguments_to_buffer_calls_are_einval),
        cmocka_unit_test(zero_byte_buffers_are_einval),
        cmocka_unit_test(a_chip_buffer_is_refused_by_strata_buffer_destroy),
        cmocka_unit_test(args_hold_copies_of_tensors_tags_and_scalars),
        cmocka_unit_test(args_init_empties_filled_args),
        cmocka_unit_test(args_copy_copies_the_used_part_into_an_independent_value),
        cmocka_unit_test(args_copy_reads_compact_args_only_up_to_their_last_tensor),
        cmocka_unit_test(a_full_argument_list_refuses_more_and_marks_the_args_invalid),
        cmocka_unit_test(an_unknown_tag_is_refused_and_marks_the_args_invalid),
        cmocka_unit_test(null_arguments_to_args_calls_are_einval),
        cmocka_unit_test(typed_scalars_read_back_as_the_type_they_were_added_as),
        cmocka_unit_test(a_typed_read_of_another_type_or_index_returns_0_and_says_why),
        cmocka_unit_test(the_payload_is_copied_once_and_bounded),
        cmocka_unit_test(items_fill_a_builder_as_the_adds_do),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
