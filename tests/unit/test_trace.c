// label: concurrency
/* tests/unit/test_trace.c - tracing and run statistics end to end: the trace
 * file of thread- and process-hosted sub workers parses and holds every task
 * once with its edges in order, a tiny lane reports drops and the run still
 * succeeds, tracing on and off compute the same, STRATA_TRACE names FILE,
 * FILE.2, an unwritable path is reported by strata_worker_trace_status, the
 * statistics count the tasks run and the critical path of a chain is the sum
 * of its durations.
 *
 * Owns: the recording side of the trace format; the structure checks are
 * tests/support/trace_check.py (python3).
 * Must never: assert durations or rates (benchmarks do): only counts and
 * ordering, and the critical path against the trace's own durations.
 */
#include "test_support.h"

#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/engine.h"
#include "core/hooks.h"
#include "util/clock.h"

#define CHAIN 6  /* tasks of the chain on buffer x */
#define LEAVES 8 /* independent tasks, one buffer each */
#define ELEMS 64

typedef struct fx {
    strata_worker *w;
    strata_callable chain, leaf, bad;
    strata_buffer *x, *leafbuf[LEAVES];
    int fail_one;      /* submit a task that fails (and a consumer poisoned by it) */
    _Atomic int *gate; /* shared with process children: open once the graph is built */
} fx;

/* Chain tasks wait until the orchestration function submitted them all, so
 * each one is wired to its live predecessor (a producer already consumed
 * is no edge). Bounded: a gate that never opens fails the task. */
static int add1(const strata_task_view *a, void *user) {
    _Atomic int *gate = user;
    uint64_t deadline = st_deadline_after(10 * TS_SEC);
    while (gate && !atomic_load(gate))
        if (st_now_ns() > deadline)
            return 1;
    int32_t *p = strata_args_data(a, 0);
    for (int i = 0; i < ELEMS; i++)
        p[i] += 1;
    return 0;
}

static int fail_body(const strata_task_view *a, void *user) {
    (void)a;
    (void)user;
    return 7;
}

static int submit_on(strata_orch *o, strata_callable fn, strata_buffer *b, strata_tag tag) {
    strata_task_args args;
    strata_args_init(&args);
    strata_tensor t;
    int64_t shape[1] = {ELEMS};
    int rc = strata_tensor_contiguous(b, STRATA_I32, 1, shape, &t);
    if (rc == STRATA_OK)
        rc = strata_args_add_tensor(&args, &t, tag);
    return rc == STRATA_OK ? strata_orch_submit_sub(o, fn, &args) : rc;
}

static int build(strata_orch *o, void *arg) {
    fx *f = arg;
    atomic_store(f->gate, 0);
    for (int i = 0; i < CHAIN; i++)
        STRATA_TRY(submit_on(o, f->chain, f->x, STRATA_INOUT));
    for (int i = 0; i < LEAVES; i++)
        STRATA_TRY(submit_on(o, f->leaf, f->leafbuf[i], STRATA_INOUT));
    if (f->fail_one) { /* a failure and its poisoned consumer: one X, one "not run" */
        STRATA_TRY(submit_on(o, f->bad, f->leafbuf[0], STRATA_INOUT));
        STRATA_TRY(submit_on(o, f->leaf, f->leafbuf[0], STRATA_INOUT));
    }
    atomic_store(f->gate, 1);
    return 0;
}

static void fx_open(fx *f, const char *path, strata_host_mode mode, uint32_t events, int collect) {
    memset(f, 0, sizeof *f);
    f->gate = ts_shared_calloc(1, sizeof *f->gate);
    strata_worker_config cfg;
    strata_worker_config_init(&cfg);
    cfg.sub_workers = 2;
    cfg.sub_mode = mode;
    cfg.trace_path = path;
    if (events)
        cfg.trace_events_per_lane = events;
    cfg.collect_stats = collect;
    assert_ok(strata_worker_create(&cfg, &f->w));
    assert_ok(strata_worker_register_sub(f->w, "chain", add1, (void *)f->gate, &f->chain));
    assert_ok(strata_worker_register_sub(f->w, "leaf", add1, NULL, &f->leaf));
    assert_ok(strata_worker_register_sub(f->w, "bad", fail_body, NULL, &f->bad));
    assert_ok(strata_buffer_create(f->w, ELEMS * 4, &f->x));
    memset(strata_buffer_data(f->x), 0, ELEMS * 4);
    for (int i = 0; i < LEAVES; i++) {
        assert_ok(strata_buffer_create(f->w, ELEMS * 4, &f->leafbuf[i]));
        memset(strata_buffer_data(f->leafbuf[i]), 0, ELEMS * 4);
    }
    assert_ok(strata_worker_init(f->w));
}

