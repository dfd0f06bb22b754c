// label: concurrency
/* tests/unit/test_orchestrator.c - every call an orchestration function makes
 * (strata_orch_submit_sub / _sub_group / _next_level / _next_level_group,
 * strata_orch_alloc, strata_orch_scope_begin / _end, strata_orch_run_id),
 * through the public API: argument checks and state rules.
 *
 * Owns: the documented status and message key words of each call for NULL
 * arguments, use outside the function or from another thread, unknown or
 * wrong-kind callables, bad targets and group sizes, call config flags,
 * hand-written tensors and argument lists (rank, dtype, shape, strides,
 * extent, tag, never initialised, marked invalid), overlapping arguments,
 * device memory and buffer identity, runtime memory larger than a ring, the
 * view strata_orch_alloc returns, and fail-fast once the run failed; a
 * refused call leaves the run untouched. Scope nesting and heap reclamation
 * are test_scope.c's.
 * Must never: assert on timing, or run cmocka assertions inside an
 * orchestration function (a failed assertion would longjmp out of the engine;
 * checks made there are recorded as probes and asserted afterwards).
 */
#include "test_support.h"

#include "core/heap_ring.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "test_endpoint.h"
#include "util/clock.h"
#include "util/error.h"

#define SEC TS_SEC
#define BUF_BYTES 4096
#define DOCUMENTED_MAX_CALLABLES 1024 /* docs/api.md, strata_worker_register_sub */

typedef struct fixture fixture;
typedef void (*orch_body)(strata_orch *o, fixture *f);

/* The worker (its "count" task is the no-op whose runs are counted, "gate"
 * holds a sub worker, "nl" goes to the test endpoints) with one BUF_BYTES
 * buffer, the body run inside an orchestration function and what it probed. */
struct fixture {
    ts_worker t;
    orch_body body;
    strata_orch *stash;
    ts_probes pr;
    ts_probes other;         /* probed by a thread other than the function's */
    strata_tensor allocs[2]; /* what strata_orch_alloc returned */
};

/* ---- fixture ---------------------------------------------------------------- */

static fixture *make_ring(uint32_t subs, int nnext, uint64_t heap_ring_bytes) {
    fixture *f = calloc(1, sizeof *f);
    assert_non_null(f);
    ts_worker_opts o;
    ts_worker_opts_init(&o);
    o.cfg.sub_workers = subs;
    if (heap_ring_bytes)
        o.cfg.heap_ring_bytes = heap_ring_bytes;
    o.endpoints = nnext;
    o.buffers[0] = BUF_BYTES;
    ts_worker_open(&f->t, &o);
    return f;
}

static fixture *make_with(uint32_t subs, int nnext) {
    return make_ring(subs, nnext, 0);
}

static fixture *make(void) {
    return make_with(2, 2);
}

static void destroy(fixture *f) {
    ts_worker_close(&f->t);
    free(f);
}

/* View of the buffer: `n` I32 elements from element `first`, element stride `stride`. */
static strata_tensor i32_view(fixture *f, int64_t first, int64_t n, int64_t stride) {
    return ts_i32(f->t.buf[0], first, n, stride);
}

/* ---- probes: calls made inside an orchestration function ---------------------- */

#define PROBE(f, expr) TS_PROBE(&(f)->pr, expr)

static void record(fixture *f, int rc) {
    ts_probe_record(&f->pr, rc);
}

static int orch_run_body(strata_orch *o, void *arg) {
    fixture *f = arg;
    f->stash = o;
    f->body(o, f);
    return STRATA_OK;
}

/* Run one orchestration function executing `body`; the run ends with `status`. */
static void run_body_ending(fixture *f, orch_body body, int status) {
    f->body = body;
    f->pr.n = 0;
    assert_status(status, strata_worker_run(f->t.w, orch_run_body, f));
    assert_true(f->pr.n < TS_MAX_PROBES);
}

/* The same for a run that must succeed: the calls refused in it left it untouched. */
static void run_body(fixture *f, orch_body body) {
    run_body_ending(f, body, STRATA_OK);
}

/* ==== NULL arguments ======================================================== */

static void body_null_orch_arguments(strata_orch *o, fixture *f) {
    strata_task_args a;
    strata_args_init(&a);
    strata_tensor t;
    int64_t n = 4;
    int ids[2] = {f->t.ep_id[0], f->t.ep_id[1]};
    strata_task_args ga[2];
    strata_args_init(&ga[0]);
    strata_args_init(&ga[1]);
    PROBE(f, strata_orch_submit_sub(NULL, f->t.count, &a));                          /* 0 */
    PROBE(f, strata_orch_submit_sub(o, f->t.count, NULL));                           /* 1 */
    PROBE(f, strata_orch_submit_next_level(NULL, f->t.nl, &a, NULL, f->t.ep_id[0])); /* 2 */
    PROBE(f, strata_orch_submit_next_level(o, f->t.nl, NULL, NULL, f->t.ep_id[0]));  /* 3 */
    PROBE(f, strata_orch_submit_sub_group(NULL, f->t.count, ga, 2));                 /* 4 */
    PROBE(f, strata_orch_submit_sub_group(o, f->t.count, NULL, 2));                  /* 5 */
    PROBE(f, strata_orch_submit_next_level_group(NULL, f->t.nl, ga, NULL, ids, 2));  /* 6 */
    PROBE(f, strata_orch_submit_next_level_group(o, f->t.nl, NULL, NULL, ids, 2));   /* 7 */
    PROBE(f, strata_orch_submit_next_level_group(o, f->t.nl, ga, NULL, NULL, 2));    /* 8 */
    PROBE(f, strata_orch_alloc(NULL, 1, &n, STRATA_I32, &t));                        /* 9 */
    PROBE(f, strata_orch_alloc(o, 1, NULL, STRATA_I32, &t));                         /* 10 */
    PROBE(f, strata_orch_alloc(o, 1, &n, STRATA_I32, NULL));                         /* 11 */
    PROBE(f, strata_orch_scope_begin(NULL));                                         /* 12 */
    PROBE(f, strata_orch_scope_end(NULL));                                           /* 13 */
    PROBE(f, strata_orch_run_id(NULL) == 0 ? STRATA_OK : STRATA_EINVAL);             /* 14 */
    PROBE(f, strata_orch_submit_sub(o, f->t.count, &a)); /* 15: control */
}

static void null_arguments_inside_orchestration_are_einval(void **state) {
    (void)state;
    fixture *f = make();
    run_body(f, body_null_orch_arguments);
    for (int i = 0; i <= 13; i++)
        assert_probe(&f->pr, i, STRATA_EINVAL, "NULL");
    assert_probe(&f->pr, 14, STRATA_OK, "");
    assert_probe(&f->pr, 15, STRATA_OK, "");
    assert_int_equal(atomic_load(&f->t.counter), 1); /* only the control task ran */
    destroy(f);
}

/* ==== state rules ============================================================ */

static void body_stash_only(strata_orch *o, fixture *f) {
    (void)o;
    (void)f;
}

