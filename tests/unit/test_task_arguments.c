// label: concurrency
/* tests/unit/test_task_arguments.c - task arguments from the submit call to
 * the body: every kind (tensors, u64 / i64 / f64 / f32 scalars, the payload)
 * in the one-call form and the argument-list form, 64 tensors per task (65
 * refused), groups, runtime views written back, and each documented mistake
 * (a typed read of the wrong type or past the end fails the task; items C
 * cannot check fail the submit naming their position).
 *
 * Owns: those behaviours on thread-hosted sub workers; built again as
 * test_task_arguments_process.c for process-hosted ones (wire_args between).
 * Must never: assert inside a body (bodies record into shared memory; the
 * test asserts after the run), or depend on timing.
 */
#include <math.h>
#include <string.h>

#include "test_support.h"

enum { NT = STRATA_MAX_TENSORS, BUF_INTS = 1024 };

/* What a body saw: written by bodies (maybe in a child), read by the test. */
typedef struct seen {
    _Atomic int calls;
    uint32_t ntensors, nscalars, payload_bytes;
    uint8_t tags[NT];
    uint8_t types[STRATA_MAX_SCALARS];
    uint64_t u64;
    int64_t i64;
    double f64;
    float f32;
    uint8_t payload[STRATA_MAX_PAYLOAD];
} seen;

typedef struct fixture {
    ts_worker t;
    seen *s; /* shared with process children */
    strata_callable record, bump, misread, past_end;
    ts_probes pr;
    void (*body)(strata_orch *o, struct fixture *f);
} fixture;

/* Records every argument as the typed reads return them. Scalars are
 * expected as u64, i64, f64, f32 in that order. */
static int record_body(const strata_task_view *v, void *user) {
    seen *s = user;
    s->ntensors = v->ntensors;
    s->nscalars = v->nscalars;
    memcpy(s->tags, v->tags, v->ntensors);
    memcpy(s->types, v->scalar_types, v->nscalars);
    s->u64 = strata_args_u64(v, 0);
    s->i64 = strata_args_i64(v, 1);
    s->f64 = strata_args_f64(v, 2);
    s->f32 = strata_args_f32(v, 3);
    size_t n = 0;
    const void *p = strata_args_payload(v, &n);
    s->payload_bytes = (uint32_t)n;
    if (p)
        memcpy(s->payload, p, n);
    atomic_fetch_add(&s->calls, 1);
    return 0;
}

/* Adds scalar 0 (an i64) to every element of every tensor. */
static int bump_body(const strata_task_view *v, void *user) {
    seen *s = user;
    int64_t by = strata_args_i64(v, 0);
    for (uint32_t i = 0; i < v->ntensors; i++)
        *(int32_t *)strata_args_data(v, i) += (int32_t)by;
    atomic_fetch_add(&s->calls, 1);
    return 0;
}

/* Reads scalar 0 as an f64 whatever it is, and returns 0 regardless. */
static int misread_body(const strata_task_view *v, void *user) {
    (void)user;
    (void)strata_args_f64(v, 0);
    return 0;
}

/* Reads scalar 3 of a task that has fewer, and returns 0 regardless. */
static int past_end_body(const strata_task_view *v, void *user) {
    (void)user;
    (void)strata_args_i64(v, 3);
    return 0;
}

static fixture *make(uint32_t subs) {
    fixture *f = test_calloc(1, sizeof *f);
    f->s = ts_shared_calloc(1, sizeof *f->s); /* before the children are forked */
    ts_worker_opts o;
    ts_worker_opts_init(&o);
    o.cfg.sub_workers = subs;
    o.cfg.sub_mode = TS_SUB_MODE;
    o.endpoints = 1;
    o.buffers[0] = BUF_INTS * sizeof(int32_t);
    o.subs[0] = (ts_sub){"record", record_body, f->s, &f->record};
    o.subs[1] = (ts_sub){"bump", bump_body, f->s, &f->bump};
    o.subs[2] = (ts_sub){"misread", misread_body, NULL, &f->misread};
    o.subs[3] = (ts_sub){"past_end", past_end_body, NULL, &f->past_end};
    ts_worker_open(&f->t, &o);
    return f;
}

