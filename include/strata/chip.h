/* strata/chip.h - the chip level (L2): one device driven through a backend.
 *
 * Owns: the public L2 API (DESIGN §4, §7): opening a chip, registering
 * programs, device memory, submitting runs and the run handle, the lane
 * queries, and the calls a program makes to enqueue kernel launches.
 * Must never: expose the ChipWorker, the lane or the backend table, or
 * include backend.h (the versioned backend ABI) or sim.h (the sim backend's
 * knobs); every object here is an opaque handle or a configuration struct
 * filled by strata_chip_config_init().
 *
 * Runs on one chip are executed in submission order. With a backend that
 * can prepare a successor while a run executes (the sim can), a submitted run
 * is prepared while its predecessor executes and launched right after the
 * predecessor is finalized; a third submit waits for the first to finish.
 * Progress is pulled: it happens inside strata_chip_* calls (submit, done,
 * wait, drain, close), so wait on (or poll) the runs you submit.
 */
#ifndef STRATA_CHIP_H
#define STRATA_CHIP_H

#include <stddef.h>
#include <stdint.h>

#include "export.h"
#include "status.h"
#include "tensor.h"
#include "types.h"
#include "worker.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct strata_chip strata_chip;         /* one open device */
typedef struct strata_chip_run strata_chip_run; /* one submitted run, owned by the caller */
typedef int32_t strata_chip_program;            /* a program registered on one chip (>= 0) */

/* STRATA_CALL_DIAGNOSTICS (a strata_call_config flag) is defined in types.h. */

struct strata_backend_ops;   /* the backend's function table (backend.h) */
struct strata_sim_injection; /* the sim backend's injection knobs (sim.h) */

/* ---- Opening a chip ------------------------------------------------------------- */

typedef struct strata_chip_config {
    /* Path of a backend shared object, or "sim": the sim backend, looked up
     * next to libstrata, then in this build tree, then on the loader's path. */
    const char *backend;
    /* A backend linked into the program: its entry point (a
     * strata_backend_entry_fn, backend.h), used instead of `backend` when set
     * (`backend` then only names it in messages). */
    const struct strata_backend_ops *(*backend_entry)(uint32_t loader_abi_version,
                                                      uint32_t *backend_abi_version);
    int device_id;             /* >= 0 (default 0) */
    const char *kernel_module; /* kernel module shared object (sim), or NULL for none */
    uint32_t sim_cores;        /* simulated core threads (default 2) */
    uint32_t pipeline_depth;   /* 0: the backend's; 1: never overlap runs; 2 */
    strata_host_mode host;     /* in a worker: THREAD (default) or PROCESS (its own process) */
    /* Sim only: injection knobs (sim.h), copied at open; NULL = none. */
    const struct strata_sim_injection *sim;
} strata_chip_config;

STRATA_API void strata_chip_config_init(strata_chip_config *cfg);

/* Load the backend, open the device. On failure nothing is left behind. */
STRATA_API int strata_chip_open(const strata_chip_config *cfg, strata_chip **out);

/* Refuse new work, finish every submitted run (each still executes, unless
 * the chip is poisoned: then queued runs fail with the poison) and close the
 * device. Idempotent: every call returns the same status, the chip's poison
 * (the first device failure) if it was poisoned, else a device error from
 * closing, else STRATA_OK. The handle stays valid: queries and drain still
 * answer, other calls fail with STRATA_ECLOSED. Must not race with other
 * calls on the chip. */
STRATA_API int strata_chip_close(strata_chip *chip);

/* Close (if needed) and free the chip. NULL is a no-op. Run handles still
 * held stay readable until released. */
STRATA_API void strata_chip_destroy(strata_chip *chip);

/* "chip sim:0" - the label every error message of this chip starts with. */
STRATA_API const char *strata_chip_label(const strata_chip *chip);

/* ---- Programs ---------------------------------------------------------------------- */

