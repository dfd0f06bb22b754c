/* tests/system/test_init_phases.c - strata_worker_init brings a worker tree
 * up in two phases: every process of the tree is forked before any thread of
 * it starts, and a failed init stops and reaps everything it started.
 *
 * Owns: an L4 (process subs) with two thread-hosted L3 children (process
 * subs; one with a process chip, one with a thread chip) and a
 * process-hosted L3 child, whose every fork made in this process during
 * init sees exactly one thread (this one: cmocka is single-threaded and
 * nothing of the tree runs before init); a failing process child added
 * after a thread-hosted child Worker fails the init, leaves no child
 * process and no thread behind, and a retry works.
 * No concurrency label: it forks (it runs under ASan+UBSan).
 */
#include <pthread.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "test_support.h"

#include "strata/chip.h"

/* The fork hook: in this process only (a process child forking its own
 * children runs it too, with threads of its own), while armed. */
static pid_t g_test_pid;
static int g_armed, g_forks, g_max_threads;

static void before_fork(void) {
    if (!g_armed || getpid() != g_test_pid)
        return;
    int n = ts_thread_count();
    g_forks++;
    if (n > g_max_threads || n < 0)
        g_max_threads = n < 0 ? 1000 : n;
}

static int g_fail_setup; /* read by a process child's setup: its value at the fork */

/* One chip, hosted as *user says. A thread-hosted one starts its threads in
 * its L3's phase 2, after every fork of the tree (it used to start them
 * when added, before init). */
static int l3_chip_setup(strata_worker *w, void *user) {
    strata_chip_config cc;
    strata_chip_config_init(&cc);
    cc.host = *(const strata_host_mode *)user;
    int id;
    return strata_worker_add_chip(w, &cc, &id);
}

static int picky_setup(strata_worker *w, void *user) {
    (void)w;
    (void)user;
    if (g_fail_setup)
        return st_fail(STRATA_EINVAL, "picky refuses to start");
    return STRATA_OK;
}

/* L4: 2 process subs, child 0 thread-hosted (L3: 2 process subs, a process
 * chip), child 1 thread-hosted (L3: 1 process sub, a thread chip), child 2
 * process-hosted (L3 with `setup`). */
static strata_worker *open_tree(strata_child_setup_fn setup, const char *name) {
    strata_worker_config wc;
    strata_worker_config_init(&wc);
    wc.level = 4;
    wc.sub_workers = 2;
    wc.sub_mode = STRATA_HOST_PROCESS;
    strata_worker *w;
    assert_ok(strata_worker_create(&wc, &w));
    strata_child_config cc;
    strata_child_config_init(&cc);
    cc.worker.level = 3;
    cc.worker.sub_workers = 2;
    cc.worker.sub_mode = STRATA_HOST_PROCESS;
    cc.host = STRATA_HOST_THREAD;
    static const strata_host_mode process_chip = STRATA_HOST_PROCESS,
                                  thread_chip = STRATA_HOST_THREAD;
    cc.setup = l3_chip_setup;
    cc.setup_user = (void *)&process_chip;
    int id = -1;
    assert_ok(strata_worker_add_child(w, &cc, &id));
    cc.worker.sub_workers = 1; /* a second one: its forks come after the first's phase 1 */
    cc.setup_user = (void *)&thread_chip;
    assert_ok(strata_worker_add_child(w, &cc, &id));
    strata_child_config_init(&cc);
    cc.worker.level = 3;
    cc.host = STRATA_HOST_PROCESS;
    cc.setup = setup;
    cc.name = name;
    assert_ok(strata_worker_add_child(w, &cc, &id));
    return w;
}

static void no_thread_of_the_tree_exists_at_any_fork(void **state) {
    (void)state;
    strata_worker *w = open_tree(NULL, NULL);
    assert_int_equal(ts_thread_count(), 1); /* nothing of the tree runs before init */
    g_forks = g_max_threads = 0;
    g_armed = 1;
    int rc = strata_worker_init(w);
    g_armed = 0;
    assert_ok(rc);
    /* here: L4's 2 subs, its process child, the thread children's 2 + 1 subs and chip */
    assert_int_equal(g_forks, 7);
    assert_int_equal(g_max_threads, 1);
    assert_true(ts_thread_count() > 1); /* and the threads run now */
    strata_worker_destroy(w);
    assert_int_equal(waitpid(-1, NULL, WNOHANG), -1);
    assert_int_equal(ts_thread_count(), 1);
}

static void a_failed_init_reaps_the_whole_tree_and_may_be_retried(void **state) {
    (void)state;
    g_fail_setup = 1;
    strata_worker *w = open_tree(picky_setup, "picky");
    g_forks = 0;
    g_armed = 1;
    assert_fails(STRATA_EENDPOINT, "2 (picky)", strata_worker_init(w));
    g_armed = 0;
    assert_message_mentions("picky refuses to start");
    assert_int_equal(g_forks, 7); /* the thread children's subtrees had been forked */
    /* nothing it started is left: no child process, no thread */
    assert_int_equal(waitpid(-1, NULL, WNOHANG), -1);
    assert_int_equal(ts_thread_count(), 1);
    /* the worker is as created: a retry forks everything again */
    g_fail_setup = 0;
    assert_ok(strata_worker_init(w));
    assert_true(ts_thread_count() > 1);
    strata_worker_destroy(w);
    assert_int_equal(waitpid(-1, NULL, WNOHANG), -1);
    assert_int_equal(ts_thread_count(), 1);
}

static void a_failed_init_then_destroy_leaves_nothing(void **state) {
    (void)state;
    g_fail_setup = 1;
    strata_worker *w = open_tree(picky_setup, "picky");
    assert_fails(STRATA_EENDPOINT, "picky", strata_worker_init(w));
    strata_worker_destroy(w);
    assert_int_equal(waitpid(-1, NULL, WNOHANG), -1);
    assert_int_equal(ts_thread_count(), 1);
}

int main(void) {
    g_test_pid = getpid();
    if (pthread_atfork(before_fork, NULL, NULL) != 0)
        return 1;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(no_thread_of_the_tree_exists_at_any_fork),
        cmocka_unit_test(a_failed_init_reaps_the_whole_tree_and_may_be_retried),
        cmocka_unit_test(a_failed_init_then_destroy_leaves_nothing),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
