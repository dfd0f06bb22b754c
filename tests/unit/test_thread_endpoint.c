// label: concurrency
/* tests/unit/test_thread_endpoint.c - sub workers hosted as threads
 * (exec/thread_endpoint.c), through the public API.
 *
 * Owns: every sub worker thread running tasks (with and without spinning),
 * the caller running none when help_while_waiting is off, close stopping
 * every sub worker thread, strata_task_set_error messages becoming the tail
 * of the run's error (cut cleanly at their limit, never leaking from an
 * earlier task on the same thread), the "returned <value>" message without
 * one, and any non-zero return of a body failing its task as STRATA_ETASK.
 * Must never: assert on timing; tasks that must run at the same time meet
 * in a bounded rendezvous (10 s: a missing worker fails instead of hanging).
 */
#include "test_support.h"

#include "util/message.h"

#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "util/clock.h"

#define SEC TS_SEC
#define MAX_SUBS 4
#define TASK_MSG_MAX STRATA_ERRMSG_MAX /* docs/api.md: a task message keeps up to 511 bytes */

typedef struct ctx {
    ts_worker t;
    strata_callable meet, set_and_return, long_message, null_format;
    int nsubs;
    _Atomic int arrived;
    _Atomic int missed; /* rendezvous that gave up */
    _Atomic int seen;
    pid_t tids[MAX_SUBS * 4];
    pthread_t threads[MAX_SUBS * 4];
    char long_text[2 * TASK_MSG_MAX];
} ctx;

/* Waits (bounded) until `nsubs` tasks arrived: only distinct threads can all
 * be here at once. Records which thread it ran on. */
static int meet_fn(const strata_task_view *a, void *user) {
    (void)a;
    ctx *c = user;
    if (atomic_load(&c->missed))
        return 1; /* one rendezvous failed already: fail fast, do not wait again */
    int k = atomic_fetch_add(&c->seen, 1);
    if (k < MAX_SUBS * 4) {
        c->tids[k] = (pid_t)syscall(SYS_gettid);
        c->threads[k] = pthread_self();
    }
    int round = k / c->nsubs;
    atomic_fetch_add(&c->arrived, 1);
    uint64_t deadline = st_deadline_after(10 * SEC);
    while (atomic_load(&c->arrived) < (round + 1) * c->nsubs) {
        if (st_now_ns() >= deadline) {
            atomic_fetch_add(&c->missed, 1);
            return 1;
        }
        sched_yield();
    }
    return 0;
}

/* Scalar 0: what to return; scalar 1: 1 to set a message ("note <scalar 2>") first. */
static int set_and_return_fn(const strata_task_view *a, void *user) {
    (void)user;
    if (strata_args_scalar(a, 1))
        strata_task_set_error("note %llu", (unsigned long long)strata_args_scalar(a, 2));
    return (int)(int64_t)strata_args_scalar(a, 0);
}

static int long_message_fn(const strata_task_view *a, void *user) {
    (void)a;
    strata_task_set_error("%s", ((ctx *)user)->long_text);
    return 1;
}

static void open_ctx(ctx *c, int nsubs, uint32_t spin_ns) {
    memset(c, 0, sizeof *c);
    c->nsubs = nsubs;
    for (size_t i = 0; i + 1 < sizeof c->long_text; i++)
        c->long_text[i] = (char)('a' + i % 26);
    ts_worker_opts o;
    ts_worker_opts_init(&o);
    o.cfg.sub_workers = (uint32_t)nsubs;
    o.cfg.spin_ns = spin_ns;
    o.cfg.help_while_waiting = 0; /* task bodies run on sub worker threads only */
    o.buffers[0] = 4096;
    o.subs[0] = (ts_sub){"meet", meet_fn, c, &c->meet};
    o.subs[1] = (ts_sub){"set_and_return", set_and_return_fn, c, &c->set_and_return};
    o.subs[2] = (ts_sub){"long_message", long_message_fn, c, &c->long_message};
    ts_worker_open(&c->t, &o);
}

