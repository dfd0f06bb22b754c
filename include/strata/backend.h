/* strata/backend.h - the versioned device backend ABI (DESIGN §7.1).
 *
 * Owns: the contract between strata's chip level and a device backend shared
 * object: the one exported entry point, the function table and pipeline
 * contract it returns, the caller-owned native run storage, the run
 * descriptor, and the ABI a program and a host-executed (sim) kernel see.
 * Must never: depend on strata internals, include any strata header but
 * types.h, or allocate anything itself. Every type here, and every type of
 * types.h (tensors, task arguments, the call config and the program
 * signature, which the public API shares), is plain data that crosses a
 * dlopen boundary, so changing any layout or meaning requires bumping
 * STRATA_BACKEND_ABI_VERSION; tests/abi/test_abi_layout.c pins the layouts of
 * the current version. A backend includes this header only and never links
 * libstrata; the public API (strata.h) does not include it.
 *
 * Loading: the loader dlopens the backend (RTLD_NOW | RTLD_LOCAL), looks up
 * STRATA_BACKEND_ENTRY_SYMBOL and calls it with its own ABI version. The
 * backend returns its function table, or NULL when the versions differ (it
 * reports its own version through the out parameter so the loader can name
 * both and ask for a rebuild).
 *
 * Native runs: a run lives in a strata_native_run the caller owns (zeroed
 * before its first prepare, never moved between prepare and finalize). Every
 * phase call after prepare passes the run's epoch and the backend checks
 * that the storage holds a prepared run, that it belongs to this device and
 * that the epoch is the current one, so a late call from an old run can never
 * touch reused storage. The acceptance word of the descriptor is written
 * (release store) only at the real launch, never at prepare or on a failed
 * launch.
 *
 * Return codes: 0 is success; negative values are failures (the message
 * buffer says what happened); poll and wait return STRATA_BACKEND_COMPLETE or
 * STRATA_BACKEND_NOT_READY on success. Finalize returns the run's device
 * error (non-zero) when its execution failed.
 */
#ifndef STRATA_BACKEND_H
#define STRATA_BACKEND_H

#include <stddef.h>
#include <stdint.h>
#ifndef __cplusplus
#include <stdatomic.h>
#endif

#include "types.h"

