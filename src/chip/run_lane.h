/* chip/run_lane.h - the ChipRunLane: FIFO owner of the native runs of one chip.
 *
 * Owns: admission (leased submits that never block, direct submits that
 * block for capacity), the order of at most two runs (activated first, then
 * by dispatch id: a staged successor never stands ahead of the head's later
 * work, hazard H1), activation, abandon, early preparation of a successor,
 * launching the front right after its predecessor is finalized, waiting with
 * deadlines, the sticky poison, drain and close (DESIGN §7.3).
 * Must never: launch anything but the activated front, prepare a successor
 * unless the front is launched, the backend allows it and neither run asks
 * for diagnostics, block in a leased submit, or let two threads drive the
 * same native run at once (a run being waited on in the device is marked
 * in_wait and left alone by everyone else).
 *
 * Progress is pulled: every state change happens inside a call (submit,
 * done, wait, activate, abandon, drain, close); there is no lane thread.
 * A handle (st_lane_run) stays readable after the lane closed.
 */
#ifndef STRATA_CHIP_RUN_LANE_H
#define STRATA_CHIP_RUN_LANE_H

#include <stdatomic.h>
#include <stdint.h>

#include "chip/chip_worker.h"
#include "strata/chip.h"
#include "util/lease.h"

typedef struct st_run_lane st_run_lane;
typedef struct st_lane_run st_lane_run;

typedef enum st_lane_phase {
    ST_LANE_QUEUED = 0, /* accepted, not natively prepared */
    ST_LANE_PREPARED,   /* natively prepared, not launched */
    ST_LANE_LAUNCHED,   /* crossed its launch fence; only the front can be here */
    ST_LANE_TERMINAL    /* finished (ok or failed); out of the FIFO */
} st_lane_phase;

/* What to run. args and cfg are copied at submit. */
typedef struct st_lane_request {
    uint32_t program;         /* backend program id */
    const char *program_name; /* for messages */
    const strata_task_args *args;
    const strata_call_config *cfg; /* NULL = defaults */
    _Atomic uint32_t *accepted;    /* optional launch-acceptance word */
    uint32_t accepted_value;
    int timed; /* 1: the lane reads the clock around the native phases (st_lane_run_times) */
} st_lane_request;

/* When a timed run's native phases happened (monotonic ns; 0: did not happen). */
typedef struct st_lane_times {
    uint64_t prepare_start, prepare_end; /* the last native prepare */
    uint64_t launch;                     /* its launch began */
    uint64_t complete;                   /* the device's completion was seen */
    uint64_t finalize_end;
} st_lane_times;

/* The lane keeps a pointer to cw until it is closed; cw must outlive that. */
int st_lane_create(st_chip_worker *cw, st_run_lane **out);
/* Close (reporting nothing) and drop the owner's reference. */
void st_lane_release(st_run_lane *lane);

/* Never blocks. The run goes behind every activated run that is launched
 * or has a lower dispatch id, and ahead of every unactivated one if it is
 * activated itself (activated first, then dispatch id). An activated run
 * that must be prepared while an unactivated one behind it holds a native
 * preparation takes it over: the unactivated one is finalized (once) and
 * prepared again later (st_lane_yields counts these).
 * `lease` is the pipeline lease of the run the work belongs to
 * (util/lease.h): several runs of one lease may be queued at once (the tasks
 * of one engine run), an older generation of a slot is stale. The lane picks
 * the native run storage itself. Rejects (nothing enqueued): closed or
 * poisoned lane, an invalid lease, a stale generation, a duplicate
 * run/dispatch identity, no room (two runs, or as many as the chip's depth),
 * an activated run with a dispatch id before a launched front. A run that fails after admission is
 * still returned (its error surfaces at wait). */
int st_lane_submit_leased(st_run_lane *lane, const st_lane_request *req, st_lease lease,
                          uint64_t run_id, uint64_t dispatch_id, int activated, st_lane_run **out);
/* Blocks (in the device wait of the front) until the run can be admitted. */
int st_lane_submit_direct(st_run_lane *lane, const st_lane_request *req, st_lane_run **out);

/* The run may launch once it is the front; it moves ahead of unactivated runs. */
int st_lane_activate(st_lane_run *run);
/* Refused for a launched run; a terminal run is left as it is. */
int st_lane_abandon(st_lane_run *run);
int st_lane_done(st_lane_run *run);
/* STRATA_OK, the run's error (re-reported on every call), or STRATA_ETIMEDOUT. */
int st_lane_wait(st_lane_run *run, uint64_t deadline_ns);

int st_lane_run_status(st_lane_run *run);
const char *st_lane_run_error(st_lane_run *run);
int st_lane_run_launched(st_lane_run *run);
/* The native phase times of a run submitted with `timed` (all 0 otherwise). */
void st_lane_run_times(st_lane_run *run, st_lane_times *out);
strata_chip_disposition st_lane_run_disposition(st_lane_run *run);
st_lane_phase st_lane_run_phase(st_lane_run *run);
uint64_t st_lane_run_id(const st_lane_run *run);
/* The identity it was admitted with (a leased run: its pipeline lease and dispatch id). */
st_lease st_lane_run_lease(const st_lane_run *run);
uint64_t st_lane_run_dispatch_id(const st_lane_run *run);
/* One more reference on the handle (dropped with st_lane_run_release). */
void st_lane_run_retain(st_lane_run *run);
/* The native run storage slot the run uses. */
uint32_t st_lane_run_slot(const st_lane_run *run);
void st_lane_run_release(st_lane_run *run);

int st_lane_poisoned(st_run_lane *lane);
/* 1 if a queued or live run uses the program. */
int st_lane_program_in_use(st_run_lane *lane, uint32_t program);
uint32_t st_lane_count(st_run_lane *lane);
/* Native preparations unactivated runs gave back to an activated run so far. */
uint64_t st_lane_yields(st_run_lane *lane);
int st_lane_drain(st_run_lane *lane);
/* Idempotent; refuses later submits; reports the poison on every call. */
int st_lane_close(st_run_lane *lane);

#endif
