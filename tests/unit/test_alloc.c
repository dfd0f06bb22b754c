// label: concurrency
/* tests/unit/test_alloc.c - the allocator's failure hook: counting, the n-th
 * allocation failing once or from then on, thread scope, turning it off, the
 * count of live mappings, and the out-of-memory message.
 */
#include <pthread.h>
#include <string.h>
#include <sys/mman.h>

#include "test_support.h"

#include "util/alloc.h"
#include "util/error.h"

/* One allocation of each kind, in a fixed order; how many returned NULL.
 * Each result is kept in ok[i] (1: it succeeded). */
enum { KINDS = 6 };

static int one_of_each(int ok[KINDS]) {
    void *p[KINDS];
    p[0] = st_malloc(16);
    p[1] = st_calloc(4, 8);
    p[2] = st_realloc(NULL, 24);
    p[3] = st_aligned_alloc(64, 10);
    p[4] = st_strdup("strata");
    p[5] = st_map_anon(4096, MAP_PRIVATE);
    int failed = 0;
    for (int i = 0; i < KINDS; i++) {
        ok[i] = p[i] != NULL;
        failed += !ok[i];
    }
    for (int i = 0; i < 5; i++)
        st_free(p[i]);
    st_unmap(p[5], 4096);
    return failed;
}

static void test_counts_without_failing(void **state) {
    (void)state;
    int ok[KINDS];
    st_alloc_fail_after(0, ST_ALLOC_FAIL_ONCE, ST_ALLOC_THIS_THREAD);
    assert_int_equal(one_of_each(ok), 0);
    st_alloc_hook_off();
    assert_int_equal(st_alloc_counted(), KINDS);
    assert_int_equal(st_alloc_failed(), 0);
}

static void test_nth_fails_once(void **state) {
    (void)state;
    for (int n = 1; n <= KINDS; n++) {
        int ok[KINDS];
        st_alloc_fail_after((uint64_t)n, ST_ALLOC_FAIL_ONCE, ST_ALLOC_THIS_THREAD);
        assert_int_equal(one_of_each(ok), 1);
        st_alloc_hook_off();
        for (int i = 0; i < KINDS; i++)
            assert_int_equal(ok[i], i != n - 1);
        assert_int_equal(st_alloc_failed(), 1);
    }
}

static void test_nth_and_later_fail(void **state) {
    (void)state;
    int ok[KINDS];
    st_alloc_fail_after(3, ST_ALLOC_FAIL_FROM, ST_ALLOC_THIS_THREAD);
    assert_int_equal(one_of_each(ok), KINDS - 2);
    st_alloc_hook_off();
    assert_true(ok[0] && ok[1]);
    for (int i = 2; i < KINDS; i++)
        assert_false(ok[i]);
    assert_int_equal(st_alloc_counted(), KINDS);
    assert_int_equal(st_alloc_failed(), KINDS - 2);
}

static void test_off_fails_nothing(void **state) {
    (void)state;
    int ok[KINDS];
    st_alloc_fail_after(1, ST_ALLOC_FAIL_FROM, ST_ALLOC_THIS_THREAD);
    st_alloc_hook_off();
    assert_int_equal(one_of_each(ok), 0);
    assert_int_equal(st_alloc_counted(), 0); /* nothing counted while off */
}

static void test_failed_realloc_keeps_the_block(void **state) {
    (void)state;
    char *p = st_malloc(8);
    assert_non_null(p);
    memcpy(p, "abcdefg", 8);
    st_alloc_fail_after(1, ST_ALLOC_FAIL_ONCE, ST_ALLOC_THIS_THREAD);
    assert_null(st_realloc(p, 1 << 20));
    st_alloc_hook_off();
    assert_string_equal(p, "abcdefg");
    st_free(p);
}

static void test_aligned_alloc_rounds_up(void **state) {
    (void)state;
    void *p = st_aligned_alloc(64, 100); /* 100 is not a multiple: rounded to 128 */
    assert_non_null(p);
    assert_int_equal((uintptr_t)p % 64, 0);
    memset(p, 0xab, 128);
    st_free(p);
}

/* Allocations on another thread while this one holds the plan. */
static void *alloc_on_thread(void *arg) {
    int *ok = arg;
    void *p = st_malloc(32);
    *ok = p != NULL;
    st_free(p);
    return NULL;
}

static int alloc_elsewhere(void) {
    pthread_t t;
    int ok = 0;
    assert_int_equal(pthread_create(&t, NULL, alloc_on_thread, &ok), 0);
    assert_int_equal(pthread_join(t, NULL), 0);
    return ok;
}

static void test_this_thread_scope_ignores_others(void **state) {
    (void)state;
    st_alloc_fail_after(1, ST_ALLOC_FAIL_FROM, ST_ALLOC_THIS_THREAD);
    int other_ok = alloc_elsewhere();
    void *mine = st_malloc(8);
    st_alloc_hook_off();
    assert_true(other_ok);
    assert_null(mine);
    assert_int_equal(st_alloc_counted(), 1);
}

static void test_all_threads_scope_counts_others(void **state) {
    (void)state;
    st_alloc_fail_after(1, ST_ALLOC_FAIL_ONCE, ST_ALLOC_ALL_THREADS);
    int other_ok = alloc_elsewhere();
    void *mine = st_malloc(8);
    st_alloc_hook_off();
    assert_false(other_ok); /* the first allocation anywhere */
    assert_non_null(mine);
    st_free(mine);
    assert_int_equal(st_alloc_counted(), 2);
    assert_int_equal(st_alloc_failed(), 1);
}

static void test_live_maps_counts_mappings(void **state) {
    (void)state;
    int64_t before = st_alloc_live_maps();
    void *a = st_map_anon(4096, MAP_PRIVATE), *b = st_map_anon(8192, MAP_SHARED);
    assert_non_null(a);
    assert_non_null(b);
    assert_int_equal(st_alloc_live_maps(), before + 2);
    st_unmap(a, 4096);
    st_unmap(NULL, 4096); /* nothing mapped: nothing counted */
    assert_int_equal(st_alloc_live_maps(), before + 1);
    st_unmap(b, 8192);
    assert_int_equal(st_alloc_live_maps(), before);
    st_alloc_fail_after(1, ST_ALLOC_FAIL_ONCE, ST_ALLOC_THIS_THREAD);
    assert_null(st_map_anon(4096, MAP_PRIVATE)); /* a failed mapping is not live */
    st_alloc_hook_off();
    assert_int_equal(st_alloc_live_maps(), before);
}

static void test_nomem_message_names_what_and_size(void **state) {
    (void)state;
    assert_status(STRATA_ENOMEM, st_fail_nomem("strata_test: the widget", 4096));
    assert_non_null(strstr(strata_error_message(), "strata_test: the widget"));
    assert_non_null(strstr(strata_error_message(), "4096 bytes"));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_counts_without_failing),
        cmocka_unit_test(test_nth_fails_once),
        cmocka_unit_test(test_nth_and_later_fail),
        cmocka_unit_test(test_off_fails_nothing),
        cmocka_unit_test(test_failed_realloc_keeps_the_block),
        cmocka_unit_test(test_aligned_alloc_rounds_up),
        cmocka_unit_test(test_this_thread_scope_ignores_others),
        cmocka_unit_test(test_all_threads_scope_counts_others),
        cmocka_unit_test(test_live_maps_counts_mappings),
        cmocka_unit_test(test_nomem_message_names_what_and_size),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