typedef struct strata_chip_program_desc {
    const char *name;     /* unique on the chip, < STRATA_PROGRAM_NAME_MAX bytes */
    strata_program_fn fn; /* enqueues the kernel launches of one run */
    void *user;           /* passed to fn */
} strata_chip_program_desc;

STRATA_API int strata_chip_register_program(strata_chip *chip, const strata_chip_program_desc *desc,
                                            strata_chip_program *out);
/* Refused (STRATA_ESTATE) while a run of the program is queued or live. */
STRATA_API int strata_chip_unregister_program(strata_chip *chip, strata_chip_program prog);

/* Inside a program: enqueue `kernel` over `blocks` blocks (0 = the call
 * config's block_dim) with nargs argument words (device addresses cast to
 * uint64_t, scalars). Launches run in enqueue order. */
STRATA_API int strata_program_launch(strata_program_ctx *ctx, const char *kernel, uint32_t blocks,
                                     const uint64_t *args, uint32_t nargs);

/* Inside a program: describe why it is about to return non-zero. */
STRATA_API void strata_program_fail(strata_program_ctx *ctx, const char *fmt, ...)
    STRATA_PRINTF_LIKE(2, 3);

/* Device address of a tensor argument as a kernel argument word. */
static inline uint64_t strata_program_arg_ptr(const strata_task_view *a, uint32_t i) {
    return i < a->ntensors ? (uint64_t)(uintptr_t)strata_tensor_data(&a->tensors[i]) : 0;
}

/* ---- Device memory ---------------------------------------------------------------- */

/* Device memory persists until freed or the chip is closed. */
STRATA_API int strata_chip_malloc(strata_chip *chip, size_t nbytes, void **dev);
STRATA_API int strata_chip_free(strata_chip *chip, void *dev);
/* Synchronous copies; [dev, dev+n) must lie inside one live allocation. */
STRATA_API int strata_chip_copy_to(strata_chip *chip, void *dev_dst, const void *host_src,
                                   size_t n);
STRATA_API int strata_chip_copy_from(strata_chip *chip, void *host_dst, const void *dev_src,
                                     size_t n);
/* Bytes of device memory currently allocated. */
STRATA_API uint64_t strata_chip_committed_bytes(const strata_chip *chip);

/* A row-major tensor over device memory (mem = STRATA_MEM_DEVICE) for the
 * arguments of a run. nbytes is the size of the allocation at dev. */
STRATA_API int strata_chip_tensor(void *dev, uint64_t nbytes, strata_dtype dtype, int rank,
                                  const int64_t *shape, strata_tensor *out);

/* ---- Runs ---------------------------------------------------------------------------- */

/* How far a run's preparation got before it launched. */
typedef enum strata_chip_disposition {
    STRATA_CHIP_VALIDATED_ONLY = 1, /* accepted and copied; not prepared on the device yet */
    STRATA_CHIP_NATIVE_PREPARED = 2 /* prepared on the device (may not have launched yet) */
} strata_chip_disposition;

/* Submit one run of `prog` (args and cfg are copied; cfg NULL = defaults).
 * Blocks while the chip already holds as many runs as it can pipeline.
 * A run that fails after it was accepted still returns STRATA_OK here; its
 * error is reported by wait. */
STRATA_API int strata_chip_submit(strata_chip *chip, strata_chip_program prog,
                                  const strata_task_args *args, const strata_call_config *cfg,
                                  strata_chip_run **out);

/* Wait until the run finished: STRATA_OK, the run's error status (message in
 * strata_error_message(), the same on every call), or STRATA_ETIMEDOUT with the
 * run still live. STRATA_WAIT_FOREVER blocks in the device wait (no polling);
 * a finite wait polls once per step and parks in the device's timed wait. */
STRATA_API int strata_chip_run_wait(strata_chip_run *run, uint64_t timeout_ns);
/* Same with an absolute CLOCK_MONOTONIC deadline (UINT64_MAX = forever). */
STRATA_API int strata_chip_run_wait_until(strata_chip_run *run, uint64_t deadline_ns);

