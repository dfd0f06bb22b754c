/* tests/unit/test_trace_children.c - process children record their own
 * events into shared memory and the parent merges them into its file: a
 * process chip's native phases (prepare, execute, finalize) on its lane in
 * its own process, inside the parent's dispatch-to-completion bars; a
 * process child Worker's inner tasks and runs on lanes of its own process,
 * each inside the parent's bar of the task that ran it (one clock for all
 * processes); a child's full lane reports its drops.
 *
 * Owns: the fixtures (a process chip on the sim backend, an L4 with one
 * process L3 child); the checks are tests/support/trace_children_check.py.
 * Must never: assert durations: only presence, counts and ordering.
 * Forks processes: not a concurrency (TSan) test.
 */
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/engine.h"
#include "core/trace.h"
#include "core/trace_child.h"
#include "strata/chip.h"
#include "test_support.h"

enum { CHIP_TASKS = 4, INNER_TASKS = 6, RUNS = 2 };

static void tmp_path(char *buf, size_t n, const char *tag) {
    snprintf(buf, n, "/tmp/strata-test-trace-%ld-%s.json", (long)getpid(), tag);
}

/* Runs a checker: trace_check.py (the format) then trace_children_check.py. */
static int check(const char *path, const char *what) {
    char here[512], cmd[2048];
    snprintf(here, sizeof here, "%s", __FILE__);
    const char *dir = dirname(here);
    snprintf(cmd, sizeof cmd,
             "/usr/bin/python3 %s/../support/trace_check.py %s -1 >/dev/null && "
             "/usr/bin/python3 %s/../support/trace_children_check.py %s",
             dir, path, dir, what);
    return system(cmd);
}

/* ---- A process chip ------------------------------------------------------------------ */

static int empty_program(strata_program_ctx *ctx, const strata_task_view *a, void *user) {
    (void)a;
    (void)user;
    return strata_program_launch(ctx, "empty_kernel", 1, NULL, 0);
}

typedef struct chip_job {
    strata_callable prog;
    int chip;
} chip_job;

static int submit_chip_tasks(strata_orch *o, void *arg) {
    chip_job *j = arg;
    strata_task_args a;
    strata_args_init(&a);
    for (int i = 0; i < CHIP_TASKS; i++)
        STRATA_TRY(strata_orch_submit_next_level(o, j->prog, &a, NULL, j->chip));
    return STRATA_OK;
}

static void a_process_chip_records_its_native_phases_in_its_own_process(void **state) {
    (void)state;
    char path[256], what[400];
    tmp_path(path, sizeof path, "chip-phases");
    strata_worker_config wc;
    strata_worker_config_init(&wc);
    wc.sub_workers = 1;
    wc.trace_path = path;
    strata_worker *w;
    assert_ok(strata_worker_create(&wc, &w));
    strata_chip_config cc;
    strata_chip_config_init(&cc);
    cc.host = STRATA_HOST_PROCESS;
    cc.kernel_module = STRATA_SIM_TEST_KERNELS_PATH;
    chip_job j;
    assert_ok(strata_worker_add_chip(w, &cc, &j.chip));
    strata_chip_program_desc d = {.name = "empty", .fn = empty_program};
    assert_ok(strata_worker_register_chip_program(w, &d, &j.prog));
    assert_ok(strata_worker_init(w));
    assert_ok(strata_worker_run(w, submit_chip_tasks, &j));
    strata_worker_destroy(w);
    snprintf(what, sizeof what, "chip %s %d", path, CHIP_TASKS);
    assert_int_equal(check(path, what), 0);
    unlink(path);
}

/* ---- An L4 with a process child Worker ----------------------------------------------- */

static strata_callable g_inc; /* the inner worker's: set by setup, in the child */

static int inc_sub(const strata_task_view *a, void *user) {
    (void)user;
    int32_t *p = strata_args_data(a, 0);
    p[0] += 1;
    return 0;
}

