/* exec/chip_child.h - a chip hosted in its own process: the "chip" kind of
 * process child, and what the parent keeps of it.
 *
 * Owns: the parent's record of a process chip (its config with the strings
 * and knobs copied, its label, its chip buffers), the calls that add one and
 * reach its device memory through control calls, and the kind.
 * Must never: be included outside src/exec/.
 */
#ifndef STRATA_EXEC_CHIP_CHILD_H
#define STRATA_EXEC_CHIP_CHILD_H

#include <stddef.h>
#include <stdint.h>

#include "exec/chip_endpoint.h"
#include "exec/process_endpoint.h"
#include "strata/chip.h"
#include "strata/sim.h"

/* The kind_arg of a process chip: made by the parent at add time, inherited
 * by the child at its fork (which opens the chip from cfg), freed by the
 * parent's endpoint when it is destroyed (the kind's release). */
typedef struct st_chip_child_arg {
    strata_chip_config cfg; /* backend, kernel_module and sim point into this record */
    char backend[256];
    char kernel_module[256];
    strata_sim_injection sim;
    char label[48];         /* the chip's label, e.g. "chip sim:0" */
    st_chip_buffers bufs;   /* parent only: the chip buffers allocated through the worker */
    st_trace_region *trace; /* the parent's region for its native phases, or NULL */
    int worker_id;          /* its next-level id in the parent */
} st_chip_child_arg;

extern const st_proc_kind st_chip_child_kind;

/* strata_worker_add_chip for cfg->host == STRATA_HOST_PROCESS. */
int st_chip_child_add(strata_worker *w, const strata_chip_config *cfg, int *worker_id);

/* The record of a process chip endpoint, or NULL if ep is none. */
st_chip_child_arg *st_chip_child_of(st_endpoint *ep);

/* Device memory of a process chip, through control calls (errors carried back
 * from the chip's process, prefixed with the endpoint's label). Copies of more
 * than a frame go in chunks. */
int st_chip_child_malloc(st_endpoint *ep, size_t nbytes, void **dev);
int st_chip_child_free(st_endpoint *ep, void *dev);
int st_chip_child_copy_to(st_endpoint *ep, void *dev_dst, const void *src, size_t n);
int st_chip_child_copy_from(st_endpoint *ep, void *dst, const void *dev_src, size_t n);

#endif
