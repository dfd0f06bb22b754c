// label: concurrency
/* tests/unit/test_api_errors.c - bad input of every kind through the public
 * API: each call returns the documented status and leaves a non-empty
 * strata_error_message() that names the problem; nothing aborts, hangs or leaks.
 *
 * Owns: the error contract of include/strata/{worker,tensor,status}.h.
 * Must never: assert on timing, or run cmocka assertions inside an
 * orchestration function (a failed assertion would longjmp out of the engine;
 * checks made there are recorded as probes and asserted afterwards).
 */
#include "test_support.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/engine.h"
#include "test_endpoint.h"
#include "util/clock.h"
#include "util/error.h"

#define SEC 1000000000ull
#define BUF_BYTES 4096
#define MAX_PROBES 48

/* Assert that the last error is non-empty and mentions `needle` (any case). */
#define assert_message_mentions(needle)                                                            \
    do {                                                                                           \
        const char *am_msg_ = strata_error_message();                                              \
        if (!am_msg_ || !am_msg_[0])                                                               \
            fail_msg("strata_error_message() is empty; expected a message about '%s'", (needle));  \
        if (!strcasestr(am_msg_, (needle)))                                                        \
            fail_msg("message '%s' does not mention '%s'", am_msg_, (needle));                     \
    } while (0)

/* `expr` fails with `status` and a fresh message mentioning `needle`. */
#define assert_fails(status, needle, expr)                                                         \
    do {                                                                                           \
        st_clear_error();                                                                          \
        assert_status((status), (expr));                                                           \
        assert_message_mentions(needle);                                                           \
    } while (0)

/* The result of one call made inside an orchestration function. */
typedef struct probe {
    int rc;
    char msg[STRATA_ERRMSG_MAX];
} probe;

typedef struct fixture fixture;
typedef void (*orch_body)(strata_orch *o, fixture *f);

struct fixture {
    strata_worker *w;
    int nnext;
    st_test_ep *ep[2];
    int ep_id[2];
    strata_callable noop, nl, gate_wait;
    _Atomic int noop_runs;
    _Atomic int gate;
    _Atomic int gate_timeouts;
    strata_buffer *buf;
    orch_body body;
    strata_orch *stash;
    probe p[MAX_PROBES];
    int np;
};

/* ---- task bodies ---------------------------------------------------------- */

static int noop_fn(const strata_task_args *a, void *user) {
    (void)a;
    atomic_fetch_add(&((fixture *)user)->noop_runs, 1);
    return 0;
}

static void sleep_us(long us) {
    struct timespec ts = {us / 1000000, (us % 1000000) * 1000};
    nanosleep(&ts, NULL);
}

/* Holds its sub worker until the test opens the gate (bounded: 10 s). */
static int gate_wait_fn(const strata_task_args *a, void *user) {
    (void)a;
    fixture *f = user;
    uint64_t deadline = st_deadline_after(10 * SEC);
    while (!atomic_load(&f->gate)) {
        if (st_now_ns() >= deadline) {
            atomic_fetch_add(&f->gate_timeouts, 1);
            return 0;
        }
        sleep_us(100);
    }
    return 0;
}

/* ---- fixture ---------------------------------------------------------------- */

static fixture *make_with(uint32_t subs, int nnext) {
    fixture *f = calloc(1, sizeof *f);
    assert_non_null(f);
    strata_worker_config cfg;
    strata_worker_config_init(&cfg);
    cfg.sub_workers = subs;
    assert_ok(strata_worker_create(&cfg, &f->w));
    f->nnext = nnext;
    for (int i = 0; i < nnext; i++) {
        st_test_ep_config ec = {0};
        assert_ok(st_test_ep_add(f->w, &ec, &f->ep_id[i], &f->ep[i]));
    }
    assert_ok(strata_worker_register_sub(f->w, "noop", noop_fn, f, &f->noop));
    assert_ok(strata_worker_register_sub(f->w, "gate_wait", gate_wait_fn, f, &f->gate_wait));
    assert_ok(st_register_next_level(f->w, "nl", NULL, NULL, NULL, &f->nl));
    assert_ok(strata_worker_init(f->w));
    assert_ok(strata_buffer_create(f->w, BUF_BYTES, &f->buf));
    return f;
}

static fixture *make(void) {
    return make_with(2, 2);
}

static void destroy(fixture *f) {
    strata_worker_destroy(f->w);
    strata_buffer_destroy(f->buf);
    assert_int_equal(atomic_load(&f->gate_timeouts), 0);
    free(f);
}

/* View of f->buf: `n` I32 elements from element `first`, element stride `stride`. */
static strata_tensor i32_view(fixture *f, int64_t first, int64_t n, int64_t stride) {
    strata_tensor t;
    assert_ok(strata_tensor_view(f->buf, (uint64_t)first * 4, STRATA_I32, 1, &n, &stride, &t));
    return t;
}

/* ---- probes: calls made inside an orchestration function ---------------------- */

static void record(fixture *f, int rc) {
    if (f->np >= MAX_PROBES)
        return; /* asserted afterwards: the test reads only what it recorded */
    probe *p = &f->p[f->np++];
    p->rc = rc;
    snprintf(p->msg, sizeof p->msg, "%s", rc != STRATA_OK ? strata_error_message() : "");
}

/* Run `expr` inside an orchestration function and keep its status + message. */
#define PROBE(f, expr)                                                                             \
    do {                                                                                           \
        st_clear_error();                                                                          \
        record((f), (expr));                                                                       \
    } while (0)

#define assert_probe(f, i, status, needle)                                                         \
    do {                                                                                           \
        assert_true((i) < (f)->np);                                                                \
        const probe *ap_ = &(f)->p[(i)];                                                           \
        if (ap_->rc != (status))                                                                   \
            fail_msg("probe %d returned %s (%d), expected %s: %s", (i),                            \
                     strata_status_name(ap_->rc), ap_->rc, strata_status_name(status), ap_->msg);  \
        if ((status) != STRATA_OK && !ap_->msg[0])                                                 \
            fail_msg("probe %d: empty message", (i));                                              \
        if ((status) != STRATA_OK && !strcasestr(ap_->msg, (needle)))                              \
            fail_msg("probe %d: message '%s' does not mention '%s'", (i), ap_->msg, (needle));     \
    } while (0)

static int orch_run_body(strata_orch *o, void *arg) {
    fixture *f = arg;
    f->stash = o;
    f->body(o, f);
    return STRATA_OK;
}

/* Run one orchestration function executing `body`; the run itself must succeed. */
static void run_body(fixture *f, orch_body body) {
    f->body = body;
    f->np = 0;
    assert_ok(strata_worker_run(f->w, orch_run_body, f));
    assert_true(f->np < MAX_PROBES);
}

static int orch_noop_task(strata_orch *o, void *arg) {
    fixture *f = arg;
    strata_task_args a;
    strata_args_init(&a);
    return strata_orch_submit_sub(o, f->noop, &a);
}

static int orch_gated_task(strata_orch *o, void *arg) {
    fixture *f = arg;
    strata_task_args a;
    strata_args_init(&a);
    return strata_orch_submit_sub(o, f->gate_wait, &a);
}

static int orch_empty(strata_orch *o, void *arg) {
    (void)o;
    (void)arg;
    return STRATA_OK;
}

/* ==== NULL arguments ======================================================== */