#ifdef __cplusplus
extern "C" {
#endif

#define STRATA_BACKEND_ABI_VERSION 4u
#define STRATA_BACKEND_ENTRY_SYMBOL "strata_backend_entry"
#define STRATA_BACKEND_MAX_DEPTH 2u  /* native runs a backend may hold at once */
#define STRATA_BACKEND_MSG_MAX 320   /* bytes of one backend message */
#define STRATA_NATIVE_RUN_BYTES 1024 /* caller-owned storage of one native run */

/* C++ (before C++23) has neither _Alignas nor _Atomic. The layouts are the
 * same: alignas(64) is _Alignas(64), and the acceptance word is a plain
 * uint32_t a C++ backend stores with release order (std::atomic_ref in
 * C++20, or __atomic_store_n(word, v, __ATOMIC_RELEASE)). */
#ifdef __cplusplus
#define STRATA_BACKEND_ALIGNAS(n) alignas(n)
typedef uint32_t strata_backend_atomic_u32;
#else
#define STRATA_BACKEND_ALIGNAS(n) _Alignas(n)
typedef _Atomic uint32_t strata_backend_atomic_u32;
#endif

/* Return codes of backend functions (all other negative values are device codes). */
enum {
    STRATA_BACKEND_OK = 0,
    STRATA_BACKEND_NOT_READY = 0,      /* poll/wait: the run has not finished yet */
    STRATA_BACKEND_COMPLETE = 1,       /* poll/wait: the run finished (ok or not: see finalize) */
    STRATA_BACKEND_ERROR = -1,         /* generic failure; the message says why */
    STRATA_BACKEND_EUNSUPPORTED = -2,  /* this backend does not implement the call */
    STRATA_BACKEND_EINCOMPATIBLE = -3, /* prepare: cannot overlap the run in flight; prepare it
                                          again once that run is finalized (depth-one fallback) */
    STRATA_BACKEND_EBUSY = -4,         /* launch: another run still owns the device; the run
                                          stays prepared and may be launched later */
    STRATA_BACKEND_ESTALE = -5         /* storage not prepared, other device, or old epoch */
};

/* A human message filled by a failing backend call (NUL-terminated). */
typedef struct strata_backend_msg {
    char text[STRATA_BACKEND_MSG_MAX];
} strata_backend_msg;

/* What the backend promises the pipeline. Immutable for the table's lifetime. */
typedef struct strata_backend_contract {
    uint32_t abi_version;        /* equal to the table's abi_version */
    uint32_t pipeline_depth;     /* native runs it can hold at once: 1 or 2 */
    uint32_t concurrent_prepare; /* 1: a successor may be prepared while a run executes
                                    (requires depth 2); 0: never */
    uint32_t reserved;           /* must be 0 */
    uint64_t run_storage_bytes; /* bytes of strata_native_run it uses, 1..STRATA_NATIVE_RUN_BYTES */
} strata_backend_contract;

/* Caller-owned storage of one native run. Opaque to everyone but the backend. */
typedef struct strata_native_run {
    STRATA_BACKEND_ALIGNAS(64) unsigned char bytes[STRATA_NATIVE_RUN_BYTES];
} strata_native_run;

/* Flags of a native run descriptor. */
#define STRATA_NATIVE_DIAGNOSTICS 0x1u /* the run collects device-wide diagnostics */

/* Identity and launch sink of one native run, copied by value at prepare. */
typedef struct strata_native_run_desc {
    uint32_t slot;        /* pipeline slot, < contract.pipeline_depth */
    uint32_t flags;       /* STRATA_NATIVE_* */
    uint64_t run_id;      /* diagnostic identity (0 for direct runs) */
    uint64_t generation;  /* lease generation (diagnostic after admission) */
    uint64_t dispatch_id; /* ordering identity (diagnostic for the backend) */
    uint64_t epoch;       /* authoritative identity of every later phase call, != 0 */
    strata_backend_atomic_u32 *accepted; /* optional: receives accepted_value at the real launch */
    uint32_t accepted_value;
    uint32_t reserved; /* 0 */
} strata_native_run_desc;

/* ---- Programs ----------------------------------------------------------------
 * A program is a host-side function that enqueues kernel launches. The
 * backend calls it while preparing a run (on the preparing thread); the
 * launches then execute in order when the run is launched. */

/* The context a program is called with (strata_program_fn, types.h). */
struct strata_program_ctx {
    uint32_t abi_version;
    uint32_t block_dim;  /* blocks requested by the call config (0 = no preference) */
    const char *program; /* the program's name */
    void *impl;          /* backend-private */
    /* Enqueue kernel `kernel` over `blocks` blocks (0 = block_dim) with
     * nargs <= STRATA_KERNEL_MAX_ARGS argument words. 0 or a negative code
     * (then the program should return it; the message is kept). */
    int (*launch)(strata_program_ctx *ctx, const char *kernel, uint32_t blocks,
                  const uint64_t *args, uint32_t nargs);
    /* Record why the program is about to fail (first message wins). */
    void (*fail)(strata_program_ctx *ctx, const char *msg);
};

/* A program as a backend registers it. The name is copied; fn and user must
 * stay valid until the program is unregistered or the device closed. */
typedef struct strata_backend_program {
    const char *name;
    strata_program_fn fn;
    void *user;
} strata_backend_program;

/* ---- Host-executed kernels (the sim backend) ------------------------------------
 * A kernel is a C function exported by a kernel module (a shared object),
 * resolved by name. It runs once per block; blocks are spread over the
 * simulated cores in any order. */

typedef struct strata_kernel_ctx {
    uint32_t block_idx;   /* 0 .. block_count-1 */
    uint32_t block_count; /* blocks of this launch */
    uint32_t core_id;     /* simulated core running this block */
    uint32_t nargs;
    const uint64_t *args; /* the launch's argument words */
    char *msg;            /* a failing kernel may describe why here */
    size_t msg_cap;
} strata_kernel_ctx;

/* Returns 0, or a non-zero device code that fails the run. */
typedef int (*strata_kernel_fn)(const strata_kernel_ctx *k);

/* ---- Opening a device ------------------------------------------------------------ */

typedef struct strata_backend_open_params {
    uint32_t abi_version;
    int32_t device_id;         /* >= 0 */
    const char *kernel_module; /* path of the kernel module, or NULL */
    uint32_t cores;            /* simulated cores / worker threads (0 = backend default) */
    uint32_t reserved;         /* 0 */
} strata_backend_open_params;

/* ---- The function table ------------------------------------------------------------
 * `dev` is the handle open() returned. Every function is required (a backend
 * without a feature returns STRATA_BACKEND_EUNSUPPORTED from it). */
typedef struct strata_backend_ops {
    uint32_t abi_version; /* STRATA_BACKEND_ABI_VERSION the backend was built with */
    uint32_t struct_size; /* sizeof(strata_backend_ops) */
    const char *name;     /* short name, e.g. "sim" */
    strata_backend_contract contract;

    int (*open)(const strata_backend_open_params *p, void **dev, strata_backend_msg *m);
    /* Refused (device left open) while a native run is prepared or executing. */
    int (*close)(void *dev, strata_backend_msg *m);
    /* Backend-specific knobs ("key", "value"); unknown keys are an error. */
    int (*configure)(void *dev, const char *key, const char *value, strata_backend_msg *m);

    int (*mem_alloc)(void *dev, uint64_t nbytes, void **addr, strata_backend_msg *m);
    int (*mem_free)(void *dev, void *addr, strata_backend_msg *m);
    int (*copy_to)(void *dev, void *dst_dev, const void *src_host, uint64_t n,
                   strata_backend_msg *m);
    int (*copy_from)(void *dev, void *dst_host, const void *src_dev, uint64_t n,
                     strata_backend_msg *m);
    uint64_t (*committed_bytes)(void *dev);

    int (*register_program)(void *dev, const strata_backend_program *p, uint32_t *id,
                            strata_backend_msg *m);
    /* Refused while a native run of this program is prepared or executing. */
    int (*unregister_program)(void *dev, uint32_t id, strata_backend_msg *m);

    /* Build the run into zeroed storage: runs the program, resolves its
     * kernels, reserves device resources; submits nothing. A failure leaves
     * the storage empty (no finalize needed). Success obliges exactly one
     * finalize. args, and what it points at, is valid during the call only
     * (it is what the program receives). */
    int (*prepare)(void *dev, strata_native_run *run, uint32_t program,
                   const strata_task_view *args, const strata_call_config *cfg,
                   const strata_native_run_desc *desc, strata_backend_msg *m);
    /* Start execution; returns once the launch is real (acceptance written)
     * or failed. A failure before anything started leaves the run prepared. */
    int (*launch)(void *dev, strata_native_run *run, uint64_t epoch, strata_backend_msg *m);
    /* Non-blocking: COMPLETE, NOT_READY, or a negative error. Releases nothing. */
    int (*poll)(void *dev, strata_native_run *run, uint64_t epoch, strata_backend_msg *m);
    /* Block (without spinning) until the run finished or deadline_ns
     * (CLOCK_MONOTONIC; UINT64_MAX = forever): COMPLETE, NOT_READY at the
     * deadline, or a negative error. Releases nothing. */
    int (*wait)(void *dev, strata_native_run *run, uint64_t epoch, uint64_t deadline_ns,
                strata_backend_msg *m);
    /* Drain if launched, release everything, empty the storage. Returns 0,
     * or the run's device error / a finalize failure (message says which).
     * Also the way to abandon a prepared run that was never launched. */
    int (*finalize)(void *dev, strata_native_run *run, uint64_t epoch, strata_backend_msg *m);
} strata_backend_ops;

/* The one exported entry point. Returns the table, or NULL when
 * loader_abi_version differs from the backend's (then *backend_abi_version
 * says which version the backend was built for). */
typedef const strata_backend_ops *(*strata_backend_entry_fn)(uint32_t loader_abi_version,
                                                             uint32_t *backend_abi_version);

#ifdef __cplusplus
}
#endif
#endif /* STRATA_BACKEND_H */