static void orch_pointer_used_after_function_returned_is_estate(void **state) {
    (void)state;
    fixture *f = make();
    run_body(f, body_stash_only);
    strata_orch *o = f->stash;
    assert_non_null(o);
    strata_task_args a;
    strata_args_init(&a);
    strata_tensor t;
    int64_t n = 4;
    int ids[1] = {f->t.ep_id[0]};
    assert_fails(STRATA_ESTATE, "outside an orchestration function",
                 strata_orch_submit_sub(o, f->t.count, &a));
    assert_fails(STRATA_ESTATE, "outside an orchestration function",
                 strata_orch_submit_next_level(o, f->t.nl, &a, NULL, f->t.ep_id[0]));
    assert_fails(STRATA_ESTATE, "outside an orchestration function",
                 strata_orch_submit_sub_group(o, f->t.count, &a, 1));
    assert_fails(STRATA_ESTATE, "outside an orchestration function",
                 strata_orch_submit_next_level_group(o, f->t.nl, &a, NULL, ids, 1));
    /* The state is checked before the arguments, NULL worker ids included. */
    assert_fails(STRATA_ESTATE, "outside an orchestration function",
                 strata_orch_submit_next_level_group(o, f->t.nl, &a, NULL, NULL, 1));
    assert_fails(STRATA_ESTATE, "outside an orchestration function",
                 strata_orch_alloc(o, 1, &n, STRATA_I32, &t));
    assert_fails(STRATA_ESTATE, "outside an orchestration function", strata_orch_scope_begin(o));
    assert_fails(STRATA_ESTATE, "outside an orchestration function", strata_orch_scope_end(o));
    assert_int_equal(strata_orch_run_id(o), 0);
    assert_int_equal(atomic_load(&f->t.counter), 0);
    destroy(f);
}

typedef struct other_thread {
    strata_orch *o;
    fixture *f;
    int rc;
    char msg[STRATA_ERRMSG_MAX];
} other_thread;

static void *submit_from_other_thread(void *arg) {
    other_thread *ot = arg;
    strata_task_args a;
    strata_args_init(&a);
    ot->rc = strata_orch_submit_sub(ot->o, ot->f->t.count, &a);
    snprintf(ot->msg, sizeof ot->msg, "%s", strata_error_message());
    return NULL;
}

static void body_submit_from_other_thread(strata_orch *o, fixture *f) {
    other_thread ot = {.o = o, .f = f};
    pthread_t t;
    if (pthread_create(&t, NULL, submit_from_other_thread, &ot) != 0) {
        record(f, -999);
        return;
    }
    pthread_join(t, NULL);
    st_fail_msg(ot.rc, ot.msg);
    record(f, ot.rc);
}

static void submit_from_another_thread_during_orchestration_is_estate(void **state) {
    (void)state;
    fixture *f = make();
    run_body(f, body_submit_from_other_thread);
    assert_probe(&f->pr, 0, STRATA_ESTATE, "thread");
    assert_int_equal(atomic_load(&f->t.counter), 0);
    destroy(f);
}

/* Every call but strata_orch_submit_sub (above), made from a second thread
 * while the function runs: refused, and none of them takes effect. */
static void *every_call_from_this_thread(void *arg) {
    fixture *f = arg;
    strata_orch *o = f->stash;
    strata_task_args a[2];
    strata_args_init(&a[0]);
    strata_args_init(&a[1]);
    int ids[2] = {f->t.ep_id[0], f->t.ep_id[1]};
    strata_tensor t;
    int64_t n = 4;
    TS_PROBE(&f->other, strata_orch_submit_next_level(o, f->t.nl, &a[0], NULL, ids[0]));   /* 0 */
    TS_PROBE(&f->other, strata_orch_submit_sub_group(o, f->t.count, a, 2));                /* 1 */
    TS_PROBE(&f->other, strata_orch_submit_next_level_group(o, f->t.nl, a, NULL, ids, 2)); /* 2 */
    TS_PROBE(&f->other, strata_orch_alloc(o, 1, &n, STRATA_I32, &t));                      /* 3 */
    TS_PROBE(&f->other, strata_orch_scope_begin(o));                                       /* 4 */
    TS_PROBE(&f->other, strata_orch_scope_end(o));                                         /* 5 */
    return NULL;
}

static void body_every_call_from_another_thread(strata_orch *o, fixture *f) {
    PROBE(f, strata_orch_scope_begin(o)); /* 0: a scope the other thread must not end */
    pthread_t t;
    if (pthread_create(&t, NULL, every_call_from_this_thread, f) != 0) {
        record(f, -999);
        return;
    }
    pthread_join(t, NULL);
    PROBE(f, strata_orch_scope_end(o)); /* 1: still open: ends here */
    PROBE(f, strata_orch_scope_end(o)); /* 2: the other thread opened none */
}

static void every_orch_call_from_another_thread_is_estate(void **state) {
    (void)state;
    fixture *f = make();
    run_body(f, body_every_call_from_another_thread);
    for (int i = 0; i < 6; i++)
        assert_probe(&f->other, i, STRATA_ESTATE, "thread other than");
    assert_probe(&f->pr, 0, STRATA_OK, "");
    assert_probe(&f->pr, 1, STRATA_OK, "");
    assert_probe(&f->pr, 2, STRATA_ESTATE, "no scope is open");
    assert_int_equal(atomic_load(&f->t.counter), 0);
    assert_int_equal(st_test_ep_count(f->t.ep[0]), 0);
    assert_int_equal(st_test_ep_count(f->t.ep[1]), 0);
    destroy(f);
}

static void body_fail_then_every_call(strata_orch *o, fixture *f) {
    strata_task_args a;
    strata_args_init(&a);
    strata_args_add_scalar(&a, 42);
    PROBE(f, strata_orch_submit_sub(o, f->t.fail, &a)); /* 0 */
    /* The failure is recorded once the task ran: submit until a submit fails fast. */
    uint64_t give_up = st_deadline_after(10 * SEC);
    int rc = STRATA_OK;
    while (rc == STRATA_OK && st_now_ns() < give_up) {
        strata_args_init(&a);
        rc = strata_orch_submit_sub(o, f->t.noop, &a);
        if (rc == STRATA_OK)
            nanosleep(&(struct timespec){0, 100000}, NULL);
    }
    record(f, rc); /* 1 */
    strata_task_args g[2];
    strata_args_init(&g[0]);
    strata_args_init(&g[1]);
    int ids[2] = {f->t.ep_id[0], f->t.ep_id[1]};
    int64_t n = 4;
    strata_tensor t;
    PROBE(f, strata_orch_submit_next_level(o, f->t.nl, &g[0], NULL, ids[0]));   /* 2 */
    PROBE(f, strata_orch_submit_sub_group(o, f->t.count, g, 2));                /* 3 */
    PROBE(f, strata_orch_submit_next_level_group(o, f->t.nl, g, NULL, ids, 2)); /* 4 */
    PROBE(f, strata_orch_alloc(o, 1, &n, STRATA_I32, &t));                      /* 5 */
}

