/* core/worker.h - what the worker (worker.c) lends the other core modules.
 *
 * Owns: the label of a task in messages, from the callable registry.
 * Must never: be included by endpoints (src/exec/): they see the worker only
 * through core/endpoint.h.
 */
#ifndef STRATA_CORE_WORKER_H
#define STRATA_CORE_WORKER_H

#include <stddef.h>

#include "core/slot.h"
#include "strata/worker.h"

/* Format the task part of a message: "task 'scale' #12". */
void st_task_label(strata_worker *w, st_slot *s, char *buf, size_t n);

#endif
