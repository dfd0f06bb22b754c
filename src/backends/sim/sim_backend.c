/* backends/sim/sim_backend.c - the sim backend's entry point and function table.
 *
 * Owns: the one exported symbol of libstrata_sim.so and the contract it
 * declares: depth 2 with concurrent prepare, so the pipelining logic of the
 * chip level runs on every CI machine.
 * Must never: export anything else (the library is built with hidden
 * visibility) or return a table to a loader of another ABI version.
 */
#include "sim_device.h"

static const strata_backend_ops sim_ops = {
    .abi_version = STRATA_BACKEND_ABI_VERSION,
    .struct_size = sizeof(strata_backend_ops),
    .name = "sim",
    .contract = {.abi_version = STRATA_BACKEND_ABI_VERSION,
                 .pipeline_depth = 2,
                 .concurrent_prepare = 1,
                 .reserved = 0,
                 .run_storage_bytes = sizeof(sim_run)},
    .open = sim_open,
    .close = sim_close,
    .configure = sim_configure,
    .mem_alloc = sim_mem_alloc,
    .mem_free = sim_mem_free,
    .copy_to = sim_copy_to,
    .copy_from = sim_copy_from,
    .committed_bytes = sim_committed,
    .register_program = sim_register_program,
    .unregister_program = sim_unregister_program,
    .prepare = sim_prepare,
    .launch = sim_launch_run,
    .poll = sim_poll,
    .wait = sim_wait,
    .finalize = sim_finalize,
};

__attribute__((visibility("default"))) const strata_backend_ops *
strata_backend_entry(uint32_t loader_abi_version, uint32_t *backend_abi_version) {
    if (backend_abi_version)
        *backend_abi_version = STRATA_BACKEND_ABI_VERSION;
    return loader_abi_version == STRATA_BACKEND_ABI_VERSION ? &sim_ops : NULL;
}
