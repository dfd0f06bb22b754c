/* backends/sim/testing/bad_backend.c - deliberately broken backends for the
 * loader's tests (built three times with BAD_MODE 1..3).
 *
 * Owns: nothing but a wrong entry point: BAD_MODE 1 reports another ABI
 * version and returns no table; 2 declares pipeline depth 3; 3 leaves a
 * required function NULL.
 * Must never: be loaded by anything but tests/unit/test_backend_loader.c.
 */
#include "strata/backend.h"

#ifndef BAD_MODE
#error "BAD_MODE must be 1, 2 or 3"
#endif

static int bad_open(const strata_backend_open_params *p, void **dev, strata_backend_msg *m) {
    (void)p, (void)dev, (void)m;
    return STRATA_BACKEND_EUNSUPPORTED;
}

static const strata_backend_ops bad_ops = {
    .abi_version = STRATA_BACKEND_ABI_VERSION,
    .struct_size = sizeof(strata_backend_ops),
    .name = "bad",
    .contract = {.abi_version = STRATA_BACKEND_ABI_VERSION,
                 .pipeline_depth = BAD_MODE == 2 ? 3 : 1,
                 .run_storage_bytes = 64},
    .open = bad_open,
};

__attribute__((visibility("default"))) const strata_backend_ops *
strata_backend_entry(uint32_t loader_abi_version, uint32_t *backend_abi_version) {
    (void)loader_abi_version;
    if (BAD_MODE == 1) {
        *backend_abi_version = STRATA_BACKEND_ABI_VERSION + 41;
        return (const strata_backend_ops *)0;
    }
    *backend_abi_version = STRATA_BACKEND_ABI_VERSION;
    return &bad_ops;
}