/* ---- every sub worker runs tasks --------------------------------------------------- */

static int orch_meet_rounds(strata_orch *o, void *arg) {
    ctx *c = arg;
    for (int i = 0; i < 3 * c->nsubs; i++) { /* three rounds, each needing every worker */
        strata_task_args a;
        strata_args_init(&a);
        STRATA_TRY(strata_orch_submit_sub(o, c->meet, &a));
    }
    return STRATA_OK;
}

static int distinct_threads(const ctx *c, int n) {
    int distinct = 0;
    for (int i = 0; i < n; i++) {
        int first = 1;
        for (int k = 0; k < i; k++)
            first &= c->tids[k] != c->tids[i];
        distinct += first;
    }
    return distinct;
}

/* /proc/self/task/<tid> is gone (or a zombie) once the thread ended. */
static int thread_ended(pid_t tid) {
    char path[64];
    snprintf(path, sizeof path, "/proc/self/task/%d/stat", (int)tid);
    char state = ts_stat_state(path);
    return state == '\0' || state == 'Z' || state == 'X';
}

static void check_every_sub_worker_runs_tasks(int nsubs, uint32_t spin_ns) {
    ctx c;
    open_ctx(&c, nsubs, spin_ns);
    assert_ok(strata_worker_run(c.t.w, orch_meet_rounds, &c));
    int n = atomic_load(&c.seen);
    assert_int_equal(n, 3 * nsubs);
    assert_int_equal(atomic_load(&c.missed), 0);
    assert_int_equal(distinct_threads(&c, n), nsubs);
    for (int i = 0; i < n; i++)
        assert_false(pthread_equal(c.threads[i], pthread_self())); /* the caller ran none */
    assert_ok(strata_worker_close(c.t.w));
    for (int i = 0; i < n; i++)
        if (!thread_ended(c.tids[i]))
            fail_msg("sub worker thread %d still runs after strata_worker_close", (int)c.tids[i]);
    ts_worker_close(&c.t);
}

static void every_sub_worker_runs_tasks(void **state) {
    (void)state;
    check_every_sub_worker_runs_tasks(MAX_SUBS, 20000);
    check_every_sub_worker_runs_tasks(2, 20000);
    check_every_sub_worker_runs_tasks(1, 20000);
}

static void sub_workers_that_never_spin_still_run_every_task(void **state) {
    (void)state;
    check_every_sub_worker_runs_tasks(3, 0); /* each parks at once while idle */
}

/* ---- what a failing body reports ----------------------------------------------------- */

/* One set_and_return task: returns `rc`, after setting "note <note>" if note != 0. */
typedef struct one_task {
    ctx *c;
    int64_t rc;
    uint64_t note;
} one_task;

static int orch_one_task(strata_orch *o, void *arg) {
    one_task *k = arg;
    strata_task_args a;
    strata_args_init(&a);
    strata_args_add_scalar(&a, (uint64_t)k->rc);
    strata_args_add_scalar(&a, k->note != 0);
    strata_args_add_scalar(&a, k->note);
    return strata_orch_submit_sub(o, k->c->set_and_return, &a);
}

/* Run one task; returns its run's status, error copied into err. */
static int run_one(ctx *c, int64_t rc, uint64_t note, char *err, size_t n) {
    one_task k = {c, rc, note};
    strata_run *h;
    assert_ok(strata_worker_submit(c->t.w, orch_one_task, &k, &h));
    int status = strata_run_wait(h, STRATA_WAIT_FOREVER);
    assert_int_equal(strata_run_status(h), status);
    snprintf(err, n, "%s", strata_run_error(h));
    strata_run_release(h);
    return status;
}

static int ends_with(const char *s, const char *tail) {
    size_t ls = strlen(s), lt = strlen(tail);
    return ls >= lt && strcmp(s + ls - lt, tail) == 0;
}