static void destroy(fixture *f) {
    ts_worker_close(&f->t);
    ts_shared_free(f->s, 1, sizeof *f->s);
    test_free(f);
}

static int32_t *ints(fixture *f) {
    return strata_buffer_data(f->t.buf[0]);
}

static strata_tensor elem(fixture *f, int64_t i) {
    return ts_i32(f->t.buf[0], i, 1, 1);
}

static int orch(strata_orch *o, void *arg) {
    fixture *f = arg;
    f->body(o, f);
    return STRATA_OK;
}

/* Runs f->body as a run; returns the run's status (probes hold the calls'). */
static int run(fixture *f, void (*body)(strata_orch *, fixture *)) {
    f->body = body;
    f->pr.n = 0;
    return strata_worker_run(f->t.w, orch, f);
}

#define PROBE(f, expr) TS_PROBE(&(f)->pr, expr)

static const uint8_t payload40[40] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 200, 201, 255, 0, 42};

static void assert_recorded(const seen *s) {
    assert_int_equal(atomic_load(&s->calls), 1);
    assert_int_equal(s->ntensors, 2);
    assert_int_equal(s->tags[0], STRATA_IN);
    assert_int_equal(s->tags[1], STRATA_INOUT);
    assert_int_equal(s->nscalars, 4);
    assert_int_equal(s->types[0], STRATA_SCALAR_U64);
    assert_int_equal(s->types[1], STRATA_SCALAR_I64);
    assert_int_equal(s->types[2], STRATA_SCALAR_F64);
    assert_int_equal(s->types[3], STRATA_SCALAR_F32);
    assert_true(s->u64 == UINT64_MAX);
    assert_true(s->i64 == -5);
    assert_true(s->f64 == -2.5e300);
    assert_true(s->f32 == 1.25f);
    assert_int_equal(s->payload_bytes, sizeof payload40);
    assert_memory_equal(s->payload, payload40, sizeof payload40);
}

/* ---- every kind, both forms ---------------------------------------------- */

static void body_one_call_kinds(strata_orch *o, fixture *f) {
    strata_tensor a = elem(f, 0), b = elem(f, 1);
    PROBE(f, strata_orch_sub(o, f->record, STRATA_IN(a), STRATA_U64(UINT64_MAX), STRATA_I64(-5),
                             STRATA_F64(-2.5e300), STRATA_INOUT(b), STRATA_F32(1.25f),
                             STRATA_BYTES(payload40, sizeof payload40)));
}

static void every_kind_round_trips_in_the_one_call_form(void **state) {
    (void)state;
    fixture *f = make(1);
    assert_ok(run(f, body_one_call_kinds));
    assert_probe(&f->pr, 0, STRATA_OK, "");
    assert_recorded(f->s);
    destroy(f);
}

static void body_list_kinds(strata_orch *o, fixture *f) {
    strata_tensor a = elem(f, 0), b = elem(f, 1);
    strata_task_args args;
    strata_args_init(&args);
    PROBE(f, strata_args_add_tensor(&args, &a, STRATA_IN));
    PROBE(f, strata_args_add_u64(&args, UINT64_MAX));
    PROBE(f, strata_args_add_i64(&args, -5));
    PROBE(f, strata_args_add_f64(&args, -2.5e300));
    PROBE(f, strata_args_add_tensor(&args, &b, STRATA_INOUT));
    PROBE(f, strata_args_add_f32(&args, 1.25f));
    PROBE(f, strata_args_set_payload(&args, payload40, sizeof payload40));
    PROBE(f, strata_orch_submit_sub(o, f->record, &args)); /* 7 */
}