static int l3_setup(strata_worker *w, void *user) {
    (void)user;
    return strata_worker_register_sub(w, "inc", inc_sub, NULL, &g_inc);
}

/* In the child: INNER_TASKS independent sub tasks, each on its own scratch. */
static int l3_program(strata_orch *o, void *arg) {
    (void)arg;
    for (int i = 0; i < INNER_TASKS; i++) {
        strata_tensor t;
        int64_t shape[1] = {16};
        STRATA_TRY(strata_orch_alloc(o, 1, shape, STRATA_I32, &t));
        strata_task_args a;
        strata_args_init(&a);
        STRATA_TRY(strata_args_add_tensor(&a, &t, STRATA_INOUT));
        STRATA_TRY(strata_orch_submit_sub(o, g_inc, &a));
    }
    return STRATA_OK;
}

/* ---- An L4 whose child Worker has a process chip of its own -------------------------- */

static strata_callable g_chip_prog; /* the inner worker's: set by setup */
static int g_chip;

static int l3_chip_setup(strata_worker *w, void *user) {
    (void)user;
    strata_chip_config cc;
    strata_chip_config_init(&cc);
    cc.host = STRATA_HOST_PROCESS;
    cc.kernel_module = STRATA_SIM_TEST_KERNELS_PATH;
    STRATA_TRY(strata_worker_add_chip(w, &cc, &g_chip));
    strata_chip_program_desc d = {.name = "empty", .fn = empty_program};
    return strata_worker_register_chip_program(w, &d, &g_chip_prog);
}

static int l3_chip_program(strata_orch *o, void *arg) {
    (void)arg;
    chip_job j = {.prog = g_chip_prog, .chip = g_chip};
    return submit_chip_tasks(o, &j);
}

typedef struct l4_job {
    strata_callable l3prog;
    int child;
} l4_job;

static int submit_to_child(strata_orch *o, void *arg) {
    l4_job *j = arg;
    strata_task_args a;
    strata_args_init(&a);
    return strata_orch_submit_next_level(o, j->l3prog, &a, NULL, j->child);
}

static void run_l4_with(const char *path, uint32_t events, strata_host_mode host,
                        int (*setup)(strata_worker *, void *), strata_orch_fn program) {
    strata_worker_config wc;
    strata_worker_config_init(&wc);
    wc.level = 4;
    wc.sub_workers = 1;
    wc.trace_path = path;
    if (events)
        wc.trace_events_per_lane = events;
    strata_worker *w;
    assert_ok(strata_worker_create(&wc, &w));
    strata_child_config cc;
    strata_child_config_init(&cc);
    cc.worker.level = 3;
    cc.worker.sub_workers = 2;
    cc.host = host;
    cc.setup = setup;
    l4_job j;
    assert_ok(strata_worker_add_child(w, &cc, &j.child));
    assert_ok(strata_worker_register_orch(w, "l3prog", program, NULL, &j.l3prog));
    assert_ok(strata_worker_init(w));
    for (int r = 0; r < RUNS; r++)
        assert_ok(strata_worker_run(w, submit_to_child, &j));
    strata_worker_destroy(w);
}

static void run_l4(const char *path, uint32_t events, strata_host_mode host) {
    run_l4_with(path, events, host, l3_setup, l3_program);
}

/* The child Worker's own process chip records into a region only the child
 * Worker mapped; the child Worker copies it into its own region at each run's
 * end, so the phases reach the file: on the chip's lane, in the chip's
 * process, inside the child Worker's bars of the chip's tasks. */
static void grandchild_chip(strata_host_mode host, const char *tag) {
    char path[256], what[400];
    tmp_path(path, sizeof path, tag);
    run_l4_with(path, 0, host, l3_chip_setup, l3_chip_program);
    snprintf(what, sizeof what, "grandchip %s %d %s", path, CHIP_TASKS * RUNS,
             host == STRATA_HOST_THREAD ? "thread" : "process");
    assert_int_equal(check(path, what), 0);
    unlink(path);
}

