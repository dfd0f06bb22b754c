/* tests/system/test_l4_workers.c - an L4 Worker whose children are L3
 * Workers, each with a sim chip and sub workers, hosted as threads or as
 * processes.
 *
 * Owns: the L3 program (a chip task c = a + b, then a sub task c += 1) run
 * directly on an L3 and unchanged as a next-level task of an L4 on two
 * children, for every hosting (child thread / process, and an L3 process child
 * whose own chip and sub workers are processes), results checked on the host;
 * strata_orch_task_args (NULL in a direct run); an error in a child's chip
 * chaining up to the top with its exact path; a task naming a callable that is
 * not an orchestration callable; an orchestration callable registered after
 * init reaching a process child; a setup failure; closing reaps every child.
 * No concurrency label: the process cases fork (they run under ASan+UBSan).
 */
#include <dirent.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "test_support.h"

#include "core/endpoint.h"
#include "exec/process_endpoint.h"
#include "strata/chip.h"
#include "strata/sim.h"

enum { HALF = 256, ALL = 2 * HALF };

/* ---- The L3 program ------------------------------------------------------------------- */

/* The callables every L3 child registers in its setup, in this order (so their
 * ids are the same in every child, thread or process). */
typedef struct l3_ids {
    strata_callable vadd, inc, fail_prog, block;
    int chip;
} l3_ids;
static l3_ids g_ids;

/* tensors a, b, c; scalar n: c = a + b on the chip */
static int vadd_program(strata_program_ctx *ctx, const strata_task_view *a, void *user) {
    (void)user;
    uint64_t words[4] = {strata_program_arg_ptr(a, 0), strata_program_arg_ptr(a, 1),
                         strata_program_arg_ptr(a, 2), strata_args_scalar(a, 0)};
    return strata_program_launch(ctx, "vector_add", 4, words, 4);
}

/* scalar: the block that fails */
static int fail_program(strata_program_ctx *ctx, const strata_task_view *a, void *user) {
    (void)user;
    uint64_t words[2] = {strata_args_scalar(a, 0), 7};
    return strata_program_launch(ctx, "fail_block", 4, words, 2);
}

/* tensor c (INOUT): c += 1 */
static int inc_sub(const strata_task_view *a, void *user) {
    (void)user;
    float *c = strata_args_data(a, 0);
    int64_t n = strata_tensor_numel(&a->tensors[0]);
    for (int64_t i = 0; i < n; i++)
        c[i] += 1.0f;
    return 0;
}

/* tensor c: marks c[0] = BLOCK_MARK, then waits (10 s at most) to be killed */
#define BLOCK_MARK 12345.0f
static int block_sub(const strata_task_view *a, void *user) {
    (void)user;
    volatile float *c = strata_args_data(a, 0);
    c[0] = BLOCK_MARK;
    for (int i = 0; i < 10000; i++)
        usleep(1000);
    strata_task_set_error("block: was not killed within 10 s");
    return 1;
}

static int l3_setup(strata_worker *w, void *user) {
    const strata_chip_config *base = user;
    strata_chip_config cc = *base;
    STRATA_TRY(strata_worker_add_chip(w, &cc, &g_ids.chip));
    strata_chip_program_desc d = {.name = "vadd", .fn = vadd_program};
    STRATA_TRY(strata_worker_register_chip_program(w, &d, &g_ids.vadd));
    strata_chip_program_desc f = {.name = "fail", .fn = fail_program};
    STRATA_TRY(strata_worker_register_chip_program(w, &f, &g_ids.fail_prog));
    STRATA_TRY(strata_worker_register_sub(w, "inc", inc_sub, NULL, &g_ids.inc));
    return strata_worker_register_sub(w, "block", block_sub, NULL, &g_ids.block);
}

/* The arguments of one L3 run: a, b (IN), c (OUT_EXISTING); scalar: the mode. */
enum { MODE_ADD = 0, MODE_FAIL = 1, MODE_BLOCK = 2 };
typedef struct l3_direct {
    strata_task_args args;
    int saw_task_args; /* strata_orch_task_args was not NULL */
} l3_direct;

/* Runs unchanged on an L3 directly (arg: l3_direct) or as the task of an L4
 * (its arguments come from strata_orch_task_args). */
