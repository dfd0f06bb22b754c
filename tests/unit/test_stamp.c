/* tests/unit/test_stamp.c - the stamps of tracing and statistics
 * (util/stamp.h): which counter is a stamp, and their conversion to
 * CLOCK_MONOTONIC nanoseconds.
 *
 * Owns: the source choice as a pure function, the scale's arithmetic on
 * made-up readings (both sources), and on this machine's clock: a stamp
 * converts to a time between the clock readings around it, a span like its
 * ends, and a forked child's stamps lie on its parent's timeline.
 * Must never: assert a duration (only an order, or agreement with the clock
 * read around the stamp).
 */
#include "test_support.h"

#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>

#include "util/stamp.h"

#define SLACK_NS 20000 /* reading a pair may be preempted between its reads */

static void the_tsc_is_a_stamp_only_where_the_kernel_keeps_time_by_it(void **state) {
    (void)state;
    assert_int_equal(st_stamp_tsc_usable("tsc", 1), ST_STAMP_HAVE_TSC);
    assert_int_equal(st_stamp_tsc_usable("tsc", 0), 0);
    assert_int_equal(st_stamp_tsc_usable("kvm-clock", 1), 0);
    assert_int_equal(st_stamp_tsc_usable("hpet", 1), 0);
    assert_int_equal(st_stamp_tsc_usable(NULL, 1), 0);
}

static void monotonic_stamps_convert_unchanged(void **state) {
    (void)state;
    st_stamp_clock c = {.tsc = 0, .tick = 100, .ns = 100};
    st_stamp_scale sc = st_stamp_scale_between(&c, 5000, 5000);
    assert_int_equal(st_stamp_to_ns(&sc, 1234), 1234);
    assert_int_equal(st_stamp_to_ns(&sc, 7), 7);
    assert_int_equal(st_stamp_span_ns(&sc, 77), 77);
}

static void a_tsc_scale_is_the_ratio_of_its_two_readings(void **state) {
    (void)state;
    st_stamp_clock c = {.tsc = 1, .tick = 1000, .ns = 500};
    st_stamp_scale sc = st_stamp_scale_between(&c, 3000, 1500); /* 2000 ticks in 1000 ns */
    assert_int_equal(st_stamp_to_ns(&sc, 1000), 500);
    assert_int_equal(st_stamp_to_ns(&sc, 2000), 1000);
    assert_int_equal(st_stamp_to_ns(&sc, 3000), 1500);
    assert_int_equal(st_stamp_to_ns(&sc, 600), 300); /* before the first reading */
    assert_int_equal(st_stamp_to_ns(&sc, 0), 0);
    assert_int_equal(st_stamp_span_ns(&sc, 4000), 2000);
    /* A second reading no later than the first gives no rate: ticks stay ticks. */
    sc = st_stamp_scale_between(&c, 1000, 500);
    assert_int_equal(st_stamp_span_ns(&sc, 40), 40);
}

static void a_stamp_converts_between_the_clock_readings_around_it(void **state) {
    (void)state;
    st_stamp_setup();
    for (int i = 0; i < 3; i++) {
        uint64_t before = st_now_ns();
        uint64_t s = st_stamp();
        uint64_t after = st_now_ns();
        usleep(2000);
        st_stamp_scale sc = st_stamp_scale_now();
        uint64_t ns = st_stamp_to_ns(&sc, s);
        assert_true(ns + SLACK_NS >= before);
        assert_true(ns <= after + SLACK_NS);
    }
}

static void a_span_converts_like_its_ends(void **state) {
    (void)state;
    st_stamp_setup();
    uint64_t a = st_stamp();
    usleep(1000);
    uint64_t b = st_stamp();
    st_stamp_scale sc = st_stamp_scale_now();
    uint64_t ends = st_stamp_to_ns(&sc, b) - st_stamp_to_ns(&sc, a);
    uint64_t span = st_stamp_span_ns(&sc, b - a);
    assert_true(span + 2 >= ends && ends + 2 >= span);
    assert_true(span >= 900000); /* usleep slept at least 1 ms, less the pair's jitter */
}

static void a_forked_childs_stamps_lie_on_its_parents_timeline(void **state) {
    (void)state;
    st_stamp_setup();
    int fd[2];
    assert_int_equal(pipe(fd), 0);
    uint64_t before = st_stamp();
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        uint64_t s = st_stamp();
        _exit(write(fd[1], &s, sizeof s) == (ssize_t)sizeof s ? 0 : 1);
    }
    uint64_t child = 0;
    assert_int_equal(read(fd[0], &child, sizeof child), (ssize_t)sizeof child);
    int st = 0;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    uint64_t after = st_stamp();
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    assert_true(before <= child);
    assert_true(child <= after);
    close(fd[0]);
    close(fd[1]);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(the_tsc_is_a_stamp_only_where_the_kernel_keeps_time_by_it),
        cmocka_unit_test(monotonic_stamps_convert_unchanged),
        cmocka_unit_test(a_tsc_scale_is_the_ratio_of_its_two_readings),
        cmocka_unit_test(a_stamp_converts_between_the_clock_readings_around_it),
        cmocka_unit_test(a_span_converts_like_its_ends),
        cmocka_unit_test(a_forked_childs_stamps_lie_on_its_parents_timeline),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