static void a_task_message_is_the_tail_of_the_run_error(void **state) {
    (void)state;
    ctx c;
    open_ctx(&c, 1, 20000);
    char err[STRATA_ERRMSG_MAX];
    assert_status(STRATA_ETASK, run_one(&c, 1, 77, err, sizeof err));
    ts_assert_mentions(err, "L3 worker sub 0: task 'set_and_return' #1 failed: note 77");
    assert_true(ends_with(err, "failed: note 77"));
    /* the same message from strata_run_wait */
    one_task k = {&c, 1, 78};
    assert_status(STRATA_ETASK, strata_worker_run(c.t.w, orch_one_task, &k));
    assert_true(ends_with(strata_error_message(), "failed: note 78"));
    ts_worker_close(&c.t);
}

static void without_a_message_the_error_names_the_returned_value(void **state) {
    (void)state;
    ctx c;
    open_ctx(&c, 1, 20000);
    char err[STRATA_ERRMSG_MAX];
    assert_status(STRATA_ETASK, run_one(&c, 5, 0, err, sizeof err));
    assert_true(ends_with(err, "failed: returned 5"));
    assert_status(STRATA_ETASK, run_one(&c, -42, 0, err, sizeof err));
    assert_true(ends_with(err, "failed: returned -42"));
    ts_worker_close(&c.t);
}

static void any_non_zero_return_fails_the_task_as_etask(void **state) {
    (void)state;
    ctx c;
    open_ctx(&c, 1, 20000);
    /* values that happen to be statuses are still just a body's return value */
    const int64_t returns[] = {
        1,       -1,     STRATA_EENDPOINT, STRATA_ENOMEM, STRATA_ECANCELED, STRATA_ETIMEDOUT,
        INT_MIN, INT_MAX};
    char err[STRATA_ERRMSG_MAX], want[64];
    for (size_t i = 0; i < sizeof returns / sizeof returns[0]; i++) {
        assert_status(STRATA_ETASK, run_one(&c, returns[i], 0, err, sizeof err));
        snprintf(want, sizeof want, "returned %d", (int)returns[i]);
        assert_true(ends_with(err, want));
    }
    assert_ok(run_one(&c, 0, 0, err, sizeof err));
    assert_string_equal(err, "");
    ts_worker_close(&c.t);
}

static void a_message_set_by_a_body_that_succeeds_is_dropped(void **state) {
    (void)state;
    ctx c;
    open_ctx(&c, 1, 20000);
    char err[STRATA_ERRMSG_MAX];
    assert_ok(run_one(&c, 0, 5, err, sizeof err)); /* set a message, then succeed */
    assert_string_equal(err, "");
    /* ... and it does not reach the next failure on the same thread */
    assert_status(STRATA_ETASK, run_one(&c, 9, 0, err, sizeof err));
    assert_true(ends_with(err, "failed: returned 9"));
    assert_null(strstr(err, "note"));
    ts_worker_close(&c.t);
}

/* Two tasks of one run on the one sub worker, in order (INOUT on one tensor):
 * the first sets a message and succeeds, the second fails without one. */
static int orch_note_then_plain_failure(strata_orch *o, void *arg) {
    ctx *c = arg;
    strata_tensor t = ts_i32(c->t.buf[0], 0, 4, 1);
    const uint64_t scripts[2][3] = {{0, 1, 5}, {3, 0, 0}};
    for (int i = 0; i < 2; i++) {
        strata_task_args a;
        strata_args_init(&a);
        strata_args_add_tensor(&a, &t, STRATA_INOUT);
        for (int k = 0; k < 3; k++)
            strata_args_add_scalar(&a, scripts[i][k]);
        STRATA_TRY(strata_orch_submit_sub(o, c->set_and_return, &a));
    }
    return STRATA_OK;
}

