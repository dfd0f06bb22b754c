// label: concurrency
/* tests/unit/test_scope.c - scopes, heap rings and the task window seen
 * through a real Worker: the nesting limit, scope_end misuse, scopes left
 * open, reclamation of runtime memory at scope_end, ring choice by depth,
 * exhausted and disabled heaps, and the task-window timeout.
 *
 * Owns: the observable contract of DESIGN §5.1 (window back-pressure) and
 * §5.3 (heaps and scopes).
 * Must never: assert wall-clock magnitudes (capacity timeouts are set short
 * only so the failing cases finish quickly), or run cmocka assertions inside
 * an orchestration function (results are recorded and asserted afterwards).
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
#define MS 1000000ull
#define KIB 1024ull

/* The fixture's worker (a manual test endpoint for "nl" when asked for, a
 * 4 KiB buffer), its config, this file's task bodies and what orchestration
 * functions recorded (ts probes). */
typedef struct sfx {
    ts_worker t;
    strata_worker_config cfg;
    strata_callable fill, check, gate_wait;
    _Atomic int bad_values; /* elements a check task found wrong */
    _Atomic int tasks_done;
    ts_probes pr;
    int iterations; /* loop iterations an orchestration function completed */
    void *addr[8];
    uint64_t bytes[8];
} sfx;

/* ---- task bodies ---------------------------------------------------------- */

static void sleep_us(long us) {
    struct timespec ts = {us / 1000000, (us % 1000000) * 1000};
    nanosleep(&ts, NULL);
}

/* tensor 0 (I32, any layout) = scalar 0 */
static int fill_fn(const strata_task_view *a, void *user) {
    sfx *f = user;
    const strata_tensor *t = strata_args_tensor(a, 0);
    int32_t *p = strata_args_data(a, 0);
    int64_t n = strata_tensor_numel(t);
    for (int64_t i = 0; i < n; i++)
        p[i] = (int32_t)strata_args_scalar(a, 0);
    atomic_fetch_add(&f->tasks_done, 1);
    return 0;
}

/* counts elements of tensor 0 that differ from scalar 0 */
static int check_fn(const strata_task_view *a, void *user) {
    sfx *f = user;
    const strata_tensor *t = strata_args_tensor(a, 0);
    const int32_t *p = strata_args_data(a, 0);
    int64_t n = strata_tensor_numel(t);
    int bad = 0;
    for (int64_t i = 0; i < n; i++)
        bad += p[i] != (int32_t)strata_args_scalar(a, 0);
    atomic_fetch_add(&f->bad_values, bad);
    atomic_fetch_add(&f->tasks_done, 1);
    return 0;
}

static int gate_wait_fn(const strata_task_view *a, void *user) {
    (void)a;
    sfx *f = user;
    uint64_t deadline = st_deadline_after(10 * SEC);
    while (!atomic_load(&f->t.gate_open)) {
        if (st_now_ns() >= deadline) {
            atomic_fetch_add(&f->t.gate_timeouts, 1);
            break;
        }
        sleep_us(100);
    }
    atomic_fetch_add(&f->tasks_done, 1);
    return 0;
}

/* ---- fixture ---------------------------------------------------------------- */

static void default_config(strata_worker_config *cfg) {
    strata_worker_config_init(cfg);
    cfg->sub_workers = 2;
}

static sfx *make_cfg(const strata_worker_config *cfg, int manual_endpoint) {
    sfx *f = calloc(1, sizeof *f);
    assert_non_null(f);
    f->cfg = *cfg;
    ts_worker_opts o;
    ts_worker_opts_init(&o);
    o.cfg = *cfg;
    o.endpoints = manual_endpoint ? 1 : 0;
    o.manual_endpoints = 1;
    o.buffers[0] = 4096;
    o.subs[0] = (ts_sub){"fill", fill_fn, f, &f->fill};
    o.subs[1] = (ts_sub){"check", check_fn, f, &f->check};
    o.subs[2] = (ts_sub){"gate_wait", gate_wait_fn, f, &f->gate_wait};
    ts_worker_open(&f->t, &o);
    return f;
}

static sfx *make(void) {
    strata_worker_config cfg;
    default_config(&cfg);
    return make_cfg(&cfg, 0);
}