static int l3_program(strata_orch *o, void *arg) {
    const strata_task_view *ta = strata_orch_task_args(o);
    strata_task_view direct;
    if (!ta) {
        l3_direct *d = arg;
        direct = strata_args_view(&d->args);
        ta = &direct;
    }
    strata_task_args a;
    strata_args_init(&a);
    if (strata_args_scalar(ta, 0) == MODE_FAIL) { /* block 1 fails on the chip */
        STRATA_TRY(strata_args_add_scalar(&a, 1));
        return strata_orch_submit_next_level(o, g_ids.fail_prog, &a, NULL, g_ids.chip);
    }
    if (strata_args_scalar(ta, 0) == MODE_BLOCK) { /* a sub task that waits to be killed */
        STRATA_TRY(strata_args_add_tensor(&a, &ta->tensors[2], STRATA_INOUT));
        return strata_orch_submit_sub(o, g_ids.block, &a);
    }
    for (int i = 0; i < 2; i++)
        STRATA_TRY(strata_args_add_tensor(&a, &ta->tensors[i], STRATA_IN));
    STRATA_TRY(strata_args_add_tensor(&a, &ta->tensors[2], STRATA_OUT_EXISTING));
    STRATA_TRY(strata_args_add_scalar(&a, (uint64_t)strata_tensor_numel(&ta->tensors[0])));
    STRATA_TRY(strata_orch_submit_next_level(o, g_ids.vadd, &a, NULL, g_ids.chip));
    strata_task_args b;
    strata_args_init(&b);
    STRATA_TRY(strata_args_add_tensor(&b, &ta->tensors[2], STRATA_INOUT));
    return strata_orch_submit_sub(o, g_ids.inc, &b);
}

/* ---- The L4 ----------------------------------------------------------------------------- */

typedef struct l4 {
    strata_worker *w;
    int child[2];
    strata_callable l3prog;
    strata_buffer *a, *b, *c;
    strata_chip_config chip;
    int fail_child;      /* -1: none */
    int fail_mode;       /* what fail_child does (MODE_FAIL or MODE_BLOCK) */
    int only_child;      /* -1: both children get a task; else only this one */
    strata_callable use; /* the callable the L4 orchestration submits */
} l4;

static int l4_program(strata_orch *o, void *arg) {
    l4 *f = arg;
    for (int k = 0; k < 2; k++) {
        if (f->only_child >= 0 && k != f->only_child)
            continue;
        strata_task_args a;
        strata_args_init(&a);
        int64_t n = HALF, s = 1;
        strata_buffer *bufs[3] = {f->a, f->b, f->c};
        for (int i = 0; i < 3; i++) {
            strata_tensor t;
            STRATA_TRY(strata_tensor_view(bufs[i], (uint64_t)k * HALF * sizeof(float), STRATA_F32,
                                          1, &n, &s, &t));
            STRATA_TRY(strata_args_add_tensor(&a, &t, i == 2 ? STRATA_OUT_EXISTING : STRATA_IN));
        }
        STRATA_TRY(strata_args_add_scalar(&a, f->fail_child == k ? (uint64_t)f->fail_mode : 0));
        STRATA_TRY(strata_orch_submit_next_level(o, f->use, &a, NULL, f->child[k]));
    }
    return STRATA_OK;
}

static void chip_config(strata_chip_config *cc, strata_host_mode host) {
    strata_chip_config_init(cc);
    cc->kernel_module = STRATA_SIM_TEST_KERNELS_PATH;
    cc->host = host;
}

static void open_l4(l4 *f, strata_host_mode child_host, strata_host_mode inner_host) {
    memset(f, 0, sizeof *f);
    f->fail_child = -1;
    f->fail_mode = MODE_FAIL;
    f->only_child = -1;
    strata_worker_config wc;
    strata_worker_config_init(&wc);
    wc.level = 4;
    wc.sub_workers = 1;
    assert_ok(strata_worker_create(&wc, &f->w));
    chip_config(&f->chip, inner_host);
    for (int k = 0; k < 2; k++) {
        strata_child_config cc;
        strata_child_config_init(&cc);
        cc.worker.level = 3;
        cc.worker.sub_workers = 2;
        cc.worker.sub_mode = inner_host;
        cc.host = child_host;
        cc.setup = l3_setup;
        cc.setup_user = &f->chip;
        assert_ok(strata_worker_add_child(f->w, &cc, &f->child[k]));
        assert_int_equal(f->child[k], k);
    }
    assert_ok(strata_worker_register_orch(f->w, "l3prog", l3_program, NULL, &f->l3prog));
    f->use = f->l3prog;
    assert_ok(strata_worker_init(f->w));
    assert_ok(strata_buffer_create(f->w, ALL * sizeof(float), &f->a));
    assert_ok(strata_buffer_create(f->w, ALL * sizeof(float), &f->b));
    assert_ok(strata_buffer_create(f->w, ALL * sizeof(float), &f->c));
}