static void fx_close(fx *f) {
    assert_ok(strata_worker_close(f->w));
    strata_buffer_destroy(f->x);
    for (int i = 0; i < LEAVES; i++)
        strata_buffer_destroy(f->leafbuf[i]);
    strata_worker_destroy(f->w);
    ts_shared_free((void *)f->gate, 1, sizeof *f->gate);
}

static void tmp_path(char *buf, size_t n, const char *tag) {
    snprintf(buf, n, "/tmp/strata-test-trace-%ld-%s.json", (long)getpid(), tag);
}

/* Runs the checker; its counts are parsed into the out fields. */
typedef struct check {
    int rc;
    long tasks, edges, dropped, pids, child_tasks, window_waits;
    unsigned long long chain_ns;
    char line[256];
} check;

static check run_check(const char *path, int expected) {
    char here[512], cmd[1400];
    snprintf(here, sizeof here, "%s", __FILE__);
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 %s/../support/trace_check.py %s %d", dirname(here),
             path, expected);
    check c = {0};
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    if (!fgets(c.line, sizeof c.line, p))
        c.line[0] = '\0';
    c.rc = pclose(p);
    sscanf(c.line,
           "tasks=%ld edges=%ld dropped=%ld chain_ns=%llu pids=%ld child_tasks=%ld "
           "window_waits=%ld",
           &c.tasks, &c.edges, &c.dropped, &c.chain_ns, &c.pids, &c.child_tasks, &c.window_waits);
    return c;
}

static void assert_check_ok(const check *c) {
    if (c->rc != 0)
        fail_msg("%s", c->line);
}

static void traced_run(strata_host_mode mode, const char *tag) {
    char path[256];
    tmp_path(path, sizeof path, tag);
    fx f;
    fx_open(&f, path, mode, 0, 0);
    strata_run *r = NULL;
    assert_ok(strata_worker_submit(f.w, build, &f, &r));
    assert_ok(strata_run_wait(r, STRATA_WAIT_FOREVER));
    strata_run_statistics rs;
    assert_ok(strata_run_stats(r, &rs));
    strata_run_release(r);
    fx_close(&f);
    check c = run_check(path, CHAIN + LEAVES);
    assert_check_ok(&c);
    assert_int_equal(c.edges, CHAIN - 1); /* the chain's, nothing between leaves */
    assert_int_equal(c.dropped, 0);
    if (mode == STRATA_HOST_PROCESS) { /* every body ran in a child, timed there */
        assert_int_equal(c.pids, 3);
        assert_int_equal(c.child_tasks, CHAIN + LEAVES);
    } else {
        assert_int_equal(c.pids, 1);
        assert_int_equal(c.child_tasks, 0);
    }
    assert_int_equal(rs.tasks_run, CHAIN + LEAVES);
    assert_true(rs.timed);
    unlink(path);
}

static void thread_subs_trace_parses_with_every_task_once(void **state) {
    (void)state;
    traced_run(STRATA_HOST_THREAD, "thread");
}

static void process_subs_trace_parses_with_every_task_once(void **state) {
    (void)state;
    traced_run(STRATA_HOST_PROCESS, "process");
}

static void failed_and_poisoned_tasks_appear_once(void **state) {
    (void)state;
    char path[256];
    tmp_path(path, sizeof path, "fail");
    fx f;
    fx_open(&f, path, STRATA_HOST_THREAD, 0, 0);
    f.fail_one = 1;
    assert_status(STRATA_ETASK, strata_worker_run(f.w, build, &f));
    strata_worker_statistics ws;
    assert_ok(strata_worker_stats(f.w, &ws));
    fx_close(&f);
    check c = run_check(path, CHAIN + LEAVES + 2);
    assert_check_ok(&c);
    uint64_t failed = ws.helper.tasks_failed;
    for (uint32_t i = 0; i < ws.sub_workers; i++)
        failed += ws.sub[i].tasks_failed;
    assert_int_equal(failed, 1);
    unlink(path);
}

