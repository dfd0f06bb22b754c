/* exec/chip_endpoint.h - the chip endpoint's record, shared by the endpoint
 * (chip_endpoint.c) and the worker-level chip calls (worker_chip.c).
 *
 * Owns: the endpoint record of a chip in an L3 worker (its task records,
 * the chip program of each worker callable used on it, chip buffers, the
 * poison and the leaf lock `mu`), the
 * endpoint's operations table (which also tells a chip endpoint from any
 * other) and its thread's entry point.
 * Must never: be included outside src/exec/: the engine sees a chip endpoint
 * only through core/endpoint.h.
 */
#ifndef STRATA_EXEC_CHIP_ENDPOINT_H
#define STRATA_EXEC_CHIP_ENDPOINT_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "chip/run_lane.h"
#include "core/endpoint.h"
#include "strata/chip.h"

/* Tasks one chip can hold: two of the head run (the lane prepares one while
 * the other executes) and one staged task of the successor run. */
#define CHIP_EP_TASKS 3
#define CHIP_EP_STAGING 1 /* staged tasks it takes at once (st_endpoint.staging) */

typedef enum chip_task_state {
    CHIP_TASK_FREE = 0,
    CHIP_TASK_QUEUED,    /* dispatched, not yet in the lane */
    CHIP_TASK_SUBMITTED, /* in the lane */
} chip_task_state;

typedef struct chip_task {
    chip_task_state state;
    st_dispatch d;      /* copy; d.args and d.cfg stay valid until the completion */
    int activated;      /* its run is (or was) the head */
    int lane_activated; /* the lane was told (st_lane_activate, or submitted activated) */
    int waiting;        /* a thread is in the device wait for it */
    st_lane_run *run;   /* its lane run once SUBMITTED (set and cleared under mu) */
    st_completion comp; /* the engine holds it from completion until it dispatches anew */
} chip_task;

typedef struct chip_buffer_entry {
    strata_buffer *b;
    void *dev;
    size_t nbytes;
} chip_buffer_entry;

typedef struct chip_ep {
    st_endpoint base;
    strata_chip *chip;
    /* Two threads serve the endpoint, alike: at most one of them is in a
     * device wait at a time, so the other can submit (and prepare) the next
     * task the moment it arrives. */
    pthread_t thread; /* the endpoint thread; it starts and joins the second */
    int started;
    pthread_t waiter;   /* the second thread */
    int has_waiter;     /* 0: it could not be started; one thread does everything */
    int nthreads;       /* threads serving (mu) */
    int controlling;    /* a thread is in a control step: submit, activate, release (mu) */
    int in_device_wait; /* threads in a device wait (mu) */
    /* mu protects tasks[] (state, d, activated, lane_activated, waiting, run),
     * active_run, stopping, poison, the threads' roles and buffers. A leaf
     * lock: never held while calling the engine, the lane or the chip. */
    pthread_mutex_t mu;
    pthread_cond_t cv; /* both threads sleep here: new task, activation, submit, stop */
    chip_task tasks[CHIP_EP_TASKS];
    st_completion reject; /* for a dispatch that finds no free record */
    uint64_t active_run;  /* highest run id activated so far */
    int stopping;
    st_error poison;      /* set once (a stale identity at activation): every task fails with it */
    uint64_t native_runs; /* native run ids minted for the lane (endpoint thread only) */
    /* Per worker callable id: its program on this chip + 1, 0 until a task of
     * it first arrives here (endpoint thread only). An index from the
     * worker's registry into the chip's, not a third table of programs. */
    int32_t chip_program[ST_MAX_CALLABLES];
    chip_buffer_entry *buffers;
    uint32_t nbuffers, cap_buffers;
} chip_ep;

/* The operations of every chip endpoint: ep->ops == &st_chip_ep_ops marks one. */
extern const st_endpoint_ops st_chip_ep_ops;

/* What a test may see of one busy task record (st_chip_ep_tasks). */
typedef struct st_chip_ep_task_info {
    int state; /* chip_task_state */
    uint64_t run_id;
    uint32_t dispatch_id;
    int staged;    /* dispatched as staged (its run was not the head) */
    int activated; /* its run is the head now */
    int in_lane;   /* submitted to the lane */
    int launched;  /* its lane run crossed its launch fence */
    strata_chip_disposition disposition;
} st_chip_ep_task_info;

/* The busy task records of a chip endpoint, oldest dispatch first (at most
 * max); the count of busy records. For tests; takes mu, then the lane's. */
int st_chip_ep_tasks(st_endpoint *ep, st_chip_ep_task_info *out, int max);

/* The endpoint thread (arg: the chip_ep). strata_worker_add_chip starts it. */
void *st_chip_ep_main(void *arg);

#endif
