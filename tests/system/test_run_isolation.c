// label: concurrency
/* tests/system/test_run_isolation.c - failures stay inside the run that
 * caused them, while other runs over the same buffers overlap with it.
 *
 * Owns: whole-runtime scenarios about run isolation: a failing run next to a
 * healthy one (either order), fail-fast submits inside a failed run, and an
 * orchestration function that fails (its error wins, unstarted tasks are
 * cancelled, started ones finish), followed by runs that must still work.
 * Must never: rely on timing to decide an outcome; every "not yet" is held by
 * a gate the test opens itself, and every wait is bounded so nothing hangs.
 */
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "test_support.h"

#define ELEMS 64
#define NFLAGS 4096
#define WAIT_NS (60ull * 1000 * 1000 * 1000)
#define GATE_LIMIT_NS (60ull * 1000 * 1000 * 1000)

/* What a task body does; scalar 0 of every task. */
typedef enum body_op {
    OP_GATE_ADD,  /* wait for the gate, then INOUT t0[i] += value */
    OP_GATE_FAIL, /* wait for the gate, then fail */
    OP_FILL,      /* OUT t0[i] = value */
    OP_ADD,       /* INOUT t0[i] += value */
    OP_SCALE,     /* IN t0, OUT t1: t1[i] = t0[i] * value */
    OP_FAIL       /* fail at once */
} body_op;

/* Scalars: op, value, flag index. */
enum { SC_OP, SC_VALUE, SC_FLAG, SC_COUNT };

typedef struct iso_ctx {
    strata_worker *w;
    strata_callable body;
    strata_buffer *x, *y, *z, *s;
    atomic_int gate;            /* 0 = closed: gated bodies wait */
    atomic_int started[NFLAGS]; /* a body began */
    atomic_int ran[NFLAGS];     /* 1 = finished successfully, 2 = failed */
} iso_ctx;

static void sleep_us(long us) {
    struct timespec ts = {0, us * 1000};
    nanosleep(&ts, NULL);
}

static uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Bounded wait for a flag; false if it never came (the caller then fails). */
static bool wait_flag(atomic_int *flag, int value) {
    uint64_t end = now_ns() + GATE_LIMIT_NS;
    while (atomic_load(flag) != value) {
        if (now_ns() > end)
            return false;
        sleep_us(50);
    }
    return true;
}

static int iso_body(const strata_task_view *a, void *user) {
    iso_ctx *ctx = user;
    uint64_t op = strata_args_scalar(a, SC_OP);
    int32_t value = (int32_t)strata_args_scalar(a, SC_VALUE);
    uint64_t flag = strata_args_scalar(a, SC_FLAG);
    if (flag >= NFLAGS) {
        strata_task_set_error("bad flag index");
        return 1;
    }
    atomic_store(&ctx->started[flag], 1);
    if ((op == OP_GATE_ADD || op == OP_GATE_FAIL) && !wait_flag(&ctx->gate, 1)) {
        strata_task_set_error("the test never opened the gate");
        atomic_store(&ctx->ran[flag], 2);
        return 1;
    }
    if (op == OP_FAIL || op == OP_GATE_FAIL) {
        atomic_store(&ctx->ran[flag], 2);
        strata_task_set_error("planned failure of task #%u", (unsigned)flag);
        return 1;
    }
    int32_t *t0 = strata_args_data(a, 0);
    int64_t n = strata_tensor_numel(strata_args_tensor(a, 0));
    for (int64_t i = 0; i < n; i++) {
        switch (op) {
        case OP_GATE_ADD:
        case OP_ADD:
            t0[i] += value;
            break;
        case OP_FILL:
            t0[i] = value;
            break;
        case OP_SCALE:
            ((int32_t *)strata_args_data(a, 1))[i] = t0[i] * value;
            break;
        }
    }
    atomic_store(&ctx->ran[flag], 1);
    return 0;
}

static void iso_setup(iso_ctx *ctx, uint32_t sub_workers) {
    memset(ctx, 0, sizeof *ctx);
    strata_worker_config cfg;
    strata_worker_config_init(&cfg);
    cfg.sub_workers = sub_workers;
    cfg.sub_mode = TS_SUB_MODE;
    cfg.pipeline_depth = 2;
    assert_ok(strata_worker_create(&cfg, &ctx->w));
    assert_ok(strata_worker_register_sub(ctx->w, "iso_body", iso_body, ctx, &ctx->body));
    strata_buffer **bufs[] = {&ctx->x, &ctx->y, &ctx->z, &ctx->s};
    for (size_t i = 0; i < 4; i++)
        assert_ok(strata_buffer_create(ctx->w, ELEMS * sizeof(int32_t), bufs[i]));
    assert_ok(strata_worker_init(ctx->w));
}

