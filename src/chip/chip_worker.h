/* chip/chip_worker.h - the owner of one device and its native runs (DESIGN §7.3).
 *
 * Owns: the loaded backend and the open device, the caller-owned storage of
 * the native runs (one per pipeline slot), the per-slot native run state
 * machine (EMPTY, PREPARING, PREPARED, LAUNCHED, REAPED, FINALIZING), the
 * epoch minted per prepare, and the generation filter of the leases of the
 * runs it prepares (util/lease.h; per lease slot, not per storage slot: the
 * tasks of one run share its lease and may hold both storage slots).
 * Must never: hold its lock across a backend call, accept a phase call whose
 * token is not the slot's current epoch in the right phase, or let a
 * successor be prepared unless the other slot's run is launched and allowed
 * it. Policy (FIFO order, activation, poison) belongs to the lane above.
 *
 * Lifecycle: st_chip_worker_new() gives a pristine worker; init (with full
 * rollback to pristine on failure) makes it ready; finalize is terminal and
 * idempotent (init after finalize is refused); free releases the memory.
 * Every error message names the chip and, for runs, the run identity
 * "(run_id=.. slot=.. generation=.. dispatch_id=.. run_epoch=..)".
 */
#ifndef STRATA_CHIP_CHIP_WORKER_H
#define STRATA_CHIP_CHIP_WORKER_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "chip/backend_loader.h"
#include "strata/backend.h"
#include "util/lease.h"

#define ST_CHIP_LABEL_MAX 64

typedef enum st_native_phase {
    ST_NATIVE_EMPTY = 0,
    ST_NATIVE_PREPARING,
    ST_NATIVE_PREPARED,
    ST_NATIVE_LAUNCHED,
    ST_NATIVE_REAPED,
    ST_NATIVE_FINALIZING,
    ST_NATIVE_INVALID /* the result of an illegal transition */
} st_native_phase;

/* The named transitions of a slot's native run. */
typedef enum st_native_event {
    ST_NATIVE_BEGIN_PREPARE,  /* EMPTY -> PREPARING */
    ST_NATIVE_PREPARE_OK,     /* PREPARING -> PREPARED */
    ST_NATIVE_PREPARE_FAILED, /* PREPARING -> EMPTY */
    ST_NATIVE_LAUNCH_OK,      /* PREPARED -> LAUNCHED */
    ST_NATIVE_LAUNCH_REAPED,  /* PREPARED -> REAPED: the launch failed, the device says done */
    ST_NATIVE_COMPLETED,      /* LAUNCHED -> REAPED: poll or wait saw the run finish */
    ST_NATIVE_BEGIN_FINALIZE, /* PREPARED | LAUNCHED | REAPED -> FINALIZING */
    ST_NATIVE_FINALIZED       /* FINALIZING -> EMPTY */
} st_native_event;

/* The state-machine table: next phase, or ST_NATIVE_INVALID. */
st_native_phase st_native_next(st_native_phase from, st_native_event ev);
const char *st_native_phase_name(st_native_phase p);

/* Identity of one prepared native run, handed back by prepare. */
typedef struct st_native_token {
    uint32_t slot;
    uint64_t epoch;
    uint64_t generation;
    uint64_t run_id;
    uint64_t dispatch_id;
} st_native_token;

/* "(run_id=.. slot=.. generation=.. dispatch_id=.. run_epoch=..)" */
void st_native_identity(const st_native_token *t, char *buf, size_t cap);

typedef struct st_chip_worker_config {
    const char *backend;           /* path or "sim" (ignored when entry is set) */
    strata_backend_entry_fn entry; /* an in-process backend (tests) */
    const char *entry_label;       /* its name in messages */
    int device_id;
    const char *kernel_module;
    uint32_t cores;
    uint32_t max_depth;       /* 0: the contract's depth; 1 or 2 caps it */
    _Atomic uint64_t *epochs; /* epoch counter shared with other chips; NULL: the worker's own */
} st_chip_worker_config;

/* One native run to prepare. */
typedef struct st_native_request {
    uint32_t slot;  /* native run storage, < the depth; not the lease's slot */
    int leased;     /* 1: lease is the run's pipeline lease and passes the filter (preview
                       before the prepare, commit after it) */
    st_lease lease; /* unleased runs use only its generation (to name the run) */
    uint64_t run_id;
    uint64_t dispatch_id;
    uint32_t program; /* backend program id */
    const strata_task_args *args;
    const strata_call_config *cfg;
    int diagnostics;
    _Atomic uint32_t *accepted;
    uint32_t accepted_value;
} st_native_request;

typedef struct st_chip_worker st_chip_worker;

st_chip_worker *st_chip_worker_new(void);
int st_chip_worker_init(st_chip_worker *cw, const st_chip_worker_config *cfg);
/* Finish every live slot (best effort), close the device, unload. Terminal. */
int st_chip_worker_finalize(st_chip_worker *cw);
/* Finalize (if needed) and free. NULL is a no-op. */
void st_chip_worker_free(st_chip_worker *cw);

const char *st_chip_worker_label(const st_chip_worker *cw); /* "chip sim:0" */
const char *st_chip_worker_backend_name(const st_chip_worker *cw);
uint32_t st_chip_worker_depth(const st_chip_worker *cw);
int st_chip_worker_initialized(const st_chip_worker *cw);
/* Depth > 1 and the backend prepares successors while a run executes. */
int st_chip_worker_supports_successor(const st_chip_worker *cw);
st_native_phase st_chip_worker_slot_phase(st_chip_worker *cw, uint32_t slot);
/* Record a lease in the generation filter as an admitter would (what a
 * concurrent newer lease does; used by tests of the preview/commit split). */
int st_chip_worker_commit_lease(st_chip_worker *cw, st_lease lease);

/* ---- Native run phases ----
 * prepare: *incompatible is set when the run cannot overlap the run in
 * flight: the backend refused, or that run's finalize had begun (a successor
 * prepared unlocked raced its end). The caller may prepare it again later,
 * as the front; no generation is spent. */
int st_cw_prepare(st_chip_worker *cw, const st_native_request *req, st_native_token *out,
                  int *incompatible);
/* On failure the run is REAPED (the device reports it done) or still
 * PREPARED (launchable later); either way it must be finalized. */
int st_cw_launch(st_chip_worker *cw, const st_native_token *t);
int st_cw_poll(st_chip_worker *cw, const st_native_token *t, int *complete);
/* Blocks in the backend until complete or deadline_ns (no polling loop). */
int st_cw_wait(st_chip_worker *cw, const st_native_token *t, uint64_t deadline_ns, int *complete);
/* Reports the finalize error, else the launch error a reaped run kept. */
int st_cw_finalize(st_chip_worker *cw, const st_native_token *t);

/* ---- Device memory, programs, knobs ---- */
int st_cw_malloc(st_chip_worker *cw, uint64_t nbytes, void **dev);
int st_cw_free(st_chip_worker *cw, void *dev);
int st_cw_copy_to(st_chip_worker *cw, void *dst_dev, const void *src, uint64_t n);
int st_cw_copy_from(st_chip_worker *cw, void *dst, const void *src_dev, uint64_t n);
uint64_t st_cw_committed(st_chip_worker *cw);
int st_cw_register_program(st_chip_worker *cw, const strata_backend_program *p, uint32_t *id);
int st_cw_unregister_program(st_chip_worker *cw, uint32_t id);
int st_cw_configure(st_chip_worker *cw, const char *key, const char *value);

#endif
