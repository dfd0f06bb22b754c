// label: concurrency
/* tests/unit/test_registry.c - the registry of named entries
 * (util/registry.h): unique names, dense ids, lookup by id and by name, the
 * capacity and duplicate errors, reuse of a freed id, and the publication
 * that lets a reader look ids up without the owner's lock.
 *
 * Owns: assertions on the registry alone; the worker's callables and a
 * chip's programs are tested through their public calls (test_api_errors,
 * test_chip_kernels).
 */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "test_support.h"

#include "util/registry.h"

#define CAP 3

typedef struct item {
    char name[16];
    uint64_t value;
} item;

static void ids_are_dense_and_found_by_id_and_by_name(void **state) {
    (void)state;
    st_registry_entry entries[CAP];
    st_registry r;
    st_registry_init(&r, entries, CAP, "thing", "box");
    item a = {"a", 1}, b = {"b", 2};
    int32_t ia = -1, ib = -1;
    assert_ok(st_registry_add(&r, a.name, &a, "add", &ia));
    assert_ok(st_registry_add(&r, b.name, &b, "add", &ib));
    assert_int_equal(ia, 0);
    assert_int_equal(ib, 1);
    assert_int_equal(st_registry_count(&r), 2);
    assert_ptr_equal(st_registry_get(&r, 0), &a);
    assert_ptr_equal(st_registry_get(&r, 1), &b);
    assert_ptr_equal(st_registry_at(&r, 1), &b);
    assert_null(st_registry_get(&r, 2)); /* never handed out */
    assert_null(st_registry_get(&r, -1));
    assert_int_equal(st_registry_find(&r, "b"), 1);
    assert_int_equal(st_registry_find(&r, "c"), -1);
}

static void a_name_is_registered_once(void **state) {
    (void)state;
    st_registry_entry entries[CAP];
    st_registry r;
    st_registry_init(&r, entries, CAP, "thing", "box");
    item a = {"a", 1}, again = {"a", 2};
    int32_t id = -1, other = 77;
    assert_ok(st_registry_add(&r, a.name, &a, "add", &id));
    assert_status(STRATA_EINVAL, st_registry_add(&r, again.name, &again, "add", &other));
    assert_string_equal(strata_error_message(), "add: thing 'a' is already registered");
    assert_int_equal(other, 77);
    assert_ptr_equal(st_registry_get(&r, id), &a);
    assert_int_equal(st_registry_count(&r), 1);
}

static void a_full_registry_names_its_limit(void **state) {
    (void)state;
    st_registry_entry entries[CAP];
    st_registry r;
    st_registry_init(&r, entries, CAP, "thing", "box");
    item it[CAP + 1] = {{"a", 0}, {"b", 0}, {"c", 0}, {"d", 0}};
    int32_t id;
    for (int i = 0; i < CAP; i++)
        assert_ok(st_registry_add(&r, it[i].name, &it[i], "add", &id));
    assert_status(STRATA_ECAPACITY, st_registry_add(&r, it[CAP].name, &it[CAP], "add", &id));
    assert_string_equal(strata_error_message(), "add: at most 3 things per box");
    assert_int_equal(st_registry_find(&r, "d"), -1);
}

static void a_removed_id_is_free_and_the_lowest_is_reused(void **state) {
    (void)state;
    st_registry_entry entries[CAP];
    st_registry r;
    st_registry_init(&r, entries, CAP, "thing", "box");
    item it[4] = {{"a", 0}, {"b", 0}, {"c", 0}, {"d", 0}};
    int32_t id;
    for (int i = 0; i < CAP; i++)
        assert_ok(st_registry_add(&r, it[i].name, &it[i], "add", &id));
    assert_ptr_equal(st_registry_remove(&r, 1), &it[1]);
    assert_null(st_registry_remove(&r, 1)); /* already free */
    assert_null(st_registry_get(&r, 1));
    assert_int_equal(st_registry_find(&r, "b"), -1);
    assert_ok(st_registry_add(&r, it[1].name, &it[1], "add", &id)); /* its name is free again */
    assert_int_equal(id, 1);
    assert_ptr_equal(st_registry_remove(&r, 0), &it[0]);
    assert_ok(st_registry_add(&r, it[3].name, &it[3], "add", &id)); /* a full box had room */
    assert_int_equal(id, 0);
    assert_int_equal(st_registry_count(&r), CAP);
}

/* ---- publication ------------------------------------------------------------------ */

#define MANY 512

typedef struct pub {
    st_registry r;
    st_registry_entry entries[MANY];
    item items[MANY];
    int bad;
} pub;

/* Looks every id up, without any lock, as soon as it is published: the
 * payload's fields, written before the add, must be visible (ThreadSanitizer
 * checks the ordering; the value check catches an entry seen half-written). */
static void *reader_main(void *arg) {
    pub *p = arg;
    for (int32_t id = 0; id < MANY; id++) {
        const item *it;
        uint64_t spins = 0;
        while ((it = st_registry_get(&p->r, id)) == NULL && ++spins < (1ull << 32))
            ; /* bounded: an add that never comes must fail the test, not hang it */
        if (!it || it->value != (uint64_t)id * 3 + 1) {
            p->bad = 1;
            return NULL;
        }
    }
    return NULL;
}

static void a_reader_without_the_lock_sees_every_published_entry(void **state) {
    (void)state;
    static pub p;
    memset(&p, 0, sizeof p);
    st_registry_init(&p.r, p.entries, MANY, "thing", "box");
    pthread_t reader;
    assert_int_equal(pthread_create(&reader, NULL, reader_main, &p), 0);
    for (int32_t i = 0; i < MANY; i++) {
        snprintf(p.items[i].name, sizeof p.items[i].name, "item%d", i);
        p.items[i].value = (uint64_t)i * 3 + 1;
        int32_t id;
        assert_ok(st_registry_add(&p.r, p.items[i].name, &p.items[i], "add", &id));
        assert_int_equal(id, i);
    }
    pthread_join(reader, NULL);
    assert_int_equal(p.bad, 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(ids_are_dense_and_found_by_id_and_by_name),
        cmocka_unit_test(a_name_is_registered_once),
        cmocka_unit_test(a_full_registry_names_its_limit),
        cmocka_unit_test(a_removed_id_is_free_and_the_lowest_is_reused),
        cmocka_unit_test(a_reader_without_the_lock_sees_every_published_entry),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