static void iso_teardown(iso_ctx *ctx) {
    assert_ok(strata_worker_close(ctx->w));
    strata_buffer_destroy(ctx->x);
    strata_buffer_destroy(ctx->y);
    strata_buffer_destroy(ctx->z);
    strata_buffer_destroy(ctx->s);
    strata_worker_destroy(ctx->w);
}

static strata_tensor whole(const strata_buffer *b) {
    strata_tensor t;
    int64_t shape[1] = {ELEMS};
    assert_ok(strata_tensor_contiguous(b, STRATA_I32, 1, shape, &t));
    return t;
}

/* One task: op over t0 (tag0) and optionally t1 (tag1). */
static int submit_op(strata_orch *o, iso_ctx *ctx, body_op op, int32_t value, int flag,
                     const strata_buffer *b0, strata_tag tag0, const strata_buffer *b1,
                     strata_tag tag1) {
    strata_task_args a;
    strata_args_init(&a);
    strata_tensor t0 = whole(b0);
    STRATA_TRY(strata_args_add_tensor(&a, &t0, tag0));
    if (b1) {
        strata_tensor t1 = whole(b1);
        STRATA_TRY(strata_args_add_tensor(&a, &t1, tag1));
    }
    STRATA_TRY(strata_args_add_scalar(&a, op));
    STRATA_TRY(strata_args_add_scalar(&a, (uint64_t)(uint32_t)value));
    STRATA_TRY(strata_args_add_scalar(&a, (uint64_t)flag));
    return strata_orch_submit_sub(o, ctx->body, &a);
}

static void assert_all(const strata_buffer *b, int32_t expected, const char *name) {
    const int32_t *p = strata_buffer_data(b);
    for (int i = 0; i < ELEMS; i++)
        if (p[i] != expected)
            fail_msg("%s[%d] = %d, expected %d", name, i, p[i], expected);
}

static void assert_contains(const char *haystack, const char *needle) {
    if (!strstr(haystack, needle))
        fail_msg("error \"%s\" does not contain \"%s\"", haystack, needle);
}

static void assert_not_contains(const char *haystack, const char *needle) {
    if (strstr(haystack, needle))
        fail_msg("error \"%s\" must not contain \"%s\"", haystack, needle);
}

/* ---- a failing run next to a healthy one ------------------------------------ */

enum {
    A_GATE = 0,
    A_FAIL,
    A_POISONED,
    A_INDEPENDENT,
    A_POISONED2,
    B0 = 10,
    B1,
    B2,
    B3,
    C0 = 20,
    C1
};

static int orch_failing_a(strata_orch *o, void *arg) {
    iso_ctx *c = arg;
    STRATA_TRY(submit_op(o, c, OP_GATE_ADD, 1, A_GATE, c->x, STRATA_INOUT, NULL, 0));
    STRATA_TRY(submit_op(o, c, OP_FAIL, 0, A_FAIL, c->x, STRATA_INOUT, NULL, 0));
    STRATA_TRY(submit_op(o, c, OP_SCALE, 2, A_POISONED, c->x, STRATA_IN, c->y, STRATA_OUT));
    STRATA_TRY(submit_op(o, c, OP_FILL, 7, A_INDEPENDENT, c->z, STRATA_OUT, NULL, 0));
    STRATA_TRY(submit_op(o, c, OP_ADD, 5, A_POISONED2, c->y, STRATA_INOUT, NULL, 0));
    return STRATA_OK;
}

static int orch_healthy_b(strata_orch *o, void *arg) {
    iso_ctx *c = arg;
    STRATA_TRY(submit_op(o, c, OP_ADD, 100, B0, c->x, STRATA_INOUT, NULL, 0));
    STRATA_TRY(submit_op(o, c, OP_SCALE, 2, B1, c->x, STRATA_IN, c->y, STRATA_OUT));
    STRATA_TRY(submit_op(o, c, OP_ADD, 1, B2, c->z, STRATA_INOUT, NULL, 0));
    STRATA_TRY(submit_op(o, c, OP_ADD, 1, B3, c->y, STRATA_INOUT, NULL, 0));
    return STRATA_OK;
}

