// label: concurrency
/* tests/unit/test_task_misuse.c - a task body (or chip program) that calls
 * back into its own worker to close it, destroy it, submit a run or wait for
 * an unfinished run is refused with STRATA_ESTATE and a message saying why,
 * as the same calls are from an orchestration function. Each of them would
 * otherwise wait for the very task that makes it. */
#include "test_support.h"

#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/hooks.h"
#include "util/clock.h"
#include "util/error.h"

typedef enum misuse { DO_CLOSE, DO_DESTROY, DO_SUBMIT, DO_RUN, DO_WAIT_OWN_RUN } misuse;

typedef struct fixture {
    strata_worker *w;
    strata_callable body, plain;
    misuse what;
    _Atomic(strata_run *) own; /* the run handle a DO_WAIT_OWN_RUN task waits on */
    _Atomic int ran;
    pthread_t ran_on; /* the thread the last misusing body ran on */
    int rc;           /* what the misused call returned inside the task */
    char msg[512];    /* and its message */
    _Atomic int held; /* 1: sub workers wait before claiming (helping test) */
} fixture;

static int nothing_orch(strata_orch *o, void *arg) {
    (void)o, (void)arg;
    return STRATA_OK;
}

static int do_misuse(fixture *f) {
    switch (f->what) {
    case DO_CLOSE:
        return strata_worker_close(f->w);
    case DO_DESTROY:
        st_clear_error();            /* the refusal's message, not an earlier one, is the verdict */
        strata_worker_destroy(f->w); /* must refuse and leave the worker intact */
        return strata_error_message()[0] ? STRATA_ESTATE : STRATA_OK;
    case DO_SUBMIT: {
        strata_run *h = NULL;
        int rc = strata_worker_submit(f->w, nothing_orch, NULL, &h);
        if (rc == STRATA_OK) { /* accepted: record it, do not wait (that would hang) */
            strata_run_release(h);
        }
        return rc;
    }
    case DO_RUN:
        return strata_worker_run(f->w, nothing_orch, NULL);
    case DO_WAIT_OWN_RUN: {
        strata_run *h;
        uint64_t give_up = st_now_ns() + 10 * TS_SEC;
        while (!(h = atomic_load(&f->own)) && st_now_ns() < give_up)
            sched_yield();
        if (!h)
            return STRATA_OK; /* the test thread never published it: fails below */
        return strata_run_wait(h, 100000000ull); /* bounded: a broken build must not hang */
    }
    }
    return STRATA_OK;
}

static int body_fn(const strata_task_view *a, void *u) {
    (void)a;
    fixture *f = u;
    f->ran_on = pthread_self();
    f->rc = do_misuse(f);
    snprintf(f->msg, sizeof f->msg, "%s", strata_error_message());
    atomic_fetch_add(&f->ran, 1);
    return 0;
}

static int plain_fn(const strata_task_view *a, void *u) {
    (void)a;
    atomic_fetch_add(&((fixture *)u)->ran, 1);
    return 0;
}

static void hold_claim(strata_worker *w, st_hook_point at, uint64_t ref, void *ctx) {
    (void)w, (void)at, (void)ref;
    fixture *f = ctx;
    uint64_t give_up = st_now_ns() + 10 * TS_SEC;
    while (atomic_load(&f->held) && st_now_ns() < give_up) {
        struct timespec ts = {0, 100000};
        nanosleep(&ts, NULL);
    }
}

static fixture *make(int subs, int help, int held) {
    fixture *f = calloc(1, sizeof *f);
    assert_non_null(f);
    strata_worker_config cfg;
    strata_worker_config_init(&cfg);
    cfg.sub_workers = (uint32_t)subs;
    cfg.help_while_waiting = help;
    assert_ok(strata_worker_create(&cfg, &f->w));
    assert_ok(strata_worker_register_sub(f->w, "misuse", body_fn, f, &f->body));
    assert_ok(strata_worker_register_sub(f->w, "plain", plain_fn, f, &f->plain));
    atomic_store(&f->held, held);
    if (held)
        st_worker_set_hook(f->w, ST_HOOK_SUB_BEFORE_CLAIM, hold_claim, f);
    assert_ok(strata_worker_init(f->w));
    return f;
}

static void destroy(fixture *f) {
    atomic_store(&f->held, 0);
    strata_worker_destroy(f->w);
    free(f);
}

static int one_task_orch(strata_orch *o, void *arg) {
    fixture *f = arg;
    strata_task_args a;
    strata_args_init(&a);
    return strata_orch_submit_sub(o, f->body, &a);
}

static int plain_orch(strata_orch *o, void *arg) {
    fixture *f = arg;
    strata_task_args a;
    strata_args_init(&a);
    return strata_orch_submit_sub(o, f->plain, &a);
}

/* The worker still works after the refusal. */
static void assert_worker_usable(fixture *f) {
    int before = atomic_load(&f->ran);
    assert_ok(strata_worker_run(f->w, plain_orch, f));
    assert_int_equal(atomic_load(&f->ran), before + 1);
}