static void every_kind_round_trips_in_the_argument_list_form(void **state) {
    (void)state;
    fixture *f = make(1);
    assert_ok(run(f, body_list_kinds));
    for (int i = 0; i < 8; i++)
        assert_probe(&f->pr, i, STRATA_OK, "");
    assert_recorded(f->s);
    destroy(f);
}

/* ---- 64 tensors; 65 refused ------------------------------------------------ */

static void body_64_tensors(strata_orch *o, fixture *f) {
    strata_task_args args;
    strata_args_init(&args);
    strata_arg items[NT + 1];
    strata_tensor t[NT + 1];
    for (int i = 0; i < NT + 1; i++) {
        t[i] = elem(f, i);
        items[i] = STRATA_INOUT(t[i]);
    }
    for (int i = 0; i < NT; i++)
        strata_args_add_tensor(&args, &t[i], STRATA_INOUT);
    strata_args_add_i64(&args, 1);
    PROBE(f, strata_orch_submit_sub(o, f->bump, &args)); /* 0: +1 on 0..63 */
    items[NT] = STRATA_I64(2);
    PROBE(f, strata_orch_submit_sub_items(o, f->bump, items, NT + 1)); /* 1: +2 on 0..63 */
    strata_args_init(&args);
    PROBE(f, strata_args_add_items(&args, items, NT));             /* 2 */
    PROBE(f, strata_args_add_tensor(&args, &t[NT], STRATA_INOUT)); /* 3: the 65th */
    PROBE(f, strata_orch_submit_sub(o, f->bump, &args));           /* 4 */
    items[NT] = STRATA_INOUT(t[NT]);
    PROBE(f, strata_orch_submit_sub_items(o, f->bump, items, NT + 1)); /* 5: 65 items */
}

static void sixty_four_tensors_reach_a_body_and_the_sixty_fifth_is_refused(void **state) {
    (void)state;
    fixture *f = make(1);
    assert_ok(run(f, body_64_tensors));
    assert_probe(&f->pr, 0, STRATA_OK, "");
    assert_probe(&f->pr, 1, STRATA_OK, "");
    assert_probe(&f->pr, 2, STRATA_OK, "");
    assert_probe(&f->pr, 3, STRATA_ECAPACITY, "more than 64 tensor arguments");
    assert_probe(&f->pr, 4, STRATA_EINVAL, "invalid");
    assert_probe(&f->pr, 5, STRATA_ECAPACITY, "argument 64: more than 64 tensor arguments");
    assert_int_equal(atomic_load(&f->s->calls), 2);
    for (int i = 0; i < NT; i++)
        assert_int_equal(ints(f)[i], 3);
    assert_int_equal(ints(f)[NT], 0); /* the 65th was never touched */
    destroy(f);
}

/* ---- groups and next-level tasks in one call -------------------------------- */

static void body_group(strata_orch *o, fixture *f) {
    strata_tensor even[NT], odd[NT];
    strata_arg items[2 * NT + 3];
    size_t n = 0;
    for (int i = 0; i < NT; i++) { /* member 0: even elements, member 1: odd ones */
        even[i] = elem(f, 2 * i);
        items[n++] = STRATA_INOUT(even[i]);
    }
    items[n++] = STRATA_I64(10);
    items[n++] = STRATA_NEXT_MEMBER;
    for (int i = 0; i < NT; i++) {
        odd[i] = elem(f, 2 * i + 1);
        items[n++] = STRATA_INOUT(odd[i]);
    }
    items[n++] = STRATA_I64(7);
    PROBE(f, strata_orch_submit_sub_group_items(o, f->bump, items, n)); /* 0 */
    strata_tensor a = elem(f, 200), b = elem(f, 201);
    PROBE(f, strata_orch_sub_group(o, f->bump, STRATA_INOUT(a), STRATA_I64(1), STRATA_NEXT_MEMBER,
                                   STRATA_INOUT(b), STRATA_I64(2))); /* 1 */
    strata_tensor c = elem(f, 300);
    int ids[1] = {f->t.ep_id[0]};
    PROBE(f, strata_orch_next_level(o, f->t.nl, NULL, f->t.ep_id[0], STRATA_IN(c),
                                    STRATA_F64(0.5)));                           /* 2 */
    PROBE(f, strata_orch_next_level_group(o, f->t.nl, NULL, ids, STRATA_IN(c))); /* 3 */
}