static void destroy(sfx *f) {
    ts_worker_close(&f->t); /* opens the gate, asserts no gate_wait task timed out */
    free(f);
}

#define RECORD(f, expr) TS_PROBE(&(f)->pr, expr)
#define assert_result(f, i, status, needle) assert_probe(&(f)->pr, i, status, needle)

/* Submit fn(value) with one tensor under tag. */
static int submit1(strata_orch *o, strata_callable fn, strata_tensor *t, strata_tag tag,
                   uint64_t value) {
    strata_task_args a;
    strata_args_init(&a);
    strata_args_add_scalar(&a, value);
    strata_args_add_tensor(&a, t, tag);
    int rc = strata_orch_submit_sub(o, fn, &a);
    if (rc == STRATA_OK)
        *t = a.tensors[0];
    return rc;
}

/* Nothing left behind: every slot free, every ring empty. */
static void assert_engine_idle(sfx *f) {
    st_engine_lock(f->t.w);
    uint32_t nfree = f->t.w->slots.nfree, cap = f->t.w->slots.capacity;
    uint64_t used[ST_HEAP_RINGS];
    for (int r = 0; r < ST_HEAP_RINGS; r++)
        used[r] = st_heap_ring_bytes(&f->t.w->heap) ? st_heap_used(&f->t.w->heap, r) : 0;
    st_engine_unlock(f->t.w);
    assert_int_equal(nfree, cap);
    for (int r = 0; r < ST_HEAP_RINGS; r++)
        if (used[r] != 0)
            fail_msg("heap ring %d still holds %llu bytes", r, (unsigned long long)used[r]);
}

/* ==== nesting ================================================================= */

static int orch_nest_to_the_limit(strata_orch *o, void *arg) {
    sfx *f = arg;
    int begun = 0;
    for (int i = 0; i < STRATA_MAX_SCOPE_DEPTH - 1; i++)
        begun += strata_orch_scope_begin(o) == STRATA_OK;
    f->iterations = begun;
    RECORD(f, strata_orch_scope_begin(o)); /* 0: the 64th scope, counting the outer one */
    /* work at the deepest level still runs */
    strata_tensor t;
    int64_t n = 16;
    RECORD(f, strata_orch_alloc(o, 1, &n, STRATA_I32, &t)); /* 1 */
    RECORD(f, submit1(o, f->fill, &t, STRATA_OUT, 5));      /* 2 */
    RECORD(f, submit1(o, f->check, &t, STRATA_IN, 5));      /* 3 */
    int ended = 0;
    for (int i = 0; i < STRATA_MAX_SCOPE_DEPTH - 1; i++)
        ended += strata_orch_scope_end(o) == STRATA_OK;
    RECORD(f, ended == STRATA_MAX_SCOPE_DEPTH - 1 ? STRATA_OK : STRATA_EINVAL); /* 4 */
    RECORD(f, strata_orch_scope_end(o)); /* 5: only the outer scope is left */
    return STRATA_OK;
}

static void nesting_limit_counts_the_outer_scope(void **state) {
    (void)state;
    sfx *f = make();
    assert_ok(strata_worker_run(f->t.w, orch_nest_to_the_limit, f));
    assert_int_equal(f->iterations, STRATA_MAX_SCOPE_DEPTH - 1);
    assert_result(f, 0, STRATA_ECAPACITY, "STRATA_MAX_SCOPE_DEPTH");
    assert_result(f, 1, STRATA_OK, "");
    assert_result(f, 2, STRATA_OK, "");
    assert_result(f, 3, STRATA_OK, "");
    assert_result(f, 4, STRATA_OK, "");
    assert_result(f, 5, STRATA_ESTATE, "no scope is open");
    assert_int_equal(atomic_load(&f->tasks_done), 2);
    assert_int_equal(atomic_load(&f->bad_values), 0);
    assert_engine_idle(f);
    destroy(f);
}

static int orch_end_without_begin(strata_orch *o, void *arg) {
    sfx *f = arg;
    RECORD(f, strata_orch_scope_end(o));   /* 0 */
    RECORD(f, strata_orch_scope_begin(o)); /* 1 */
    RECORD(f, strata_orch_scope_end(o));   /* 2 */
    RECORD(f, strata_orch_scope_end(o));   /* 3 */
    return STRATA_OK;
}