static void a_full_lane_counts_drops_and_the_run_succeeds(void **state) {
    (void)state;
    char path[256];
    tmp_path(path, sizeof path, "drops");
    fx f;
    fx_open(&f, path, STRATA_HOST_THREAD, 4, 0);
    assert_ok(strata_worker_run(f.w, build, &f));
    strata_worker_statistics ws;
    assert_ok(strata_worker_stats(f.w, &ws));
    assert_int_equal(ws.trace_events, 4);
    assert_true(ws.trace_dropped > 0);
    fx_close(&f);
    check c = run_check(path, -1);
    assert_check_ok(&c);
    assert_int_equal((uint64_t)c.dropped, ws.trace_dropped);
    unlink(path);
}

/* The chain's result with tracing on and off. */
static int32_t chain_result(const char *path) {
    fx f;
    fx_open(&f, path, STRATA_HOST_THREAD, 0, 0);
    assert_ok(strata_worker_run(f.w, build, &f));
    assert_ok(strata_worker_run(f.w, build, &f));
    int32_t v = ((int32_t *)strata_buffer_data(f.x))[ELEMS - 1];
    for (int i = 0; i < LEAVES; i++)
        assert_int_equal(((int32_t *)strata_buffer_data(f.leafbuf[i]))[0], 2);
    fx_close(&f);
    return v;
}

static void tracing_on_and_off_compute_the_same(void **state) {
    (void)state;
    char path[256];
    tmp_path(path, sizeof path, "same");
    int32_t off = chain_result(NULL);
    int32_t on = chain_result(path);
    assert_int_equal(off, 2 * CHAIN);
    assert_int_equal(on, off);
    unlink(path);
}

static void stats_count_every_task_without_tracing(void **state) {
    (void)state;
    fx f;
    fx_open(&f, NULL, STRATA_HOST_THREAD, 0, 0);
    assert_ok(strata_worker_run(f.w, build, &f));
    assert_ok(strata_worker_run(f.w, build, &f));
    strata_worker_statistics ws;
    assert_ok(strata_worker_stats(f.w, &ws));
    uint64_t run = ws.helper.tasks_run;
    for (uint32_t i = 0; i < ws.sub_workers; i++)
        run += ws.sub[i].tasks_run;
    assert_int_equal(run, 2 * (CHAIN + LEAVES));
    assert_int_equal(ws.sub_workers, 2);
    assert_false(ws.timed);
    assert_int_equal(ws.overhead_tasks, 0); /* untimed: no clock read */
    assert_int_equal(ws.trace_events, 0);
    assert_true(ws.window_high_water >= 1);
    fx_close(&f);
}

static void collect_stats_times_tasks_without_a_trace(void **state) {
    (void)state;
    fx f;
    fx_open(&f, NULL, STRATA_HOST_THREAD, 0, 1);
    strata_run *r = NULL;
    assert_ok(strata_worker_submit(f.w, build, &f, &r));
    assert_ok(strata_run_wait(r, STRATA_WAIT_FOREVER));
    strata_run_statistics rs;
    assert_ok(strata_run_stats(r, &rs));
    strata_run_release(r);
    strata_worker_statistics ws;
    assert_ok(strata_worker_stats(f.w, &ws));
    assert_true(ws.timed);
    assert_int_equal(ws.overhead_tasks, CHAIN + LEAVES);
    assert_true(ws.overhead_max_ns >= ws.overhead_mean_ns);
    assert_int_equal(ws.trace_events, 0);
    assert_true(rs.critical_path_ns > 0);
    fx_close(&f);
}

static int build_chain_only(strata_orch *o, void *arg) {
    fx *f = arg;
    atomic_store(f->gate, 0);
    for (int i = 0; i < CHAIN; i++)
        STRATA_TRY(submit_on(o, f->chain, f->x, STRATA_INOUT));
    atomic_store(f->gate, 1);
    return 0;
}