static void null_config_and_out_on_create_are_einval(void **state) {
    (void)state;
    strata_worker_config_init(NULL); /* documented no-op: must not crash */
    strata_worker_config cfg;
    strata_worker_config_init(&cfg);
    strata_worker *w = (strata_worker *)&cfg;
    assert_fails(STRATA_EINVAL, "NULL", strata_worker_create(NULL, &w));
    assert_fails(STRATA_EINVAL, "NULL", strata_worker_create(&cfg, NULL));
}

static void null_worker_on_lifecycle_calls_is_einval(void **state) {
    (void)state;
    assert_fails(STRATA_EINVAL, "NULL", strata_worker_init(NULL));
    assert_fails(STRATA_EINVAL, "NULL", strata_worker_close(NULL));
    strata_worker_destroy(NULL); /* documented no-op */
    assert_int_equal(strata_worker_next_level_count(NULL), 0);
}

static void null_arguments_to_register_sub_are_einval(void **state) {
    (void)state;
    fixture *f = make();
    strata_callable c = 123;
    assert_fails(STRATA_EINVAL, "NULL", strata_worker_register_sub(NULL, "x", noop_fn, NULL, &c));
    assert_fails(STRATA_EINVAL, "NULL", strata_worker_register_sub(f->w, NULL, noop_fn, NULL, &c));
    assert_fails(STRATA_EINVAL, "NULL", strata_worker_register_sub(f->w, "x", noop_fn, NULL, NULL));
    assert_fails(STRATA_EINVAL, "NULL", strata_worker_register_sub(f->w, "x", NULL, NULL, &c));
    assert_int_equal(c, 123); /* nothing written on failure */
    /* and "x" was never registered by any of them */
    assert_ok(strata_worker_register_sub(f->w, "x", noop_fn, f, &c));
    destroy(f);
}

static void null_arguments_to_run_calls_are_einval(void **state) {
    (void)state;
    fixture *f = make();
    strata_run *h = (strata_run *)f;
    assert_fails(STRATA_EINVAL, "NULL", strata_worker_submit(NULL, orch_empty, NULL, &h));
    assert_fails(STRATA_EINVAL, "NULL", strata_worker_submit(f->w, NULL, NULL, &h));
    assert_fails(STRATA_EINVAL, "NULL", strata_worker_submit(f->w, orch_empty, NULL, NULL));
    assert_fails(STRATA_EINVAL, "NULL", strata_worker_run(NULL, orch_empty, NULL));
    assert_fails(STRATA_EINVAL, "NULL", strata_worker_run(f->w, NULL, NULL));
    assert_fails(STRATA_EINVAL, "NULL", strata_run_wait(NULL, 0));
    assert_fails(STRATA_EINVAL, "NULL", strata_run_status(NULL));
    assert_int_equal(strata_run_done(NULL), 0);
    assert_string_equal(strata_run_error(NULL), "");
    assert_int_equal(strata_run_id(NULL), 0);
    strata_run_release(NULL); /* like free(NULL) */
    /* the worker is still usable */
    assert_ok(strata_worker_run(f->w, orch_noop_task, f));
    assert_int_equal(atomic_load(&f->noop_runs), 1);
    destroy(f);
}

static void null_arguments_to_buffer_calls_are_einval(void **state) {
    (void)state;
    fixture *f = make();
    strata_buffer *b = (strata_buffer *)f;
    char mem[64];
    assert_fails(STRATA_EINVAL, "NULL", strata_buffer_create(NULL, 64, &b));
    assert_fails(STRATA_EINVAL, "NULL", strata_buffer_create(f->w, 64, NULL));
    assert_fails(STRATA_EINVAL, "NULL", strata_buffer_wrap(NULL, mem, sizeof mem, &b));
    assert_fails(STRATA_EINVAL, "NULL", strata_buffer_wrap(f->w, NULL, sizeof mem, &b));
    assert_fails(STRATA_EINVAL, "NULL", strata_buffer_wrap(f->w, mem, sizeof mem, NULL));
    strata_buffer_destroy(NULL);
    assert_null(strata_buffer_data(NULL));
    assert_int_equal(strata_buffer_size(NULL), 0);
    destroy(f);
}

static void zero_byte_buffers_are_einval(void **state) {
    (void)state;
    fixture *f = make();
    strata_buffer *b = (strata_buffer *)f;
    char mem[8];
    assert_fails(STRATA_EINVAL, "nbytes", strata_buffer_create(f->w, 0, &b));
    assert_null(b);
    b = (strata_buffer *)f;
    assert_fails(STRATA_EINVAL, "nbytes", strata_buffer_wrap(f->w, mem, 0, &b));
    assert_null(b);
    destroy(f);
}

static void null_arguments_to_tensor_calls_are_einval(void **state) {
    (void)state;
    fixture *f = make();
    strata_tensor t;
    int64_t n = 4;
    assert_fails(STRATA_EINVAL, "NULL", strata_tensor_view(NULL, 0, STRATA_I32, 1, &n, NULL, &t));
    assert_fails(STRATA_EINVAL, "NULL",
                 strata_tensor_view(f->buf, 0, STRATA_I32, 1, NULL, NULL, &t));
    assert_fails(STRATA_EINVAL, "NULL",
                 strata_tensor_view(f->buf, 0, STRATA_I32, 1, &n, NULL, NULL));
    assert_fails(STRATA_EINVAL, "NULL", strata_tensor_contiguous(NULL, STRATA_I32, 1, &n, &t));
    assert_fails(STRATA_EINVAL, "NULL", strata_tensor_contiguous(f->buf, STRATA_I32, 1, NULL, &t));
    assert_fails(STRATA_EINVAL, "NULL", strata_tensor_contiguous(f->buf, STRATA_I32, 1, &n, NULL));
    assert_int_equal(strata_tensor_numel(NULL), 0);
    assert_int_equal(strata_dtype_size(STRATA_DTYPE_COUNT), 0);
    assert_int_equal(strata_dtype_size((strata_dtype)-1), 0);
    assert_non_null(strata_status_name(12345));
    assert_non_null(strata_status_name(STRATA_EINVAL));
    destroy(f);
}

static void null_arguments_to_args_calls_are_einval(void **state) {
    (void)state;
    fixture *f = make();
    strata_task_args a;
    strata_args_init(NULL); /* no-op */
    strata_args_init(&a);
    strata_tensor t = i32_view(f, 0, 4, 1);
    assert_fails(STRATA_EINVAL, "NULL", strata_args_add_tensor(NULL, &t, STRATA_IN));
    assert_fails(STRATA_EINVAL, "NULL", strata_args_add_tensor(&a, NULL, STRATA_IN));
    assert_fails(STRATA_EINVAL, "NULL", strata_args_add_scalar(NULL, 1));
    assert_int_equal(a.ntensors, 0);
    assert_null(strata_args_data(NULL, 0));
    assert_null(strata_args_tensor(NULL, 0));
    assert_int_equal(strata_args_scalar(NULL, 0), 0);
    /* out-of-range accessors */
    assert_null(strata_args_data(&a, 0));
    assert_null(strata_args_tensor(&a, 3));
    assert_int_equal(strata_args_scalar(&a, 0), 0);
    destroy(f);
}

