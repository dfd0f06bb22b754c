/* tests/unit/test_state_machine.c - the transition-table helper every state
 * machine of the library uses (util/state_machine.h): which transitions a
 * table allows, where they lead, and that an illegal one aborts in a debug
 * build with a message naming the machine, the transition and the state. */
#include "test_support.h"

#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/slot.h"
#include "util/state_machine.h"

enum { S_A, S_B, S_C, S_COUNT };
enum { T_AB, T_ANY_C, T_COUNT };
static const char *const names[S_COUNT] = {"A", "B", "C"};
static const st_sm_rule rules[T_COUNT] = {
    [T_AB] = {ST_SM_BIT(S_A), S_B, "a-to-b"},
    [T_ANY_C] = {ST_SM_BIT(S_A) | ST_SM_BIT(S_B), S_C, "to-c"},
};
static const st_sm machine = {"toy", names, S_COUNT, rules, T_COUNT};

static void table_allows_exactly_its_source_states(void **state) {
    (void)state;
    assert_true(st_sm_allows(&machine, S_A, T_AB));
    assert_false(st_sm_allows(&machine, S_B, T_AB));
    assert_false(st_sm_allows(&machine, S_C, T_AB));
    assert_true(st_sm_allows(&machine, S_A, T_ANY_C));
    assert_true(st_sm_allows(&machine, S_B, T_ANY_C));
    assert_false(st_sm_allows(&machine, S_C, T_ANY_C));
    assert_false(st_sm_allows(&machine, S_A, T_COUNT)); /* no such transition */
    assert_false(st_sm_allows(&machine, 40, T_AB));     /* no such state */
}

static void next_gives_the_target(void **state) {
    (void)state;
    assert_int_equal(st_sm_next(&machine, S_A, T_AB, "x"), S_B);
    assert_int_equal(st_sm_next(&machine, S_B, T_ANY_C, "x"), S_C);
}

/* In a child: the report goes to stderr and the process aborts. */
static void illegal_transition_aborts_with_a_named_report(void **state) {
    (void)state;
#ifdef STRATA_DEBUG_ASSERT
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        dup2(fds[1], 2);
        st_sm_next(&machine, S_C, T_AB, "object 7");
        _exit(0); /* not reached in a debug build */
    }
    close(fds[1]);
    char buf[512] = {0};
    ssize_t n = read(fds[0], buf, sizeof buf - 1);
    close(fds[0]);
    int st = 0;
    waitpid(pid, &st, 0);
    assert_true(n > 0);
    assert_true(WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT);
    assert_non_null(strstr(buf, "toy"));
    assert_non_null(strstr(buf, "object 7"));
    assert_non_null(strstr(buf, "a-to-b"));
    assert_non_null(strstr(buf, "state C"));
#else
    /* Release builds compile the check away by design: the rule's target. */
    assert_int_equal(st_sm_next(&machine, S_C, T_AB, "object 7"), S_B);
#endif
}

/* The task machine of DESIGN §5.1, through the shared helper. */
static void task_machine_follows_the_design(void **state) {
    (void)state;
    assert_true(st_sm_allows(&st_slot_machine, ST_FREE, ST_T_CLAIM));
    assert_true(st_sm_allows(&st_slot_machine, ST_READY, ST_T_DISPATCH));
    assert_false(st_sm_allows(&st_slot_machine, ST_PENDING, ST_T_DISPATCH));
    assert_false(st_sm_allows(&st_slot_machine, ST_RUNNING, ST_T_FAIL_CLAIM));
    assert_true(st_sm_allows(&st_slot_machine, ST_BUILDING, ST_T_UNCLAIM));
    assert_false(st_sm_allows(&st_slot_machine, ST_PENDING, ST_T_UNCLAIM));
    assert_int_equal(st_sm_next(&st_slot_machine, ST_CONSUMED, ST_T_RECYCLE, "slot"), ST_FREE);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(table_allows_exactly_its_source_states),
        cmocka_unit_test(next_gives_the_target),
        cmocka_unit_test(illegal_transition_aborts_with_a_named_report),
        cmocka_unit_test(task_machine_follows_the_design),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