static void scope_end_without_an_open_scope_is_estate(void **state) {
    (void)state;
    sfx *f = make();
    assert_ok(strata_worker_run(f->t.w, orch_end_without_begin, f));
    assert_result(f, 0, STRATA_ESTATE, "no scope is open");
    assert_result(f, 1, STRATA_OK, "");
    assert_result(f, 2, STRATA_OK, "");
    assert_result(f, 3, STRATA_ESTATE, "no scope is open");
    destroy(f);
}

static int orch_scope_calls_per_run(strata_orch *o, void *arg) {
    sfx *f = arg;
    RECORD(f, strata_orch_scope_begin(o));
    RECORD(f, strata_orch_scope_begin(o));
    return STRATA_OK; /* left open: the next run starts at the outer scope again */
}

static void every_run_starts_at_depth_one(void **state) {
    (void)state;
    sfx *f = make();
    for (int i = 0; i < 40; i++) /* 80 begins in all: more than the limit */
        assert_ok(strata_worker_run(f->t.w, orch_scope_calls_per_run, f));
    assert_int_equal(f->pr.n, 80);
    for (int i = 0; i < 80; i++)
        assert_result(f, i, STRATA_OK, "");
    destroy(f);
}

/* ==== scopes left open ============================================================ */

typedef struct open_ctx {
    sfx *f;
    int fail; /* return an error instead of STRATA_OK */
} open_ctx;

static int orch_leave_scopes_open(strata_orch *o, void *arg) {
    open_ctx *c = arg;
    sfx *f = c->f;
    for (int d = 0; d < 5; d++) {
        RECORD(f, strata_orch_scope_begin(o));
        strata_tensor t;
        int64_t n = 256;
        RECORD(f, strata_orch_alloc(o, 1, &n, STRATA_I32, &t));
        RECORD(f, submit1(o, f->fill, &t, STRATA_OUT, (uint64_t)d));
        RECORD(f, submit1(o, f->check, &t, STRATA_IN, (uint64_t)d));
    }
    return c->fail ? st_fail(STRATA_EINVAL, "deliberate failure with 5 scopes open") : STRATA_OK;
}

static void scopes_left_open_are_closed_when_the_function_returns(void **state) {
    (void)state;
    sfx *f = make();
    open_ctx c = {.f = f};
    assert_ok(strata_worker_run(f->t.w, orch_leave_scopes_open, &c));
    for (int i = 0; i < f->pr.n; i++)
        assert_result(f, i, STRATA_OK, "");
    assert_int_equal(atomic_load(&f->tasks_done), 10);
    assert_int_equal(atomic_load(&f->bad_values), 0);
    assert_engine_idle(f);
    f->pr.n = 0;
    assert_ok(strata_worker_run(f->t.w, orch_leave_scopes_open, &c)); /* and again */
    assert_engine_idle(f);
    destroy(f);
}

static void scopes_left_open_by_a_failing_function_are_closed(void **state) {
    (void)state;
    sfx *f = make();
    open_ctx c = {.f = f, .fail = 1};
    strata_run *h;
    assert_ok(strata_worker_submit(f->t.w, orch_leave_scopes_open, &c, &h));
    assert_status(STRATA_EINVAL, strata_run_wait(h, STRATA_WAIT_FOREVER));
    assert_non_null(strstr(strata_run_error(h), "deliberate failure"));
    strata_run_release(h);
    assert_engine_idle(f);
    c.fail = 0;
    assert_ok(strata_worker_run(f->t.w, orch_leave_scopes_open, &c)); /* the worker is fine */
    assert_engine_idle(f);
    destroy(f);
}

/* ==== reclamation at scope_end ========================================================== */

#define LOOP_ITERATIONS 1000
#define LOOP_ELEMS 4096 /* 16 KiB of I32 */

typedef struct loop_ctx {
    sfx *f;
    int use_begin, use_end;
} loop_ctx;