static void body_null_orch_arguments(strata_orch *o, fixture *f) {
    strata_task_args a;
    strata_args_init(&a);
    strata_tensor t;
    int64_t n = 4;
    int ids[2] = {f->ep_id[0], f->ep_id[1]};
    strata_task_args ga[2];
    strata_args_init(&ga[0]);
    strata_args_init(&ga[1]);
    PROBE(f, strata_orch_submit_sub(NULL, f->noop, &a));                          /* 0 */
    PROBE(f, strata_orch_submit_sub(o, f->noop, NULL));                           /* 1 */
    PROBE(f, strata_orch_submit_next_level(NULL, f->nl, &a, NULL, f->ep_id[0]));  /* 2 */
    PROBE(f, strata_orch_submit_next_level(o, f->nl, NULL, NULL, f->ep_id[0]));   /* 3 */
    PROBE(f, strata_orch_submit_sub_group(NULL, f->noop, ga, 2));                 /* 4 */
    PROBE(f, strata_orch_submit_sub_group(o, f->noop, NULL, 2));                  /* 5 */
    PROBE(f, strata_orch_submit_next_level_group(NULL, f->nl, ga, NULL, ids, 2)); /* 6 */
    PROBE(f, strata_orch_submit_next_level_group(o, f->nl, NULL, NULL, ids, 2));  /* 7 */
    PROBE(f, strata_orch_submit_next_level_group(o, f->nl, ga, NULL, NULL, 2));   /* 8 */
    PROBE(f, strata_orch_alloc(NULL, 1, &n, STRATA_I32, &t));                     /* 9 */
    PROBE(f, strata_orch_alloc(o, 1, NULL, STRATA_I32, &t));                      /* 10 */
    PROBE(f, strata_orch_alloc(o, 1, &n, STRATA_I32, NULL));                      /* 11 */
    PROBE(f, strata_orch_scope_begin(NULL));                                      /* 12 */
    PROBE(f, strata_orch_scope_end(NULL));                                        /* 13 */
    PROBE(f, strata_orch_run_id(NULL) == 0 ? STRATA_OK : STRATA_EINVAL);          /* 14 */
    PROBE(f, strata_orch_submit_sub(o, f->noop, &a));                             /* 15: control */
}

static void null_arguments_inside_orchestration_are_einval(void **state) {
    (void)state;
    fixture *f = make();
    run_body(f, body_null_orch_arguments);
    for (int i = 0; i <= 13; i++)
        assert_probe(f, i, STRATA_EINVAL, "NULL");
    assert_probe(f, 14, STRATA_OK, "");
    assert_probe(f, 15, STRATA_OK, "");
    assert_int_equal(atomic_load(&f->noop_runs), 1); /* only the control task ran */
    destroy(f);
}

/* ==== lifecycle =============================================================== */

static void submit_before_init_is_estate(void **state) {
    (void)state;
    strata_worker_config cfg;
    strata_worker_config_init(&cfg);
    strata_worker *w;
    assert_ok(strata_worker_create(&cfg, &w));
    strata_run *h = (strata_run *)&cfg;
    assert_fails(STRATA_ESTATE, "strata_worker_init",
                 strata_worker_submit(w, orch_empty, NULL, &h));
    assert_null(h);
    assert_fails(STRATA_ESTATE, "strata_worker_init", strata_worker_run(w, orch_empty, NULL));
    strata_worker_destroy(w); /* never initialised: must not hang or leak */
}

static void init_twice_is_estate(void **state) {
    (void)state;
    fixture *f = make();
    assert_fails(STRATA_ESTATE, "already initialised", strata_worker_init(f->w));
    assert_ok(strata_worker_run(f->w, orch_noop_task, f)); /* still works */
    destroy(f);
}

static void init_after_close_is_estate(void **state) {
    (void)state;
    fixture *f = make();
    assert_ok(strata_worker_close(f->w));
    assert_fails(STRATA_ESTATE, "closed", strata_worker_init(f->w));
    destroy(f);
}

static void close_is_idempotent(void **state) {
    (void)state;
    fixture *f = make();
    assert_ok(strata_worker_close(f->w));
    assert_ok(strata_worker_close(f->w));
    destroy(f);
}

static void close_of_never_initialised_worker_with_endpoints_is_clean(void **state) {
    (void)state;
    strata_worker_config cfg;
    strata_worker_config_init(&cfg);
    strata_worker *w;
    assert_ok(strata_worker_create(&cfg, &w));
    st_test_ep *ep;
    int id;
    st_test_ep_config ec = {0};
    assert_ok(st_test_ep_add(w, &ec, &id, &ep));
    assert_ok(strata_worker_close(w));
    strata_worker_destroy(w);
}

static void submit_after_close_is_eclosed(void **state) {
    (void)state;
    fixture *f = make();
    assert_ok(strata_worker_run(f->w, orch_noop_task, f));
    assert_ok(strata_worker_close(f->w));
    strata_run *h = (strata_run *)f;
    assert_fails(STRATA_ECLOSED, "closed", strata_worker_submit(f->w, orch_noop_task, f, &h));
    assert_null(h);
    assert_fails(STRATA_ECLOSED, "closed", strata_worker_run(f->w, orch_noop_task, f));
    assert_int_equal(atomic_load(&f->noop_runs), 1);
    destroy(f);
}

static void register_after_close_is_eclosed(void **state) {
    (void)state;
    fixture *f = make();
    assert_ok(strata_worker_close(f->w));
    strata_callable c;
    assert_fails(STRATA_ECLOSED, "closed",
                 strata_worker_register_sub(f->w, "late", noop_fn, f, &c));
    assert_fails(STRATA_ECLOSED, "closed",
                 st_register_next_level(f->w, "late_nl", NULL, NULL, NULL, &c));
    destroy(f);
}

static void register_after_init_is_allowed(void **state) {
    (void)state;
    fixture *f = make();
    strata_callable c;
    assert_ok(strata_worker_register_sub(f->w, "after_init", noop_fn, f, &c));
    assert_true(c >= 0);
    destroy(f);
}

static void *open_gate_later(void *arg) {
    fixture *f = arg;
    sleep_us(20000);
    atomic_store(&f->gate, 1);
    return NULL;
}

static void close_waits_for_running_runs(void **state) {
    (void)state;
    fixture *f = make();
    strata_run *h;
    assert_ok(strata_worker_submit(f->w, orch_gated_task, f, &h));
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, open_gate_later, f), 0);
    assert_ok(strata_worker_close(f->w)); /* returns only once the gated run finished */
    pthread_join(t, NULL);
    assert_true(strata_run_done(h));
    assert_ok(strata_run_status(h));
    strata_run_release(h);
    destroy(f);
}

static void expired_wait_leaves_unfinished_run_alone(void **state) {
    (void)state;
    fixture *f = make();
    strata_run *h;
    assert_ok(strata_worker_submit(f->w, orch_gated_task, f, &h));
    assert_false(strata_run_done(h));
    assert_fails(STRATA_ETIMEDOUT, "still", strata_run_wait(h, 1000));
    assert_false(strata_run_done(h)); /* the expired wait did not disturb the run */
    atomic_store(&f->gate, 1);
    assert_ok(strata_run_wait(h, STRATA_WAIT_FOREVER));
    strata_run_release(h);
    destroy(f);
}

typedef struct nested {
    fixture *f;
    int submit_rc, run_rc, close_rc;
    char submit_msg[STRATA_ERRMSG_MAX], run_msg[STRATA_ERRMSG_MAX], close_msg[STRATA_ERRMSG_MAX];
    strata_run *inner;
} nested;

static int orch_nested_calls(strata_orch *o, void *arg) {
    nested *n = arg;
    st_clear_error();
    n->inner = (strata_run *)n;
    n->submit_rc = strata_worker_submit(n->f->w, orch_noop_task, n->f, &n->inner);
    snprintf(n->submit_msg, sizeof n->submit_msg, "%s", strata_error_message());
    st_clear_error();
    n->run_rc = strata_worker_run(n->f->w, orch_noop_task, n->f);
    snprintf(n->run_msg, sizeof n->run_msg, "%s", strata_error_message());
    st_clear_error();
    n->close_rc = strata_worker_close(n->f->w);
    snprintf(n->close_msg, sizeof n->close_msg, "%s", strata_error_message());
    return orch_noop_task(o, n->f);
}

