// label: concurrency
/* tests/unit/test_worker.c - the worker (core/worker.c, exec/worker_init.c):
 * its configuration, lifecycle and callable registry.
 *
 * Owns: every config field's check and default, create copying the config,
 * the state rules of init / close / destroy / submit (before init, twice,
 * after close, from inside an orchestration function), close waiting for
 * admitted runs, and registration (names, NULL arguments, ids counting up,
 * the 1024-callable capacity, after init and after close), and the level
 * label in a run's error.
 * Must never: assert on timing, or run cmocka assertions inside an
 * orchestration function (what it sees is recorded and asserted afterwards).
 */
#include "test_support.h"

#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/endpoint.h"
#include "test_endpoint.h"
#include "util/error.h"

#define SEC TS_SEC
#define DOCUMENTED_MAX_CALLABLES 1024 /* docs/api.md, strata_worker_register_sub */

/* Two sub workers and two test endpoints; "count" is the task whose runs are counted. */
typedef struct fixture {
    ts_worker t;
} fixture;

static fixture *make(void) {
    fixture *f = calloc(1, sizeof *f);
    assert_non_null(f);
    ts_worker_opts o;
    ts_worker_opts_init(&o);
    o.endpoints = 2;
    ts_worker_open(&f->t, &o);
    return f;
}

static void destroy(fixture *f) {
    ts_worker_close(&f->t);
    free(f);
}