static void once_the_run_failed_every_submit_and_alloc_fails_fast(void **state) {
    (void)state;
    fixture *f = make();
    run_body_ending(f, body_fail_then_every_call, STRATA_ETASK);
    assert_probe(&f->pr, 0, STRATA_OK, "");
    for (int i = 1; i <= 5; i++)
        assert_probe(&f->pr, i, STRATA_ETASK, "boom 42"); /* the run's status and message */
    assert_int_equal(atomic_load(&f->t.counter), 0);
    assert_int_equal(st_test_ep_count(f->t.ep[0]), 0);
    assert_int_equal(st_test_ep_count(f->t.ep[1]), 0);
    destroy(f);
}

/* ==== callables and targets =================================================== */

static void body_unknown_callable(strata_orch *o, fixture *f) {
    strata_task_args a[2];
    strata_args_init(&a[0]);
    strata_args_init(&a[1]);
    int ids[2] = {f->t.ep_id[0], f->t.ep_id[1]};
    PROBE(f, strata_orch_submit_sub(o, 999, &a[0]));
    PROBE(f, strata_orch_submit_sub(o, -1, &a[0]));
    PROBE(f, strata_orch_submit_next_level(o, 999, &a[0], NULL, f->t.ep_id[0]));
    PROBE(f, strata_orch_submit_sub_group(o, DOCUMENTED_MAX_CALLABLES, a, 2));
    PROBE(f, strata_orch_submit_next_level_group(o, -7, a, NULL, ids, 2));
}

static void unknown_callable_id_is_einval(void **state) {
    (void)state;
    fixture *f = make();
    run_body(f, body_unknown_callable);
    for (int i = 0; i < 5; i++)
        assert_probe(&f->pr, i, STRATA_EINVAL, "unknown callable");
    assert_int_equal(atomic_load(&f->t.counter), 0);
    destroy(f);
}

static void body_wrong_kind(strata_orch *o, fixture *f) {
    strata_task_args a[2];
    strata_args_init(&a[0]);
    strata_args_init(&a[1]);
    int ids[2] = {f->t.ep_id[0], f->t.ep_id[1]};
    PROBE(f, strata_orch_submit_next_level(o, f->t.count, &a[0], NULL, f->t.ep_id[0])); /* 0 */
    PROBE(f, strata_orch_submit_next_level_group(o, f->t.count, a, NULL, ids, 2));      /* 1 */
    PROBE(f, strata_orch_submit_sub(o, f->t.nl, &a[0]));                                /* 2 */
    PROBE(f, strata_orch_submit_sub_group(o, f->t.nl, a, 2));                           /* 3 */
    PROBE(f,
          strata_orch_submit_next_level(o, f->t.nl, &a[0], NULL, f->t.ep_id[0])); /* 4: control */
    PROBE(f, strata_orch_submit_sub(o, f->t.count, &a[0]));                       /* 5: control */
}

static void callable_of_the_wrong_kind_is_einval(void **state) {
    (void)state;
    fixture *f = make();
    run_body(f, body_wrong_kind);
    assert_probe(&f->pr, 0, STRATA_EINVAL, "sub callable");
    assert_probe(&f->pr, 1, STRATA_EINVAL, "sub callable");
    assert_probe(&f->pr, 2, STRATA_EINVAL, "next-level callable");
    assert_probe(&f->pr, 3, STRATA_EINVAL, "next-level callable");
    assert_probe(&f->pr, 4, STRATA_OK, "");
    assert_probe(&f->pr, 5, STRATA_OK, "");
    assert_int_equal(atomic_load(&f->t.counter), 1);
    assert_int_equal(st_test_ep_count(f->t.ep[0]), 1);
    assert_int_equal(st_test_ep_count(f->t.ep[1]), 0);
    destroy(f);
}

static void body_unknown_worker(strata_orch *o, fixture *f) {
    strata_task_args a[2];
    strata_args_init(&a[0]);
    strata_args_init(&a[1]);
    int bad[2] = {f->t.ep_id[0], 2};
    int neg[2] = {-1, f->t.ep_id[0]};
    PROBE(f, strata_orch_submit_next_level(o, f->t.nl, &a[0], NULL, 2));
    PROBE(f, strata_orch_submit_next_level(o, f->t.nl, &a[0], NULL, -1));
    PROBE(f, strata_orch_submit_next_level(o, f->t.nl, &a[0], NULL, STRATA_MAX_NEXT_LEVEL));
    PROBE(f, strata_orch_submit_next_level_group(o, f->t.nl, a, NULL, bad, 2));
    PROBE(f, strata_orch_submit_next_level_group(o, f->t.nl, a, NULL, neg, 2));
}

static void unknown_next_level_worker_id_is_einval(void **state) {
    (void)state;
    fixture *f = make();
    assert_int_equal(strata_worker_next_level_count(f->t.w), 2);
    run_body(f, body_unknown_worker);
    for (int i = 0; i < 5; i++)
        assert_probe(&f->pr, i, STRATA_EINVAL, "no next-level worker");
    assert_int_equal(st_test_ep_count(f->t.ep[0]), 0);
    assert_int_equal(st_test_ep_count(f->t.ep[1]), 0);
    destroy(f);
}

static void body_next_level_without_children(strata_orch *o, fixture *f) {
    strata_task_args a;
    strata_args_init(&a);
    PROBE(f, strata_orch_submit_next_level(o, f->t.nl, &a, NULL, 0));
}

static void next_level_task_on_worker_without_children_is_einval(void **state) {
    (void)state;
    fixture *f = make_with(2, 0);
    assert_int_equal(strata_worker_next_level_count(f->t.w), 0);
    run_body(f, body_next_level_without_children);
    assert_probe(&f->pr, 0, STRATA_EINVAL, "no next-level worker");
    destroy(f);
}

static void body_sub_without_sub_workers(strata_orch *o, fixture *f) {
    strata_task_args a;
    strata_args_init(&a);
    PROBE(f, strata_orch_submit_sub(o, f->t.count, &a));
}

static void sub_task_on_worker_without_sub_workers_is_einval(void **state) {
    (void)state;
    fixture *f = make_with(0, 1);
    run_body(f, body_sub_without_sub_workers);
    assert_probe(&f->pr, 0, STRATA_EINVAL, "sub workers");
    destroy(f);
}

static void body_duplicate_target(strata_orch *o, fixture *f) {
    strata_task_args a[2];
    strata_args_init(&a[0]);
    strata_args_init(&a[1]);
    int dup[2] = {f->t.ep_id[1], f->t.ep_id[1]};
    int ok[2] = {f->t.ep_id[1], f->t.ep_id[0]};
    PROBE(f, strata_orch_submit_next_level_group(o, f->t.nl, a, NULL, dup, 2));
    PROBE(f, strata_orch_submit_next_level_group(o, f->t.nl, a, NULL, ok, 2)); /* control */
}