static void submit_and_close_inside_orchestration_are_estate(void **state) {
    (void)state;
    fixture *f = make();
    nested n = {.f = f};
    assert_ok(strata_worker_run(f->w, orch_nested_calls, &n)); /* no deadlock */
    assert_int_equal(n.submit_rc, STRATA_ESTATE);
    assert_non_null(strcasestr(n.submit_msg, "inside an orchestration function"));
    assert_null(n.inner);
    assert_int_equal(n.run_rc, STRATA_ESTATE);
    assert_non_null(strcasestr(n.run_msg, "inside an orchestration function"));
    assert_int_equal(n.close_rc, STRATA_ESTATE);
    assert_non_null(strcasestr(n.close_msg, "inside an orchestration function"));
    /* only the outer run's own task ran, and the worker is not closed */
    assert_int_equal(atomic_load(&f->noop_runs), 1);
    assert_ok(strata_worker_run(f->w, orch_noop_task, f));
    assert_int_equal(atomic_load(&f->noop_runs), 2);
    destroy(f);
}

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
    int ids[1] = {f->ep_id[0]};
    assert_fails(STRATA_ESTATE, "outside an orchestration function",
                 strata_orch_submit_sub(o, f->noop, &a));
    assert_fails(STRATA_ESTATE, "outside an orchestration function",
                 strata_orch_submit_next_level(o, f->nl, &a, NULL, f->ep_id[0]));
    assert_fails(STRATA_ESTATE, "outside an orchestration function",
                 strata_orch_submit_sub_group(o, f->noop, &a, 1));
    assert_fails(STRATA_ESTATE, "outside an orchestration function",
                 strata_orch_submit_next_level_group(o, f->nl, &a, NULL, ids, 1));
    assert_fails(STRATA_ESTATE, "outside an orchestration function",
                 strata_orch_alloc(o, 1, &n, STRATA_I32, &t));
    assert_fails(STRATA_ESTATE, "outside an orchestration function", strata_orch_scope_begin(o));
    assert_fails(STRATA_ESTATE, "outside an orchestration function", strata_orch_scope_end(o));
    assert_int_equal(strata_orch_run_id(o), 0);
    assert_int_equal(atomic_load(&f->noop_runs), 0);
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
    ot->rc = strata_orch_submit_sub(ot->o, ot->f->noop, &a);
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
    assert_probe(f, 0, STRATA_ESTATE, "thread");
    assert_int_equal(atomic_load(&f->noop_runs), 0);
    destroy(f);
}

/* ==== callables and targets =================================================== */

static void body_unknown_callable(strata_orch *o, fixture *f) {
    strata_task_args a[2];
    strata_args_init(&a[0]);
    strata_args_init(&a[1]);
    int ids[2] = {f->ep_id[0], f->ep_id[1]};
    PROBE(f, strata_orch_submit_sub(o, 999, &a[0]));
    PROBE(f, strata_orch_submit_sub(o, -1, &a[0]));
    PROBE(f, strata_orch_submit_next_level(o, 999, &a[0], NULL, f->ep_id[0]));
    PROBE(f, strata_orch_submit_sub_group(o, ST_MAX_CALLABLES, a, 2));
    PROBE(f, strata_orch_submit_next_level_group(o, -7, a, NULL, ids, 2));
}

static void unknown_callable_id_is_einval(void **state) {
    (void)state;
    fixture *f = make();
    run_body(f, body_unknown_callable);
    for (int i = 0; i < 5; i++)
        assert_probe(f, i, STRATA_EINVAL, "unknown callable");
    assert_int_equal(atomic_load(&f->noop_runs), 0);
    destroy(f);
}

static void body_wrong_kind(strata_orch *o, fixture *f) {
    strata_task_args a[2];
    strata_args_init(&a[0]);
    strata_args_init(&a[1]);
    int ids[2] = {f->ep_id[0], f->ep_id[1]};
    PROBE(f, strata_orch_submit_next_level(o, f->noop, &a[0], NULL, f->ep_id[0])); /* 0 */
    PROBE(f, strata_orch_submit_next_level_group(o, f->noop, a, NULL, ids, 2));    /* 1 */
    PROBE(f, strata_orch_submit_sub(o, f->nl, &a[0]));                             /* 2 */
    PROBE(f, strata_orch_submit_sub_group(o, f->nl, a, 2));                        /* 3 */
    PROBE(f, strata_orch_submit_next_level(o, f->nl, &a[0], NULL, f->ep_id[0]));   /* 4: control */
    PROBE(f, strata_orch_submit_sub(o, f->noop, &a[0]));                           /* 5: control */
}

static void callable_of_the_wrong_kind_is_einval(void **state) {
    (void)state;
    fixture *f = make();
    run_body(f, body_wrong_kind);
    assert_probe(f, 0, STRATA_EINVAL, "sub callable");
    assert_probe(f, 1, STRATA_EINVAL, "sub callable");
    assert_probe(f, 2, STRATA_EINVAL, "next-level callable");
    assert_probe(f, 3, STRATA_EINVAL, "next-level callable");
    assert_probe(f, 4, STRATA_OK, "");
    assert_probe(f, 5, STRATA_OK, "");
    assert_int_equal(atomic_load(&f->noop_runs), 1);
    assert_int_equal(st_test_ep_count(f->ep[0]), 1);
    assert_int_equal(st_test_ep_count(f->ep[1]), 0);
    destroy(f);
}

static void body_unknown_worker(strata_orch *o, fixture *f) {
    strata_task_args a[2];
    strata_args_init(&a[0]);
    strata_args_init(&a[1]);
    int bad[2] = {f->ep_id[0], 2};
    int neg[2] = {-1, f->ep_id[0]};
    PROBE(f, strata_orch_submit_next_level(o, f->nl, &a[0], NULL, 2));
    PROBE(f, strata_orch_submit_next_level(o, f->nl, &a[0], NULL, -1));
    PROBE(f, strata_orch_submit_next_level(o, f->nl, &a[0], NULL, STRATA_MAX_NEXT_LEVEL));
    PROBE(f, strata_orch_submit_next_level_group(o, f->nl, a, NULL, bad, 2));
    PROBE(f, strata_orch_submit_next_level_group(o, f->nl, a, NULL, neg, 2));
}

static void unknown_next_level_worker_id_is_einval(void **state) {
    (void)state;
    fixture *f = make();
    assert_int_equal(strata_worker_next_level_count(f->w), 2);
    run_body(f, body_unknown_worker);
    for (int i = 0; i < 5; i++)
        assert_probe(f, i, STRATA_EINVAL, "no next-level worker");
    assert_int_equal(st_test_ep_count(f->ep[0]), 0);
    assert_int_equal(st_test_ep_count(f->ep[1]), 0);
    destroy(f);
}

static void body_next_level_without_children(strata_orch *o, fixture *f) {
    strata_task_args a;
    strata_args_init(&a);
    PROBE(f, strata_orch_submit_next_level(o, f->nl, &a, NULL, 0));
}

static void next_level_task_on_worker_without_children_is_einval(void **state) {
    (void)state;
    fixture *f = make_with(2, 0);
    assert_int_equal(strata_worker_next_level_count(f->w), 0);
    run_body(f, body_next_level_without_children);
    assert_probe(f, 0, STRATA_EINVAL, "no next-level worker");
    destroy(f);
}

