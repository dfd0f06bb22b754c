/* tests/unit/test_backend_loader.c - loading device backends.
 *
 * Owns: one test per load failure (file missing, not a shared object, entry
 * point missing, ABI version mismatch, malformed contract, malformed table),
 * the in-process handshake, and the "sim" name lookup. The broken backends
 * are real shared objects built next to the sim (src/backends/sim/testing).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "test_support.h"

#include "chip/backend_loader.h"

static void expect_error_contains(const char *needle) {
    if (!strstr(strata_error_message(), needle))
        fail_msg("expected '%s' in: %s", needle, strata_error_message());
}

static void a_missing_file_is_named(void **state) {
    st_backend b;
    assert_status(STRATA_EINVAL, st_backend_load("/nonexistent/dir/libgone.so", &b));
    expect_error_contains("/nonexistent/dir/libgone.so");
    expect_error_contains("file not found");
    assert_null(b.ops);
    assert_null(b.lib);
}

static void a_file_that_is_not_a_shared_object_is_named(void **state) {
    char path[] = "/tmp/strata_not_a_so_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, "hello, not an ELF file\n", 23), 23);
    close(fd);
    st_backend b;
    assert_status(STRATA_EINVAL, st_backend_load(path, &b));
    expect_error_contains(path);
    expect_error_contains("not a shared object");
    unlink(path);
}

static void a_missing_entry_point_is_named(void **state) {
    st_backend b; /* the kernel module is a shared object without the entry point */
    assert_status(STRATA_EABI, st_backend_load(STRATA_SIM_TEST_KERNELS_PATH, &b));
    expect_error_contains(STRATA_SIM_TEST_KERNELS_PATH);
    expect_error_contains("entry point 'strata_backend_entry' missing");
    assert_null(b.lib);
}

static void an_abi_mismatch_names_both_versions_and_asks_for_a_rebuild(void **state) {
    st_backend b;
    assert_status(STRATA_EABI, st_backend_load(STRATA_TEST_BAD_BACKEND_ABI_PATH, &b));
    expect_error_contains(STRATA_TEST_BAD_BACKEND_ABI_PATH);
    char theirs[32], mine[32]; /* the bad backend claims ours + 41 */
    snprintf(theirs, sizeof theirs, "version %u", STRATA_BACKEND_ABI_VERSION + 41);
    snprintf(mine, sizeof mine, "version %u", STRATA_BACKEND_ABI_VERSION);
    expect_error_contains(theirs);
    expect_error_contains(mine);
    expect_error_contains("rebuild");
    assert_null(b.ops);
}

static void a_malformed_contract_is_rejected(void **state) {
    st_backend b;
    assert_status(STRATA_EABI, st_backend_load(STRATA_TEST_BAD_BACKEND_CONTRACT_PATH, &b));
    expect_error_contains(STRATA_TEST_BAD_BACKEND_CONTRACT_PATH);
    expect_error_contains("malformed contract");
    expect_error_contains("pipeline depth 3");
}

static void a_malformed_function_table_is_rejected(void **state) {
    st_backend b;
    assert_status(STRATA_EABI, st_backend_load(STRATA_TEST_BAD_BACKEND_TABLE_PATH, &b));
    expect_error_contains("malformed function table");
    expect_error_contains("'close' is NULL");
}

static void the_sim_loads_by_path_and_by_name(void **state) {
    st_backend b;
    assert_ok(st_backend_load(STRATA_SIM_BACKEND_PATH, &b));
    assert_non_null(b.lib);
    assert_string_equal(b.ops->name, "sim");
    assert_int_equal(b.ops->contract.pipeline_depth, 2);
    assert_int_equal(b.ops->contract.concurrent_prepare, 1);
    st_backend_unload(&b);
    assert_null(b.ops);

    char path[ST_BACKEND_PATH_MAX];
    assert_ok(st_backend_resolve("sim", path, sizeof path));
    assert_int_equal(access(path, F_OK), 0);
    assert_ok(st_backend_load("sim", &b));
    assert_string_equal(b.ops->name, "sim");
    st_backend_unload(&b);
    st_backend_unload(&b); /* safe on an empty backend */
}