static int orch_third_c(strata_orch *o, void *arg) {
    iso_ctx *c = arg;
    STRATA_TRY(submit_op(o, c, OP_ADD, 1, C0, c->x, STRATA_INOUT, NULL, 0));
    STRATA_TRY(submit_op(o, c, OP_SCALE, 3, C1, c->x, STRATA_IN, c->s, STRATA_OUT));
    return STRATA_OK;
}

static void test_failing_run_leaves_overlapping_run_untouched(void **state) {
    (void)state;
    iso_ctx *ctx = ts_shared_calloc(1, sizeof *ctx); /* bodies in children see it */
    iso_setup(ctx, 2);

    strata_run *ha = NULL, *hb = NULL;
    assert_ok(strata_worker_submit(ctx->w, orch_failing_a, ctx, &ha));
    assert_true(wait_flag(&ctx->started[A_GATE], 1)); /* run A is executing */
    assert_ok(strata_worker_submit(ctx->w, orch_healthy_b, ctx, &hb));
    /* The gate is closed, so A cannot have finished, and B (not the head run)
     * must not have started a single task. */
    assert_int_equal(strata_run_done(ha), 0);
    assert_int_equal(strata_run_done(hb), 0);
    for (int f = B0; f <= B3; f++)
        assert_int_equal(atomic_load(&ctx->started[f]), 0);
    assert_true(strata_run_id(hb) > strata_run_id(ha));

    atomic_store(&ctx->gate, 1);
    assert_status(STRATA_ETASK, strata_run_wait(ha, WAIT_NS));
    assert_int_equal(strata_run_status(ha), STRATA_ETASK);
    assert_contains(strata_run_error(ha), "planned failure of task #1");
    assert_int_equal(atomic_load(&ctx->ran[A_GATE]), 1);
    assert_int_equal(atomic_load(&ctx->ran[A_FAIL]), 2);
    assert_int_equal(atomic_load(&ctx->started[A_POISONED]), 0);
    assert_int_equal(atomic_load(&ctx->started[A_POISONED2]), 0);
    assert_int_equal(atomic_load(&ctx->ran[A_INDEPENDENT]), 1);

    assert_ok(strata_run_wait(hb, WAIT_NS));
    assert_int_equal(strata_run_status(hb), STRATA_OK);
    assert_string_equal(strata_run_error(hb), "");
    for (int f = B0; f <= B3; f++)
        assert_int_equal(atomic_load(&ctx->ran[f]), 1);
    assert_all(ctx->x, 101, "x"); /* A's gate task (+1), then B (+100) */
    assert_all(ctx->y, 203, "y"); /* A's writers of y were poisoned; B: 101*2+1 */
    assert_all(ctx->z, 8, "z");   /* A's independent fill (7), then B (+1) */
    strata_run_release(ha);
    strata_run_release(hb);

    assert_ok(strata_worker_run(ctx->w, orch_third_c, ctx));
    assert_all(ctx->x, 102, "x");
    assert_all(ctx->s, 306, "s");
    iso_teardown(ctx);
    ts_shared_free(ctx, 1, sizeof *ctx);
}

/* The mirror image: the healthy run is the executing head, the failing one is
 * built behind it over the same buffers. */
static int orch_healthy_gated(strata_orch *o, void *arg) {
    iso_ctx *c = arg;
    STRATA_TRY(submit_op(o, c, OP_GATE_ADD, 10, 30, c->x, STRATA_INOUT, NULL, 0));
    STRATA_TRY(submit_op(o, c, OP_SCALE, 2, 31, c->x, STRATA_IN, c->y, STRATA_OUT));
    return STRATA_OK;
}

static int orch_failing_behind(strata_orch *o, void *arg) {
    iso_ctx *c = arg;
    STRATA_TRY(submit_op(o, c, OP_FAIL, 0, 40, c->y, STRATA_INOUT, NULL, 0));
    STRATA_TRY(submit_op(o, c, OP_ADD, 1000, 41, c->y, STRATA_INOUT, NULL, 0)); /* poisoned */
    STRATA_TRY(submit_op(o, c, OP_ADD, 3, 42, c->x, STRATA_INOUT, NULL, 0));    /* independent */
    return STRATA_OK;
}

