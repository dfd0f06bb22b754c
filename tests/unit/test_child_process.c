/* tests/unit/test_child_process.c - forked children (ipc/child_process.h).
 *
 * Owns: how a child's end is decoded into `why` (exit(3), SIGKILL, SIGSEGV),
 * the probe (running, ended, cached; a child reaped elsewhere is "no longer
 * waitable"), the bounded reap (a hung child is killed by the deadline; a
 * second reap changes nothing), and the child's view of its parent: alive
 * while it runs, dead once it was SIGKILLed even though the orphan's new
 * parent (this test process, a subreaper) is alive, because the check
 * compares with the pid captured at spawn.
 * Must never: assert timing; wait without a bound. Forks: no TSan label.
 */
#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "test_support.h"

#include "ipc/child_process.h"
#include "ipc/shm_region.h"
#include "util/clock.h"

#define BOUND (10 * TS_SEC)

static void nap_us(long us) {
    nanosleep(&(struct timespec){0, us * 1000}, NULL);
}

static int exit_3(void *arg) {
    (void)arg;
    return 3;
}

static int die_by(void *arg) {
    int sig = *(int *)arg;
    struct rlimit none = {0, 0};
    setrlimit(RLIMIT_CORE, &none); /* no core file in the build tree */
    signal(sig, SIG_DFL);          /* a sanitizer's handler would turn it into an exit */
    raise(sig);
    return 99;
}

static int hang(void *arg) {
    (void)arg;
    for (;;)
        pause();
    return 0;
}

static void an_exit_status_is_decoded(void **state) {
    (void)state;
    st_child c;
    assert_ok(st_child_spawn(&c, "exit child", exit_3, NULL));
    assert_true(c.pid > 0);
    assert_string_equal(c.label, "exit child");
    assert_int_equal(st_child_reap(&c, st_deadline_after(BOUND)), 1);
    assert_int_equal(c.exited, 1);
    assert_int_equal(c.pid, 0);
    assert_true(WIFEXITED(c.status) && WEXITSTATUS(c.status) == 3);
    assert_string_equal(c.why, "exited with status 3");
    /* idempotent: the same answer, nothing waited for or signalled */
    assert_int_equal(st_child_reap(&c, 0), 1);
    assert_int_equal(st_child_alive(&c), 0);
    assert_string_equal(c.why, "exited with status 3");
}