static void duplicate_group_target_is_einval(void **state) {
    (void)state;
    fixture *f = make();
    run_body(f, body_duplicate_target);
    assert_probe(&f->pr, 0, STRATA_EINVAL, "twice");
    assert_probe(&f->pr, 1, STRATA_OK, "");
    assert_int_equal(st_test_ep_count(f->t.ep[0]), 1);
    assert_int_equal(st_test_ep_count(f->t.ep[1]), 1);
    destroy(f);
}

static void body_group_sizes(strata_orch *o, fixture *f) {
    strata_task_args *a = calloc(STRATA_MAX_GROUP + 1, sizeof *a);
    int ids[STRATA_MAX_GROUP + 1];
    if (!a) {
        record(f, -999);
        return;
    }
    for (int i = 0; i <= STRATA_MAX_GROUP; i++) {
        strata_args_init(&a[i]);
        ids[i] = i;
    }
    PROBE(f, strata_orch_submit_sub_group(o, f->t.count, a, 0));                    /* 0 */
    PROBE(f, strata_orch_submit_sub_group(o, f->t.count, a, -1));                   /* 1 */
    PROBE(f, strata_orch_submit_sub_group(o, f->t.count, a, STRATA_MAX_GROUP + 1)); /* 2 */
    PROBE(f, strata_orch_submit_sub_group(o, f->t.count, a, 3));                    /* 3 */
    PROBE(f, strata_orch_submit_next_level_group(o, f->t.nl, a, NULL, ids, 0));     /* 4 */
    PROBE(f, strata_orch_submit_next_level_group(o, f->t.nl, a, NULL, ids,
                                                 STRATA_MAX_GROUP + 1));        /* 5 */
    PROBE(f, strata_orch_submit_next_level_group(o, f->t.nl, a, NULL, ids, 3)); /* 6 */
    PROBE(f, strata_orch_submit_sub_group(o, f->t.count, a, 2));                /* 7 */
    free(a);
}

static void group_size_out_of_range_is_einval(void **state) {
    (void)state;
    fixture *f = make(); /* 2 sub workers, 2 next-level workers */
    run_body(f, body_group_sizes);
    assert_probe(&f->pr, 0, STRATA_EINVAL, "members");
    assert_probe(&f->pr, 1, STRATA_EINVAL, "members");
    assert_probe(&f->pr, 2, STRATA_EINVAL, "members");
    assert_probe(&f->pr, 3, STRATA_EINVAL, "sub workers");
    assert_probe(&f->pr, 4, STRATA_EINVAL, "members");
    assert_probe(&f->pr, 5, STRATA_EINVAL, "members");
    assert_probe(&f->pr, 6, STRATA_EINVAL, "no next-level worker");
    assert_probe(&f->pr, 7, STRATA_OK, "");
    assert_int_equal(atomic_load(&f->t.counter), 2); /* only the control group ran */
    destroy(f);
}

static void body_call_config_flags(strata_orch *o, fixture *f) {
    strata_task_args a;
    strata_args_init(&a);
    strata_call_config cc = {.block_dim = 0, .flags = 0x2};
    PROBE(f, strata_orch_submit_next_level(o, f->t.nl, &a, &cc, f->t.ep_id[0]));
    cc.flags = 0;
    PROBE(f, strata_orch_submit_next_level(o, f->t.nl, &a, &cc, f->t.ep_id[0]));
    cc.flags = STRATA_CALL_DIAGNOSTICS;
    PROBE(f, strata_orch_submit_next_level(o, f->t.nl, &a, &cc, f->t.ep_id[0]));
}

static void unknown_call_config_flags_are_einval(void **state) {
    (void)state;
    fixture *f = make();
    run_body(f, body_call_config_flags);
    assert_probe(&f->pr, 0, STRATA_EINVAL, "flags");
    assert_probe(&f->pr, 1, STRATA_OK, "");
    assert_probe(&f->pr, 2, STRATA_OK, "");
    destroy(f);
}

/* ==== tensors ================================================================ */

/* Submit one noop task with `t` under `tag`; record the result. */
static void probe_submit_tensor(strata_orch *o, fixture *f, const strata_tensor *t,
                                strata_tag tag) {
    strata_task_args a;
    strata_args_init(&a);
    int rc = strata_args_add_tensor(&a, t, tag);
    if (rc != STRATA_OK) {
        record(f, rc);
        return;
    }
    PROBE(f, strata_orch_submit_sub(o, f->t.count, &a));
}

static void body_hand_modified_tensors(strata_orch *o, fixture *f) {
    strata_tensor good = i32_view(f, 0, 16, 1), t;
    t = good;
    t.rank = 0;
    probe_submit_tensor(o, f, &t, STRATA_IN); /* 0 */
    t = good;
    t.rank = 6;
    probe_submit_tensor(o, f, &t, STRATA_IN); /* 1 */
    t = good;
    t.shape[0] = 0;
    probe_submit_tensor(o, f, &t, STRATA_IN); /* 2 */
    t = good;
    t.shape[0] = -5;
    probe_submit_tensor(o, f, &t, STRATA_OUT); /* 3 */
    t = good;
    t.strides[0] = 0;
    probe_submit_tensor(o, f, &t, STRATA_IN); /* 4 */
    t = good;
    t.strides[0] = -1;
    probe_submit_tensor(o, f, &t, STRATA_INOUT); /* 5 */
    t = good;
    t.shape[0] = BUF_BYTES / 4 + 1;           /* one element past the end */
    probe_submit_tensor(o, f, &t, STRATA_IN); /* 6 */
    t = good;
    t.offset = BUF_BYTES - 8; /* 16 elements from 8 bytes before the end */
    probe_submit_tensor(o, f, &t, STRATA_OUT_EXISTING); /* 7 */
    t = good;
    t.strides[0] = BUF_BYTES;                 /* steps far past the end */
    probe_submit_tensor(o, f, &t, STRATA_IN); /* 8 */
    t = good;
    t.dtype = STRATA_DTYPE_COUNT;
    probe_submit_tensor(o, f, &t, STRATA_IN); /* 9 */
    t = good;
    t.base = NULL;                                  /* only OUT may come without memory */
    probe_submit_tensor(o, f, &t, STRATA_IN);       /* 10 */
    probe_submit_tensor(o, f, &good, STRATA_INOUT); /* 11: control */
}

static void hand_modified_tensor_is_rejected_at_submit(void **state) {
    (void)state;
    fixture *f = make();
    run_body(f, body_hand_modified_tensors);
    assert_probe(&f->pr, 0, STRATA_EINVAL, "rank");
    assert_probe(&f->pr, 1, STRATA_EINVAL, "rank");
    assert_probe(&f->pr, 2, STRATA_EINVAL, "dimension");
    assert_probe(&f->pr, 3, STRATA_EINVAL, "dimension");
    assert_probe(&f->pr, 4, STRATA_EINVAL, "stride");
    assert_probe(&f->pr, 5, STRATA_EINVAL, "stride");
    assert_probe(&f->pr, 6, STRATA_EINVAL, "outside its buffer");
    assert_probe(&f->pr, 7, STRATA_EINVAL, "outside its buffer");
    assert_probe(&f->pr, 8, STRATA_EINVAL, "outside its buffer");
    assert_probe(&f->pr, 9, STRATA_EINVAL, "dtype");
    assert_probe(&f->pr, 10, STRATA_EINVAL, "no buffer");
    assert_probe(&f->pr, 11, STRATA_OK, "");
    assert_int_equal(atomic_load(&f->t.counter), 1); /* only the control task ran */
    destroy(f);
}

