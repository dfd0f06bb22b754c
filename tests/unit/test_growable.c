/* tests/unit/test_growable.c - the one growth step of the library's growable
 * arrays (util/growable.h): the first capacity, doubling, leaving inline
 * storage by copying, and keeping the caller's array on failure. */
#include "test_support.h"

#include <stdint.h>
#include <string.h>

#include "util/alloc.h"
#include "util/growable.h"

static void first_growth_takes_the_initial_capacity(void **state) {
    (void)state;
    uint32_t cap = 0;
    int *v = st_grow(NULL, &cap, 1, sizeof *v, 16, NULL, "a test array");
    assert_non_null(v);
    assert_int_equal(cap, 16);
    st_free(v);
}

static void a_full_array_doubles_and_keeps_its_elements(void **state) {
    (void)state;
    uint32_t cap = 0;
    int *v = st_grow(NULL, &cap, 1, sizeof *v, 4, NULL, "a test array");
    assert_non_null(v);
    for (int i = 0; i < 4; i++)
        v[i] = i * 7;
    int *w = st_grow(v, &cap, 5, sizeof *w, 4, NULL, "a test array");
    assert_non_null(w);
    assert_int_equal(cap, 8);
    for (int i = 0; i < 4; i++)
        assert_int_equal(w[i], i * 7);
    w = st_grow(w, &cap, 100, sizeof *w, 4, NULL, "a test array"); /* far past: enough at once */
    assert_non_null(w);
    assert_int_equal(cap, 128);
    st_free(w);
}

static void inline_storage_is_copied_never_freed(void **state) {
    (void)state;
    uint64_t inl[4] = {1, 2, 3, 4};
    uint32_t cap = 4;
    uint64_t *v = st_grow(inl, &cap, 5, sizeof *v, 4, inl, "a test list");
    assert_non_null(v);
    assert_ptr_not_equal(v, inl);
    assert_int_equal(cap, 8);
    for (int i = 0; i < 4; i++)
        assert_int_equal(v[i], (uint64_t)i + 1);
    assert_int_equal(inl[3], 4); /* untouched, and ASan would catch a free of it */
    st_free(v);
}

static void failure_keeps_the_array_and_names_it(void **state) {
    (void)state;
    uint32_t cap = 0;
    int *v = st_grow(NULL, &cap, 1, sizeof *v, 4, NULL, "a test array");
    assert_non_null(v);
    v[0] = 42;
    st_alloc_fail_after(1, ST_ALLOC_FAIL_ONCE, ST_ALLOC_THIS_THREAD);
    int *w = st_grow(v, &cap, 5, sizeof *w, 4, NULL, "the widget table");
    st_alloc_hook_off();
    assert_null(w);
    assert_int_equal(cap, 4);
    assert_int_equal(v[0], 42);
    assert_non_null(strstr(strata_error_message(), "the widget table"));
    st_free(v);
}

static void a_size_that_does_not_fit_fails_cleanly(void **state) {
    (void)state;
    uint32_t cap = 1u << 31;
    size_t bytes = 0;
    char big = 0;
    assert_null(st_grow_raw(&big, &cap, (1u << 31) + 1, 1, 1, &big, &bytes)); /* 2^32 elements */
    assert_int_equal(bytes, SIZE_MAX);
    assert_int_equal(cap, 1u << 31);
    cap = 8;
    assert_null(st_grow_raw(NULL, &cap, 9, SIZE_MAX / 8, 1, NULL, &bytes)); /* bytes overflow */
    assert_int_equal(bytes, SIZE_MAX);
    assert_int_equal(cap, 8);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(first_growth_takes_the_initial_capacity),
        cmocka_unit_test(a_full_array_doubles_and_keeps_its_elements),
        cmocka_unit_test(inline_storage_is_copied_never_freed),
        cmocka_unit_test(failure_keeps_the_array_and_names_it),
        cmocka_unit_test(a_size_that_does_not_fit_fails_cleanly),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