static void an_empty_name_is_rejected(void **state) {
    st_backend b;
    assert_status(STRATA_EINVAL, st_backend_load("", &b));
    assert_status(STRATA_EINVAL, st_backend_load(NULL, &b));
}

/* ---- The same checks on in-process entry points ----------------------------------------- */

static strata_backend_ops table;

static const strata_backend_ops *entry_returning_table(uint32_t loader, uint32_t *mine) {
    *mine = STRATA_BACKEND_ABI_VERSION;
    return &table;
}

static const strata_backend_ops *entry_of_another_version(uint32_t loader, uint32_t *mine) {
    *mine = 7;
    return NULL;
}

static int dummy_fn(void) {
    return 0;
}

static void fill_valid_table(void) {
    memset(&table, 0, sizeof table);
    table.abi_version = STRATA_BACKEND_ABI_VERSION;
    table.struct_size = sizeof table;
    table.name = "inproc";
    table.contract = (strata_backend_contract){.abi_version = STRATA_BACKEND_ABI_VERSION,
                                               .pipeline_depth = 2,
                                               .concurrent_prepare = 1,
                                               .run_storage_bytes = 64};
    /* Only presence is checked; none of these is called by the loader. */
    void (*f)(void) = (void (*)(void))dummy_fn;
    memcpy(&table.open, &f, sizeof f);
    memcpy(&table.close, &f, sizeof f);
    memcpy(&table.configure, &f, sizeof f);
    memcpy(&table.mem_alloc, &f, sizeof f);
    memcpy(&table.mem_free, &f, sizeof f);
    memcpy(&table.copy_to, &f, sizeof f);
    memcpy(&table.copy_from, &f, sizeof f);
    memcpy(&table.committed_bytes, &f, sizeof f);
    memcpy(&table.register_program, &f, sizeof f);
    memcpy(&table.unregister_program, &f, sizeof f);
    memcpy(&table.prepare, &f, sizeof f);
    memcpy(&table.launch, &f, sizeof f);
    memcpy(&table.poll, &f, sizeof f);
    memcpy(&table.wait, &f, sizeof f);
    memcpy(&table.finalize, &f, sizeof f);
}

static void in_process_entry_points_pass_the_same_checks(void **state) {
    st_backend b;
    fill_valid_table();
    assert_ok(st_backend_from_entry(entry_returning_table, "inproc", &b));
    assert_null(b.lib);
    assert_string_equal(b.path, "inproc");

    assert_status(STRATA_EABI, st_backend_from_entry(entry_of_another_version, "old", &b));
    expect_error_contains("version 7");

    table.contract.pipeline_depth = 1; /* concurrent prepare needs depth 2 */
    assert_status(STRATA_EABI, st_backend_from_entry(entry_returning_table, "inproc", &b));
    expect_error_contains("concurrent_prepare");

    fill_valid_table();
    table.contract.reserved = 1;
    assert_status(STRATA_EABI, st_backend_from_entry(entry_returning_table, "inproc", &b));

    fill_valid_table();
    table.contract.run_storage_bytes = STRATA_NATIVE_RUN_BYTES + 1;
    assert_status(STRATA_EABI, st_backend_from_entry(entry_returning_table, "inproc", &b));
    expect_error_contains("run storage");

    fill_valid_table();
    table.struct_size = 8;
    assert_status(STRATA_EABI, st_backend_from_entry(entry_returning_table, "inproc", &b));
    expect_error_contains("rebuild");

    fill_valid_table();
    table.wait = NULL;
    assert_status(STRATA_EABI, st_backend_from_entry(entry_returning_table, "inproc", &b));
    expect_error_contains("'wait' is NULL");
    assert_null(b.ops);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(a_missing_file_is_named),
        cmocka_unit_test(a_file_that_is_not_a_shared_object_is_named),
        cmocka_unit_test(a_missing_entry_point_is_named),
        cmocka_unit_test(an_abi_mismatch_names_both_versions_and_asks_for_a_rebuild),
        cmocka_unit_test(a_malformed_contract_is_rejected),
        cmocka_unit_test(a_malformed_function_table_is_rejected),
        cmocka_unit_test(the_sim_loads_by_path_and_by_name),
        cmocka_unit_test(an_empty_name_is_rejected),
        cmocka_unit_test(in_process_entry_points_pass_the_same_checks),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