static void test_failing_run_behind_healthy_head(void **state) {
    (void)state;
    iso_ctx *ctx = ts_shared_calloc(1, sizeof *ctx); /* bodies in children see it */
    iso_setup(ctx, 2);
    strata_run *ha = NULL, *hb = NULL;
    assert_ok(strata_worker_submit(ctx->w, orch_healthy_gated, ctx, &ha));
    assert_true(wait_flag(&ctx->started[30], 1));
    assert_ok(strata_worker_submit(ctx->w, orch_failing_behind, ctx, &hb));
    assert_int_equal(atomic_load(&ctx->started[40]), 0); /* B waits behind the head */
    atomic_store(&ctx->gate, 1);

    assert_ok(strata_run_wait(ha, WAIT_NS));
    assert_string_equal(strata_run_error(ha), "");
    assert_status(STRATA_ETASK, strata_run_wait(hb, WAIT_NS));
    assert_contains(strata_run_error(hb), "planned failure of task #40");
    assert_int_equal(atomic_load(&ctx->started[41]), 0);
    assert_int_equal(atomic_load(&ctx->ran[42]), 1);
    assert_all(ctx->x, 13, "x");
    assert_all(ctx->y, 20, "y");
    strata_run_release(ha);
    strata_run_release(hb);
    iso_teardown(ctx);
    ts_shared_free(ctx, 1, sizeof *ctx);
}

/* ---- fail-fast submits inside a failed run ------------------------------------- */

typedef struct failfast_log {
    iso_ctx *ctx;
    int rc;
    char msg[512];
    int last_flag;
    int alloc_rc;
    int scope_rc;
} failfast_log;

/* Submits a failing task, then independent tasks until a submit is refused
 * (bounded); then checks that alloc and scope calls are refused as well. */
static int orch_failfast(strata_orch *o, void *arg) {
    failfast_log *log = arg;
    iso_ctx *c = log->ctx;
    STRATA_TRY(submit_op(o, c, OP_FAIL, 0, 0, c->x, STRATA_INOUT, NULL, 0));
    /* fill tasks write z: independent of the failed task, never poisoned by it */
    uint64_t end = now_ns() + GATE_LIMIT_NS;
    int flag = 1, rc = STRATA_OK;
    while (rc == STRATA_OK && now_ns() < end && flag < NFLAGS) {
        if (atomic_load(&c->ran[0]) != 2) { /* the failure has not happened yet */
            sleep_us(100);
            continue;
        }
        log->last_flag = flag;
        rc = submit_op(o, c, OP_FILL, flag, flag, c->z, STRATA_OUT, NULL, 0);
        flag++;
        if (rc == STRATA_OK)
            sleep_us(1000); /* the body has failed; give the engine time to record it */
    }
    log->rc = rc;
    snprintf(log->msg, sizeof log->msg, "%s", strata_error_message());
    int64_t shape[1] = {16};
    strata_tensor t;
    log->alloc_rc = strata_orch_alloc(o, 1, shape, STRATA_I32, &t);
    log->scope_rc = strata_orch_scope_begin(o);
    if (log->scope_rc == STRATA_OK)
        (void)strata_orch_scope_end(o);
    return rc;
}

static void test_submits_fail_fast_in_a_failed_run(void **state) {
    (void)state;
    iso_ctx *ctx = ts_shared_calloc(1, sizeof *ctx); /* bodies in children see it */
    iso_setup(ctx, 2);
    failfast_log log = {.ctx = ctx};
    strata_run *h = NULL;
    assert_ok(strata_worker_submit(ctx->w, orch_failfast, &log, &h));
    assert_non_null(h);
    assert_status(STRATA_ETASK, strata_run_wait(h, WAIT_NS));
    assert_contains(strata_run_error(h), "planned failure of task #0");
    if (log.rc == STRATA_OK)
        fail_msg("no submit was refused within 60 s after the run's task failed");
    assert_int_equal(log.rc, strata_run_status(h));
    assert_contains(log.msg, "planned failure of task #0");
    /* the refused submit created no task */
    assert_int_equal(atomic_load(&ctx->started[log.last_flag]), 0);
    /* other orchestration calls in a failed run succeed or report the run's error */
    if (log.alloc_rc != STRATA_OK)
        assert_int_equal(log.alloc_rc, strata_run_status(h));
    if (log.scope_rc != STRATA_OK)
        assert_int_equal(log.scope_rc, strata_run_status(h));
    strata_run_release(h);

    /* the worker goes on: the next run is clean */
    assert_all(ctx->x, 0, "x"); /* the failed task wrote nothing */
    assert_ok(strata_worker_run(ctx->w, orch_third_c, ctx));
    assert_all(ctx->x, 1, "x");
    assert_all(ctx->s, 3, "s");
    iso_teardown(ctx);
    ts_shared_free(ctx, 1, sizeof *ctx);
}

