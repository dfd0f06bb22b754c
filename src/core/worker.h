/* core/worker.h - what the worker (worker.c) lends the other core modules.
 *
 * Owns: the label of a task in messages, from the callable registry, and the
 * thread marks that refuse a wait which could never end: the orchestration
 * function running on this thread, a task body of the worker running on it.
 * Must never: be included by endpoints (src/exec/): they see the worker only
 * through core/endpoint.h.
 */
#ifndef STRATA_CORE_WORKER_H
#define STRATA_CORE_WORKER_H

#include <stddef.h>

#include "core/slot.h"
#include "strata/worker.h"
#include "util/thread_role.h"

/* The worker whose orchestration function runs on this thread, or NULL. */
strata_worker *st_thread_orchestrating(void);

/* A task body (or chip program) of w runs on this thread: waiting for w here
 * would wait for the task itself (util/thread_role.h). */
static inline int st_in_task_of(const strata_worker *w) {
    return st_thread_served() == (const void *)w;
}

/* Refuse `what`, called from a task body of the worker it would wait for. */
int st_refuse_in_task(const char *what, const char *why);

/* Format the task part of a message: "task 'scale' #12". */
void st_task_label(strata_worker *w, st_slot *s, char *buf, size_t n);

#endif