static void close_l4(l4 *f) {
    strata_buffer_destroy(f->a);
    strata_buffer_destroy(f->b);
    strata_buffer_destroy(f->c);
    assert_ok(strata_worker_close(f->w));
    strata_worker_destroy(f->w);
    /* every process child (and theirs) is reaped: none is left to wait for */
    assert_int_equal(waitpid(-1, NULL, WNOHANG), -1);
}

static void fill_inputs(l4 *f, int round) {
    float *a = strata_buffer_data(f->a), *b = strata_buffer_data(f->b);
    float *c = strata_buffer_data(f->c);
    for (int i = 0; i < ALL; i++) {
        a[i] = (float)(i + round);
        b[i] = (float)(2 * i);
        c[i] = -1.0f;
    }
}

static void check_outputs(l4 *f, int round) {
    const float *c = strata_buffer_data(f->c);
    for (int i = f->only_child == 1 ? HALF : 0; i < (f->only_child == 0 ? HALF : ALL); i++)
        if (c[i] != (float)(3 * i + round + 1))
            fail_msg("round %d: c[%d] = %f, expected %d", round, i, c[i], 3 * i + round + 1);
}

static void run_rounds(strata_host_mode child_host, strata_host_mode inner_host) {
    l4 f;
    open_l4(&f, child_host, inner_host);
    for (int round = 0; round < 3; round++) {
        fill_inputs(&f, round);
        assert_ok(strata_worker_run(f.w, l4_program, &f));
        check_outputs(&f, round);
    }
    close_l4(&f);
}

/* ---- Tests ------------------------------------------------------------------------------- */

static void the_l3_program_runs_directly_on_an_l3(void **state) {
    (void)state;
    strata_worker_config wc;
    strata_worker_config_init(&wc);
    strata_worker *w;
    assert_ok(strata_worker_create(&wc, &w));
    strata_chip_config cc;
    chip_config(&cc, STRATA_HOST_THREAD);
    assert_ok(l3_setup(w, &cc));
    assert_ok(strata_worker_init(w));
    strata_buffer *buf[3];
    for (int i = 0; i < 3; i++)
        assert_ok(strata_buffer_create(w, HALF * sizeof(float), &buf[i]));
    float *a = strata_buffer_data(buf[0]), *b = strata_buffer_data(buf[1]);
    for (int i = 0; i < HALF; i++) {
        a[i] = (float)i;
        b[i] = 1.0f;
    }
    l3_direct d;
    strata_args_init(&d.args);
    int64_t n = HALF, s = 1;
    for (int i = 0; i < 3; i++) {
        strata_tensor t;
        assert_ok(strata_tensor_view(buf[i], 0, STRATA_F32, 1, &n, &s, &t));
        assert_ok(strata_args_add_tensor(&d.args, &t, i == 2 ? STRATA_OUT_EXISTING : STRATA_IN));
    }
    assert_ok(strata_args_add_scalar(&d.args, 0));
    assert_ok(strata_worker_run(w, l3_program, &d));
    const float *c = strata_buffer_data(buf[2]);
    for (int i = 0; i < HALF; i++)
        assert_true(c[i] == (float)i + 2.0f);
    for (int i = 0; i < 3; i++)
        strata_buffer_destroy(buf[i]);
    strata_worker_destroy(w);
}

static void l4_with_thread_children(void **state) {
    (void)state;
    run_rounds(STRATA_HOST_THREAD, STRATA_HOST_THREAD);
}

/* The exact path of a chip failure two levels down. */
static void an_error_chains_up_with_its_path(strata_host_mode child_host) {
    l4 f;
    open_l4(&f, child_host, STRATA_HOST_THREAD);
    fill_inputs(&f, 0);
    f.fail_child = 1;
    strata_run *h;
    assert_ok(strata_worker_submit(f.w, l4_program, &f, &h));
    assert_int_equal(strata_run_wait(h, STRATA_WAIT_FOREVER), STRATA_ETASK);
    const char *expect =
        "run 1: L4 worker 1 (L3 child 1): task 'l3prog' #2 failed: run 1: L3 worker 0 (chip "
        "sim:0): task 'fail' #1 failed: chip sim:0: finalize failed with code 7 (run_id=1 "
        "slot=0 generation=1 dispatch_id=1 run_epoch=1): program 'fail': kernel 'fail_block' "
        "(launch 1 of 1) block 1 of 4 failed with code 7: block 1 was asked to fail";
    if (strcmp(strata_run_error(h), expect) != 0)
        fail_msg("error:\n  %s\nexpected:\n  %s", strata_run_error(h), expect);
    strata_run_release(h);
    /* child 0 (and the L4) go on working; child 1's chip is poisoned by its device failure */
    f.fail_child = -1;
    close_l4(&f);
}