static void critical_path_of_a_chain_is_the_sum_of_its_durations(void **state) {
    (void)state;
    char path[256];
    tmp_path(path, sizeof path, "crit");
    fx f;
    fx_open(&f, path, STRATA_HOST_THREAD, 0, 0);
    strata_run *r = NULL;
    assert_ok(strata_worker_submit(f.w, build_chain_only, &f, &r));
    assert_ok(strata_run_wait(r, STRATA_WAIT_FOREVER));
    strata_run_statistics rs;
    assert_ok(strata_run_stats(r, &rs));
    strata_run_release(r);
    fx_close(&f);
    check c = run_check(path, CHAIN);
    assert_check_ok(&c);
    assert_int_equal(c.edges, CHAIN - 1);
    /* The same stamps, converted twice (the run's statistics, the file): they
     * agree to rounding, a nanosecond per duration and the two scales' drift. */
    unsigned long long crit = rs.critical_path_ns, slack = CHAIN + crit / 1000;
    assert_true(crit + slack >= c.chain_ns && c.chain_ns + slack >= crit);
    unlink(path);
}

/* Tasks that hold their slots until the orchestration function began to
 * wait for one (the engine's capacity-wait seam says when): the window is
 * full at least once, without a timing assumption. */
static int slow_task(const strata_task_view *a, void *user) {
    (void)a;
    _Atomic int *waited = user;
    uint64_t deadline = st_deadline_after(10 * TS_SEC);
    while (!atomic_load(waited) && st_now_ns() < deadline)
        ;
    return 0;
}

static void on_capacity_wait(strata_worker *w, st_hook_point at, uint64_t ref, void *ctx) {
    (void)w;
    (void)at;
    (void)ref;
    atomic_store((_Atomic int *)ctx, 1);
}

typedef struct window_fx {
    strata_callable slow;
    _Atomic int waited;
} window_fx;

static int build_past_the_window(strata_orch *o, void *arg) {
    window_fx *f = arg;
    strata_task_args args;
    strata_args_init(&args);
    for (int i = 0; i < 16; i++)
        STRATA_TRY(strata_orch_submit_sub(o, f->slow, &args));
    return 0;
}

static void a_full_window_shows_as_a_capacity_wait(void **state) {
    (void)state;
    char path[256];
    tmp_path(path, sizeof path, "window");
    strata_worker_config cfg;
    strata_worker_config_init(&cfg);
    cfg.sub_workers = 2;
    cfg.task_window = 4;
    cfg.help_while_waiting = 0;
    cfg.trace_path = path;
    strata_worker *w = NULL;
    window_fx f = {0};
    assert_ok(strata_worker_create(&cfg, &w));
    assert_ok(strata_worker_register_sub(w, "slow", slow_task, (void *)&f.waited, &f.slow));
    st_worker_set_hook(w, ST_HOOK_CAPACITY_WAIT, on_capacity_wait, (void *)&f.waited);
    assert_ok(strata_worker_init(w));
    assert_ok(strata_worker_run(w, build_past_the_window, &f));
    strata_worker_statistics ws;
    assert_ok(strata_worker_stats(w, &ws));
    assert_int_equal(ws.window_high_water, 4);
    strata_worker_destroy(w);
    check c = run_check(path, 16);
    assert_check_ok(&c);
    assert_true(c.window_waits >= 1);
    unlink(path);
}

static void strata_trace_names_one_file_per_worker(void **state) {
    (void)state;
    char base[256], second[300];
    tmp_path(base, sizeof base, "env");
    snprintf(second, sizeof second, "%s.2", base);
    assert_int_equal(setenv("STRATA_TRACE", base, 1), 0);
    fx a, b;
    fx_open(&a, NULL, STRATA_HOST_THREAD, 0, 0);
    fx_open(&b, NULL, STRATA_HOST_THREAD, 0, 0);
    unsetenv("STRATA_TRACE");
    assert_ok(strata_worker_run(a.w, build, &a));
    assert_ok(strata_worker_run(b.w, build_chain_only, &b));
    fx_close(&a);
    fx_close(&b);
    check ca = run_check(base, CHAIN + LEAVES);
    assert_check_ok(&ca);
    check cb = run_check(second, CHAIN);
    assert_check_ok(&cb);
    unlink(base);
    unlink(second);
}