static int orch_alloc_loop(strata_orch *o, void *arg) {
    loop_ctx *c = arg;
    sfx *f = c->f;
    for (int i = 0; i < LOOP_ITERATIONS; i++) {
        if (c->use_begin)
            STRATA_TRY(strata_orch_scope_begin(o));
        strata_tensor t;
        int64_t n = LOOP_ELEMS;
        int rc = strata_orch_alloc(o, 1, &n, STRATA_I32, &t);
        if (rc != STRATA_OK) {
            ts_probe_record(&f->pr, rc);
            return rc;
        }
        STRATA_TRY(submit1(o, f->fill, &t, STRATA_OUT, (uint64_t)i));
        STRATA_TRY(submit1(o, f->check, &t, STRATA_IN, (uint64_t)i));
        if (c->use_end)
            STRATA_TRY(strata_orch_scope_end(o));
        f->iterations = i + 1;
    }
    return STRATA_OK;
}

static strata_worker_config small_heap_config(void) {
    strata_worker_config cfg;
    default_config(&cfg);
    cfg.heap_ring_bytes = 64 * KIB;
    cfg.capacity_timeout_ns = 200 * MS;
    return cfg;
}

static void scope_end_reclaims_inner_memory_so_a_small_ring_suffices(void **state) {
    (void)state;
    strata_worker_config cfg = small_heap_config();
    cfg.capacity_timeout_ns = 10 * SEC; /* waiting for reclamation is expected here */
    sfx *f = make_cfg(&cfg, 0);
    loop_ctx c = {.f = f, .use_begin = 1, .use_end = 1};
    int rc = strata_worker_run(f->t.w, orch_alloc_loop, &c);
    if (rc != STRATA_OK)
        fail_msg("run failed after %d iterations: %s", f->iterations, strata_error_message());
    assert_int_equal(f->iterations, LOOP_ITERATIONS);
    assert_int_equal(atomic_load(&f->tasks_done), 2 * LOOP_ITERATIONS);
    assert_int_equal(atomic_load(&f->bad_values), 0);
    assert_engine_idle(f);
    destroy(f);
}

/* The run's result and the recorded allocation failure both name the setting. */
static void assert_heap_exhausted(sfx *f, int run_rc) {
    assert_int_equal(run_rc, STRATA_ECAPACITY);
    if (!strcasestr(strata_error_message(), "heap_ring_bytes"))
        fail_msg("run error '%s' does not name heap_ring_bytes", strata_error_message());
    assert_int_equal(f->pr.n, 1);
    assert_result(f, 0, STRATA_ECAPACITY, "heap_ring_bytes");
    assert_engine_idle(f);
}

static void without_scope_end_the_ring_is_exhausted(void **state) {
    (void)state;
    strata_worker_config cfg = small_heap_config();
    sfx *f = make_cfg(&cfg, 0);
    loop_ctx c = {.f = f, .use_begin = 1, .use_end = 0};
    assert_heap_exhausted(f, strata_worker_run(f->t.w, orch_alloc_loop, &c));
    /* depth 2 -> ring 1, depth 3 -> ring 2, depth >= 4 -> ring 3 (4 x 16 KiB fit) */
    assert_int_equal(f->iterations, 6);
    assert_int_equal(atomic_load(&f->bad_values), 0);
    destroy(f);
}

static void without_any_scope_the_outer_scope_holds_everything(void **state) {
    (void)state;
    strata_worker_config cfg = small_heap_config();
    sfx *f = make_cfg(&cfg, 0);
    loop_ctx c = {.f = f, .use_begin = 0, .use_end = 0};
    assert_heap_exhausted(f, strata_worker_run(f->t.w, orch_alloc_loop, &c));
    assert_int_equal(f->iterations, 4); /* ring 0 holds 4 x 16 KiB */
    destroy(f);
}

static void heap_exhausted_message_states_the_current_size(void **state) {
    (void)state;
    strata_worker_config cfg = small_heap_config();
    sfx *f = make_cfg(&cfg, 0);
    loop_ctx c = {.f = f, .use_begin = 0, .use_end = 0};
    assert_status(STRATA_ECAPACITY, strata_worker_run(f->t.w, orch_alloc_loop, &c));
    const char *m = f->pr.p[0].msg;
    /* "what to change": the message should say what heap_ring_bytes is now (64 KiB) */
    if (!strstr(m, "65536") && !strcasestr(m, "64 KiB") && !strcasestr(m, "64KiB"))
        fail_msg("message '%s' does not state the current heap_ring_bytes (64 KiB)", m);
    destroy(f);
}