static void a_process_child_workers_own_chip_records_its_phases(void **state) {
    (void)state;
    grandchild_chip(STRATA_HOST_PROCESS, "grandchip-process");
}

static void a_thread_child_workers_own_chip_records_its_phases(void **state) {
    (void)state;
    grandchild_chip(STRATA_HOST_THREAD, "grandchip-thread");
}

/* ---- An L4 whose child Worker has a child Worker of its own ------------------------- */

static strata_callable g_l2prog; /* the child Worker's: set by its setup */
static int g_grandchild;
static strata_host_mode g_grand_host;
static strata_callable g_boom; /* the grandchild's: set by its setup */
static int g_grand_fails;      /* the grandchild's runs each have one task that fails */

static int boom_sub(const strata_task_view *a, void *user) {
    (void)a;
    (void)user;
    strata_task_set_error("grandchild boom");
    return 1;
}

static int l2_setup(strata_worker *w, void *user) {
    STRATA_TRY(l3_setup(w, user));
    return strata_worker_register_sub(w, "boom", boom_sub, NULL, &g_boom);
}

static int l2_program(strata_orch *o, void *arg) {
    STRATA_TRY(l3_program(o, arg));
    if (!g_grand_fails)
        return STRATA_OK;
    strata_task_args a;
    strata_args_init(&a);
    return strata_orch_submit_sub(o, g_boom, &a);
}

static int l3_worker_setup(strata_worker *w, void *user) {
    (void)user;
    strata_child_config cc;
    strata_child_config_init(&cc);
    cc.worker.level = 2;
    cc.worker.sub_workers = 2;
    cc.host = g_grand_host;
    cc.setup = l2_setup;
    STRATA_TRY(strata_worker_add_child(w, &cc, &g_grandchild));
    return strata_worker_register_orch(w, "l2prog", l2_program, NULL, &g_l2prog);
}

static int l3_worker_program(strata_orch *o, void *arg) {
    (void)arg;
    l4_job j = {.l3prog = g_l2prog, .child = g_grandchild};
    return submit_to_child(o, &j);
}

static const char *host_name(strata_host_mode host) {
    return host == STRATA_HOST_THREAD ? "thread" : "process";
}

/* L4 -> L3 (child_host) -> L2 (grand_host): RUNS runs, each one task of the
 * L3, which is one task of the L2, which runs INNER_TASKS sub tasks. */
static void run_l4_l3_l2(const char *path, strata_host_mode child_host, strata_host_mode grand_host,
                         uint32_t grand_events) {
    g_grand_host = grand_host;
    strata_worker_config wc;
    strata_worker_config_init(&wc);
    wc.level = 4;
    wc.sub_workers = 1;
    wc.trace_path = path;
    strata_worker *w;
    assert_ok(strata_worker_create(&wc, &w));
    strata_child_config cc;
    strata_child_config_init(&cc);
    cc.worker.level = 3;
    cc.worker.sub_workers = 1;
    if (grand_events)
        cc.worker.trace_events_per_lane = grand_events;
    cc.host = child_host;
    cc.setup = l3_worker_setup;
    l4_job j;
    assert_ok(strata_worker_add_child(w, &cc, &j.child));
    assert_ok(strata_worker_register_orch(w, "l3prog", l3_worker_program, NULL, &j.l3prog));
    assert_ok(strata_worker_init(w));
    for (int r = 0; r < RUNS; r++) {
        int rc = strata_worker_run(w, submit_to_child, &j);
        if (g_grand_fails)
            assert_int_not_equal(rc, STRATA_OK);
        else
            assert_ok(rc);
    }
    strata_worker_destroy(w);
}