static void body_overflowing_extent(strata_orch *o, fixture *f) {
    /* The last element sits at (2^63-1) + (2^63-1) + 3 = 2^64 + 1 bytes: the
     * extent wraps around 2^64 to a tiny number, yet the view reaches far
     * past its 4 KiB buffer. (The task never touches the data.) */
    strata_tensor t = i32_view(f, 0, 1, 1);
    t.dtype = STRATA_U8;
    t.rank = 3;
    t.shape[0] = 2;
    t.shape[1] = 2;
    t.shape[2] = 4;
    t.strides[0] = INT64_MAX;
    t.strides[1] = INT64_MAX;
    t.strides[2] = 1;
    probe_submit_tensor(o, f, &t, STRATA_IN);
    t.offset = UINT64_MAX - 2; /* offset + extent wraps */
    t.rank = 1;
    t.shape[0] = 4;
    t.strides[0] = 1;
    probe_submit_tensor(o, f, &t, STRATA_IN);
}

static void hand_modified_tensor_whose_extent_overflows_is_rejected(void **state) {
    (void)state;
    fixture *f = make();
    run_body(f, body_overflowing_extent);
    assert_probe(&f->pr, 0, STRATA_EINVAL, "outside its buffer");
    assert_probe(&f->pr, 1, STRATA_EINVAL, "outside its buffer");
    assert_int_equal(atomic_load(&f->t.counter), 0);
    destroy(f);
}

static void body_alloc_bad_shapes(strata_orch *o, fixture *f) {
    strata_tensor t;
    int64_t shape[6] = {4, 4, 4, 4, 4, 4};
    int64_t zero[2] = {4, 0}, neg[1] = {-1};
    PROBE(f, strata_orch_alloc(o, 0, shape, STRATA_F32, &t));         /* 0 */
    PROBE(f, strata_orch_alloc(o, 6, shape, STRATA_F32, &t));         /* 1 */
    PROBE(f, strata_orch_alloc(o, 2, zero, STRATA_F32, &t));          /* 2 */
    PROBE(f, strata_orch_alloc(o, 1, neg, STRATA_F32, &t));           /* 3 */
    PROBE(f, strata_orch_alloc(o, 1, shape, STRATA_DTYPE_COUNT, &t)); /* 4 */
    PROBE(f, strata_orch_alloc(o, 2, shape, STRATA_F32, &t));         /* 5: control */
}

static void orch_alloc_with_bad_shape_is_einval(void **state) {
    (void)state;
    fixture *f = make();
    run_body(f, body_alloc_bad_shapes);
    assert_probe(&f->pr, 0, STRATA_EINVAL, "rank");
    assert_probe(&f->pr, 1, STRATA_EINVAL, "rank");
    assert_probe(&f->pr, 2, STRATA_EINVAL, "dimension");
    assert_probe(&f->pr, 3, STRATA_EINVAL, "dimension");
    assert_probe(&f->pr, 4, STRATA_EINVAL, "dtype");
    assert_probe(&f->pr, 5, STRATA_OK, "");
    destroy(f);
}

static void body_hand_written_args(strata_orch *o, fixture *f) {
    strata_tensor good = i32_view(f, 0, 16, 1);
    strata_task_args a;
    strata_args_init(&a);
    strata_args_add_tensor(&a, &good, STRATA_IN);
    a.tags[0] = STRATA_NO_DEP + 1; /* a tag written past strata_args_add_tensor */
    PROBE(f, strata_orch_submit_sub(o, f->t.count, &a)); /* 0 */
    a.tags[0] = 200;
    PROBE(f, strata_orch_submit_next_level(o, f->t.nl, &a, NULL, f->t.ep_id[0])); /* 1 */
    strata_task_args junk;
    memset(&junk, 0x7f, sizeof junk); /* never initialised */
    junk.invalid = 0;
    PROBE(f, strata_orch_submit_sub(o, f->t.count, &junk)); /* 2 */
    strata_args_init(&a);
    a.nscalars = STRATA_MAX_SCALARS + 1;
    PROBE(f, strata_orch_submit_sub(o, f->t.count, &a)); /* 3 */
    strata_args_init(&a);
    PROBE(f, strata_orch_submit_sub(o, f->t.count, &a)); /* 4: control */
}

static void hand_written_tags_and_uninitialised_args_are_einval(void **state) {
    (void)state;
    fixture *f = make();
    run_body(f, body_hand_written_args);
    assert_probe(&f->pr, 0, STRATA_EINVAL, "unknown tag");
    assert_probe(&f->pr, 1, STRATA_EINVAL, "unknown tag");
    assert_probe(&f->pr, 2, STRATA_EINVAL, "not initialised");
    assert_probe(&f->pr, 3, STRATA_EINVAL, "not initialised");
    assert_probe(&f->pr, 4, STRATA_OK, "");
    assert_int_equal(atomic_load(&f->t.counter), 1); /* only the control task ran */
    assert_int_equal(st_test_ep_count(f->t.ep[0]), 0);
    destroy(f);
}

/* A one-tensor args of `t` under `tag`. */
static strata_task_args one_tensor(const strata_tensor *t, strata_tag tag) {
    strata_task_args a;
    strata_args_init(&a);
    strata_args_add_tensor(&a, t, tag);
    return a;
}

static void body_device_memory_and_identity(strata_orch *o, fixture *f) {
    /* a host view marked as device memory of next-level worker 0 (no task touches it) */
    strata_tensor dev0 = i32_view(f, 0, 16, 1);
    dev0.mem = STRATA_MEM_DEVICE;
    dev0.ident.owner = f->t.ep_id[0];
    strata_task_args a = one_tensor(&dev0, STRATA_IN);
    PROBE(f, strata_orch_submit_sub(o, f->t.count, &a));                          /* 0 */
    PROBE(f, strata_orch_submit_next_level(o, f->t.nl, &a, NULL, f->t.ep_id[1])); /* 1 */
    PROBE(f, strata_orch_submit_next_level(o, f->t.nl, &a, NULL, f->t.ep_id[0])); /* 2 */
    strata_task_args g[2];
    strata_args_init(&g[0]);
    g[1] = a;
    int ids[2] = {f->t.ep_id[0], f->t.ep_id[1]};
    PROBE(f, strata_orch_submit_next_level_group(o, f->t.nl, g, NULL, ids, 2)); /* 3 */
    /* an L2 tensor: memory but no buffer identity */
    strata_tensor l2;
    int64_t n = 16;
    if (strata_chip_tensor(strata_buffer_data(f->t.buf[0]), BUF_BYTES, STRATA_I32, 1, &n, &l2) !=
        STRATA_OK) {
        record(f, -999);
        return;
    }
    a = one_tensor(&l2, STRATA_IN);
    PROBE(f, strata_orch_submit_next_level(o, f->t.nl, &a, NULL, f->t.ep_id[0])); /* 4 */
}