static void group_members_get_their_own_items(void **state) {
    (void)state;
    fixture *f = make(2);
    assert_ok(run(f, body_group));
    for (int i = 0; i < 4; i++)
        assert_probe(&f->pr, i, STRATA_OK, "");
    for (int i = 0; i < NT; i++) {
        assert_int_equal(ints(f)[2 * i], 10);
        assert_int_equal(ints(f)[2 * i + 1], 7);
    }
    assert_int_equal(ints(f)[200], 1);
    assert_int_equal(ints(f)[201], 2);
    destroy(f);
}

/* ---- an OUT tensor without memory gets its view written back --------------- */

static void body_write_back(strata_orch *o, fixture *f) {
    strata_tensor r;
    memset(&r, 0, sizeof r);
    r.dtype = STRATA_I32;
    r.rank = 1;
    r.shape[0] = 1;
    PROBE(f, strata_orch_sub(o, f->bump, STRATA_OUT(r), STRATA_I64(0)));     /* 0 */
    PROBE(f, r.base != NULL && r.ident.id != 0 ? STRATA_OK : STRATA_EINVAL); /* 1 */
    PROBE(f, strata_orch_sub(o, f->bump, STRATA_INOUT(r), STRATA_I64(5)));   /* 2: names it */
}

static void an_out_tensor_without_memory_gets_its_runtime_view_back(void **state) {
    (void)state;
    fixture *f = make(1);
    assert_ok(run(f, body_write_back));
    for (int i = 0; i < 3; i++)
        assert_probe(&f->pr, i, STRATA_OK, "");
    assert_int_equal(atomic_load(&f->s->calls), 2);
    destroy(f);
}

/* ---- mistakes ---------------------------------------------------------------- */

static void body_misread(strata_orch *o, fixture *f) {
    PROBE(f, strata_orch_sub(o, f->misread, STRATA_I64(3)));
}

static void a_typed_read_of_another_type_fails_the_task_naming_the_position(void **state) {
    (void)state;
    fixture *f = make(1);
    st_clear_error();
    assert_status(STRATA_ETASK, run(f, body_misread));
    assert_message_mentions("strata_args_f64: scalar 0 is i64, not f64");
    destroy(f);
}

static void body_past_end(strata_orch *o, fixture *f) {
    PROBE(f, strata_orch_sub(o, f->past_end, STRATA_I64(3), STRATA_U64(4)));
}

static void a_typed_read_past_the_scalars_fails_the_task_naming_the_index(void **state) {
    (void)state;
    fixture *f = make(1);
    st_clear_error();
    assert_status(STRATA_ETASK, run(f, body_past_end));
    assert_message_mentions("strata_args_i64: scalar 3 does not exist: the task has 2");
    destroy(f);
}

static void body_orch_misread(strata_orch *o, fixture *f) {
    (void)o;
    strata_task_args a;
    strata_args_init(&a);
    strata_args_add_u64(&a, 1);
    strata_task_view v = strata_args_view(&a);
    PROBE(f, strata_args_i64(&v, 0) == 0 ? STRATA_OK : STRATA_EINVAL);
}

static void a_failed_typed_read_in_an_orchestration_function_fails_the_run(void **state) {
    (void)state;
    fixture *f = make(1);
    st_clear_error();
    assert_status(STRATA_EINVAL, run(f, body_orch_misread));
    assert_message_mentions("strata_args_i64: scalar 0 is u64, not i64");
    assert_probe(&f->pr, 0, STRATA_OK, "");
    destroy(f);
}

