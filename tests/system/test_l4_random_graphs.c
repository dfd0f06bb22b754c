// label: concurrency
/* tests/system/test_l4_random_graphs.c - the random graphs of
 * test_random_graphs.c, each run as one next-level task of an L4 on one of
 * its two thread-hosted L3 children, checked against the same sequential
 * replay.
 *
 * Owns: the L4 shapes (the children's sub workers and depth, small capacity
 * inside the children); the generator, the model and the checks are
 * tests/support/random_graphs.c.
 * Must never: look inside the engine.
 */
#include "random_graphs.h"
#include "test_support.h"

static int l4_runs(void) {
    int n = rg_runs_per_shape() / 3;
    return n < 8 ? 8 : n;
}

static void random_graphs_in_two_children(void **state) {
    (void)state;
    const rg_shape a = {1, 1, 0, 0, 2}, b = {2, 2, 0, 0, 2}, c = {4, 2, 0, 0, 2};
    rg_run_random_graphs(&a, l4_runs(), 0x7001);
    rg_run_random_graphs(&b, l4_runs(), 0x7002);
    rg_run_random_graphs(&c, l4_runs(), 0x7003);
}

static void random_graphs_in_two_small_children(void **state) {
    (void)state;
    const rg_shape a = {2, 2, 16, 16 << 10, 2};
    rg_run_random_graphs(&a, l4_runs(), 0x7101);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(random_graphs_in_two_children),
        cmocka_unit_test(random_graphs_in_two_small_children),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