/* ==== ring by depth ============================================================================
 */

static int orch_alloc_per_depth(strata_orch *o, void *arg) {
    sfx *f = arg;
    for (int d = 0; d < 5; d++) { /* depths 1..5 */
        if (d > 0)
            RECORD(f, strata_orch_scope_begin(o));
        strata_tensor t;
        int64_t n = 256 * (d + 1); /* different sizes: aliasing would show */
        RECORD(f, strata_orch_alloc(o, 1, &n, STRATA_I32, &t));
        f->addr[d] = t.base;
        f->bytes[d] = t.buffer_bytes;
    }
    /* an OUT tensor without memory at depth 5 comes from ring 3 too */
    strata_tensor out;
    memset(&out, 0, sizeof out);
    out.dtype = STRATA_I32;
    out.rank = 1;
    out.shape[0] = 64;
    RECORD(f, submit1(o, f->fill, &out, STRATA_OUT, 1));
    f->addr[5] = out.base;
    f->bytes[5] = out.buffer_bytes;
    return STRATA_OK;
}

static int ring_of(sfx *f, const void *p, uint64_t bytes) {
    for (int r = 0; r < ST_HEAP_RINGS; r++) {
        const char *base = f->t.w->heap.rings[r].base;
        if ((const char *)p >= base && (const char *)p + bytes <= base + f->cfg.heap_ring_bytes)
            return r;
    }
    return -1;
}

static void allocations_come_from_the_ring_of_their_scope_depth(void **state) {
    (void)state;
    strata_worker_config cfg;
    default_config(&cfg);
    cfg.heap_ring_bytes = 64 * KIB;
    sfx *f = make_cfg(&cfg, 0);
    assert_ok(strata_worker_run(f->t.w, orch_alloc_per_depth, f));
    for (int i = 0; i < f->pr.n; i++)
        assert_result(f, i, STRATA_OK, "");
    const int expected[6] = {0, 1, 2, 3, 3, 3};
    for (int i = 0; i < 6; i++) {
        assert_non_null(f->addr[i]);
        if (ring_of(f, f->addr[i], f->bytes[i]) != expected[i])
            fail_msg("allocation %d (depth %d) came from ring %d, expected ring %d", i,
                     i < 5 ? i + 1 : 5, ring_of(f, f->addr[i], f->bytes[i]), expected[i]);
    }
    /* live allocations never alias */
    for (int i = 0; i < 6; i++)
        for (int j = i + 1; j < 6; j++) {
            const char *a = f->addr[i], *b = f->addr[j];
            if (a < b + f->bytes[j] && b < a + f->bytes[i])
                fail_msg("allocations %d and %d overlap", i, j);
        }
    assert_engine_idle(f);
    destroy(f);
}

/* ==== heap disabled =============================================================================
 */

static int orch_heap_disabled(strata_orch *o, void *arg) {
    sfx *f = arg;
    strata_tensor t;
    int64_t n = 16;
    RECORD(f, strata_orch_alloc(o, 1, &n, STRATA_I32, &t)); /* 0 */
    strata_tensor user;
    RECORD(f, strata_tensor_contiguous(f->t.buf[0], STRATA_I32, 1, &n, &user)); /* 1 */
    RECORD(f, submit1(o, f->fill, &user, STRATA_OUT, 3)); /* 2: user memory is fine */
    strata_tensor out;
    memset(&out, 0, sizeof out);
    out.dtype = STRATA_I32;
    out.rank = 1;
    out.shape[0] = 16;
    RECORD(f, submit1(o, f->fill, &out, STRATA_OUT, 4)); /* 3 */
    return STRATA_OK;
}

static void disabled_heap_fails_runtime_allocations_naming_the_setting(void **state) {
    (void)state;
    strata_worker_config cfg;
    default_config(&cfg);
    cfg.heap_ring_bytes = 0;
    sfx *f = make_cfg(&cfg, 0);
    int rc = strata_worker_run(f->t.w, orch_heap_disabled, f);
    assert_result(f, 0, STRATA_ECAPACITY, "heap_ring_bytes");
    assert_result(f, 1, STRATA_OK, "");
    assert_result(f, 2, STRATA_OK, "");
    assert_result(f, 3, STRATA_ECAPACITY, "heap_ring_bytes");
    /* the run may carry the failed submit as its error, but it ends */
    assert_true(rc == STRATA_OK || rc == STRATA_ECAPACITY);
    const int32_t *p = strata_buffer_data(f->t.buf[0]);
    assert_int_equal(p[0], 3);
    assert_engine_idle(f);
    destroy(f);
}