/* 1 if finished, 0 if not (drives progress; never reports the run's error). */
STRATA_API int strata_chip_run_done(const strata_chip_run *run);
/* STRATA_OK while live or completed; the error status once failed. */
STRATA_API int strata_chip_run_status(const strata_chip_run *run);
/* The run's first error, naming chip, run identity, phase, program, kernel
 * and block where they apply; "" if none. Valid until release. */
STRATA_API const char *strata_chip_run_error(const strata_chip_run *run);
/* 1 once the run crossed its launch fence (stays 1 after it finished). */
STRATA_API int strata_chip_run_launched(const strata_chip_run *run);
STRATA_API strata_chip_disposition strata_chip_run_disposition(const strata_chip_run *run);
/* The chip-local run number (from 1) that error messages name. */
STRATA_API uint64_t strata_chip_run_id(const strata_chip_run *run);
/* Drop the caller's handle. NULL is a no-op. A live run is not stopped: it
 * still finishes, unobserved, and close / drain still wait for it. */
STRATA_API void strata_chip_run_release(strata_chip_run *run);

/* submit + wait forever + release; returns the run's status. */
STRATA_API int strata_chip_run_sync(strata_chip *chip, strata_chip_program prog,
                                    const strata_task_args *args, const strata_call_config *cfg);

/* ---- Lane queries -------------------------------------------------------------------- */

/* 1 once a device failure (finalize, poll or wait) poisoned the chip: later
 * submits fail with STRATA_EPOISONED naming that failure. */
STRATA_API int strata_chip_poisoned(const strata_chip *chip);
/* Finish every submitted run; returns the poison if any. The chip stays open. */
STRATA_API int strata_chip_drain(strata_chip *chip);

/* ---- Chips in an L3 worker (cfg.host: a thread or a process) -------------------------
 * A chip added to a worker is a next-level child: tasks reach it through
 * strata_orch_submit_next_level(o, program, &args, &cfg, worker_id) (or a group),
 * run on it through its lane, and complete like any other task. Its device
 * memory is allocated from the worker and persists across runs until freed. */

/* Open a chip from cfg and add it to w (before strata_worker_init); *worker_id
 * is its next-level worker id. Errors of the config surface here. */
STRATA_API int strata_worker_add_chip(strata_worker *w, const strata_chip_config *cfg,
                                      int *worker_id);

/* Register a chip program on w (before or after init); every chip it is
 * dispatched to registers it on first use. */
STRATA_API int strata_worker_register_chip_program(strata_worker *w,
                                                   const strata_chip_program_desc *desc,
                                                   strata_callable *out);

/* nbytes of device memory on chip `worker_id`, as a buffer with its own
 * identity. Make its tensors with strata_worker_chip_tensor() (they carry
 * mem = STRATA_MEM_DEVICE and ident.owner = worker_id, so the engine refuses
 * them on any other worker). Freed by strata_worker_chip_free(), or when the
 * worker is destroyed. */
STRATA_API int strata_worker_chip_malloc(strata_worker *w, int worker_id, size_t nbytes,
                                         strata_buffer **out);
/* A view of a chip buffer, as strata_tensor_view() describes it. */
STRATA_API int strata_worker_chip_tensor(strata_worker *w, const strata_buffer *b, uint64_t offset,
                                         strata_dtype dtype, int rank, const int64_t *shape,
                                         const int64_t *strides, strata_tensor *out);
/* Synchronous copies into / out of a chip buffer at a byte offset. Not
 * ordered against tasks: use them while no task of a live run uses the
 * buffer (e.g. between runs: "load the weights once"). */
STRATA_API int strata_worker_chip_copy_to(strata_worker *w, strata_buffer *b, uint64_t offset,
                                          const void *src, size_t n);
STRATA_API int strata_worker_chip_copy_from(strata_worker *w, const strata_buffer *b,
                                            uint64_t offset, void *dst, size_t n);
/* Free the device memory and the buffer handle. */
STRATA_API int strata_worker_chip_free(strata_worker *w, strata_buffer *b);

#ifdef __cplusplus
}
#endif
#endif /* STRATA_CHIP_H */