/* The grandchild Worker's runs and tasks reach the file: named "n0/n0/...",
 * on lanes of its own, each task inside the child Worker's bar of the task
 * that ran it, each exactly once. */
static void grandchild_worker(strata_host_mode child_host, strata_host_mode grand_host) {
    char path[256], tag[64], what[400];
    snprintf(tag, sizeof tag, "grandworker-%s-%s", host_name(child_host), host_name(grand_host));
    tmp_path(path, sizeof path, tag);
    run_l4_l3_l2(path, child_host, grand_host, 0);
    snprintf(what, sizeof what, "grandworker %s %d %d %s %s", path, INNER_TASKS, RUNS,
             host_name(child_host), host_name(grand_host));
    assert_int_equal(check(path, what), 0);
    unlink(path);
}

static void a_thread_child_workers_thread_child_worker_records_its_runs_and_tasks(void **state) {
    (void)state;
    grandchild_worker(STRATA_HOST_THREAD, STRATA_HOST_THREAD);
}

static void a_process_child_workers_process_child_worker_records_its_runs_and_tasks(void **state) {
    (void)state;
    grandchild_worker(STRATA_HOST_PROCESS, STRATA_HOST_PROCESS);
}

static void a_thread_child_workers_process_child_worker_records_its_runs_and_tasks(void **state) {
    (void)state;
    grandchild_worker(STRATA_HOST_THREAD, STRATA_HOST_PROCESS);
}

static void a_process_child_workers_thread_child_worker_records_its_runs_and_tasks(void **state) {
    (void)state;
    grandchild_worker(STRATA_HOST_PROCESS, STRATA_HOST_THREAD);
}

/* A grandchild's failed task carries its message: the child Worker copies it
 * into its own table with the record. */
static void a_grandchild_workers_failed_task_keeps_its_message(void **state) {
    (void)state;
    char path[256], what[400];
    tmp_path(path, sizeof path, "grandchild-error");
    g_grand_fails = 1;
    run_l4_l3_l2(path, STRATA_HOST_PROCESS, STRATA_HOST_PROCESS, 0);
    g_grand_fails = 0;
    snprintf(what, sizeof what, "granderror %s %d", path, RUNS);
    assert_int_equal(check(path, what), 0);
    unlink(path);
}

/* The grandchild's region is the child Worker's size: 8 events, fewer than
 * its tasks'; its drops reach the file on its own orchestrator lane. */
static void a_grandchild_workers_full_lane_reports_its_drops(void **state) {
    (void)state;
    char path[256], what[400];
    tmp_path(path, sizeof path, "grandchild-drops");
    run_l4_l3_l2(path, STRATA_HOST_PROCESS, STRATA_HOST_PROCESS, 8);
    snprintf(what, sizeof what, "granddrops %s", path);
    assert_int_equal(check(path, what), 0);
    unlink(path);
}

static void a_process_child_workers_tasks_have_lanes_of_their_own_on_the_same_clock(void **state) {
    (void)state;
    char path[256], what[400];
    tmp_path(path, sizeof path, "child-worker");
    run_l4(path, 0, STRATA_HOST_PROCESS);
    snprintf(what, sizeof what, "worker %s %d %d process", path, INNER_TASKS, RUNS);
    assert_int_equal(check(path, what), 0);
    /* strata-trace reads the child's runs as runs of their own */
    char here[512], cmd[1400];
    snprintf(here, sizeof here, "%s", __FILE__);
    snprintf(cmd, sizeof cmd,
             "/usr/bin/python3 %s/../../tools/strata-trace summary %s | grep -q '^  run n0/2: '",
             dirname(here), path);
    assert_int_equal(system(cmd), 0);
    unlink(path);
}

/* A thread-hosted child Worker records the same way, in a region of its
 * parent's process; its lanes are named after it beside the parent's. */