static void a_signal_is_decoded_with_its_name(void **state) {
    (void)state;
    static const struct {
        int sig;
        const char *why;
    } cases[] = {
        {SIGKILL, "killed by signal 9 (SIGKILL)"},
        {SIGSEGV, "killed by signal 11 (SIGSEGV)"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int sig = cases[i].sig;
        st_child c;
        assert_ok(st_child_spawn(&c, "signal child", die_by, &sig));
        assert_int_equal(st_child_reap(&c, st_deadline_after(BOUND)), 1); /* died by itself */
        assert_true(WIFSIGNALED(c.status));
        assert_string_equal(c.why, cases[i].why);
        assert_int_equal(c.killed, 0);
    }
}

static void the_probe_sees_running_then_ended(void **state) {
    (void)state;
    st_child c;
    assert_ok(st_child_spawn(&c, "probe child", exit_3, NULL));
    uint64_t deadline = st_deadline_after(BOUND);
    while (st_child_alive(&c) && st_now_ns() < deadline)
        nap_us(100);
    assert_int_equal(c.exited, 1);
    assert_string_equal(c.why, "exited with status 3");
    assert_int_equal(st_child_alive(&c), 0); /* cached */

    assert_ok(st_child_spawn(&c, "hung child", hang, NULL));
    assert_int_equal(st_child_alive(&c), 1);
    assert_int_equal(c.exited, 0);
    assert_int_equal(st_child_reap(&c, 0), 0);
}

static void reap_kills_a_hung_child_by_the_deadline(void **state) {
    (void)state;
    st_child c;
    assert_ok(st_child_spawn(&c, "hung child", hang, NULL));
    assert_int_equal(st_child_reap(&c, st_deadline_after(20000000)), 0); /* 20 ms */
    assert_int_equal(c.killed, 1);
    assert_int_equal(c.exited, 1);
    assert_int_equal(c.pid, 0);
    assert_string_equal(c.why, "killed by signal 9 (SIGKILL)");
    assert_int_equal(st_child_reap(&c, st_deadline_after(BOUND)), 0); /* idempotent */
    assert_string_equal(c.why, "killed by signal 9 (SIGKILL)");
}

static void a_child_reaped_elsewhere_is_no_longer_waitable(void **state) {
    (void)state;
    st_child c;
    assert_ok(st_child_spawn(&c, "stolen child", exit_3, NULL));
    int status;
    assert_int_equal(waitpid(c.pid, &status, 0), c.pid); /* someone else reaps it */
    assert_int_equal(st_child_alive(&c), 0);
    assert_int_equal(c.exited, 1);
    assert_int_equal(c.pid, 0);
    assert_non_null(strstr(c.why, "no longer waitable"));
    assert_int_equal(st_child_reap(&c, 0), 1);
}

static int check_parent(void *arg) {
    pid_t expected = *(pid_t *)arg;
    if (st_child_parent_pid() != expected || getppid() != expected)
        return 4;
    return st_child_parent_alive() ? 0 : 5;
}

static void a_child_sees_its_parent_alive(void **state) {
    (void)state;
    assert_int_equal(st_child_parent_pid(), 0); /* not a spawned child itself */
    assert_int_equal(st_child_parent_alive(), 1);
    pid_t me = getpid();
    st_child c;
    assert_ok(st_child_spawn(&c, "parent check", check_parent, &me));
    assert_int_equal(st_child_reap(&c, st_deadline_after(BOUND)), 1);
    assert_string_equal(c.why, "exited with status 0");
}

/* ---- a grandchild whose parent is SIGKILLed ---- */

typedef struct family {
    _Atomic int grandchild_pid;
    _Atomic int saw_alive;  /* the grandchild's first look: 1 alive, 2 dead */
    _Atomic int saw_dead;   /* 1 dead seen, 2 never seen within the bound */
    _Atomic int parent_pid; /* the grandchild's st_child_parent_pid() */
} family;

static int grandchild(void *arg) {
    family *f = arg;
    atomic_store(&f->parent_pid, (int)st_child_parent_pid());
    atomic_store(&f->saw_alive, st_child_parent_alive() ? 1 : 2);
    uint64_t deadline = st_deadline_after(BOUND);
    while (st_child_parent_alive() && st_now_ns() < deadline)
        nap_us(200);
    atomic_store(&f->saw_dead, st_child_parent_alive() ? 2 : 1);
    return 0;
}

static int middle(void *arg) {
    family *f = arg;
    st_child g;
    if (st_child_spawn(&g, "grandchild", grandchild, f) != STRATA_OK)
        return 7;
    atomic_store(&f->grandchild_pid, (int)g.pid);
    for (;;) /* until the test SIGKILLs it */
        pause();
    return 0;
}

static void a_grandchild_sees_its_killed_parent_dead(void **state) {
    (void)state;
    /* The orphan is re-parented to this process: a live parent, but not the
     * one it was spawned by. */
    assert_int_equal(prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0), 0);
    st_shm r;
    assert_ok(st_shm_create("family", sizeof(family), &r));
    family *f = r.base;
    st_child m;
    assert_ok(st_child_spawn(&m, "middle", middle, f));
    uint64_t deadline = st_deadline_after(BOUND);
    while ((atomic_load(&f->grandchild_pid) == 0 || atomic_load(&f->saw_alive) == 0) &&
           st_now_ns() < deadline)
        nap_us(100);
    pid_t g = atomic_load(&f->grandchild_pid);
    assert_true(g > 0);
    assert_int_equal(atomic_load(&f->parent_pid), m.pid);
    assert_int_equal(kill(m.pid, SIGKILL), 0);
    assert_int_equal(st_child_reap(&m, st_deadline_after(BOUND)), 1); /* died of our SIGKILL */
    assert_string_equal(m.why, "killed by signal 9 (SIGKILL)");
    int status = 0;
    assert_int_equal(waitpid(g, &status, 0), g); /* ours now, as the subreaper */
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    assert_int_equal(atomic_load(&f->saw_alive), 1);
    assert_int_equal(atomic_load(&f->saw_dead), 1);
    prctl(PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0);
    st_shm_destroy(&r);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(an_exit_status_is_decoded),
        cmocka_unit_test(a_signal_is_decoded_with_its_name),
        cmocka_unit_test(the_probe_sees_running_then_ended),
        cmocka_unit_test(reap_kills_a_hung_child_by_the_deadline),
        cmocka_unit_test(a_child_reaped_elsewhere_is_no_longer_waitable),
        cmocka_unit_test(a_child_sees_its_parent_alive),
        cmocka_unit_test(a_grandchild_sees_its_killed_parent_dead),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
