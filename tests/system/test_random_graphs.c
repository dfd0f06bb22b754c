// label: concurrency
/* tests/system/test_random_graphs.c - thousands of seeded random task graphs
 * run on an L3 Worker and checked against a sequential replay.
 *
 * Owns: the worker shapes the graphs run on (sub workers, pipeline depth,
 * small task windows and heap rings); the generator, the model and the checks
 * are tests/support/random_graphs.c (see its comment for what is checked).
 * Must never: look inside the engine.
 */
#include "random_graphs.h"
#include "test_support.h"

static void test_random_graphs_one_sub_worker(void **state) {
    (void)state;
    const rg_shape a = {1, 1, 0, 0, 0}, b = {1, 2, 0, 0, 0};
    rg_run_random_graphs(&a, rg_runs_per_shape(), 0x1001);
    rg_run_random_graphs(&b, rg_runs_per_shape(), 0x1002);
}

static void test_random_graphs_two_sub_workers(void **state) {
    (void)state;
    const rg_shape a = {2, 1, 0, 0, 0}, b = {2, 2, 0, 0, 0};
    rg_run_random_graphs(&a, rg_runs_per_shape(), 0x2001);
    rg_run_random_graphs(&b, rg_runs_per_shape(), 0x2002);
}

static void test_random_graphs_four_sub_workers(void **state) {
    (void)state;
    const rg_shape a = {4, 1, 0, 0, 0}, b = {4, 2, 0, 0, 0};
    rg_run_random_graphs(&a, rg_runs_per_shape(), 0x4001);
    rg_run_random_graphs(&b, rg_runs_per_shape(), 0x4002);
}

/* A task window of 16 and heap rings of 16 KiB (a graph holds at most 12
 * intermediates, so a single run always fits): submits keep waiting for
 * slots and ring space while earlier tasks and runs fail and are consumed. */
static void test_random_graphs_small_capacity(void **state) {
    (void)state;
    const rg_shape a = {1, 2, 16, 16 << 10, 0}, b = {2, 2, 16, 16 << 10, 0},
                   c = {4, 1, 16, 16 << 10, 0};
    rg_run_random_graphs(&a, rg_runs_per_shape(), 0x5001);
    rg_run_random_graphs(&b, rg_runs_per_shape(), 0x5002);
    rg_run_random_graphs(&c, rg_runs_per_shape(), 0x5003);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_random_graphs_one_sub_worker),
        cmocka_unit_test(test_random_graphs_two_sub_workers),
        cmocka_unit_test(test_random_graphs_four_sub_workers),
        cmocka_unit_test(test_random_graphs_small_capacity),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