/* ==== scope_end never blocks ================================================================== */

static int orch_scope_end_with_running_task(strata_orch *o, void *arg) {
    sfx *f = arg;
    RECORD(f, strata_orch_scope_begin(o));
    strata_tensor t;
    int64_t n = 16;
    RECORD(f, strata_orch_alloc(o, 1, &n, STRATA_I32, &t));
    RECORD(f, submit1(o, f->gate_wait, &t, STRATA_IN, 0));
    RECORD(f, strata_orch_scope_end(o));
    /* the gated task cannot have finished: scope_end did not wait for it */
    RECORD(f, atomic_load(&f->tasks_done) == 0 ? STRATA_OK : STRATA_ESTATE);
    return STRATA_OK;
}

static void scope_end_does_not_wait_for_its_tasks(void **state) {
    (void)state;
    sfx *f = make();
    strata_run *h;
    assert_ok(strata_worker_submit(f->t.w, orch_scope_end_with_running_task, f, &h));
    ts_gate_open(&f->t);
    assert_ok(strata_run_wait(h, STRATA_WAIT_FOREVER));
    strata_run_release(h);
    for (int i = 0; i < 5; i++)
        assert_result(f, i, STRATA_OK, "");
    assert_int_equal(atomic_load(&f->tasks_done), 1);
    assert_engine_idle(f);
    destroy(f);
}

/* ==== the task window ========================================================================= */

typedef struct chain_ctx {
    sfx *f;
    int ntasks;
} chain_ctx;

/* A chain of next-level tasks on one buffer: each waits for the previous. */
static int orch_next_level_chain(strata_orch *o, void *arg) {
    chain_ctx *c = arg;
    sfx *f = c->f;
    strata_tensor t;
    int64_t n = 16;
    STRATA_TRY(strata_tensor_contiguous(f->t.buf[0], STRATA_I32, 1, &n, &t));
    for (int i = 0; i < c->ntasks; i++) {
        strata_task_args a;
        strata_args_init(&a);
        strata_args_add_scalar(&a, (uint64_t)i);
        strata_args_add_tensor(&a, &t, STRATA_INOUT);
        st_clear_error();
        int rc = strata_orch_submit_next_level(o, f->t.nl, &a, NULL, f->t.ep_id[0]);
        ts_probe_record(&f->pr, rc);
        if (rc != STRATA_OK)
            return rc;
        f->iterations = i + 1;
    }
    return STRATA_OK;
}

static void full_task_window_times_out_naming_task_window(void **state) {
    (void)state;
    strata_worker_config cfg;
    default_config(&cfg);
    cfg.task_window = 4;
    cfg.capacity_timeout_ns = 200 * MS;
    sfx *f = make_cfg(&cfg, 1);
    chain_ctx c = {.f = f, .ntasks = 8};
    strata_run *h;
    /* The first task is held by the endpoint; the next three wait on it. */
    assert_ok(strata_worker_submit(f->t.w, orch_next_level_chain, &c, &h));
    assert_int_equal(f->iterations, 4);
    for (int i = 0; i < 4; i++)
        assert_result(f, i, STRATA_OK, "");
    assert_result(f, 4, STRATA_ECAPACITY, "task_window");
    assert_int_equal(st_test_ep_finish(f->t.ep[0], STRATA_OK, "", 10 * SEC), 0);
    assert_status(STRATA_ECAPACITY, strata_run_wait(h, STRATA_WAIT_FOREVER));
    assert_non_null(strstr(strata_run_error(h), "task_window"));
    strata_run_release(h);
    assert_int_equal(st_test_ep_count(f->t.ep[0]), 1); /* the waiting ones were cancelled */
    assert_engine_idle(f);
    destroy(f);
}

typedef struct finisher {
    sfx *f;
    int n, finished;
} finisher;