static void an_earlier_tasks_message_never_reaches_a_later_failure(void **state) {
    (void)state;
    ctx c;
    open_ctx(&c, 1, 20000);
    strata_run *h;
    assert_ok(strata_worker_submit(c.t.w, orch_note_then_plain_failure, &c, &h));
    assert_status(STRATA_ETASK, strata_run_wait(h, STRATA_WAIT_FOREVER));
    const char *err = strata_run_error(h);
    ts_assert_mentions(err, "task 'set_and_return' #2 failed: returned 3");
    assert_null(strstr(err, "note"));
    strata_run_release(h);
    ts_worker_close(&c.t);
}

static int orch_long_message(strata_orch *o, void *arg) {
    ctx *c = arg;
    strata_task_args a;
    strata_args_init(&a);
    return strata_orch_submit_sub(o, c->long_message, &a);
}

static void a_long_task_message_is_cut_cleanly(void **state) {
    (void)state;
    ctx c;
    open_ctx(&c, 1, 20000);
    strata_run *h;
    assert_ok(strata_worker_submit(c.t.w, orch_long_message, &c, &h));
    assert_status(STRATA_ETASK, strata_run_wait(h, STRATA_WAIT_FOREVER));
    const char *err = strata_run_error(h);
    const char *tail = strstr(err, "failed: ");
    assert_non_null(tail);
    tail += strlen("failed: ");
    /* the run's error is full: the context, the message's front, the cut marker */
    assert_int_equal(strlen(err), STRATA_ERRMSG_MAX - 1);
    size_t front = strlen(tail) - strlen(ST_MSG_CUT);
    assert_memory_equal(tail, c.long_text, front);
    assert_string_equal(tail + front, ST_MSG_CUT);
    ts_assert_mentions(err, "run 1: L3 worker sub 0: task 'long_message' #1"); /* prefix intact */
    strata_run_release(h);
    ts_worker_close(&c.t);
}

/* A NULL format is bad input like any other: the task fails, the process
 * does not (strata_program_fail ignores a NULL format the same way). */
static int null_format_fn(const strata_task_view *a, void *user) {
    (void)a, (void)user;
    const char *volatile fmt = NULL; /* not known at compile time */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wformat-security"
#pragma GCC diagnostic ignored "-Wformat-nonliteral"
    strata_task_set_error(fmt);
#pragma GCC diagnostic pop
    return 1;
}

static int orch_null_format(strata_orch *o, void *arg) {
    ctx *c = arg;
    strata_task_args a;
    strata_args_init(&a);
    return strata_orch_submit_sub(o, c->null_format, &a);
}

static void a_null_format_fails_the_task_not_the_process(void **state) {
    (void)state;
    ctx c;
    open_ctx(&c, 1, 20000);
    assert_ok(strata_worker_register_sub(c.t.w, "null_format", null_format_fn, &c, &c.null_format));
    strata_run *h;
    assert_ok(strata_worker_submit(c.t.w, orch_null_format, &c, &h));
    assert_status(STRATA_ETASK, strata_run_wait(h, STRATA_WAIT_FOREVER));
    ts_assert_mentions(strata_run_error(h), "task 'null_format' #1 failed");
    strata_run_release(h);
    ts_worker_close(&c.t);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(every_sub_worker_runs_tasks),
        cmocka_unit_test(sub_workers_that_never_spin_still_run_every_task),
        cmocka_unit_test(a_task_message_is_the_tail_of_the_run_error),
        cmocka_unit_test(without_a_message_the_error_names_the_returned_value),
        cmocka_unit_test(any_non_zero_return_fails_the_task_as_etask),
        cmocka_unit_test(a_message_set_by_a_body_that_succeeds_is_dropped),
        cmocka_unit_test(an_earlier_tasks_message_never_reaches_a_later_failure),
        cmocka_unit_test(a_long_task_message_is_cut_cleanly),
        cmocka_unit_test(a_null_format_fails_the_task_not_the_process),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