/* A process forked from one that named files after STRATA_TRACE puts its
 * pid into its own names: FILE.<pid>, then FILE.<pid>.2. The child uses the
 * public calls only and reports through its exit status. */
static int child_traced_worker(void) {
    strata_worker_config cfg;
    strata_worker_config_init(&cfg);
    cfg.sub_workers = 1;
    cfg.sub_mode = STRATA_HOST_THREAD;
    strata_worker *w[2] = {NULL, NULL};
    for (int i = 0; i < 2; i++)
        if (strata_worker_create(&cfg, &w[i]) != STRATA_OK || strata_worker_init(w[i]) != STRATA_OK)
            return 10 + i;
    for (int i = 0; i < 2; i++) {
        strata_worker_close(w[i]);
        if (strata_worker_trace_status(w[i]) != STRATA_OK)
            return 20 + i;
        strata_worker_destroy(w[i]);
    }
    return 0;
}

static void a_forked_process_puts_its_pid_into_strata_trace_names(void **state) {
    (void)state;
    char base[256], theirs[300], theirs2[320], mine[320];
    tmp_path(base, sizeof base, "fork");
    assert_int_equal(setenv("STRATA_TRACE", base, 1), 0);
    strata_worker_config cfg;
    strata_worker_config_init(&cfg);
    cfg.sub_workers = 1;
    strata_worker *w = NULL;
    assert_ok(strata_worker_create(&cfg, &w));        /* names this process's file: no thread yet */
    snprintf(mine, sizeof mine, "%s", w->trace.path); /* FILE, or FILE.n after earlier tests */
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0)
        _exit(child_traced_worker());
    int wst = 0;
    assert_int_equal(waitpid(pid, &wst, 0), pid);
    unsetenv("STRATA_TRACE");
    assert_true(WIFEXITED(wst));
    assert_int_equal(WEXITSTATUS(wst), 0);
    assert_ok(strata_worker_init(w));
    strata_worker_destroy(w);
    snprintf(theirs, sizeof theirs, "%s.%ld", base, (long)pid);
    snprintf(theirs2, sizeof theirs2, "%s.%ld.2", base, (long)pid);
    char with_pid[300]; /* the parent's own name never carries its pid */
    snprintf(with_pid, sizeof with_pid, "%s.%ld", base, (long)getpid());
    assert_true(strncmp(mine, with_pid, strlen(with_pid)) != 0);
    const char *all[] = {mine, theirs, theirs2};
    for (int i = 0; i < 3; i++) {
        check c = run_check(all[i], 0);
        assert_check_ok(&c);
        unlink(all[i]);
    }
}

/* "%p" in STRATA_TRACE is the pid (processes started apart with one
 * environment), "%%" a '%'. */
static void strata_trace_expands_percent_p_to_the_pid(void **state) {
    (void)state;
    char want[256];
    assert_int_equal(setenv("STRATA_TRACE", "/tmp/strata-test-trace-%p-100%%.json", 1), 0);
    strata_worker_config cfg;
    strata_worker_config_init(&cfg);
    cfg.sub_workers = 1;
    strata_worker *w = NULL;
    assert_ok(strata_worker_create(&cfg, &w));
    unsetenv("STRATA_TRACE");
    snprintf(want, sizeof want, "/tmp/strata-test-trace-%ld-100%%.json", (long)getpid());
    /* FILE, or FILE.n after this process's earlier workers */
    assert_int_equal(strncmp(w->trace.path, want, strlen(want)), 0);
    strata_worker_destroy(w); /* never initialised: no file */
}

/* The file is written beside its name and renamed over it: a reader holding
 * the old file keeps it whole (a write in place would truncate and refill
 * that same file), and no temporary is left. */