static void *finish_held_tasks(void *arg) {
    finisher *fin = arg;
    for (int i = 0; i < fin->n; i++) {
        if (st_test_ep_finish(fin->f->t.ep[0], STRATA_OK, "", 10 * SEC) != 0)
            break;
        fin->finished++;
    }
    return NULL;
}

static void full_task_window_waits_for_a_slot_to_free(void **state) {
    (void)state;
    strata_worker_config cfg;
    default_config(&cfg);
    cfg.task_window = 4;
    sfx *f = make_cfg(&cfg, 1);
    finisher fin = {.f = f, .n = 20};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, finish_held_tasks, &fin), 0);
    chain_ctx c = {.f = f, .ntasks = 20};
    int rc = strata_worker_run(f->t.w, orch_next_level_chain, &c);
    pthread_join(t, NULL);
    assert_ok(rc);
    assert_int_equal(fin.finished, 20);
    assert_int_equal(f->iterations, 20);
    assert_int_equal(st_test_ep_count(f->t.ep[0]), 20);
    for (uint32_t i = 0; i < 20; i++)
        assert_int_equal(st_test_ep_record_at(f->t.ep[0], i).scalar0, i); /* in chain order */
    assert_engine_idle(f);
    destroy(f);
}

/* Runtime memory used after its scope ended and its last user finished is
 * refused (STRATA_ESTALE), not silently read from reused memory. */
typedef struct stale_ctx {
    strata_callable touch;
    int rc_after;
    char msg[256];
} stale_ctx;

static int touch_fn(const strata_task_view *a, void *u) {
    (void)u;
    *(int32_t *)strata_args_data(a, 0) = 1;
    return 0;
}

static int orch_use_after_scope(strata_orch *o, void *arg) {
    stale_ctx *c = arg;
    strata_tensor t;
    int64_t n = 4;
    STRATA_TRY(strata_orch_scope_begin(o));
    STRATA_TRY(strata_orch_alloc(o, 1, &n, STRATA_I32, &t));
    STRATA_TRY(strata_orch_scope_end(o)); /* nothing uses it: reclaimed now */
    strata_task_args a;
    strata_args_init(&a);
    strata_args_add_tensor(&a, &t, STRATA_INOUT);
    c->rc_after = strata_orch_submit_sub(o, c->touch, &a);
    snprintf(c->msg, sizeof c->msg, "%s", strata_error_message());
    return STRATA_OK;
}

static void runtime_memory_used_after_its_scope_is_stale(void **state) {
    (void)state;
    strata_worker_config cfg;
    strata_worker_config_init(&cfg);
    cfg.sub_workers = 1;
    strata_worker *w;
    assert_ok(strata_worker_create(&cfg, &w));
    stale_ctx c = {0};
    assert_ok(strata_worker_register_sub(w, "touch", touch_fn, NULL, &c.touch));
    assert_ok(strata_worker_init(w));
    assert_ok(strata_worker_run(w, orch_use_after_scope, &c)); /* the run itself is untouched */
    assert_int_equal(c.rc_after, STRATA_ESTALE);
    assert_non_null(strstr(c.msg, "reclaimed"));
    strata_worker_destroy(w);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(runtime_memory_used_after_its_scope_is_stale),
        cmocka_unit_test(nesting_limit_counts_the_outer_scope),
        cmocka_unit_test(scope_end_without_an_open_scope_is_estate),
        cmocka_unit_test(every_run_starts_at_depth_one),
        cmocka_unit_test(scopes_left_open_are_closed_when_the_function_returns),
        cmocka_unit_test(scopes_left_open_by_a_failing_function_are_closed),
        cmocka_unit_test(scope_end_reclaims_inner_memory_so_a_small_ring_suffices),
        cmocka_unit_test(without_scope_end_the_ring_is_exhausted),
        cmocka_unit_test(without_any_scope_the_outer_scope_holds_everything),
        cmocka_unit_test(heap_exhausted_message_states_the_current_size),
        cmocka_unit_test(allocations_come_from_the_ring_of_their_scope_depth),
        cmocka_unit_test(disabled_heap_fails_runtime_allocations_naming_the_setting),
        cmocka_unit_test(scope_end_does_not_wait_for_its_tasks),
        cmocka_unit_test(full_task_window_times_out_naming_task_window),
        cmocka_unit_test(full_task_window_waits_for_a_slot_to_free),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