static void misuse_is_refused(misuse what, const char *call) {
    fixture *f = make(2, 0, 0);
    f->what = what;
    strata_run *h;
    assert_ok(strata_worker_submit(f->w, one_task_orch, f, &h));
    atomic_store(&f->own, h);
    assert_ok(strata_run_wait(h, STRATA_WAIT_FOREVER));
    strata_run_release(h);
    assert_int_equal(atomic_load(&f->ran), 1);
    if (f->rc != STRATA_ESTATE)
        fail_msg("%s from a task body returned %s: %s", call, strata_status_name(f->rc), f->msg);
    assert_non_null(strstr(f->msg, call));
    assert_non_null(strstr(f->msg, "task body"));
    assert_worker_usable(f);
    destroy(f);
}

static void close_from_a_task_body_is_refused(void **state) {
    (void)state;
    misuse_is_refused(DO_CLOSE, "strata_worker_close");
}

static void destroy_from_a_task_body_is_refused(void **state) {
    (void)state;
    misuse_is_refused(DO_DESTROY, "strata_worker_destroy");
}

static void submit_from_a_task_body_is_refused(void **state) {
    (void)state;
    misuse_is_refused(DO_SUBMIT, "strata_worker_submit");
}

static void run_from_a_task_body_is_refused(void **state) {
    (void)state;
    misuse_is_refused(DO_RUN, "strata_worker_submit");
}

static void waiting_on_its_own_run_from_a_task_body_is_refused(void **state) {
    (void)state;
    misuse_is_refused(DO_WAIT_OWN_RUN, "strata_run_wait");
}

/* A task lent to the thread waiting for its run runs on that thread: the
 * same calls are refused there too. */
static void close_from_a_lent_task_is_refused(void **state) {
    (void)state;
    fixture *f = make(1, 1, 1); /* the only sub worker is held before its claim */
    f->what = DO_CLOSE;
    assert_ok(strata_worker_run(f->w, one_task_orch, f)); /* the waiter runs the task */
    assert_int_equal(atomic_load(&f->ran), 1);
    assert_true(pthread_equal(f->ran_on, pthread_self())); /* it really was lent */
    assert_int_equal(f->rc, STRATA_ESTATE);
    assert_non_null(strstr(f->msg, "strata_worker_close"));
    assert_non_null(strstr(f->msg, "task body"));
    atomic_store(&f->held, 0);
    assert_worker_usable(f);
    destroy(f);
}

/* A different worker may be driven from a task body. */
static void another_worker_may_be_used_from_a_task_body(void **state) {
    (void)state;
    fixture *f = make(2, 0, 0);
    fixture *g = make(1, 0, 0);
    f->what = DO_RUN;
    strata_worker *own = f->w;
    f->w = g->w; /* the task body runs a run on g */
    strata_run *h;
    assert_ok(strata_worker_submit(own, one_task_orch, f, &h));
    assert_ok(strata_run_wait(h, STRATA_WAIT_FOREVER));
    strata_run_release(h);
    assert_int_equal(atomic_load(&f->ran), 1);
    assert_ok(f->rc);
    f->w = own;
    destroy(g);
    destroy(f);
}

/* ---- a chip program on a chip of the worker -------------------------------- */

static int closing_program(strata_program_ctx *ctx, const strata_task_view *args, void *user) {
    (void)ctx, (void)args;
    fixture *f = user;
    f->rc = strata_worker_close(f->w);
    snprintf(f->msg, sizeof f->msg, "%s", strata_error_message());
    atomic_fetch_add(&f->ran, 1);
    return 0;
}

typedef struct chip_case {
    fixture *f;
    strata_callable prog;
    int chip;
} chip_case;

static int chip_orch(strata_orch *o, void *arg) {
    chip_case *c = arg;
    strata_task_args a;
    strata_args_init(&a);
    return strata_orch_submit_next_level(o, c->prog, &a, NULL, c->chip);
}

static void close_from_a_chip_program_is_refused(void **state) {
    (void)state;
    fixture *f = calloc(1, sizeof *f);
    assert_non_null(f);
    strata_worker_config cfg;
    strata_worker_config_init(&cfg);
    cfg.sub_workers = 1;
    assert_ok(strata_worker_create(&cfg, &f->w));
    strata_chip_config cc;
    strata_chip_config_init(&cc);
    chip_case c = {f, -1, -1};
    assert_ok(strata_worker_add_chip(f->w, &cc, &c.chip));
    strata_chip_program_desc d = {.name = "closer", .fn = closing_program, .user = f};
    assert_ok(strata_worker_register_chip_program(f->w, &d, &c.prog));
    assert_ok(strata_worker_register_sub(f->w, "plain", plain_fn, f, &f->plain));
    assert_ok(strata_worker_init(f->w));
    assert_ok(strata_worker_run(f->w, chip_orch, &c));
    assert_int_equal(atomic_load(&f->ran), 1);
    assert_int_equal(f->rc, STRATA_ESTATE);
    assert_non_null(strstr(f->msg, "chip program"));
    assert_worker_usable(f);
    destroy(f);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(close_from_a_task_body_is_refused),
        cmocka_unit_test(destroy_from_a_task_body_is_refused),
        cmocka_unit_test(submit_from_a_task_body_is_refused),
        cmocka_unit_test(run_from_a_task_body_is_refused),
        cmocka_unit_test(waiting_on_its_own_run_from_a_task_body_is_refused),
        cmocka_unit_test(close_from_a_lent_task_is_refused),
        cmocka_unit_test(another_worker_may_be_used_from_a_task_body),
        cmocka_unit_test(close_from_a_chip_program_is_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