static void the_trace_replaces_an_old_file_whole_and_leaves_no_temporary(void **state) {
    (void)state;
    char path[256], keep[300], tmp[320];
    tmp_path(path, sizeof path, "rename");
    snprintf(keep, sizeof keep, "%s.keep", path);
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
    FILE *old = fopen(path, "w");
    assert_non_null(old);
    fputs("old\n", old);
    assert_int_equal(fclose(old), 0);
    unlink(keep);
    assert_int_equal(link(path, keep), 0); /* the old file, under a second name */
    fx f;
    fx_open(&f, path, STRATA_HOST_THREAD, 0, 0);
    assert_ok(strata_worker_run(f.w, build, &f));
    fx_close(&f);
    check c = run_check(path, CHAIN + LEAVES);
    assert_check_ok(&c);
    char buf[16] = {0};
    old = fopen(keep, "r");
    assert_non_null(old);
    assert_non_null(fgets(buf, sizeof buf, old));
    fclose(old);
    assert_string_equal(buf, "old\n");
    struct stat st;
    assert_int_equal(stat(tmp, &st), -1);
    unlink(path);
    unlink(keep);
}

/* A callable name of bytes that are not UTF-8 (and a control character):
 * the file still parses as strict UTF-8 JSON, the bad bytes as U+FFFD. */
static void names_that_are_not_utf8_are_replaced_in_the_file(void **state) {
    (void)state;
    char path[256], cmd[1024];
    tmp_path(path, sizeof path, "utf8");
    fx f;
    fx_open(&f, path, STRATA_HOST_THREAD, 0, 0);
    strata_callable odd;
    /* a lone continuation byte, a truncated 3-byte sequence, an overlong '/',
     * a surrogate, a tab and valid "é" */
    assert_ok(strata_worker_register_sub(f.w, "odd\x80-\xe2\x82-\xc0\xaf-\xed\xa0\x80-\t-\xc3\xa9",
                                         add1, NULL, &odd));
    f.leaf = odd;
    assert_ok(strata_worker_run(f.w, build, &f));
    fx_close(&f);
    check c = run_check(path, CHAIN + LEAVES);
    assert_check_ok(&c);
    snprintf(cmd, sizeof cmd,
             "/usr/bin/python3 -c \"import json,sys; d=json.load(open(sys.argv[1],encoding='utf-8'"
             ",errors='strict')); n={e['name'] for e in d['traceEvents'] if e.get('cat')=='task'};"
             " want='odd\\ufffd-\\ufffd\\ufffd-\\ufffd\\ufffd-\\ufffd\\ufffd\\ufffd-\\t-\\u00e9';"
             " sys.exit(0 if want in n else print(n) or 3)\" %s",
             path);
    assert_int_equal(system(cmd), 0);
    unlink(path);
}

/* A failure message of bytes that are not UTF-8 and a control character. */
static int fail_with_odd_text(const strata_task_view *a, void *user) {
    (void)a;
    (void)user;
    strata_task_set_error("bad \xff byte \x01 \xe2\x82 end");
    return 1;
}

static int build_one_failure(strata_orch *o, void *arg) {
    strata_task_args a;
    strata_args_init(&a);
    return strata_orch_submit_sub(o, *(strata_callable *)arg, &a);
}

/* The failed task's message is in its args ("error"), replaced where it is
 * not UTF-8, and the file parses as strict UTF-8 JSON. */
static void a_failed_tasks_message_is_in_the_file_as_utf8(void **state) {
    (void)state;
    char path[256], cmd[1024];
    tmp_path(path, sizeof path, "errtext");
    fx f;
    fx_open(&f, path, STRATA_HOST_THREAD, 0, 0);
    strata_callable odd;
    assert_ok(strata_worker_register_sub(f.w, "odd", fail_with_odd_text, NULL, &odd));
    assert_status(STRATA_ETASK, strata_worker_run(f.w, build_one_failure, &odd));
    fx_close(&f);
    check c = run_check(path, 1);
    assert_check_ok(&c);
    snprintf(
        cmd, sizeof cmd,
        "/usr/bin/python3 -c \"import json,sys; d=json.load(open(sys.argv[1],encoding='utf-8'"
        ",errors='strict')); t=[e['args'] for e in d['traceEvents'] if e.get('cat')=='task'];"
        " ok=t[0]['status']=='failed' and t[0].get('error')=="
        "'bad \\ufffd byte \\u0001 \\ufffd\\ufffd end'; sys.exit(0 if ok else print(t) or 3)\" %s",
        path);
    assert_int_equal(system(cmd), 0);
    unlink(path);
}

