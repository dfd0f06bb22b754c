/* exec/chip_endpoint.h - the chip endpoint's record, shared by the endpoint
 * (chip_endpoint.c) and the worker-level chip calls (worker_chip.c).
 *
 * Owns: the endpoint record of a chip in an L3 worker (its task records,
 * the chip program of each worker callable used on it, chip buffers and the
 * leaf lock `mu`), the
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

#define CHIP_EP_TASKS 2 /* tasks one chip can hold: a running one and a staged one */

typedef enum chip_task_state {
    CHIP_TASK_FREE = 0,
    CHIP_TASK_QUEUED,    /* dispatched, not yet in the lane */
    CHIP_TASK_SUBMITTED, /* in the lane */
} chip_task_state;

typedef struct chip_task {
    chip_task_state state;
    st_dispatch d; /* copy; d.args and d.cfg stay valid until the completion */
    int activated; /* its run is (or was) the head */
    int lane_activated;
    st_lane_run *run;
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
    pthread_t thread;
    int started;
    /* mu protects tasks[].state/activated, active_run, stopping and buffers.
     * A leaf lock: never held while calling the engine, the lane or the chip. */
    pthread_mutex_t mu;
    pthread_cond_t cv; /* the thread sleeps here: new task, activation, stop */
    chip_task tasks[CHIP_EP_TASKS];
    st_completion reject; /* for a dispatch that finds no free record */
    uint64_t active_run;  /* highest run id activated so far */
    int stopping;
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

/* The endpoint thread (arg: the chip_ep). strata_worker_add_chip starts it. */
void *st_chip_ep_main(void *arg);

#endif