static void body_sub_without_sub_workers(strata_orch *o, fixture *f) {
    strata_task_args a;
    strata_args_init(&a);
    PROBE(f, strata_orch_submit_sub(o, f->noop, &a));
}

static void sub_task_on_worker_without_sub_workers_is_einval(void **state) {
    (void)state;
    fixture *f = make_with(0, 1);
    run_body(f, body_sub_without_sub_workers);
    assert_probe(f, 0, STRATA_EINVAL, "sub workers");
    destroy(f);
}

static void body_duplicate_target(strata_orch *o, fixture *f) {
    strata_task_args a[2];
    strata_args_init(&a[0]);
    strata_args_init(&a[1]);
    int dup[2] = {f->ep_id[1], f->ep_id[1]};
    int ok[2] = {f->ep_id[1], f->ep_id[0]};
    PROBE(f, strata_orch_submit_next_level_group(o, f->nl, a, NULL, dup, 2));
    PROBE(f, strata_orch_submit_next_level_group(o, f->nl, a, NULL, ok, 2)); /* control */
}

static void duplicate_group_target_is_einval(void **state) {
    (void)state;
    fixture *f = make();
    run_body(f, body_duplicate_target);
    assert_probe(f, 0, STRATA_EINVAL, "twice");
    assert_probe(f, 1, STRATA_OK, "");
    assert_int_equal(st_test_ep_count(f->ep[0]), 1);
    assert_int_equal(st_test_ep_count(f->ep[1]), 1);
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
    PROBE(f, strata_orch_submit_sub_group(o, f->noop, a, 0));                    /* 0 */
    PROBE(f, strata_orch_submit_sub_group(o, f->noop, a, -1));                   /* 1 */
    PROBE(f, strata_orch_submit_sub_group(o, f->noop, a, STRATA_MAX_GROUP + 1)); /* 2 */
    PROBE(f, strata_orch_submit_sub_group(o, f->noop, a, 3));                    /* 3 */
    PROBE(f, strata_orch_submit_next_level_group(o, f->nl, a, NULL, ids, 0));    /* 4 */
    PROBE(f, strata_orch_submit_next_level_group(o, f->nl, a, NULL, ids,
                                                 STRATA_MAX_GROUP + 1));      /* 5 */
    PROBE(f, strata_orch_submit_next_level_group(o, f->nl, a, NULL, ids, 3)); /* 6 */
    PROBE(f, strata_orch_submit_sub_group(o, f->noop, a, 2));                 /* 7 */
    free(a);
}

static void group_size_out_of_range_is_einval(void **state) {
    (void)state;
    fixture *f = make(); /* 2 sub workers, 2 next-level workers */
    run_body(f, body_group_sizes);
    assert_probe(f, 0, STRATA_EINVAL, "members");
    assert_probe(f, 1, STRATA_EINVAL, "members");
    assert_probe(f, 2, STRATA_EINVAL, "members");
    assert_probe(f, 3, STRATA_EINVAL, "sub workers");
    assert_probe(f, 4, STRATA_EINVAL, "members");
    assert_probe(f, 5, STRATA_EINVAL, "members");
    assert_probe(f, 6, STRATA_EINVAL, "no next-level worker");
    assert_probe(f, 7, STRATA_OK, "");
    assert_int_equal(atomic_load(&f->noop_runs), 2); /* only the control group ran */
    destroy(f);
}

static void body_call_config_flags(strata_orch *o, fixture *f) {
    strata_task_args a;
    strata_args_init(&a);
    strata_call_config cc = {.block_dim = 0, .flags = 0x2};
    PROBE(f, strata_orch_submit_next_level(o, f->nl, &a, &cc, f->ep_id[0]));
    cc.flags = 0;
    PROBE(f, strata_orch_submit_next_level(o, f->nl, &a, &cc, f->ep_id[0]));
    cc.flags = STRATA_CALL_DIAGNOSTICS;
    PROBE(f, strata_orch_submit_next_level(o, f->nl, &a, &cc, f->ep_id[0]));
}

static void unknown_call_config_flags_are_einval(void **state) {
    (void)state;
    fixture *f = make();
    run_body(f, body_call_config_flags);
    assert_probe(f, 0, STRATA_EINVAL, "flags");
    assert_probe(f, 1, STRATA_OK, "");
    assert_probe(f, 2, STRATA_OK, "");
    destroy(f);
}

/* ==== tensor views ============================================================ */

static void view_rank_outside_1_to_5_is_einval(void **state) {
    (void)state;
    fixture *f = make();
    strata_tensor t;
    int64_t shape[6] = {2, 2, 2, 2, 2, 2};
    assert_fails(STRATA_EINVAL, "rank",
                 strata_tensor_view(f->buf, 0, STRATA_U8, 0, shape, NULL, &t));
    assert_fails(STRATA_EINVAL, "rank",
                 strata_tensor_view(f->buf, 0, STRATA_U8, 6, shape, NULL, &t));
    assert_fails(STRATA_EINVAL, "rank",
                 strata_tensor_view(f->buf, 0, STRATA_U8, -1, shape, NULL, &t));
    assert_fails(STRATA_EINVAL, "rank", strata_tensor_contiguous(f->buf, STRATA_U8, 6, shape, &t));
    assert_ok(strata_tensor_view(f->buf, 0, STRATA_U8, 5, shape, NULL, &t));
    assert_int_equal(t.rank, 5);
    destroy(f);
}

static void view_with_unknown_dtype_is_einval(void **state) {
    (void)state;
    fixture *f = make();
    strata_tensor t;
    int64_t n = 4;
    assert_fails(STRATA_EINVAL, "dtype",
                 strata_tensor_view(f->buf, 0, STRATA_DTYPE_COUNT, 1, &n, NULL, &t));
    assert_fails(STRATA_EINVAL, "dtype",
                 strata_tensor_view(f->buf, 0, (strata_dtype)-3, 1, &n, NULL, &t));
    destroy(f);
}

static void view_with_non_positive_dimension_is_einval(void **state) {
    (void)state;
    fixture *f = make();
    strata_tensor t;
    int64_t zero[2] = {4, 0}, neg[2] = {-2, 4};
    assert_fails(STRATA_EINVAL, "dimension",
                 strata_tensor_view(f->buf, 0, STRATA_I32, 2, zero, NULL, &t));
    assert_fails(STRATA_EINVAL, "dimension",
                 strata_tensor_view(f->buf, 0, STRATA_I32, 2, neg, NULL, &t));
    assert_fails(STRATA_EINVAL, "dimension",
                 strata_tensor_contiguous(f->buf, STRATA_I32, 2, zero, &t));
    destroy(f);
}