static void an_error_chains_up_with_its_path_thread(void **state) {
    (void)state;
    an_error_chains_up_with_its_path(STRATA_HOST_THREAD);
}

static void an_error_chains_up_with_its_path_process(void **state) {
    (void)state;
    an_error_chains_up_with_its_path(STRATA_HOST_PROCESS);
}

static void l4_with_process_children(void **state) {
    (void)state;
    run_rounds(STRATA_HOST_PROCESS, STRATA_HOST_THREAD);
}

static void l4_with_thread_children_whose_subs_and_chips_are_processes(void **state) {
    (void)state;
    run_rounds(STRATA_HOST_THREAD, STRATA_HOST_PROCESS);
}

static void l4_with_process_children_whose_subs_and_chips_are_processes(void **state) {
    (void)state;
    run_rounds(STRATA_HOST_PROCESS, STRATA_HOST_PROCESS);
}

/* Registered on the L4 after init: the process children learn of it then. */
static void an_orchestration_registered_after_init_reaches_process_children(void **state) {
    (void)state;
    l4 f;
    open_l4(&f, STRATA_HOST_PROCESS, STRATA_HOST_THREAD);
    assert_ok(strata_worker_register_orch(f.w, "late", l3_program, NULL, &f.use));
    fill_inputs(&f, 5);
    assert_ok(strata_worker_run(f.w, l4_program, &f));
    check_outputs(&f, 5);
    close_l4(&f);
}

static pid_t child_pid(l4 *f, int k) {
    st_proc_ep *p = st_proc_ep_of(st_worker_next_endpoint(f->w, f->child[k]));
    assert_non_null(p);
    return st_proc_ep_child(p)->pid;
}

/* Child 1's process is killed while its task runs: that task fails naming the
 * child and the signal, later tasks to it fail fast, child 0 and later runs
 * keep working. */
static void a_child_process_killed_mid_task(void **state) {
    (void)state;
    l4 f;
    open_l4(&f, STRATA_HOST_PROCESS, STRATA_HOST_THREAD);
    fill_inputs(&f, 0);
    f.fail_child = 1;
    f.fail_mode = MODE_BLOCK;
    strata_run *h;
    assert_ok(strata_worker_submit(f.w, l4_program, &f, &h));
    volatile float *mark = (float *)strata_buffer_data(f.c) + HALF;
    for (int i = 0; i < 10000 && *mark != BLOCK_MARK; i++)
        usleep(1000);
    assert_true(*mark == BLOCK_MARK); /* the task is running in child 1 */
    pid_t pid = child_pid(&f, 1);
    assert_true(pid > 0);
    assert_int_equal(kill(pid, SIGKILL), 0);
    int rc = strata_run_wait(h, 60 * TS_SEC);
    assert_true(rc == STRATA_EENDPOINT || rc == STRATA_ETASK);
    ts_assert_mentions(strata_run_error(h), "L3 child 1");
    ts_assert_mentions(strata_run_error(h), "signal 9");
    strata_run_release(h);
    /* a later task to child 1 fails fast, naming it */
    f.fail_child = -1;
    f.only_child = 1;
    assert_int_equal(strata_worker_run(f.w, l4_program, &f), STRATA_EENDPOINT);
    assert_message_mentions("L3 child 1");
    /* child 0 goes on working */
    f.only_child = 0;
    fill_inputs(&f, 2);
    assert_ok(strata_worker_run(f.w, l4_program, &f));
    check_outputs(&f, 2);
    close_l4(&f);
}

static int plain_sub(const strata_task_view *a, void *user) {
    (void)a;
    (void)user;
    return 0;
}

