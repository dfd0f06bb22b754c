/* tests/abi/test_abi_layout.c - the layouts of the versioned backend ABI.
 *
 * Owns: the sizes, alignments and key offsets of every type a backend shares
 * with strata (backend.h and the plain types of types.h), pinned per
 * STRATA_BACKEND_ABI_VERSION. A layout change that forgets to bump the
 * version fails here; bumping it means pinning the new layouts below.
 * Must never: derive the expected numbers from the types themselves (that
 * could not fail); they are written down for one version and data model.
 */
#include "test_support.h"

#include <stdalign.h>

#include "strata/backend.h"

#if UINTPTR_MAX != UINT64_MAX
#error "the ABI layouts are pinned for 64-bit data models only: pin this one too"
#endif
#if STRATA_BACKEND_ABI_VERSION != 4
#error "STRATA_BACKEND_ABI_VERSION changed: pin the layouts of the new version here"
#endif

static void limits_of_version_4(void **state) {
    (void)state;
    assert_int_equal(STRATA_MAX_RANK, 5);
    assert_int_equal(STRATA_MAX_TENSORS, 64);
    assert_int_equal(STRATA_MAX_SCALARS, 16);
    assert_int_equal(STRATA_MAX_PAYLOAD, 256);
    assert_int_equal(STRATA_PROGRAM_NAME_MAX, 64);
    assert_int_equal(STRATA_KERNEL_MAX_ARGS, 32);
    assert_int_equal(STRATA_BACKEND_MAX_DEPTH, 2);
    assert_int_equal(STRATA_BACKEND_MSG_MAX, 320);
    assert_int_equal(STRATA_NATIVE_RUN_BYTES, 1024);
    assert_string_equal(STRATA_BACKEND_ENTRY_SYMBOL, "strata_backend_entry");
}

static void shared_plain_types_of_version_4(void **state) {
    (void)state;
    assert_int_equal(sizeof(strata_buffer_id), 16);
    /* version 2: no internal field (holder_ is gone), the padding is named;
     * version 3: bodies and programs (and prepare) get a strata_task_view;
     * version 4: 64 tensors, typed scalars and a payload per task; the view
     * ends with the worker index */
    assert_int_equal(sizeof(strata_tensor), 128);
    assert_int_equal(alignof(strata_tensor), 8);
    assert_int_equal(offsetof(strata_tensor, ident), 24);
    assert_int_equal(offsetof(strata_tensor, dtype), 40);
    assert_int_equal(offsetof(strata_tensor, mem), 42);
    assert_int_equal(offsetof(strata_tensor, pad_), 43);
    assert_int_equal(sizeof(((strata_tensor *)0)->pad_), 5);
    assert_int_equal(offsetof(strata_tensor, shape), 48);
    assert_int_equal(offsetof(strata_tensor, strides), 88);
    assert_int_equal(sizeof(strata_task_args), 8672);
    assert_int_equal(offsetof(strata_task_args, payload_bytes), 12);
    assert_int_equal(offsetof(strata_task_args, tags), 16);
    assert_int_equal(offsetof(strata_task_args, scalar_types), 80);
    assert_int_equal(offsetof(strata_task_args, scalars), 96);
    assert_int_equal(offsetof(strata_task_args, tensors), 224);
    assert_int_equal(offsetof(strata_task_args, payload), 8416);
    assert_int_equal(sizeof(strata_task_view), 56);
    assert_int_equal(offsetof(strata_task_view, worker), 52);
    assert_int_equal(alignof(strata_task_view), 8);
    assert_int_equal(offsetof(strata_task_view, nscalars), 4);
    assert_int_equal(offsetof(strata_task_view, tags), 8);
    assert_int_equal(offsetof(strata_task_view, scalars), 16);
    assert_int_equal(offsetof(strata_task_view, tensors), 24);
    assert_int_equal(offsetof(strata_task_view, scalar_types), 32);
    assert_int_equal(offsetof(strata_task_view, payload), 40);
    assert_int_equal(offsetof(strata_task_view, payload_bytes), 48);
    assert_int_equal(sizeof(strata_call_config), 8);
    assert_int_equal(offsetof(strata_call_config, flags), 4);
}

/* Not backend ABI, but public layout a program compiled against an older
 * header would misread: the child config's MPI fields (appended at the end)
 * and the host mode's value. */
static void child_config_with_its_mpi_fields(void **state) {
    (void)state;
    assert_int_equal(STRATA_HOST_MPI, 2);
    assert_int_equal(offsetof(strata_child_config, rank),
                     offsetof(strata_child_config, name) + sizeof(const char *));
    assert_int_equal(offsetof(strata_child_config, heartbeat_timeout_ns),
                     offsetof(strata_child_config, rank) + 8);
    assert_int_equal(sizeof(strata_child_config),
                     offsetof(strata_child_config, heartbeat_timeout_ns) + 8);
}

static void backend_types_of_version_4(void **state) {
    (void)state;
    assert_int_equal(sizeof(strata_backend_msg), 320);
    assert_int_equal(sizeof(strata_backend_contract), 24);
    assert_int_equal(sizeof(strata_native_run), 1024);
    assert_int_equal(alignof(strata_native_run), 64);
    assert_int_equal(sizeof(strata_native_run_desc), 56);
    assert_int_equal(offsetof(strata_native_run_desc, epoch), 32);
    assert_int_equal(offsetof(strata_native_run_desc, accepted), 40);
    assert_int_equal(sizeof(strata_program_ctx), 40);
    assert_int_equal(offsetof(strata_program_ctx, launch), 24);
    assert_int_equal(sizeof(strata_backend_program), 24);
    assert_int_equal(sizeof(strata_kernel_ctx), 40);
    assert_int_equal(sizeof(strata_backend_open_params), 24);
    assert_int_equal(sizeof(strata_backend_ops), 160);
    assert_int_equal(offsetof(strata_backend_ops, open), 40);
    assert_int_equal(offsetof(strata_backend_ops, finalize), 152);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(limits_of_version_4),
        cmocka_unit_test(shared_plain_types_of_version_4),
        cmocka_unit_test(backend_types_of_version_4),
        cmocka_unit_test(child_config_with_its_mpi_fields),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
