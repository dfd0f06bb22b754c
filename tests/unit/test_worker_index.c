// label: concurrency
/* tests/unit/test_worker_index.c - a task body reads its worker's index
 * (strata_task_view.worker).
 *
 * Indices are in 0 .. strata_worker_sub_slots() - 1; a waiting caller that
 * runs a task reads sub_workers; two bodies running at once never read the
 * same index (each body holds a per-index in-use flag, set and cleared with
 * atomics, while it runs); group members read their distinct workers'
 * indices; of two callers waiting for one run, only one runs tasks at a
 * time; process-hosted sub workers read their index in the child.
 * ST_HOOK_SUB_BEFORE_CLAIM holds the sub workers so that the caller is the
 * one that runs a task (as in test_helping.c).
 */
#include "test_support.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/hooks.h"
#include "util/clock.h"

#define MAX_INDEX 8
#define MANY_TASKS 3000

/* Shared with process children (ts_shared_calloc): written by every body. */
typedef struct board {
    _Atomic int in_use[MAX_INDEX];
    _Atomic int seen[MAX_INDEX];
    _Atomic int out_of_range;
    _Atomic int shared; /* a body found its index in use by another body */
    _Atomic int held;   /* 1: sub workers wait in the claim hook */
    uint32_t slots;
    uint64_t body_ns; /* how long a body holds its index */
} board;

static int record_index(const strata_task_view *a, void *u) {
    board *b = u;
    uint32_t i = a->worker;
    if (i >= b->slots || i >= MAX_INDEX) {
        atomic_fetch_add(&b->out_of_range, 1);
        return 0;
    }
    if (atomic_exchange(&b->in_use[i], 1))
        atomic_fetch_add(&b->shared, 1);
    uint64_t until = st_now_ns() + b->body_ns; /* long enough for bodies to overlap */
    while (st_now_ns() < until)
        ;
    atomic_fetch_add(&b->seen[i], 1);
    atomic_store(&b->in_use[i], 0);
    return 0;
}

static void hold_claim(strata_worker *w, st_hook_point at, uint64_t ref, void *ctx) {
    (void)w, (void)at, (void)ref;
    board *b = ctx;
    uint64_t give_up = st_now_ns() + 5 * TS_SEC; /* a broken test must not hang CI */
    while (atomic_load(&b->held) && st_now_ns() < give_up) {
        struct timespec ts = {0, 100000};
        nanosleep(&ts, NULL);
    }
}

typedef struct fixture {
    strata_worker *w;
    strata_callable fn;
    board *b;
    int tasks, members; /* members > 1: one group of that many, else `tasks` single tasks */
} fixture;

static void open_fixture(fixture *f, uint32_t subs, int help, strata_host_mode mode, int held) {
    memset(f, 0, sizeof *f);
    f->b = ts_shared_calloc(1, sizeof *f->b);
    atomic_store(&f->b->held, held);
    strata_worker_config cfg;
    strata_worker_config_init(&cfg);
    cfg.sub_workers = subs;
    cfg.help_while_waiting = help;
    cfg.sub_mode = mode;
    assert_ok(strata_worker_create(&cfg, &f->w));
    f->b->slots = strata_worker_sub_slots(f->w);
    f->b->body_ns = 2000;
    assert_ok(strata_worker_register_sub(f->w, "index", record_index, f->b, &f->fn));
    if (held)
        st_worker_set_hook(f->w, ST_HOOK_SUB_BEFORE_CLAIM, hold_claim, f->b);
    assert_ok(strata_worker_init(f->w));
}

static void close_fixture(fixture *f) {
    atomic_store(&f->b->held, 0);
    strata_worker_destroy(f->w);
    assert_int_equal(atomic_load(&f->b->out_of_range), 0);
    assert_int_equal(atomic_load(&f->b->shared), 0);
    ts_shared_free(f->b, 1, sizeof *f->b);
}

static int orch_tasks(strata_orch *o, void *arg) {
    fixture *f = arg;
    if (f->members > 1) {
        strata_task_args a[MAX_INDEX];
        for (int i = 0; i < f->members; i++)
            strata_args_init(&a[i]);
        return strata_orch_submit_sub_group(o, f->fn, a, f->members);
    }
    for (int t = 0; t < f->tasks; t++) {
        strata_task_args a;
        strata_args_init(&a);
        STRATA_TRY(strata_orch_submit_sub(o, f->fn, &a));
    }
    return STRATA_OK;
}

static void the_slots_count_the_subs_and_the_helping_caller(void **state) {
    (void)state;
    fixture f;
    open_fixture(&f, 3, 1, STRATA_HOST_THREAD, 0);
    assert_int_equal(strata_worker_sub_slots(f.w), 4);
    close_fixture(&f);
    open_fixture(&f, 3, 0, STRATA_HOST_THREAD, 0);
    assert_int_equal(strata_worker_sub_slots(f.w), 3);
    close_fixture(&f);
    assert_int_equal(strata_worker_sub_slots(NULL), 0);
}