static void body_bad_items(strata_orch *o, fixture *f) {
    strata_tensor a = elem(f, 0);
    uint8_t big[STRATA_MAX_PAYLOAD + 1] = {0};
    strata_arg none = {0};                                                    /* kind 0 */
    strata_arg no_tensor = {.kind = STRATA_ARG_TENSOR, .tag = STRATA_IN};     /* NULL tensor */
    PROBE(f, strata_orch_sub(o, f->bump, STRATA_IN(a), STRATA_I64(1), none)); /* 0 */
    PROBE(f, strata_orch_sub(o, f->bump, STRATA_I64(1), no_tensor));          /* 1 */
    PROBE(f, strata_orch_sub(o, f->bump, STRATA_BYTES(big, sizeof big)));     /* 2 */
    PROBE(f, strata_orch_sub(o, f->bump, STRATA_BYTES(big, 1), STRATA_BYTES(big, 1))); /* 3 */
    PROBE(f, strata_orch_sub(o, f->bump, STRATA_I64(1), STRATA_NEXT_MEMBER));          /* 4 */
    strata_arg many[STRATA_MAX_SCALARS + 1];
    for (int i = 0; i <= STRATA_MAX_SCALARS; i++)
        many[i] = STRATA_U64(i);
    PROBE(f, strata_orch_submit_sub_items(o, f->bump, many, STRATA_MAX_SCALARS + 1)); /* 5 */
    strata_task_args args;
    strata_args_init(&args);
    PROBE(f, strata_args_set_payload(&args, big, sizeof big));   /* 6 */
    PROBE(f, strata_orch_submit_sub(o, f->bump, &args));         /* 7 */
    PROBE(f, strata_orch_submit_sub_items(o, f->bump, NULL, 1)); /* 8 */
    strata_arg tag9 = STRATA_IN(a);
    tag9.tag = 9;
    PROBE(f, strata_orch_sub(o, f->bump, tag9)); /* 9 */
}

static void items_c_cannot_check_fail_the_submit_naming_their_position(void **state) {
    (void)state;
    fixture *f = make(1);
    assert_ok(run(f, body_bad_items));
    assert_probe(&f->pr, 0, STRATA_EINVAL, "argument 2: kind 0 is not an argument");
    assert_probe(&f->pr, 1, STRATA_EINVAL, "argument 1: a tensor item without a tensor");
    assert_probe(&f->pr, 2, STRATA_ECAPACITY, "argument 0: a payload of 257 bytes");
    assert_probe(&f->pr, 3, STRATA_EINVAL, "argument 1: a second payload");
    assert_probe(&f->pr, 4, STRATA_EINVAL, "argument 1: a member break");
    assert_probe(&f->pr, 5, STRATA_ECAPACITY, "argument 16: more than 16 scalar arguments");
    assert_probe(&f->pr, 6, STRATA_ECAPACITY, "257 bytes");
    assert_probe(&f->pr, 7, STRATA_EINVAL, "invalid");
    assert_probe(&f->pr, 8, STRATA_EINVAL, "items is NULL");
    assert_probe(&f->pr, 9, STRATA_EINVAL, "argument 0: unknown tag 9");
    assert_int_equal(atomic_load(&f->s->calls), 0);
    destroy(f);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(every_kind_round_trips_in_the_one_call_form),
        cmocka_unit_test(every_kind_round_trips_in_the_argument_list_form),
        cmocka_unit_test(sixty_four_tensors_reach_a_body_and_the_sixty_fifth_is_refused),
        cmocka_unit_test(group_members_get_their_own_items),
        cmocka_unit_test(an_out_tensor_without_memory_gets_its_runtime_view_back),
        cmocka_unit_test(a_typed_read_of_another_type_fails_the_task_naming_the_position),
        cmocka_unit_test(a_typed_read_past_the_scalars_fails_the_task_naming_the_index),
        cmocka_unit_test(a_failed_typed_read_in_an_orchestration_function_fails_the_run),
        cmocka_unit_test(items_c_cannot_check_fail_the_submit_naming_their_position),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