static void sleep_us(long us) {
    struct timespec ts = {us / 1000000, (us % 1000000) * 1000};
    nanosleep(&ts, NULL);
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

static void *open_gate_later(void *arg) {
    fixture *f = arg;
    sleep_us(20000);
    ts_gate_open(&f->t);
    return NULL;
}

/* What calls that would wait for the worker returned inside its orchestration function. */
typedef struct nested {
    fixture *f;
    int submit_rc, run_rc, close_rc, destroyed;
    char submit_msg[STRATA_ERRMSG_MAX], run_msg[STRATA_ERRMSG_MAX], close_msg[STRATA_ERRMSG_MAX];
    char destroy_msg[STRATA_ERRMSG_MAX];
    strata_run *inner;
} nested;

static int orch_nested_calls(strata_orch *o, void *arg) {
    nested *n = arg;
    st_clear_error();
    n->inner = (strata_run *)n;
    n->submit_rc = strata_worker_submit(n->f->t.w, orch_noop_task, n->f, &n->inner);
    snprintf(n->submit_msg, sizeof n->submit_msg, "%s", strata_error_message());
    st_clear_error();
    n->run_rc = strata_worker_run(n->f->t.w, orch_noop_task, n->f);
    snprintf(n->run_msg, sizeof n->run_msg, "%s", strata_error_message());
    st_clear_error();
    n->close_rc = strata_worker_close(n->f->t.w);
    snprintf(n->close_msg, sizeof n->close_msg, "%s", strata_error_message());
    if (n->destroyed) { /* asked to try destroy too */
        st_clear_error();
        strata_worker_destroy(n->f->t.w); /* refused: the worker stays */
        snprintf(n->destroy_msg, sizeof n->destroy_msg, "%s", strata_error_message());
    }
    return orch_noop_task(o, n->f);
}

static int orch_fail_task(strata_orch *o, void *arg) {
    ts_worker *t = arg;
    strata_task_args a;
    strata_args_init(&a);
    return strata_orch_submit_sub(o, t->fail, &a);
}

static int count_into(const strata_task_view *a, void *user) {
    (void)a;
    atomic_fetch_add((_Atomic int *)user, 1);
    return 0;
}

/* A sub group of two members of `fn`. */
typedef struct group_of_two {
    strata_callable fn;
} group_of_two;

static int orch_group_of_two(strata_orch *o, void *arg) {
    group_of_two *g = arg;
    strata_task_args a[2];
    strata_args_init(&a[0]);
    strata_args_init(&a[1]);
    return strata_orch_submit_sub_group(o, g->fn, a, 2);
}

/* strata_worker_create(cfg) fails with EINVAL naming `field` and writes NULL. */
#define assert_config_rejected(cfg, field)                                                         \
    do {                                                                                           \
        strata_worker *cr_w = (strata_worker *)&(cfg);                                             \
        assert_fails(STRATA_EINVAL, field, strata_worker_create(&(cfg), &cr_w));                   \
        assert_null(cr_w);                                                                         \
    } while (0)

/* strata_worker_create(cfg) succeeds (and the worker is destroyed again). */
static void assert_config_accepted(const strata_worker_config *cfg) {
    strata_worker *w = NULL;
    assert_ok(strata_worker_create(cfg, &w));
    assert_non_null(w);
    strata_worker_destroy(w);
}

/* ==== configuration ============================================================ */

/* Moved from test_api_errors.c. */
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

/* Moved from test_api_errors.c. */
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

/* Moved from test_api_errors.c. */
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

/* strata_worker_init forks the process children first: nothing added before
 * it (a thread-hosted sim chip, a next-level endpoint) may start a thread,
 * or a thread in its start-up at a fork could leave the child a lock that
 * no thread of it releases (a sanitizer's, an allocator's). */
static void *no_op_thread(void *arg) {
    return arg;
}

static void children_added_before_init_start_no_thread_until_init(void **state) {
    (void)state;
    pthread_t t; /* a first thread: ThreadSanitizer starts its own helper thread with it */
    assert_int_equal(pthread_create(&t, NULL, no_op_thread, NULL), 0);
    assert_int_equal(pthread_join(t, NULL), 0);
    int before = ts_thread_count();
    assert_true(before >= 1);
    strata_worker_config cfg;
    strata_worker_config_init(&cfg);
    cfg.sub_workers = 1;
    cfg.sub_mode = STRATA_HOST_PROCESS;
    strata_worker *w;
    assert_ok(strata_worker_create(&cfg, &w));
    strata_chip_config cc;
    strata_chip_config_init(&cc);
    cc.kernel_module = STRATA_SIM_TEST_KERNELS_PATH;
    int chip, ep_id;
    assert_ok(strata_worker_add_chip(w, &cc, &chip));
    assert_ok(st_test_ep_add(w, NULL, &ep_id, NULL));
    assert_int_equal(ts_thread_count(), before);
    assert_ok(strata_worker_init(w));
    assert_true(ts_thread_count() > before); /* they start at init */
    assert_ok(strata_worker_close(w));
    strata_worker_destroy(w);
    assert_int_equal(ts_thread_count(), before);
}

/* Moved from test_api_errors.c. */
static void config_sub_mode_is_thread_or_process(void **state) {
    (void)state;
    strata_worker_config cfg;
    strata_worker_config_init(&cfg);
    cfg.sub_mode = STRATA_HOST_PROCESS;
    strata_worker *w;
    assert_ok(strata_worker_create(&cfg, &w));
    strata_worker_destroy(w);
    strata_worker_config_init(&cfg);
    cfg.sub_mode = (strata_host_mode)7;
    assert_config_rejected(cfg, "sub_mode");
}

/* Moved from test_api_errors.c. */
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
    strata_worker_config_init(&cfg);
    cfg.startup_timeout_ns = 0;
    assert_config_rejected(cfg, "startup_timeout_ns");
    strata_worker_config_init(&cfg);
    cfg.shared_arena_bytes = 0;
    assert_config_rejected(cfg, "shared_arena_bytes");
}

static int cpus_we_may_use(void) {
    cpu_set_t set;
    assert_int_equal(sched_getaffinity(0, sizeof set, &set), 0);
    int n = CPU_COUNT(&set);
    return n < STRATA_MAX_SUB_WORKERS ? n : STRATA_MAX_SUB_WORKERS; /* the default's cap */
}

/* One sub worker per CPU the calling thread may run on: pinned to one CPU
 * (as under `taskset -c 0`), the default is 1. */
