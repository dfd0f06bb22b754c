/* exec/chip_endpoint.h - the chip endpoint's record, shared by the endpoint
 * (chip_endpoint.c) and the worker-level chip calls (worker_chip.c).
 *
 * Owns: the endpoint record of a thread-hosted chip in an L3 worker (its
 * chip, the driver that runs its lane for the engine's tasks, its chip
 * buffers), the endpoint's operations table (which also tells a chip endpoint
 * from any other), and the chip buffer list both hostings keep in the parent
 * (st_chip_buffers).
 * Must never: be included outside src/exec/: the engine sees a chip endpoint
 * only through core/endpoint.h.
 */
#ifndef STRATA_EXEC_CHIP_ENDPOINT_H
#define STRATA_EXEC_CHIP_ENDPOINT_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "core/endpoint.h"
#include "exec/chip_driver.h"
#include "strata/chip.h"

typedef struct chip_buffer_entry {
    strata_buffer *b;
    void *dev; /* the device address (in the chip's own process for a process chip) */
    size_t nbytes;
} chip_buffer_entry;

/* The chip buffers of one chip of a worker (strata_worker_chip_malloc). `mu`
 * protects the list; a leaf lock, never held while calling the chip, its
 * process or the engine. */
typedef struct st_chip_buffers {
    pthread_mutex_t mu;
    chip_buffer_entry *v;
    uint32_t n, cap;
} st_chip_buffers;

typedef struct chip_ep {
    st_endpoint base;
    strata_chip *chip;
    st_chip_driver drv;   /* its task records, threads and lock (exec/chip_driver.h) */
    st_completion reject; /* for a dispatch the driver refuses */
    st_chip_buffers bufs;
} chip_ep;

/* The operations of every chip endpoint: ep->ops == &st_chip_ep_ops marks one. */
extern const st_endpoint_ops st_chip_ep_ops;

/* Set ep up over its opened chip (driver not started). */
void st_chip_ep_setup(chip_ep *ep);

/* The busy task records of a chip endpoint, oldest dispatch first (at most
 * max); the count of busy records. For tests. */
int st_chip_ep_tasks(st_endpoint *ep, st_chip_ep_task_info *out, int max);

#endif