static void a_thread_child_workers_tasks_have_lanes_of_their_own(void **state) {
    (void)state;
    char path[256], what[400];
    tmp_path(path, sizeof path, "thread-child-worker");
    run_l4(path, 0, STRATA_HOST_THREAD);
    snprintf(what, sizeof what, "worker %s %d %d thread", path, INNER_TASKS, RUNS);
    assert_int_equal(check(path, what), 0);
    unlink(path);
}

static void a_child_workers_full_lane_reports_its_drops(void **state) {
    (void)state;
    char path[256], what[400];
    tmp_path(path, sizeof path, "child-drops");
    run_l4(path, 8, STRATA_HOST_PROCESS); /* the child's lane too: fewer than its tasks' events */
    snprintf(what, sizeof what, "drops %s", path);
    assert_int_equal(check(path, what), 0);
    unlink(path);
}

/* A region is the child's to scribble on: the parent's reader trusts none of
 * it (the records' address, the count, the table sizes, the strings). */
static void a_scribbled_region_is_read_within_what_the_parent_mapped(void **state) {
    (void)state;
    char path[256];
    tmp_path(path, sizeof path, "scribbled");
    strata_worker_config wc;
    strata_worker_config_init(&wc);
    wc.trace_path = path;
    wc.trace_events_per_lane = 16;
    strata_worker *w;
    assert_ok(strata_worker_create(&wc, &w));
    st_trace_region *r = st_trace_region_new(w, 0, ST_REGION_WORKER);
    assert_non_null(r);
    const st_trace_event *mapped = r->lane.ev;
    r->lane.ev = NULL;
    r->lane.cap = 1u << 30;
    atomic_store(&r->lane.count, 1u << 30);
    r->names.nsubs = 1 << 20;
    r->names.nnext = -5;
    r->names.ncallables = 1u << 20;
    memset(r->names.callable[0], 'x', sizeof r->names.callable[0]); /* no terminator */
    r->msgs.n = 1000;
    memset(r->msgs.text[0], 'y', sizeof r->msgs.text[0]);
    atomic_store(&r->named, 1);
    st_trace_region_view v;
    assert_ok(st_trace_region_read(w, 0, &v));
    assert_ptr_equal(v.ev, mapped);
    assert_int_equal(v.n, 16);
    assert_true(v.named);
    assert_int_equal(v.names->nsubs, STRATA_MAX_SUB_WORKERS);
    assert_int_equal(v.names->nnext, 0);
    assert_int_equal(v.names->ncallables, ST_MAX_CALLABLES);
    assert_int_equal(strlen(v.names->callable[0]), sizeof v.names->callable[0] - 1);
    assert_int_equal(v.msgs->n, ST_TRACE_MSGS);
    assert_int_equal(strlen(v.msgs->text[0]), sizeof v.msgs->text[0] - 1);
    st_trace_region_view_free(&v);
    strata_worker_destroy(w); /* unmaps what it mapped, whatever cap now says */
}

/* A name record as the child Worker writes it (core/trace_child.h): the
 * payload's 64-bit words in ts, t[0..3], run. */
static st_trace_event name_rec(unsigned origin, uint8_t what, uint32_t index, int32_t chunk,
                               const void *bytes, size_t len) {
    uint64_t p[ST_NM_BYTES / 8] = {0};
    memcpy(p, bytes, len);
    return (st_trace_event){.ts = p[0],
                            .t = {p[1], p[2], p[3], p[4]},
                            .run = p[5],
                            .a = index,
                            .worker = chunk,
                            .kind = ST_TEV_FROM(ST_TEV_NAME, origin),
                            .status = what};
}

/* A child Worker's child's names come through its lane, which its own child
 * (a process) could have scribbled on before they were copied: every size is
 * clamped, every index checked, every string terminated, other origins'
 * entries ignored, and without a header there are no names at all. */