static void view_with_non_positive_stride_is_einval(void **state) {
    (void)state;
    fixture *f = make();
    strata_tensor t;
    int64_t shape[2] = {4, 4};
    int64_t zero[2] = {4, 0}, neg[2] = {-4, 1};
    assert_fails(STRATA_EINVAL, "stride",
                 strata_tensor_view(f->buf, 64, STRATA_I32, 2, shape, zero, &t));
    assert_fails(STRATA_EINVAL, "stride",
                 strata_tensor_view(f->buf, 64, STRATA_I32, 2, shape, neg, &t));
    int64_t ok[2] = {8, 2}; /* a legal strided view */
    assert_ok(strata_tensor_view(f->buf, 0, STRATA_I32, 2, shape, ok, &t));
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
    assert_ok(strata_tensor_view(f->buf, BUF_BYTES - 4, STRATA_I32, 1, &one, NULL, &t));
    assert_ok(strata_tensor_view(f->buf, 0, STRATA_I32, 1, &all, NULL, &t));
    /* one byte past it: not */
    assert_fails(STRATA_EINVAL, "buffer",
                 strata_tensor_view(f->buf, BUF_BYTES - 3, STRATA_I32, 1, &one, NULL, &t));
    assert_fails(STRATA_EINVAL, "buffer",
                 strata_tensor_view(f->buf, 4, STRATA_I32, 1, &all, NULL, &t));
    int64_t too_many = all + 1;
    assert_fails(STRATA_EINVAL, "buffer",
                 strata_tensor_contiguous(f->buf, STRATA_I32, 1, &too_many, &t));
    /* a stride that steps over the end */
    assert_fails(STRATA_EINVAL, "buffer",
                 strata_tensor_view(f->buf, 0, STRATA_I32, 1, &two, &big_stride, &t));
    /* values whose products overflow 64 bits */
    assert_fails(STRATA_EINVAL, "buffer",
                 strata_tensor_view(f->buf, UINT64_MAX - 1, STRATA_I32, 1, &one, NULL, &t));
    int64_t huge = INT64_MAX;
    assert_fails(STRATA_EINVAL, "buffer",
                 strata_tensor_view(f->buf, 0, STRATA_F64, 1, &huge, NULL, &t));
    int64_t shp[3] = {2, 2, 4}, wrap[3] = {INT64_MAX, INT64_MAX, 1};
    assert_fails(STRATA_EINVAL, "buffer",
                 strata_tensor_view(f->buf, 0, STRATA_U8, 3, shp, wrap, &t));
    destroy(f);
}

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
    PROBE(f, strata_orch_submit_sub(o, f->noop, &a));
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
    assert_probe(f, 0, STRATA_EINVAL, "rank");
    assert_probe(f, 1, STRATA_EINVAL, "rank");
    assert_probe(f, 2, STRATA_EINVAL, "dimension");
    assert_probe(f, 3, STRATA_EINVAL, "dimension");
    assert_probe(f, 4, STRATA_EINVAL, "stride");
    assert_probe(f, 5, STRATA_EINVAL, "stride");
    assert_probe(f, 6, STRATA_EINVAL, "outside its buffer");
    assert_probe(f, 7, STRATA_EINVAL, "outside its buffer");
    assert_probe(f, 8, STRATA_EINVAL, "outside its buffer");
    assert_probe(f, 9, STRATA_EINVAL, "dtype");
    assert_probe(f, 10, STRATA_EINVAL, "no buffer");
    assert_probe(f, 11, STRATA_OK, "");
    assert_int_equal(atomic_load(&f->noop_runs), 1); /* only the control task ran */
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
    assert_probe(f, 0, STRATA_EINVAL, "outside its buffer");
    assert_probe(f, 1, STRATA_EINVAL, "outside its buffer");
    assert_int_equal(atomic_load(&f->noop_runs), 0);
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
    assert_probe(f, 0, STRATA_EINVAL, "rank");
    assert_probe(f, 1, STRATA_EINVAL, "rank");
    assert_probe(f, 2, STRATA_EINVAL, "dimension");
    assert_probe(f, 3, STRATA_EINVAL, "dimension");
    assert_probe(f, 4, STRATA_EINVAL, "dtype");
    assert_probe(f, 5, STRATA_OK, "");
    destroy(f);
}

/* ==== argument lists ========================================================== */

static void body_too_many_tensors(strata_orch *o, fixture *f) {
    strata_task_args a;
    strata_args_init(&a);
    for (int i = 0; i < STRATA_MAX_TENSORS; i++) {
        strata_tensor t = i32_view(f, i, 1, 1);
        PROBE(f, strata_args_add_tensor(&a, &t, STRATA_IN)); /* 0..15 */
    }
    strata_tensor extra = i32_view(f, 100, 1, 1);
    PROBE(f, strata_args_add_tensor(&a, &extra, STRATA_IN));                /* 16 */
    PROBE(f, a.invalid ? STRATA_OK : STRATA_EINVAL);                        /* 17 */
    PROBE(f, a.ntensors == STRATA_MAX_TENSORS ? STRATA_OK : STRATA_EINVAL); /* 18 */
    PROBE(f, strata_orch_submit_sub(o, f->noop, &a));                       /* 19 */
}

static void too_many_tensors_invalidate_the_args_and_the_submit(void **state) {
    (void)state;
    fixture *f = make();
    run_body(f, body_too_many_tensors);
    for (int i = 0; i < STRATA_MAX_TENSORS; i++)
        assert_probe(f, i, STRATA_OK, "");
    assert_probe(f, 16, STRATA_ECAPACITY, "tensor arguments");
    assert_probe(f, 17, STRATA_OK, "");
    assert_probe(f, 18, STRATA_OK, "");
    assert_probe(f, 19, STRATA_EINVAL, "invalid");
    assert_int_equal(atomic_load(&f->noop_runs), 0);
    destroy(f);
}

static void body_too_many_scalars(strata_orch *o, fixture *f) {
    strata_task_args a;
    strata_args_init(&a);
    for (int i = 0; i < STRATA_MAX_SCALARS; i++)
        PROBE(f, strata_args_add_scalar(&a, (uint64_t)i));                    /* 0..15 */
    PROBE(f, strata_args_add_scalar(&a, 99));                                 /* 16 */
    PROBE(f, strata_orch_submit_sub(o, f->noop, &a));                         /* 17 */
    PROBE(f, strata_orch_submit_next_level(o, f->nl, &a, NULL, f->ep_id[0])); /* 18 */
    /* re-initialising makes them usable again */
    strata_args_init(&a);
    PROBE(f, strata_orch_submit_sub(o, f->noop, &a)); /* 19 */
}

static void too_many_scalars_invalidate_the_args_and_the_submit(void **state) {
    (void)state;
    fixture *f = make();
    run_body(f, body_too_many_scalars);
    for (int i = 0; i < STRATA_MAX_SCALARS; i++)
        assert_probe(f, i, STRATA_OK, "");
    assert_probe(f, 16, STRATA_ECAPACITY, "scalar arguments");
    assert_probe(f, 17, STRATA_EINVAL, "invalid");
    assert_probe(f, 18, STRATA_EINVAL, "invalid");
    assert_probe(f, 19, STRATA_OK, "");
    assert_int_equal(atomic_load(&f->noop_runs), 1);
    assert_int_equal(st_test_ep_count(f->ep[0]), 0);
    destroy(f);
}

static void body_unknown_tag(strata_orch *o, fixture *f) {
    strata_task_args a;
    strata_args_init(&a);
    strata_tensor t = i32_view(f, 0, 4, 1);
    PROBE(f, strata_args_add_tensor(&a, &t, (strata_tag)(STRATA_NO_DEP + 1)));
    PROBE(f, strata_orch_submit_sub(o, f->noop, &a));
}

static void unknown_tag_invalidates_the_args(void **state) {
    (void)state;
    fixture *f = make();
    run_body(f, body_unknown_tag);
    assert_probe(f, 0, STRATA_EINVAL, "tag");
    assert_probe(f, 1, STRATA_EINVAL, "invalid");
    assert_int_equal(atomic_load(&f->noop_runs), 0);
    destroy(f);
}

static void body_group_member_invalid(strata_orch *o, fixture *f) {
    strata_task_args a[2];
    strata_args_init(&a[0]);
    strata_args_init(&a[1]);
    for (int i = 0; i <= STRATA_MAX_SCALARS; i++)
        strata_args_add_scalar(&a[1], 1);
    PROBE(f, strata_orch_submit_sub_group(o, f->noop, a, 2));
}