/* The sub workers are held before their claim: only the waiting caller can
 * run the tasks, and it reads index sub_workers. */
static void a_caller_running_a_task_while_it_waits_reads_index_n(void **state) {
    (void)state;
    fixture f;
    open_fixture(&f, 2, 1, STRATA_HOST_THREAD, 1);
    f.tasks = 3;
    assert_ok(strata_worker_run(f.w, orch_tasks, &f));
    assert_int_equal(atomic_load(&f.b->seen[2]), 3);
    assert_int_equal(atomic_load(&f.b->seen[0]) + atomic_load(&f.b->seen[1]), 0);
    close_fixture(&f);
}

static void bodies_running_at_once_never_share_an_index(void **state) {
    (void)state;
    fixture f;
    open_fixture(&f, 3, 1, STRATA_HOST_THREAD, 0);
    f.tasks = MANY_TASKS;
    for (int r = 0; r < 3; r++)
        assert_ok(strata_worker_run(f.w, orch_tasks, &f));
    int total = 0;
    for (int i = 0; i < MAX_INDEX; i++)
        total += atomic_load(&f.b->seen[i]);
    assert_int_equal(total, 3 * MANY_TASKS);
    print_message("tasks per index: %d %d %d, caller %d\n", atomic_load(&f.b->seen[0]),
                  atomic_load(&f.b->seen[1]), atomic_load(&f.b->seen[2]),
                  atomic_load(&f.b->seen[3]));
    close_fixture(&f); /* no index out of range, none shared */
}

typedef struct second_waiter {
    strata_run *h;
    int rc;
} second_waiter;

static void *second_waiter_main(void *arg) {
    second_waiter *sw = arg;
    sw->rc = strata_run_wait(sw->h, STRATA_WAIT_FOREVER);
    return NULL;
}

/* Two threads wait for one run whose sub worker is held: both would take
 * tasks, but only one at a time helps, so index sub_workers is never shared. */
static void two_waiting_callers_never_share_the_helpers_index(void **state) {
    (void)state;
    fixture f;
    open_fixture(&f, 2, 1, STRATA_HOST_THREAD, 1); /* two mailboxes: two tasks to lend at once */
    f.b->body_ns = 200000;
    f.tasks = 8;
    for (int round = 0; round < 5; round++) {
        second_waiter sw = {0};
        assert_ok(strata_worker_submit(f.w, orch_tasks, &f, &sw.h));
        pthread_t t;
        assert_int_equal(pthread_create(&t, NULL, second_waiter_main, &sw), 0);
        assert_ok(strata_run_wait(sw.h, STRATA_WAIT_FOREVER));
        pthread_join(t, NULL);
        assert_ok(sw.rc);
        strata_run_release(sw.h);
    }
    assert_int_equal(atomic_load(&f.b->seen[2]), 40);
    close_fixture(&f); /* none shared */
}

static void group_members_read_their_distinct_workers_indices(void **state) {
    (void)state;
    fixture f;
    open_fixture(&f, 3, 1, STRATA_HOST_THREAD, 0);
    f.members = 3;
    assert_ok(strata_worker_run(f.w, orch_tasks, &f));
    for (int i = 0; i < 3; i++)
        assert_int_equal(atomic_load(&f.b->seen[i]), 1);
    close_fixture(&f);
}

static void process_hosted_subs_read_their_index_in_the_child(void **state) {
    (void)state;
    fixture f;
    open_fixture(&f, 2, 1, STRATA_HOST_PROCESS, 0);
    f.members = 2; /* one member on each sub worker: both indices, at once */
    assert_ok(strata_worker_run(f.w, orch_tasks, &f));
    assert_int_equal(atomic_load(&f.b->seen[0]), 1);
    assert_int_equal(atomic_load(&f.b->seen[1]), 1);
    f.members = 0;
    f.tasks = 200;
    assert_ok(strata_worker_run(f.w, orch_tasks, &f));
    assert_int_equal(atomic_load(&f.b->seen[0]) + atomic_load(&f.b->seen[1]), 202);
    assert_int_equal(atomic_load(&f.b->seen[2]), 0); /* a waiter never runs a process task */
    close_fixture(&f);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(the_slots_count_the_subs_and_the_helping_caller),
        cmocka_unit_test(a_caller_running_a_task_while_it_waits_reads_index_n),
        cmocka_unit_test(bodies_running_at_once_never_share_an_index),
        cmocka_unit_test(two_waiting_callers_never_share_the_helpers_index),
        cmocka_unit_test(group_members_read_their_distinct_workers_indices),
        cmocka_unit_test(process_hosted_subs_read_their_index_in_the_child),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