static void the_default_sub_workers_follow_the_cpus_we_may_use(void **state) {
    (void)state;
    cpu_set_t all, one;
    assert_int_equal(sched_getaffinity(0, sizeof all, &all), 0);
    int first = 0;
    while (!CPU_ISSET(first, &all))
        first++;
    CPU_ZERO(&one);
    CPU_SET(first, &one);
    assert_int_equal(sched_setaffinity(0, sizeof one, &one), 0);
    strata_worker_config cfg;
    strata_worker_config_init(&cfg);
    assert_int_equal(sched_setaffinity(0, sizeof all, &all), 0);
    assert_int_equal(cfg.sub_workers, 1);
    strata_worker_config_init(&cfg);
    assert_int_equal(cfg.sub_workers, cpus_we_may_use());
}

/* Moved from test_api_errors.c. */
static void config_defaults_are_documented_values(void **state) {
    (void)state;
    strata_worker_config cfg;
    memset(&cfg, 0xab, sizeof cfg);
    strata_worker_config_init(&cfg);
    assert_int_equal(cfg.level, 3);
    assert_int_equal(cfg.sub_workers, cpus_we_may_use()); /* see the test below */
    assert_int_equal(cfg.sub_mode, STRATA_HOST_THREAD);
    assert_int_equal(cfg.task_window, 4096);
    assert_int_equal(cfg.pipeline_depth, 2);
    assert_int_equal(cfg.heap_ring_bytes, 64ull << 20);
    assert_int_equal(cfg.capacity_timeout_ns, 10 * SEC);
    assert_int_equal(cfg.spin_ns, 20000);
    assert_int_equal(cfg.startup_timeout_ns, 30 * SEC);
    assert_int_equal(cfg.shared_arena_bytes, 1ull << 30);
}

static void config_help_while_waiting_must_be_0_or_1(void **state) {
    (void)state;
    strata_worker_config cfg;
    const int bad[] = {2, -1, 100};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        strata_worker_config_init(&cfg);
        cfg.help_while_waiting = bad[i];
        assert_config_rejected(cfg, "help_while_waiting");
    }
    for (int v = 0; v <= 1; v++) {
        strata_worker_config_init(&cfg);
        cfg.help_while_waiting = v;
        assert_config_accepted(&cfg);
    }
}

static void config_limits_are_inclusive(void **state) {
    (void)state;
    strata_worker_config cfg;
    strata_worker_config_init(&cfg);
    cfg.sub_workers = STRATA_MAX_SUB_WORKERS; /* created, never started: no thread yet */
    assert_config_accepted(&cfg);
    strata_worker_config_init(&cfg);
    cfg.sub_workers = 0;
    assert_config_accepted(&cfg);
    strata_worker_config_init(&cfg);
    cfg.spin_ns = 10000000; /* 10 ms */
    assert_config_accepted(&cfg);
    cfg.spin_ns = 10000001;
    assert_config_rejected(cfg, "spin_ns");
    strata_worker_config_init(&cfg);
    cfg.capacity_timeout_ns = 1;
    assert_config_accepted(&cfg);
    strata_worker_config_init(&cfg);
    cfg.task_window = 1u << 16; /* a large power of two (2^24 would map gigabytes here) */
    assert_config_accepted(&cfg);
}

static void the_level_is_a_label_that_failed_runs_name(void **state) {
    (void)state;
    const int levels[] = {7, 0, -2};
    for (size_t i = 0; i < sizeof levels / sizeof levels[0]; i++) {
        ts_worker t;
        ts_worker_opts o;
        ts_worker_opts_init(&o);
        o.cfg.level = levels[i];
        o.cfg.sub_workers = 1;
        ts_worker_open(&t, &o);
        strata_run *h;
        assert_ok(strata_worker_submit(t.w, orch_fail_task, &t, &h));
        assert_status(STRATA_ETASK, strata_run_wait(h, STRATA_WAIT_FOREVER));
        char label[32];
        snprintf(label, sizeof label, "L%d worker sub 0", levels[i]);
        ts_assert_mentions(strata_run_error(h), label);
        strata_run_release(h);
        ts_worker_close(&t);
    }
}