static void invalid_args_of_one_group_member_fail_the_group(void **state) {
    (void)state;
    fixture *f = make();
    run_body(f, body_group_member_invalid);
    assert_probe(f, 0, STRATA_EINVAL, "member 1");
    assert_int_equal(atomic_load(&f->noop_runs), 0);
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
    PROBE(f, strata_orch_submit_sub(o, f->noop, &a));
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
        assert_probe(f, i, STRATA_EINVAL, "overlap");
    assert_int_equal(atomic_load(&f->noop_runs), 0);
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
    PROBE(f, strata_orch_submit_sub_group(o, f->noop, m, 2)); /* 0: write + write */
    strata_args_init(&m[1]);
    strata_args_add_tensor(&m[1], &mid, STRATA_IN);
    PROBE(f, strata_orch_submit_sub_group(o, f->noop, m, 2)); /* 1: write + read */
    strata_args_init(&m[0]);
    strata_args_add_tensor(&m[0], &lo, STRATA_IN);
    PROBE(f, strata_orch_submit_sub_group(o, f->noop, m, 2)); /* 2: read + read: fine */
    strata_args_init(&m[1]);
    strata_args_add_tensor(&m[1], &hi, STRATA_OUT);
    strata_args_init(&m[0]);
    strata_args_add_tensor(&m[0], &lo, STRATA_OUT);
    PROBE(f, strata_orch_submit_sub_group(o, f->noop, m, 2)); /* 3: disjoint writes: fine */
}

static void group_members_overlapping_where_one_writes_are_einval(void **state) {
    (void)state;
    fixture *f = make();
    run_body(f, body_group_members_overlap);
    assert_probe(f, 0, STRATA_EINVAL, "overlap");
    assert_probe(f, 1, STRATA_EINVAL, "overlap");
    assert_probe(f, 2, STRATA_OK, "");
    assert_probe(f, 3, STRATA_OK, "");
    destroy(f);
}

static void body_overlap_accepted(strata_orch *o, fixture *f) {
    strata_tensor all = i32_view(f, 0, 64, 1);
    strata_tensor low = i32_view(f, 0, 32, 1);
    strata_tensor high = i32_view(f, 32, 32, 1);
    strata_tensor even = i32_view(f, 0, 32, 2), odd = i32_view(f, 1, 32, 2);
    int64_t tile[2] = {4, 4}, rows[2] = {16, 1};
    strata_tensor left, right;
    strata_tensor_view(f->buf, 0, STRATA_I32, 2, tile, rows, &left);
    strata_tensor_view(f->buf, 16, STRATA_I32, 2, tile, rows, &right); /* columns 4..7 */
    probe_pair(o, f, all, STRATA_IN, all, STRATA_IN);                  /* 0: IN + IN */
    probe_pair(o, f, low, STRATA_IN, all, STRATA_IN);                  /* 1 */
    probe_pair(o, f, low, STRATA_OUT, high, STRATA_IN);                /* 2: disjoint ranges */
    probe_pair(o, f, high, STRATA_INOUT, low, STRATA_OUT);             /* 3 */
    probe_pair(o, f, even, STRATA_OUT, odd, STRATA_IN);                /* 4: interleaved */
    probe_pair(o, f, odd, STRATA_INOUT, even, STRATA_OUT);             /* 5 */
    probe_pair(o, f, left, STRATA_OUT, right, STRATA_INOUT);           /* 6: 2-D tiles */
}

static void non_conflicting_args_of_one_task_are_accepted(void **state) {
    (void)state;
    fixture *f = make();
    run_body(f, body_overlap_accepted);
    for (int i = 0; i < 7; i++)
        assert_probe(f, i, STRATA_OK, "");
    assert_int_equal(atomic_load(&f->noop_runs), 7);
    destroy(f);
}

static void body_same_memory_other_identity(strata_orch *o, fixture *f) {
    /* Two identities wrapping the same memory never alias (identity decides). */
    strata_buffer *b2;
    if (strata_buffer_wrap(f->w, strata_buffer_data(f->buf), BUF_BYTES, &b2) != STRATA_OK) {
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
    assert_probe(f, 0, STRATA_OK, "");
    destroy(f);
}

/* ==== configuration ============================================================ */

/* strata_worker_create(cfg) fails with EINVAL naming `field` and writes NULL. */
#define assert_config_rejected(cfg, field)                                                         \
    do {                                                                                           \
        strata_worker *cr_w = (strata_worker *)&(cfg);                                             \
        assert_fails(STRATA_EINVAL, field, strata_worker_create(&(cfg), &cr_w));                   \
        assert_null(cr_w);                                                                         \
    } while (0)

static void config_task_window_must_be_a_power_of_two(void **state) {
    (void)state;
    strata_worker_config cfg;
    uint32_t bad[] = {0, 1, 3, 6, 4095, 4097, 1u << 25, UINT32_MAX};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        strata_worker_config_init(&cfg);
        cfg.task_window = bad[i];
        assert_config_rejected(cfg, "task_window");
    }
    strata_worker_config_init(&cfg);
    cfg.task_window = 2;
    strata_worker *w;
    assert_ok(strata_worker_create(&cfg, &w));
    strata_worker_destroy(w);
}

static void config_pipeline_depth_must_be_1_or_2(void **state) {
    (void)state;
    strata_worker_config cfg;
    uint32_t bad[] = {0, 3, 100};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        strata_worker_config_init(&cfg);
        cfg.pipeline_depth = bad[i];
        assert_config_rejected(cfg, "pipeline_depth");
    }
    for (uint32_t d = 1; d <= 2; d++) {
        strata_worker_config_init(&cfg);
        cfg.pipeline_depth = d;
        strata_worker *w;
        assert_ok(strata_worker_create(&cfg, &w));
        strata_worker_destroy(w);
    }
}

static void config_heap_ring_bytes_must_be_a_multiple_of_1024(void **state) {
    (void)state;
    strata_worker_config cfg;
    uint64_t bad[] = {1, 1000, 1025, (64ull << 20) + 512};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        strata_worker_config_init(&cfg);
        cfg.heap_ring_bytes = bad[i];
        assert_config_rejected(cfg, "heap_ring_bytes");
    }
    uint64_t good[] = {0, 1024, 64 * 1024};
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        strata_worker_config_init(&cfg);
        cfg.heap_ring_bytes = good[i];
        strata_worker *w;
        assert_ok(strata_worker_create(&cfg, &w));
        strata_worker_destroy(w);
    }
}

static void config_process_sub_mode_is_not_available(void **state) {
    (void)state;
    strata_worker_config cfg;
    strata_worker_config_init(&cfg);
    cfg.sub_mode = STRATA_HOST_PROCESS;
    assert_config_rejected(cfg, "sub_mode");
    strata_worker_config_init(&cfg);
    cfg.sub_mode = (strata_host_mode)7;
    assert_config_rejected(cfg, "sub_mode");
}

static void config_other_limits_are_checked(void **state) {
    (void)state;
    strata_worker_config cfg;
    strata_worker_config_init(&cfg);
    cfg.sub_workers = STRATA_MAX_SUB_WORKERS + 1;
    assert_config_rejected(cfg, "sub_workers");
    strata_worker_config_init(&cfg);
    cfg.capacity_timeout_ns = 0;
    assert_config_rejected(cfg, "capacity_timeout_ns");
    strata_worker_config_init(&cfg);
    cfg.spin_ns = UINT32_MAX;
    assert_config_rejected(cfg, "spin_ns");
}