static void device_memory_goes_only_to_its_own_worker_and_l2_tensors_nowhere(void **state) {
    (void)state;
    fixture *f = make();
    run_body(f, body_device_memory_and_identity);
    assert_probe(&f->pr, 0, STRATA_EINVAL, "sub tasks take host memory only");
    assert_probe(&f->pr, 1, STRATA_EINVAL,
                 "tensor 0 is device memory of worker 0, but the task goes to worker 1");
    assert_probe(&f->pr, 2, STRATA_OK, "");
    assert_probe(&f->pr, 3, STRATA_EINVAL, "member 1 tensor 0 is device memory of worker 0");
    assert_probe(&f->pr, 4, STRATA_EINVAL, "no buffer");
    assert_int_equal(atomic_load(&f->t.counter), 0);
    assert_int_equal(st_test_ep_count(f->t.ep[0]), 1); /* only the task on its own worker */
    assert_int_equal(st_test_ep_count(f->t.ep[1]), 0);
    destroy(f);
}

#define SMALL_RING (64 * 1024)

static void body_runtime_memory_larger_than_a_ring(strata_orch *o, fixture *f) {
    int64_t too_big = SMALL_RING / 4 + 1, ring = SMALL_RING / 4;
    strata_tensor t;
    PROBE(f, strata_orch_alloc(o, 1, &too_big, STRATA_I32, &t)); /* 0 */
    strata_tensor out = {0};                                     /* OUT without memory */
    out.rank = 1;
    out.dtype = STRATA_I32;
    out.shape[0] = too_big;
    strata_task_args a = one_tensor(&out, STRATA_OUT);
    PROBE(f, strata_orch_submit_sub(o, f->t.count, &a));      /* 1 */
    PROBE(f, strata_orch_alloc(o, 1, &ring, STRATA_I32, &t)); /* 2: a whole ring fits */
}

static void runtime_memory_larger_than_a_ring_is_einval(void **state) {
    (void)state;
    fixture *f = make_ring(2, 0, SMALL_RING);
    run_body(f, body_runtime_memory_larger_than_a_ring);
    assert_probe(&f->pr, 0, STRATA_EINVAL, "exceeds heap_ring_bytes");
    assert_probe(&f->pr, 1, STRATA_EINVAL, "exceeds heap_ring_bytes");
    assert_probe(&f->pr, 2, STRATA_OK, "");
    assert_int_equal(atomic_load(&f->t.counter), 0);
    destroy(f);
}

static void body_two_allocs(strata_orch *o, fixture *f) {
    int64_t shape[3] = {2, 3, 5};
    PROBE(f, strata_orch_alloc(o, 3, shape, STRATA_F64, &f->allocs[0]));
    PROBE(f, strata_orch_alloc(o, 1, shape, STRATA_U8, &f->allocs[1]));
}

static void orch_alloc_returns_a_row_major_view_with_a_fresh_identity(void **state) {
    (void)state;
    fixture *f = make();
    run_body(f, body_two_allocs);
    assert_probe(&f->pr, 0, STRATA_OK, "");
    assert_probe(&f->pr, 1, STRATA_OK, "");
    const strata_tensor *t = &f->allocs[0];
    assert_int_equal(t->rank, 3);
    assert_int_equal(t->dtype, STRATA_F64);
    assert_int_equal(t->shape[0], 2);
    assert_int_equal(t->shape[1], 3);
    assert_int_equal(t->shape[2], 5);
    assert_int_equal(t->strides[0], 15);
    assert_int_equal(t->strides[1], 5);
    assert_int_equal(t->strides[2], 1);
    assert_int_equal(t->offset, 0);
    assert_int_equal(t->buffer_bytes, 2 * 3 * 5 * 8);
    assert_int_equal(t->mem, STRATA_MEM_HOST);
    assert_int_equal(t->ident.owner, -1);
    assert_int_equal(t->ident.generation, 1);
    assert_true(st_is_runtime_id(t->ident.id));     /* runtime memory: the engine knows its task */
    assert_int_equal((uintptr_t)t->base % 1024, 0); /* 1 KiB aligned */
    strata_tensor host = i32_view(f, 0, 1, 1);
    assert_true(t->ident.id != 0 && t->ident.id != host.ident.id);
    assert_true(f->allocs[1].ident.id != t->ident.id); /* each allocation its own identity */
    assert_true(f->allocs[1].base != t->base);
    destroy(f);
}

/* ==== argument lists ========================================================== */

static void body_too_many_tensors(strata_orch *o, fixture *f) {
    strata_task_args a;
    strata_args_init(&a);
    for (int i = 0; i < STRATA_MAX_TENSORS; i++) {
        strata_tensor t = i32_view(f, i, 1, 1);
        PROBE(f, strata_args_add_tensor(&a, &t, STRATA_IN)); /* 0..63 */
    }
    strata_tensor extra = i32_view(f, 100, 1, 1);
    PROBE(f, strata_args_add_tensor(&a, &extra, STRATA_IN));                /* 64 */
    PROBE(f, a.invalid ? STRATA_OK : STRATA_EINVAL);                        /* 65 */
    PROBE(f, a.ntensors == STRATA_MAX_TENSORS ? STRATA_OK : STRATA_EINVAL); /* 66 */
    PROBE(f, strata_orch_submit_sub(o, f->t.count, &a));                    /* 67 */
}

static void too_many_tensors_invalidate_the_args_and_the_submit(void **state) {
    (void)state;
    fixture *f = make();
    run_body(f, body_too_many_tensors);
    for (int i = 0; i < STRATA_MAX_TENSORS; i++)
        assert_probe(&f->pr, i, STRATA_OK, "");
    assert_probe(&f->pr, STRATA_MAX_TENSORS, STRATA_ECAPACITY, "more than 64 tensor arguments");
    assert_probe(&f->pr, STRATA_MAX_TENSORS + 1, STRATA_OK, "");
    assert_probe(&f->pr, STRATA_MAX_TENSORS + 2, STRATA_OK, "");
    assert_probe(&f->pr, STRATA_MAX_TENSORS + 3, STRATA_EINVAL, "invalid");
    assert_int_equal(atomic_load(&f->t.counter), 0);
    destroy(f);
}

static void body_too_many_scalars(strata_orch *o, fixture *f) {
    strata_task_args a;
    strata_args_init(&a);
    for (int i = 0; i < STRATA_MAX_SCALARS; i++)
        PROBE(f, strata_args_add_scalar(&a, (uint64_t)i));                        /* 0..15 */
    PROBE(f, strata_args_add_scalar(&a, 99));                                     /* 16 */
    PROBE(f, strata_orch_submit_sub(o, f->t.count, &a));                          /* 17 */
    PROBE(f, strata_orch_submit_next_level(o, f->t.nl, &a, NULL, f->t.ep_id[0])); /* 18 */
    /* re-initialising makes them usable again */
    strata_args_init(&a);
    PROBE(f, strata_orch_submit_sub(o, f->t.count, &a)); /* 19 */
}