/* ---- a failing orchestration function ------------------------------------------- */

#define CHAIN 24
enum { D_GATE = 50, D_GATE_FAIL = 51, D_FIRST_DEP = 60 };

typedef struct orch_failure {
    iso_ctx *ctx;
    int rc;        /* what the orchestration function returned */
    char msg[512]; /* the message of its own failure */
} orch_failure;

/* Two gated tasks start (one will succeed, one will fail after the orchestration
 * function has failed); many dependants are queued behind them; then the
 * function fails with the error of a call it got wrong. */
static int orch_fails_itself(strata_orch *o, void *arg) {
    orch_failure *f = arg;
    iso_ctx *c = f->ctx;
    STRATA_TRY(submit_op(o, c, OP_GATE_ADD, 1, D_GATE, c->x, STRATA_INOUT, NULL, 0));
    STRATA_TRY(submit_op(o, c, OP_GATE_FAIL, 0, D_GATE_FAIL, c->y, STRATA_INOUT, NULL, 0));
    if (!wait_flag(&c->started[D_GATE], 1) || !wait_flag(&c->started[D_GATE_FAIL], 1))
        return STRATA_ETIMEDOUT;
    for (int i = 0; i < CHAIN; i++) {
        const strata_buffer *b = i % 2 ? c->y : c->x;
        STRATA_TRY(submit_op(o, c, OP_ADD, 1, D_FIRST_DEP + i, b, STRATA_INOUT, NULL, 0));
    }
    /* an independent task with no free worker to start on (both are gated) */
    STRATA_TRY(submit_op(o, c, OP_FILL, 9, D_FIRST_DEP + CHAIN, c->z, STRATA_OUT, NULL, 0));
    /* a view past the end of its buffer: the function's own error */
    strata_tensor t;
    int64_t shape[1] = {ELEMS};
    f->rc = strata_tensor_view(c->z, 4, STRATA_I32, 1, shape, NULL, &t);
    snprintf(f->msg, sizeof f->msg, "%s", strata_error_message());
    return f->rc;
}

static void test_orchestration_error_cancels_unstarted_tasks(void **state) {
    (void)state;
    iso_ctx *ctx = ts_shared_calloc(1, sizeof *ctx); /* bodies in children see it */
    iso_setup(ctx, 2);
    orch_failure f = {.ctx = ctx};
    strata_run *h = NULL;
    assert_ok(
        strata_worker_submit(ctx->w, orch_fails_itself, &f, &h)); /* the run is still returned */
    assert_non_null(h);
    assert_int_equal(f.rc, STRATA_EINVAL);
    assert_true(f.msg[0] != '\0');
    assert_int_equal(strata_run_done(h), 0); /* the gated tasks are still running */
    atomic_store(&ctx->gate, 1);
    assert_status(STRATA_EINVAL, strata_run_wait(h, WAIT_NS));
    assert_int_equal(strata_run_status(h), STRATA_EINVAL);
    /* its own error wins over the started task that failed while draining */
    assert_contains(strata_run_error(h), f.msg);
    assert_not_contains(strata_run_error(h), "planned failure");
    /* started tasks finished; unstarted ones never ran */
    assert_int_equal(atomic_load(&ctx->ran[D_GATE]), 1);
    assert_int_equal(atomic_load(&ctx->ran[D_GATE_FAIL]), 2);
    for (int i = 0; i <= CHAIN; i++)
        assert_int_equal(atomic_load(&ctx->started[D_FIRST_DEP + i]), 0);
    assert_all(ctx->x, 1, "x");
    assert_all(ctx->y, 0, "y");
    assert_all(ctx->z, 0, "z");
    strata_run_release(h);

    /* the worker goes on */
    assert_ok(strata_worker_run(ctx->w, orch_third_c, ctx));
    assert_all(ctx->x, 2, "x");
    assert_all(ctx->s, 6, "s");
    iso_teardown(ctx);
    ts_shared_free(ctx, 1, sizeof *ctx);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_failing_run_leaves_overlapping_run_untouched),
        cmocka_unit_test(test_failing_run_behind_healthy_head),
        cmocka_unit_test(test_submits_fail_fast_in_a_failed_run),
        cmocka_unit_test(test_orchestration_error_cancels_unstarted_tasks),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