static void config_defaults_are_documented_values(void **state) {
    (void)state;
    strata_worker_config cfg;
    memset(&cfg, 0xab, sizeof cfg);
    strata_worker_config_init(&cfg);
    assert_int_equal(cfg.level, 3);
    assert_int_equal(cfg.sub_workers, 2);
    assert_int_equal(cfg.sub_mode, STRATA_HOST_THREAD);
    assert_int_equal(cfg.task_window, 4096);
    assert_int_equal(cfg.pipeline_depth, 2);
    assert_int_equal(cfg.heap_ring_bytes, 64ull << 20);
    assert_int_equal(cfg.capacity_timeout_ns, 10 * SEC);
    assert_int_equal(cfg.spin_ns, 20000);
}

/* ==== callable names ============================================================= */

static void duplicate_callable_name_is_einval(void **state) {
    (void)state;
    fixture *f = make();
    strata_callable c = 77;
    assert_fails(STRATA_EINVAL, "already registered",
                 strata_worker_register_sub(f->w, "noop", noop_fn, f, &c));
    assert_int_equal(c, 77);
    /* names are unique across kinds */
    assert_fails(STRATA_EINVAL, "already registered",
                 st_register_next_level(f->w, "noop", NULL, NULL, NULL, &c));
    assert_fails(STRATA_EINVAL, "already registered",
                 strata_worker_register_sub(f->w, "nl", noop_fn, f, &c));
    /* the original still works */
    assert_ok(strata_worker_run(f->w, orch_noop_task, f));
    assert_int_equal(atomic_load(&f->noop_runs), 1);
    destroy(f);
}

static void empty_or_overlong_callable_name_is_einval(void **state) {
    (void)state;
    fixture *f = make();
    strata_callable c;
    assert_fails(STRATA_EINVAL, "name", strata_worker_register_sub(f->w, "", noop_fn, f, &c));
    char longname[65];
    memset(longname, 'a', 64);
    longname[64] = '\0';
    assert_fails(STRATA_EINVAL, "name", strata_worker_register_sub(f->w, longname, noop_fn, f, &c));
    longname[63] = '\0'; /* 63 characters: the longest allowed */
    assert_ok(strata_worker_register_sub(f->w, longname, noop_fn, f, &c));
    destroy(f);
}

/* docs/api.md: STRATA_ECAPACITY at 1024 callables per worker, ids 0..1023,
 * whatever their kind; the message names the limit. */
static void the_callable_registry_is_full_at_its_documented_limit(void **state) {
    (void)state;
    fixture *f = make();
    char name[32];
    strata_callable c = -1, last = -1;
    int rc = STRATA_OK;
    for (int i = 0; rc == STRATA_OK && i < 2000; i++) {
        snprintf(name, sizeof name, "filler%d", i);
        rc = strata_worker_register_sub(f->w, name, noop_fn, f, &c);
        if (rc == STRATA_OK)
            last = c;
    }
    assert_int_equal(rc, STRATA_ECAPACITY);
    assert_message_mentions("at most 1024 callables per worker");
    assert_int_equal(last, 1023);
    assert_fails(STRATA_ECAPACITY, "1024",
                 st_register_next_level(f->w, "one_more", NULL, NULL, NULL, &c));
    assert_ok(strata_worker_run(f->w, orch_noop_task, f)); /* the registered ones still run */
    destroy(f);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(null_config_and_out_on_create_are_einval),
        cmocka_unit_test(null_worker_on_lifecycle_calls_is_einval),
        cmocka_unit_test(null_arguments_to_register_sub_are_einval),
        cmocka_unit_test(null_arguments_to_run_calls_are_einval),
        cmocka_unit_test(null_arguments_to_buffer_calls_are_einval),
        cmocka_unit_test(zero_byte_buffers_are_einval),
        cmocka_unit_test(null_arguments_to_tensor_calls_are_einval),
        cmocka_unit_test(null_arguments_to_args_calls_are_einval),
        cmocka_unit_test(null_arguments_inside_orchestration_are_einval),
        cmocka_unit_test(submit_before_init_is_estate),
        cmocka_unit_test(init_twice_is_estate),
        cmocka_unit_test(init_after_close_is_estate),
        cmocka_unit_test(close_is_idempotent),
        cmocka_unit_test(close_of_never_initialised_worker_with_endpoints_is_clean),
        cmocka_unit_test(submit_after_close_is_eclosed),
        cmocka_unit_test(register_after_close_is_eclosed),
        cmocka_unit_test(register_after_init_is_allowed),
        cmocka_unit_test(close_waits_for_running_runs),
        cmocka_unit_test(expired_wait_leaves_unfinished_run_alone),
        cmocka_unit_test(submit_and_close_inside_orchestration_are_estate),
        cmocka_unit_test(orch_pointer_used_after_function_returned_is_estate),
        cmocka_unit_test(submit_from_another_thread_during_orchestration_is_estate),
        cmocka_unit_test(unknown_callable_id_is_einval),
        cmocka_unit_test(callable_of_the_wrong_kind_is_einval),
        cmocka_unit_test(unknown_next_level_worker_id_is_einval),
        cmocka_unit_test(next_level_task_on_worker_without_children_is_einval),
        cmocka_unit_test(sub_task_on_worker_without_sub_workers_is_einval),
        cmocka_unit_test(duplicate_group_target_is_einval),
        cmocka_unit_test(group_size_out_of_range_is_einval),
        cmocka_unit_test(unknown_call_config_flags_are_einval),
        cmocka_unit_test(view_rank_outside_1_to_5_is_einval),
        cmocka_unit_test(view_with_unknown_dtype_is_einval),
        cmocka_unit_test(view_with_non_positive_dimension_is_einval),
        cmocka_unit_test(view_with_non_positive_stride_is_einval),
        cmocka_unit_test(view_outside_its_buffer_is_einval),
        cmocka_unit_test(hand_modified_tensor_is_rejected_at_submit),
        cmocka_unit_test(hand_modified_tensor_whose_extent_overflows_is_rejected),
        cmocka_unit_test(orch_alloc_with_bad_shape_is_einval),
        cmocka_unit_test(too_many_tensors_invalidate_the_args_and_the_submit),
        cmocka_unit_test(too_many_scalars_invalidate_the_args_and_the_submit),
        cmocka_unit_test(unknown_tag_invalidates_the_args),
        cmocka_unit_test(invalid_args_of_one_group_member_fail_the_group),
        cmocka_unit_test(overlapping_args_where_one_writes_are_einval_in_both_orders),
        cmocka_unit_test(group_members_overlapping_where_one_writes_are_einval),
        cmocka_unit_test(non_conflicting_args_of_one_task_are_accepted),
        cmocka_unit_test(overlap_is_decided_on_buffer_identity),
        cmocka_unit_test(config_task_window_must_be_a_power_of_two),
        cmocka_unit_test(config_pipeline_depth_must_be_1_or_2),
        cmocka_unit_test(config_heap_ring_bytes_must_be_a_multiple_of_1024),
        cmocka_unit_test(config_process_sub_mode_is_not_available),
        cmocka_unit_test(config_other_limits_are_checked),
        cmocka_unit_test(config_defaults_are_documented_values),
        cmocka_unit_test(duplicate_callable_name_is_einval),
        cmocka_unit_test(the_callable_registry_is_full_at_its_documented_limit),
        cmocka_unit_test(empty_or_overlong_callable_name_is_einval),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