static void stats_after_close_still_describe_the_worker(void **state) {
    (void)state;
    fx f;
    fx_open(&f, NULL, STRATA_HOST_THREAD, 0, 1);
    assert_ok(strata_worker_run(f.w, build, &f));
    assert_ok(strata_worker_close(f.w));
    strata_worker_statistics ws;
    assert_ok(strata_worker_stats(f.w, &ws));
    assert_int_equal(ws.sub_workers, 2);
    assert_int_equal(ws.next_level, 0);
    uint64_t run = ws.helper.tasks_run;
    for (uint32_t i = 0; i < ws.sub_workers; i++)
        run += ws.sub[i].tasks_run;
    assert_int_equal(run, CHAIN + LEAVES);
    fx_close(&f);
}

static void an_unwritable_trace_path_is_reported_after_close(void **state) {
    (void)state;
    fx f;
    fx_open(&f, "/nonexistent-strata-dir/trace.json", STRATA_HOST_THREAD, 0, 0);
    assert_ok(strata_worker_run(f.w, build, &f));
    assert_ok(strata_worker_trace_status(f.w)); /* nothing written yet */
    assert_ok(strata_worker_close(f.w));        /* close's contract: always OK */
    st_clear_error();
    assert_status(STRATA_EINVAL, strata_worker_trace_status(f.w));
    assert_message_mentions("/nonexistent-strata-dir/trace.json");
    fx_close(&f);
}

static void bad_trace_settings_are_refused(void **state) {
    (void)state;
    strata_worker_config cfg;
    strata_worker_config_init(&cfg);
    strata_worker *w = NULL;
    cfg.trace_events_per_lane = 0;
    assert_fails(STRATA_EINVAL, "trace_events_per_lane", strata_worker_create(&cfg, &w));
    strata_worker_config_init(&cfg);
    cfg.trace_path = "";
    assert_fails(STRATA_EINVAL, "trace_path", strata_worker_create(&cfg, &w));
    strata_worker_config_init(&cfg);
    cfg.collect_stats = 2;
    assert_fails(STRATA_EINVAL, "collect_stats", strata_worker_create(&cfg, &w));
    assert_null(w);
    strata_worker_statistics ws;
    assert_fails(STRATA_EINVAL, "strata_worker_stats", strata_worker_stats(NULL, &ws));
    strata_run_statistics rs;
    assert_fails(STRATA_EINVAL, "strata_run_stats", strata_run_stats(NULL, &rs));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(thread_subs_trace_parses_with_every_task_once),
        cmocka_unit_test(process_subs_trace_parses_with_every_task_once),
        cmocka_unit_test(failed_and_poisoned_tasks_appear_once),
        cmocka_unit_test(a_full_lane_counts_drops_and_the_run_succeeds),
        cmocka_unit_test(tracing_on_and_off_compute_the_same),
        cmocka_unit_test(stats_count_every_task_without_tracing),
        cmocka_unit_test(collect_stats_times_tasks_without_a_trace),
        cmocka_unit_test(critical_path_of_a_chain_is_the_sum_of_its_durations),
        cmocka_unit_test(a_full_window_shows_as_a_capacity_wait),
        cmocka_unit_test(strata_trace_names_one_file_per_worker),
        cmocka_unit_test(an_unwritable_trace_path_is_reported_after_close),
        cmocka_unit_test(a_forked_process_puts_its_pid_into_strata_trace_names),
        cmocka_unit_test(strata_trace_expands_percent_p_to_the_pid),
        cmocka_unit_test(the_trace_replaces_an_old_file_whole_and_leaves_no_temporary),
        cmocka_unit_test(names_that_are_not_utf8_are_replaced_in_the_file),
        cmocka_unit_test(stats_after_close_still_describe_the_worker),
        cmocka_unit_test(a_failed_tasks_message_is_in_the_file_as_utf8),
        cmocka_unit_test(bad_trace_settings_are_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
