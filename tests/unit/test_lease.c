/* tests/unit/test_lease.c - the pipeline lease (util/lease.h): validity, the
 * pool that mints leases, the filter that recognises a stale holder.
 *
 * Owns: assertions on the lease helpers alone; how the engine, the lane and
 * the ChipWorker use them is tested with those modules.
 */
#include <string.h>

#include "test_support.h"

#include "util/lease.h"

static void a_lease_is_valid_only_with_a_slot_of_the_pool_and_a_generation(void **state) {
    (void)state;
    assert_true(st_lease_valid((st_lease){.slot = 0, .generation = 1}));
    assert_true(st_lease_valid((st_lease){.slot = ST_LEASE_SLOTS - 1, .generation = 7}));
    assert_false(st_lease_valid((st_lease){.slot = 0, .generation = 0}));
    assert_false(st_lease_valid((st_lease){.slot = ST_LEASE_SLOTS, .generation = 1}));
    assert_false(st_lease_valid((st_lease){.slot = 0, .reserved = 1, .generation = 1}));
}

static void the_pool_takes_the_lowest_free_slot_with_a_growing_generation(void **state) {
    (void)state;
    st_lease_pool p;
    memset(&p, 0, sizeof p);
    st_lease a, b, c;
    assert_true(st_lease_take(&p, &a));
    assert_true(st_lease_take(&p, &b));
    assert_int_equal(a.slot, 0);
    assert_int_equal(a.generation, 1);
    assert_int_equal(b.slot, 1);
    assert_int_equal(b.generation, 1);
    assert_false(st_lease_take(&p, &c)); /* every slot held */
    st_lease_return(&p, a);
    assert_true(st_lease_take(&p, &c));
    assert_int_equal(c.slot, 0);
    assert_int_equal(c.generation, 2); /* a's holder is now recognisably stale */
    assert_true(st_lease_valid(c));
    st_lease_return(&p, b);
    st_lease_return(&p, c);
    assert_true(st_lease_take(&p, &a));
    assert_int_equal(a.slot, 0);
    assert_int_equal(a.generation, 3);
}

static void the_filter_rejects_older_generations_and_admits_equal_ones(void **state) {
    (void)state;
    st_lease_filter f;
    st_lease_filter_reset(&f);
    st_lease g5 = {.slot = 0, .generation = 5}, g2 = {.slot = 0, .generation = 2};
    st_lease g4 = {.slot = 0, .generation = 4};
    assert_true(st_lease_filter_admits(&f, g5));
    assert_true(st_lease_filter_admits(&f, g2)); /* admits records nothing */
    assert_true(st_lease_filter_commit(&f, g5));
    assert_true(st_lease_filter_commit(&f, g5)); /* equal: one lease, several tasks */
    assert_false(st_lease_filter_admits(&f, g4));
    assert_false(st_lease_filter_commit(&f, g4));
    assert_int_equal(f.newest[0], 5); /* a refused commit records nothing */
    assert_true(st_lease_filter_admits(&f, (st_lease){.slot = 1, .generation = 1})); /* per slot */
    assert_false(st_lease_filter_admits(&f, (st_lease){.slot = ST_LEASE_SLOTS, .generation = 9}));
    st_lease_filter_reset(&f);
    assert_true(st_lease_filter_admits(&f, g2));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(a_lease_is_valid_only_with_a_slot_of_the_pool_and_a_generation),
        cmocka_unit_test(the_pool_takes_the_lowest_free_slot_with_a_growing_generation),
        cmocka_unit_test(the_filter_rejects_older_generations_and_admits_equal_ones),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