static void scribbled_name_records_are_read_within_the_tables(void **state) {
    (void)state;
    int32_t head[5] = {2, 4242, 1 << 20, -5, 1 << 20};
    int32_t other[5] = {9, 9, 1, 1, 1};
    int32_t pids[ST_NM_PIDS];
    for (int i = 0; i < ST_NM_PIDS; i++)
        pids[i] = 7000 + i;
    char xs[ST_NM_BYTES];
    memset(xs, 'x', sizeof xs); /* no terminator in either chunk */
    st_trace_event ev[] = {
        name_rec(1, ST_NM_CALLABLE, 0, 0, xs, sizeof xs), /* before the header: ignored */
        name_rec(1, ST_NM_HEAD, 0, 0, head, sizeof head),
        name_rec(2, ST_NM_HEAD, 0, 0, other, sizeof other),
        name_rec(1, ST_NM_SUB_PIDS, STRATA_MAX_SUB_WORKERS - 2, 0, pids, sizeof pids),
        name_rec(1, ST_NM_CALLABLE, 1, 0, xs, sizeof xs),
        name_rec(1, ST_NM_CALLABLE, 1, 1, xs, sizeof xs),
        name_rec(1, ST_NM_CALLABLE, 2, 7, xs, sizeof xs),                /* no such chunk */
        name_rec(1, ST_NM_CALLABLE, ST_MAX_CALLABLES, 0, xs, sizeof xs), /* past the table */
        name_rec(1, ST_NM_NEXT_LABEL, 0, 0, xs, sizeof xs),              /* nnext clamped to 0 */
    };
    uint32_t n = (uint32_t)(sizeof ev / sizeof ev[0]);
    st_trace_names *nm = malloc(sizeof *nm);
    assert_non_null(nm);
    assert_true(st_trace_names_decode(ev, n, 1, nm));
    assert_int_equal(nm->pid, 4242);
    assert_int_equal(nm->nsubs, STRATA_MAX_SUB_WORKERS);
    assert_int_equal(nm->nnext, 0);
    assert_int_equal(nm->ncallables, ST_MAX_CALLABLES);
    assert_int_equal(nm->sub_pid[STRATA_MAX_SUB_WORKERS - 1], 7001);
    assert_int_equal(strlen(nm->callable[0]), 0);
    assert_int_equal(strlen(nm->callable[1]), ST_NM_STR - 1);
    assert_int_equal(strlen(nm->callable[2]), 0);
    assert_int_equal(strlen(nm->next_label[0]), 0);
    assert_false(st_trace_names_decode(ev, n, 3, nm)); /* no header of origin 3 */
    assert_false(st_trace_names_decode(ev + 3, n - 3, 1, nm));
    free(nm);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(a_process_chip_records_its_native_phases_in_its_own_process),
        cmocka_unit_test(a_process_child_workers_own_chip_records_its_phases),
        cmocka_unit_test(a_thread_child_workers_own_chip_records_its_phases),
        cmocka_unit_test(a_process_child_workers_tasks_have_lanes_of_their_own_on_the_same_clock),
        cmocka_unit_test(a_thread_child_workers_tasks_have_lanes_of_their_own),
        cmocka_unit_test(a_child_workers_full_lane_reports_its_drops),
        cmocka_unit_test(a_thread_child_workers_thread_child_worker_records_its_runs_and_tasks),
        cmocka_unit_test(a_process_child_workers_process_child_worker_records_its_runs_and_tasks),
        cmocka_unit_test(a_thread_child_workers_process_child_worker_records_its_runs_and_tasks),
        cmocka_unit_test(a_process_child_workers_thread_child_worker_records_its_runs_and_tasks),
        cmocka_unit_test(a_grandchild_workers_failed_task_keeps_its_message),
        cmocka_unit_test(a_grandchild_workers_full_lane_reports_its_drops),
        cmocka_unit_test(a_scribbled_region_is_read_within_what_the_parent_mapped),
        cmocka_unit_test(scribbled_name_records_are_read_within_the_tables),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