static void create_copies_the_config(void **state) {
    (void)state;
    strata_worker_config cfg;
    strata_worker_config_init(&cfg);
    cfg.sub_workers = 2;
    strata_worker *w;
    assert_ok(strata_worker_create(&cfg, &w));
    cfg.sub_workers = 0; /* changes nothing now */
    cfg.pipeline_depth = 0;
    strata_callable count;
    _Atomic int runs = 0;
    assert_ok(strata_worker_register_sub(w, "count", count_into, &runs, &count));
    assert_ok(strata_worker_init(w));
    group_of_two g = {.fn = count};
    assert_ok(strata_worker_run(w, orch_group_of_two, &g)); /* two sub workers exist */
    assert_int_equal(atomic_load(&runs), 2);
    strata_worker_destroy(w);
}

/* ==== NULL arguments ======================================================== */

/* Moved from test_api_errors.c. */
static void null_config_and_out_on_create_are_einval(void **state) {
    (void)state;
    strata_worker_config_init(NULL); /* documented no-op: must not crash */
    strata_worker_config cfg;
    strata_worker_config_init(&cfg);
    strata_worker *w = (strata_worker *)&cfg;
    assert_fails(STRATA_EINVAL, "NULL", strata_worker_create(NULL, &w));
    assert_fails(STRATA_EINVAL, "NULL", strata_worker_create(&cfg, NULL));
}

/* Moved from test_api_errors.c. */
static void null_worker_on_lifecycle_calls_is_einval(void **state) {
    (void)state;
    assert_fails(STRATA_EINVAL, "NULL", strata_worker_init(NULL));
    assert_fails(STRATA_EINVAL, "NULL", strata_worker_close(NULL));
    strata_worker_destroy(NULL); /* documented no-op */
    assert_int_equal(strata_worker_next_level_count(NULL), 0);
}

/* Moved from test_api_errors.c. */
static void null_arguments_to_register_sub_are_einval(void **state) {
    (void)state;
    fixture *f = make();
    strata_callable c = 123;
    assert_fails(STRATA_EINVAL, "NULL",
                 strata_worker_register_sub(NULL, "x", ts_noop_sub, NULL, &c));
    assert_fails(STRATA_EINVAL, "NULL",
                 strata_worker_register_sub(f->t.w, NULL, ts_noop_sub, NULL, &c));
    assert_fails(STRATA_EINVAL, "NULL",
                 strata_worker_register_sub(f->t.w, "x", ts_noop_sub, NULL, NULL));
    assert_fails(STRATA_EINVAL, "NULL", strata_worker_register_sub(f->t.w, "x", NULL, NULL, &c));
    assert_int_equal(c, 123); /* nothing written on failure */
    /* and "x" was never registered by any of them */
    assert_ok(strata_worker_register_sub(f->t.w, "x", ts_noop_sub, f, &c));
    destroy(f);
}

/* ==== lifecycle =============================================================== */

/* Moved from test_api_errors.c. */
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

/* Moved from test_api_errors.c. */
static void init_twice_is_estate(void **state) {
    (void)state;
    fixture *f = make();
    assert_fails(STRATA_ESTATE, "already initialised", strata_worker_init(f->t.w));
    assert_ok(strata_worker_run(f->t.w, orch_noop_task, f)); /* still works */
    destroy(f);
}

/* Moved from test_api_errors.c. */
static void init_after_close_is_estate(void **state) {
    (void)state;
    fixture *f = make();
    assert_ok(strata_worker_close(f->t.w));
    assert_fails(STRATA_ESTATE, "closed", strata_worker_init(f->t.w));
    destroy(f);
}

/* Moved from test_api_errors.c. */
static void close_is_idempotent(void **state) {
    (void)state;
    fixture *f = make();
    assert_ok(strata_worker_close(f->t.w));
    assert_ok(strata_worker_close(f->t.w));
    destroy(f);
}

