/* exec/worker_child.h - the pieces of a child Worker both hostings share.
 *
 * Owns: the declarations worker_child.c lends its two hostings (the thread
 * endpoint and the process kind): bringing a child Worker up from its config
 * and running one task as one run of it.
 * Must never: be included outside src/exec/.
 */
#ifndef STRATA_EXEC_WORKER_CHILD_H
#define STRATA_EXEC_WORKER_CHILD_H

#include <stddef.h>

#include "core/endpoint.h"
#include "strata/worker.h"

/* Create the inner worker, run cfg->setup on it, and init it if `init`.
 * `label` names the child in messages. STRATA_OK and *out, or the failure
 * (nothing left). */
int st_worker_child_bring_up(const strata_child_config *cfg, const char *label, int init,
                             strata_worker **out);

/* Run the orchestration callable ci with args as one run of inner and wait
 * for it. STRATA_OK, STRATA_ETASK (the run failed: msg is the run's error, its
 * path below included), STRATA_EENDPOINT (inner refused the run) or
 * STRATA_ENOMEM; msg (cap bytes) is "" on success. */
int st_worker_child_run(strata_worker *inner, const char *label, const st_callable_info *ci,
                        const strata_task_args *args, char *msg, size_t cap);

/* strata_worker_add_child for STRATA_HOST_PROCESS. */
int st_worker_child_add_process(strata_worker *parent, const strata_child_config *cfg,
                                int *worker_id);

#endif
