/* exec/chip_endpoint.c - a chip as a thread-hosted next-level child of an L3
 * worker: the endpoint over an in-process chip's driver.
 *
 * Owns: the endpoint's operations (dispatch, activate, stop, destroy, and the
 * driver's start in the worker's phase 2: start_threads, unstart) on top
 * of exec/chip_driver (which drives the lane: task records, threads, leased
 * submits, activation, releases), the completion of a task the driver
 * refuses, and handing the driver's completions to the engine.
 * Must never: block in dispatch or activate (they run under the engine lock:
 * the driver only records and signals), or complete a dispatch twice.
 */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "core/buffer.h"
#include "core/endpoint.h"
#include "exec/chip_driver.h"
#include "exec/chip_endpoint.h"
#include "strata/chip.h"
#include "util/alloc.h"
#include "util/error.h"

/* The driver's completion goes to the engine as it is (the record stays the
 * engine's until it dispatches anew). */
static void chip_ep_completed(void *owner, st_completion *c, uint64_t tag) {
    (void)tag;
    chip_ep *ep = owner;
    st_endpoint_complete(&ep->base, c);
}

void st_chip_ep_setup(chip_ep *ep) {
    const st_chip_driver_hooks hooks = {.owner = ep, .complete = chip_ep_completed, .staged = NULL};
    st_chip_driver_init(&ep->drv, ep->chip, ep->base.label, ep->base.engine, &hooks);
}

int st_chip_ep_tasks(st_endpoint *base, st_chip_ep_task_info *out, int max) {
    return st_chip_driver_tasks(&((chip_ep *)base)->drv, out, max);
}

/* ---- Endpoint operations (engine lock held: record and signal only) -------------------- */

static void chip_ep_dispatch(st_endpoint *base, const st_dispatch *d) {
    chip_ep *ep = (chip_ep *)base;
    char why[STRATA_ERRMSG_MAX];
    st_completion *spare = NULL;
    if (st_chip_driver_dispatch(&ep->drv, d, 0, -1, why, sizeof why, &spare) != STRATA_OK)
        st_endpoint_complete_with(base, spare ? spare : &ep->reject, d, STRATA_EENDPOINT, "%s",
                                  why);
}

static void chip_ep_activate(st_endpoint *base, uint64_t run_id) {
    st_chip_driver_activate(&((chip_ep *)base)->drv, run_id);
}

static void chip_ep_stop(st_endpoint *base) {
    st_chip_driver_stop(&((chip_ep *)base)->drv);
}

/* Phase 2 of the worker's init (every process of its tree is forked): the
 * driver's threads start here, never when the chip is added. */
static int chip_ep_start_threads(st_endpoint *base) {
    chip_ep *ep = (chip_ep *)base;
    if (ep->drv.started)
        return STRATA_OK;
    return st_chip_driver_start(&ep->drv);
}

static void chip_ep_unstart(st_endpoint *base) {
    st_chip_driver_unstart(&((chip_ep *)base)->drv);
}

static void chip_ep_destroy(st_endpoint *base) {
    chip_ep *ep = (chip_ep *)base;
    st_chip_driver_destroy(&ep->drv); /* joins its threads */
    strata_chip_destroy(ep->chip);    /* finishes the lane; frees the device memory left */
    for (size_t i = 0; i < ep->bufs.n; i++)
        st_buffer_destroy_device(ep->bufs.v[i].b);
    st_free(ep->bufs.v);
    pthread_mutex_destroy(&ep->bufs.mu);
    st_free(ep);
}

const st_endpoint_ops st_chip_ep_ops = {
    .dispatch = chip_ep_dispatch,
    .progress = NULL,
    .activate = chip_ep_activate,
    .stop = chip_ep_stop,
    .destroy = chip_ep_destroy,
    .start_threads = chip_ep_start_threads,
    .unstart = chip_ep_unstart,
};