static void too_many_scalars_invalidate_the_args_and_the_submit(void **state) {
    (void)state;
    fixture *f = make();
    run_body(f, body_too_many_scalars);
    for (int i = 0; i < STRATA_MAX_SCALARS; i++)
        assert_probe(&f->pr, i, STRATA_OK, "");
    assert_probe(&f->pr, 16, STRATA_ECAPACITY, "scalar arguments");
    assert_probe(&f->pr, 17, STRATA_EINVAL, "invalid");
    assert_probe(&f->pr, 18, STRATA_EINVAL, "invalid");
    assert_probe(&f->pr, 19, STRATA_OK, "");
    assert_int_equal(atomic_load(&f->t.counter), 1);
    assert_int_equal(st_test_ep_count(f->t.ep[0]), 0);
    destroy(f);
}

static void body_unknown_tag(strata_orch *o, fixture *f) {
    strata_task_args a;
    strata_args_init(&a);
    strata_tensor t = i32_view(f, 0, 4, 1);
    PROBE(f, strata_args_add_tensor(&a, &t, (strata_tag)(STRATA_NO_DEP + 1)));
    PROBE(f, strata_orch_submit_sub(o, f->t.count, &a));
}

static void unknown_tag_invalidates_the_args(void **state) {
    (void)state;
    fixture *f = make();
    run_body(f, body_unknown_tag);
    assert_probe(&f->pr, 0, STRATA_EINVAL, "tag");
    assert_probe(&f->pr, 1, STRATA_EINVAL, "invalid");
    assert_int_equal(atomic_load(&f->t.counter), 0);
    destroy(f);
}

static void body_group_member_invalid(strata_orch *o, fixture *f) {
    strata_task_args a[2];
    strata_args_init(&a[0]);
    strata_args_init(&a[1]);
    for (int i = 0; i <= STRATA_MAX_SCALARS; i++)
        strata_args_add_scalar(&a[1], 1);
    PROBE(f, strata_orch_submit_sub_group(o, f->t.count, a, 2));
}

static void invalid_args_of_one_group_member_fail_the_group(void **state) {
    (void)state;
    fixture *f = make();
    run_body(f, body_group_member_invalid);
    assert_probe(&f->pr, 0, STRATA_EINVAL, "member 1");
    assert_int_equal(atomic_load(&f->t.counter), 0);
    destroy(f);
}

/* ==== two arguments of one task overlapping ==================================== */

/* Submit a task with t0 under tag0 and t1 under tag1; record the result. */
static void probe_pair(strata_orch *o, fixture *f, strata_tensor t0, strata_tag tag0,
                       strata_tensor t1, strata_tag tag1) {
    strata_task_args a;
    strata_args_init(&a);
    strata_args_add_tensor(&a, &t0, tag0);
    strata_args_add_tensor(&a, &t1, tag1);
    PROBE(f, strata_orch_submit_sub(o, f->t.count, &a));
}

static void body_overlap_with_a_writer(strata_orch *o, fixture *f) {
    strata_tensor all = i32_view(f, 0, 64, 1);
    strata_tensor low = i32_view(f, 0, 32, 1);
    strata_tensor mid = i32_view(f, 16, 32, 1);
    probe_pair(o, f, all, STRATA_IN, all, STRATA_OUT);             /* 0 */
    probe_pair(o, f, all, STRATA_OUT, all, STRATA_IN);             /* 1 */
    probe_pair(o, f, low, STRATA_IN, mid, STRATA_OUT);             /* 2 */
    probe_pair(o, f, mid, STRATA_OUT, low, STRATA_IN);             /* 3 */
    probe_pair(o, f, low, STRATA_IN, mid, STRATA_INOUT);           /* 4 */
    probe_pair(o, f, mid, STRATA_INOUT, low, STRATA_IN);           /* 5 */
    probe_pair(o, f, low, STRATA_OUT_EXISTING, mid, STRATA_IN);    /* 6 */
    probe_pair(o, f, low, STRATA_IN, mid, STRATA_OUT_EXISTING);    /* 7 */
    probe_pair(o, f, low, STRATA_OUT, mid, STRATA_OUT);            /* 8 */
    probe_pair(o, f, low, STRATA_INOUT, mid, STRATA_OUT_EXISTING); /* 9 */
    /* strided views sharing one element (element 0) */
    probe_pair(o, f, i32_view(f, 0, 8, 2), STRATA_IN, i32_view(f, 0, 8, 3), STRATA_OUT); /* 10 */
    probe_pair(o, f, i32_view(f, 0, 8, 3), STRATA_OUT, i32_view(f, 0, 8, 2), STRATA_IN); /* 11 */
}

static void overlapping_args_where_one_writes_are_einval_in_both_orders(void **state) {
    (void)state;
    fixture *f = make();
    run_body(f, body_overlap_with_a_writer);
    for (int i = 0; i < 12; i++)
        assert_probe(&f->pr, i, STRATA_EINVAL, "overlap");
    assert_int_equal(atomic_load(&f->t.counter), 0);
    destroy(f);
}

/* A task with more tensors than are checked pair by pair: nine disjoint reads
 * and a write, which overlaps read 3 (probe 0), touches nothing else (1), or
 * is a second writer over the first (2). */
static void body_many_tensors_overlap(strata_orch *o, fixture *f) {
    for (int variant = 0; variant < 3; variant++) {
        strata_task_args a;
        strata_args_init(&a);
        for (int k = 0; k < 9; k++) {
            strata_tensor r = i32_view(f, 4 * k, 4, 1);
            strata_args_add_tensor(&a, &r, variant == 2 && k == 5 ? STRATA_INOUT : STRATA_IN);
        }
        strata_tensor wr = i32_view(f, variant == 0 ? 13 : variant == 1 ? 40 : 20, 2, 1);
        strata_args_add_tensor(&a, &wr, STRATA_OUT_EXISTING);
        PROBE(f, strata_orch_submit_sub(o, f->t.count, &a));
    }
}

static void many_tensors_overlapping_a_writer_are_einval(void **state) {
    (void)state;
    fixture *f = make();
    run_body(f, body_many_tensors_overlap);
    assert_probe(&f->pr, 0, STRATA_EINVAL, "tensors 3 and 9 overlap");
    assert_probe(&f->pr, 1, STRATA_OK, "");
    assert_probe(&f->pr, 2, STRATA_EINVAL, "tensors 5 and 9 overlap");
    destroy(f);
}