static void a_callable_that_is_not_an_orchestration_fails_on_the_child(void **state) {
    (void)state;
    l4 f;
    open_l4(&f, STRATA_HOST_THREAD, STRATA_HOST_THREAD);
    assert_ok(st_register_next_level(f.w, "plain", plain_sub, NULL, NULL, &f.use));
    fill_inputs(&f, 0);
    assert_int_equal(strata_worker_run(f.w, l4_program, &f), STRATA_ETASK);
    /* whichever child failed first: the parent's prefix names it once */
    assert_message_mentions("(L3 child ");
    assert_message_mentions("): task 'plain' #");
    assert_message_mentions(" failed: 'plain' is not an orchestration callable");
    close_l4(&f);
}

static int failing_setup(strata_worker *w, void *user) {
    (void)w;
    (void)user;
    return strata_worker_register_sub(w, "", plain_sub, NULL, &g_ids.inc); /* a bad name */
}

static void a_failing_setup_fails_add_child(void **state) {
    (void)state;
    strata_worker_config wc;
    strata_worker_config_init(&wc);
    wc.level = 4;
    strata_worker *w;
    assert_ok(strata_worker_create(&wc, &w));
    strata_child_config cc;
    strata_child_config_init(&cc);
    cc.setup = failing_setup;
    cc.name = "picky";
    int id = -1;
    assert_fails(STRATA_EINVAL, "picky: setup failed", strata_worker_add_child(w, &cc, &id));
    assert_message_mentions("name must be");
    assert_int_equal(strata_worker_next_level_count(w), 0);
    cc.host = (strata_host_mode)7;
    assert_fails(STRATA_EINVAL, "unknown host mode", strata_worker_add_child(w, &cc, &id));
    assert_fails(STRATA_EINVAL, "must not be NULL", strata_worker_add_child(w, NULL, &id));
    assert_ok(strata_worker_init(w));
    strata_child_config_init(&cc);
    assert_status(STRATA_ESTATE, strata_worker_add_child(w, &cc, &id));
    strata_worker_destroy(w);
}

static void a_failing_setup_in_a_process_child_fails_init(void **state) {
    (void)state;
    strata_worker_config wc;
    strata_worker_config_init(&wc);
    wc.level = 4;
    strata_worker *w;
    assert_ok(strata_worker_create(&wc, &w));
    strata_child_config cc;
    strata_child_config_init(&cc);
    cc.host = STRATA_HOST_PROCESS;
    int id = -1;
    assert_ok(strata_worker_add_child(w, &cc, &id)); /* a good one first */
    cc.setup = failing_setup;
    cc.name = "picky";
    assert_ok(strata_worker_add_child(w, &cc, &id)); /* set up only when forked */
    assert_fails(STRATA_EENDPOINT, "1 (picky)", strata_worker_init(w));
    assert_message_mentions("picky: setup failed: ");
    assert_message_mentions("name must be");
    strata_worker_destroy(w);
    assert_int_equal(waitpid(-1, NULL, WNOHANG), -1); /* both children reaped */
}

static int probe_args(strata_orch *o, void *arg) {
    *(int *)arg = strata_orch_task_args(o) != NULL;
    return STRATA_OK;
}

static void task_args_are_null_in_a_direct_run(void **state) {
    (void)state;
    strata_worker_config wc;
    strata_worker_config_init(&wc);
    strata_worker *w;
    assert_ok(strata_worker_create(&wc, &w));
    assert_ok(strata_worker_init(w));
    int seen = -1;
    assert_ok(strata_worker_run(w, probe_args, &seen));
    assert_int_equal(seen, 0);
    assert_null(strata_orch_task_args(NULL));
    strata_worker_destroy(w);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(the_l3_program_runs_directly_on_an_l3),
        cmocka_unit_test(task_args_are_null_in_a_direct_run),
        cmocka_unit_test(l4_with_thread_children),
        cmocka_unit_test(an_error_chains_up_with_its_path_thread),
        cmocka_unit_test(a_callable_that_is_not_an_orchestration_fails_on_the_child),
        cmocka_unit_test(a_failing_setup_fails_add_child),
        cmocka_unit_test(l4_with_process_children),
        cmocka_unit_test(an_error_chains_up_with_its_path_process),
        cmocka_unit_test(an_orchestration_registered_after_init_reaches_process_children),
        cmocka_unit_test(a_child_process_killed_mid_task),
        cmocka_unit_test(a_failing_setup_in_a_process_child_fails_init),
        cmocka_unit_test(l4_with_thread_children_whose_subs_and_chips_are_processes),
        cmocka_unit_test(l4_with_process_children_whose_subs_and_chips_are_processes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