/* Moved from test_api_errors.c. */
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

/* Moved from test_api_errors.c. */
static void submit_after_close_is_eclosed(void **state) {
    (void)state;
    fixture *f = make();
    assert_ok(strata_worker_run(f->t.w, orch_noop_task, f));
    assert_ok(strata_worker_close(f->t.w));
    strata_run *h = (strata_run *)f;
    assert_fails(STRATA_ECLOSED, "closed", strata_worker_submit(f->t.w, orch_noop_task, f, &h));
    assert_null(h);
    assert_fails(STRATA_ECLOSED, "closed", strata_worker_run(f->t.w, orch_noop_task, f));
    assert_int_equal(atomic_load(&f->t.counter), 1);
    destroy(f);
}

/* Moved from test_api_errors.c. */
static void register_after_close_is_eclosed(void **state) {
    (void)state;
    fixture *f = make();
    assert_ok(strata_worker_close(f->t.w));
    strata_callable c;
    assert_fails(STRATA_ECLOSED, "closed",
                 strata_worker_register_sub(f->t.w, "late", ts_noop_sub, f, &c));
    assert_fails(STRATA_ECLOSED, "closed",
                 st_register_next_level(f->t.w, "late_nl", NULL, NULL, NULL, &c));
    destroy(f);
}

/* Moved from test_api_errors.c. */
static void register_after_init_is_allowed(void **state) {
    (void)state;
    fixture *f = make();
    strata_callable c;
    assert_ok(strata_worker_register_sub(f->t.w, "after_init", ts_noop_sub, f, &c));
    assert_true(c >= 0);
    destroy(f);
}

/* Moved from test_api_errors.c. */
static void close_waits_for_running_runs(void **state) {
    (void)state;
    fixture *f = make();
    strata_run *h;
    assert_ok(strata_worker_submit(f->t.w, orch_gated_task, f, &h));
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, open_gate_later, f), 0);
    assert_ok(strata_worker_close(f->t.w)); /* returns only once the gated run finished */
    assert_true(strata_run_done(h)); /* before the join: a close that did not wait fails here */
    pthread_join(t, NULL);
    assert_ok(strata_run_status(h));
    strata_run_release(h);
    destroy(f);
}

/* Moved from test_api_errors.c. */
static void submit_and_close_inside_orchestration_are_estate(void **state) {
    (void)state;
    fixture *f = make();
    nested n = {.f = f};
    assert_ok(strata_worker_run(f->t.w, orch_nested_calls, &n)); /* no deadlock */
    assert_int_equal(n.submit_rc, STRATA_ESTATE);
    assert_non_null(strcasestr(n.submit_msg, "inside an orchestration function"));
    assert_null(n.inner);
    assert_int_equal(n.run_rc, STRATA_ESTATE);
    assert_non_null(strcasestr(n.run_msg, "inside an orchestration function"));
    assert_int_equal(n.close_rc, STRATA_ESTATE);
    assert_non_null(strcasestr(n.close_msg, "inside an orchestration function"));
    /* only the outer run's own task ran, and the worker is not closed */
    assert_int_equal(atomic_load(&f->t.counter), 1);
    assert_ok(strata_worker_run(f->t.w, orch_noop_task, f));
    assert_int_equal(atomic_load(&f->t.counter), 2);
    destroy(f);
}

static void destroy_inside_orchestration_does_nothing(void **state) {
    (void)state;
    fixture *f = make();
    nested n = {.f = f, .destroyed = 1};
    assert_ok(strata_worker_run(f->t.w, orch_nested_calls, &n));
    ts_assert_mentions(n.destroy_msg, "inside an orchestration function");
    /* the worker is intact and open: the run's own task ran, and more runs work */
    assert_int_equal(atomic_load(&f->t.counter), 1);
    assert_ok(strata_worker_run(f->t.w, orch_noop_task, f));
    assert_int_equal(atomic_load(&f->t.counter), 2);
    destroy(f);
}