static void body_group_members_overlap(strata_orch *o, fixture *f) {
    /* One group task: its members run at the same time on distinct workers,
     * so members whose arguments overlap where one writes race like two
     * arguments of one task do. */
    strata_task_args m[2];
    strata_tensor lo = i32_view(f, 0, 32, 1), mid = i32_view(f, 16, 32, 1);
    strata_tensor hi = i32_view(f, 32, 32, 1);
    strata_args_init(&m[0]);
    strata_args_init(&m[1]);
    strata_args_add_tensor(&m[0], &lo, STRATA_OUT);
    strata_args_add_tensor(&m[1], &mid, STRATA_OUT);
    PROBE(f, strata_orch_submit_sub_group(o, f->t.count, m, 2)); /* 0: write + write */
    strata_args_init(&m[1]);
    strata_args_add_tensor(&m[1], &mid, STRATA_IN);
    PROBE(f, strata_orch_submit_sub_group(o, f->t.count, m, 2)); /* 1: write + read */
    strata_args_init(&m[0]);
    strata_args_add_tensor(&m[0], &lo, STRATA_IN);
    PROBE(f, strata_orch_submit_sub_group(o, f->t.count, m, 2)); /* 2: read + read: fine */
    strata_args_init(&m[1]);
    strata_args_add_tensor(&m[1], &hi, STRATA_OUT);
    strata_args_init(&m[0]);
    strata_args_add_tensor(&m[0], &lo, STRATA_OUT);
    PROBE(f, strata_orch_submit_sub_group(o, f->t.count, m, 2)); /* 3: disjoint writes: fine */
}

static void group_members_overlapping_where_one_writes_are_einval(void **state) {
    (void)state;
    fixture *f = make();
    run_body(f, body_group_members_overlap);
    assert_probe(&f->pr, 0, STRATA_EINVAL, "overlap");
    assert_probe(&f->pr, 1, STRATA_EINVAL, "overlap");
    assert_probe(&f->pr, 2, STRATA_OK, "");
    assert_probe(&f->pr, 3, STRATA_OK, "");
    destroy(f);
}

static void body_overlap_accepted(strata_orch *o, fixture *f) {
    strata_tensor all = i32_view(f, 0, 64, 1);
    strata_tensor low = i32_view(f, 0, 32, 1);
    strata_tensor high = i32_view(f, 32, 32, 1);
    strata_tensor even = i32_view(f, 0, 32, 2), odd = i32_view(f, 1, 32, 2);
    int64_t tile[2] = {4, 4}, rows[2] = {16, 1};
    strata_tensor left, right;
    strata_tensor_view(f->t.buf[0], 0, STRATA_I32, 2, tile, rows, &left);
    strata_tensor_view(f->t.buf[0], 16, STRATA_I32, 2, tile, rows, &right); /* columns 4..7 */
    probe_pair(o, f, all, STRATA_IN, all, STRATA_IN);                       /* 0: IN + IN */
    probe_pair(o, f, low, STRATA_IN, all, STRATA_IN);                       /* 1 */
    probe_pair(o, f, low, STRATA_OUT, high, STRATA_IN);                     /* 2: disjoint ranges */
    probe_pair(o, f, high, STRATA_INOUT, low, STRATA_OUT);                  /* 3 */
    probe_pair(o, f, even, STRATA_OUT, odd, STRATA_IN);                     /* 4: interleaved */
    probe_pair(o, f, odd, STRATA_INOUT, even, STRATA_OUT);                  /* 5 */
    probe_pair(o, f, left, STRATA_OUT, right, STRATA_INOUT);                /* 6: 2-D tiles */
}

static void non_conflicting_args_of_one_task_are_accepted(void **state) {
    (void)state;
    fixture *f = make();
    run_body(f, body_overlap_accepted);
    for (int i = 0; i < 7; i++)
        assert_probe(&f->pr, i, STRATA_OK, "");
    assert_int_equal(atomic_load(&f->t.counter), 7);
    destroy(f);
}

static void body_same_memory_other_identity(strata_orch *o, fixture *f) {
    /* Two identities wrapping the same memory never alias (identity decides). */
    strata_buffer *b2;
    if (strata_buffer_wrap(f->t.w, strata_buffer_data(f->t.buf[0]), BUF_BYTES, &b2) != STRATA_OK) {
        record(f, -999);
        return;
    }
    strata_tensor t1 = i32_view(f, 0, 8, 1), t2;
    int64_t n = 8;
    strata_tensor_contiguous(b2, STRATA_I32, 1, &n, &t2);
    probe_pair(o, f, t1, STRATA_OUT, t2, STRATA_IN);
    strata_buffer_destroy(b2); /* the task never touches the data */
}

static void overlap_is_decided_on_buffer_identity(void **state) {
    (void)state;
    fixture *f = make();
    run_body(f, body_same_memory_other_identity);
    assert_probe(&f->pr, 0, STRATA_OK, "");
    destroy(f);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(null_arguments_inside_orchestration_are_einval),
        cmocka_unit_test(orch_pointer_used_after_function_returned_is_estate),
        cmocka_unit_test(submit_from_another_thread_during_orchestration_is_estate),
        cmocka_unit_test(every_orch_call_from_another_thread_is_estate),
        cmocka_unit_test(once_the_run_failed_every_submit_and_alloc_fails_fast),
        cmocka_unit_test(unknown_callable_id_is_einval),
        cmocka_unit_test(callable_of_the_wrong_kind_is_einval),
        cmocka_unit_test(unknown_next_level_worker_id_is_einval),
        cmocka_unit_test(next_level_task_on_worker_without_children_is_einval),
        cmocka_unit_test(sub_task_on_worker_without_sub_workers_is_einval),
        cmocka_unit_test(duplicate_group_target_is_einval),
        cmocka_unit_test(group_size_out_of_range_is_einval),
        cmocka_unit_test(unknown_call_config_flags_are_einval),
        cmocka_unit_test(hand_modified_tensor_is_rejected_at_submit),
        cmocka_unit_test(hand_modified_tensor_whose_extent_overflows_is_rejected),
        cmocka_unit_test(orch_alloc_with_bad_shape_is_einval),
        cmocka_unit_test(hand_written_tags_and_uninitialised_args_are_einval),
        cmocka_unit_test(device_memory_goes_only_to_its_own_worker_and_l2_tensors_nowhere),
        cmocka_unit_test(runtime_memory_larger_than_a_ring_is_einval),
        cmocka_unit_test(orch_alloc_returns_a_row_major_view_with_a_fresh_identity),
        cmocka_unit_test(too_many_tensors_invalidate_the_args_and_the_submit),
        cmocka_unit_test(too_many_scalars_invalidate_the_args_and_the_submit),
        cmocka_unit_test(unknown_tag_invalidates_the_args),
        cmocka_unit_test(invalid_args_of_one_group_member_fail_the_group),
        cmocka_unit_test(overlapping_args_where_one_writes_are_einval_in_both_orders),
        cmocka_unit_test(many_tensors_overlapping_a_writer_are_einval),
        cmocka_unit_test(group_members_overlapping_where_one_writes_are_einval),
        cmocka_unit_test(non_conflicting_args_of_one_task_are_accepted),
        cmocka_unit_test(overlap_is_decided_on_buffer_identity),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