static void destroy_waits_for_a_released_live_run(void **state) {
    (void)state;
    fixture *f = make();
    strata_run *h;
    assert_ok(strata_worker_submit(f->t.w, orch_gated_task, f, &h));
    strata_run_release(h); /* nobody holds it any more; it is still live */
    assert_ok(strata_worker_submit(f->t.w, orch_noop_task, f, &h));
    strata_run_release(h); /* admitted behind it */
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, open_gate_later, f), 0);
    strata_worker_destroy(f->t.w); /* closes first: returns once both runs finished */
    pthread_join(t, NULL);
    assert_int_equal(atomic_load(&f->t.counter), 1); /* the later run's task ran too */
    assert_int_equal(atomic_load(&f->t.gate_timeouts), 0);
    ts_worker_forget(&f->t);
    for (int i = 0; i < TS_MAX_BUFFERS; i++)
        assert_null(f->t.buf[i]);
    free(f);
}

static void next_level_count_counts_children_until_close(void **state) {
    (void)state;
    fixture *f = make();
    assert_int_equal(strata_worker_next_level_count(f->t.w), 2);
    assert_ok(strata_worker_close(f->t.w));
    assert_int_equal(strata_worker_next_level_count(f->t.w), 0);
    destroy(f);
    strata_worker_config cfg;
    strata_worker_config_init(&cfg);
    strata_worker *w;
    assert_ok(strata_worker_create(&cfg, &w));
    assert_int_equal(strata_worker_next_level_count(w), 0);
    strata_worker_destroy(w);
}

/* ==== callables ================================================================ */

/* Moved from test_api_errors.c. */
static void duplicate_callable_name_is_einval(void **state) {
    (void)state;
    fixture *f = make();
    strata_callable c = 77;
    assert_fails(STRATA_EINVAL, "already registered",
                 strata_worker_register_sub(f->t.w, "noop", ts_noop_sub, f, &c));
    assert_int_equal(c, 77);
    /* names are unique across kinds */
    assert_fails(STRATA_EINVAL, "already registered",
                 st_register_next_level(f->t.w, "noop", NULL, NULL, NULL, &c));
    assert_fails(STRATA_EINVAL, "already registered",
                 strata_worker_register_sub(f->t.w, "nl", ts_noop_sub, f, &c));
    /* the original still works */
    assert_ok(strata_worker_run(f->t.w, orch_noop_task, f));
    assert_int_equal(atomic_load(&f->t.counter), 1);
    destroy(f);
}

/* Moved from test_api_errors.c. */
static void empty_or_overlong_callable_name_is_einval(void **state) {
    (void)state;
    fixture *f = make();
    strata_callable c;
    assert_fails(STRATA_EINVAL, "name", strata_worker_register_sub(f->t.w, "", ts_noop_sub, f, &c));
    char longname[65];
    memset(longname, 'a', 64);
    longname[64] = '\0';
    assert_fails(STRATA_EINVAL, "name",
                 strata_worker_register_sub(f->t.w, longname, ts_noop_sub, f, &c));
    longname[63] = '\0'; /* 63 characters: the longest allowed */
    assert_ok(strata_worker_register_sub(f->t.w, longname, ts_noop_sub, f, &c));
    destroy(f);
}

static void callable_ids_count_up_from_zero(void **state) {
    (void)state;
    strata_worker_config cfg;
    strata_worker_config_init(&cfg);
    strata_worker *w;
    assert_ok(strata_worker_create(&cfg, &w));
    strata_callable c = -1;
    assert_ok(strata_worker_register_sub(w, "first", ts_noop_sub, NULL, &c));
    assert_int_equal(c, 0);
    assert_ok(st_register_next_level(w, "second", NULL, NULL, NULL, &c));
    assert_int_equal(c, 1);
    assert_status(STRATA_EINVAL, strata_worker_register_sub(w, "first", ts_noop_sub, NULL, &c));
    assert_int_equal(c, 1);
    assert_ok(strata_worker_register_sub(w, "third", ts_noop_sub, NULL, &c)); /* no id was spent */
    assert_int_equal(c, 2);
    strata_worker_destroy(w);
}

static void the_callable_table_holds_1024(void **state) {
    (void)state;
    strata_worker_config cfg;
    strata_worker_config_init(&cfg);
    strata_worker *w;
    assert_ok(strata_worker_create(&cfg, &w));
    char name[16];
    strata_callable c = -1;
    for (int i = 0; i < DOCUMENTED_MAX_CALLABLES; i++) {
        snprintf(name, sizeof name, "c%d", i);
        assert_ok(strata_worker_register_sub(w, name, ts_noop_sub, NULL, &c));
    }
    assert_int_equal(c, DOCUMENTED_MAX_CALLABLES - 1);
    c = -1;
    assert_fails(STRATA_ECAPACITY, "1024 callables",
                 strata_worker_register_sub(w, "one_more", ts_noop_sub, NULL, &c));
    assert_int_equal(c, -1);
    assert_fails(STRATA_ECAPACITY, "1024 callables",
                 st_register_next_level(w, "nl_more", NULL, NULL, NULL, &c));
    strata_worker_destroy(w);
}

static void a_callable_registered_after_init_runs(void **state) {
    (void)state;
    fixture *f = make();
    _Atomic int runs = 0;
    strata_callable late;
    assert_ok(strata_worker_register_sub(f->t.w, "late", count_into, &runs, &late));
    group_of_two g = {.fn = late};
    assert_ok(strata_worker_run(f->t.w, orch_group_of_two, &g));
    assert_int_equal(atomic_load(&runs), 2);
    destroy(f);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(config_task_window_must_be_a_power_of_two),
        cmocka_unit_test(config_pipeline_depth_must_be_1_or_2),
        cmocka_unit_test(config_heap_ring_bytes_must_be_a_multiple_of_1024),
        cmocka_unit_test(config_sub_mode_is_thread_or_process),
        cmocka_unit_test(children_added_before_init_start_no_thread_until_init),
        cmocka_unit_test(config_other_limits_are_checked),
        cmocka_unit_test(config_defaults_are_documented_values),
        cmocka_unit_test(the_default_sub_workers_follow_the_cpus_we_may_use),
        cmocka_unit_test(config_help_while_waiting_must_be_0_or_1),
        cmocka_unit_test(config_limits_are_inclusive),
        cmocka_unit_test(the_level_is_a_label_that_failed_runs_name),
        cmocka_unit_test(create_copies_the_config),
        cmocka_unit_test(null_config_and_out_on_create_are_einval),
        cmocka_unit_test(null_worker_on_lifecycle_calls_is_einval),
        cmocka_unit_test(null_arguments_to_register_sub_are_einval),
        cmocka_unit_test(submit_before_init_is_estate),
        cmocka_unit_test(init_twice_is_estate),
        cmocka_unit_test(init_after_close_is_estate),
        cmocka_unit_test(close_is_idempotent),
        cmocka_unit_test(close_of_never_initialised_worker_with_endpoints_is_clean),
        cmocka_unit_test(submit_after_close_is_eclosed),
        cmocka_unit_test(register_after_close_is_eclosed),
        cmocka_unit_test(register_after_init_is_allowed),
        cmocka_unit_test(close_waits_for_running_runs),
        cmocka_unit_test(submit_and_close_inside_orchestration_are_estate),
        cmocka_unit_test(destroy_inside_orchestration_does_nothing),
        cmocka_unit_test(destroy_waits_for_a_released_live_run),
        cmocka_unit_test(next_level_count_counts_children_until_close),
        cmocka_unit_test(duplicate_callable_name_is_einval),
        cmocka_unit_test(empty_or_overlong_callable_name_is_einval),
        cmocka_unit_test(callable_ids_count_up_from_zero),
        cmocka_unit_test(the_callable_table_holds_1024),
        cmocka_unit_test(a_callable_registered_after_init_runs),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
