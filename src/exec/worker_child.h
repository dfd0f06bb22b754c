/* exec/worker_child.h - the pieces of a child Worker both hostings share.
 *
 * Owns: the declarations worker_child.c lends its two hostings (the thread
 * endpoint and the process kind): bringing a child Worker up from its config
 * and running one task as one run of it.
 * Must never: be included outside src/exec/ and src/mpi/ (the MPI-hosted child,
 * the layer above, brings its Worker up and runs its tasks the same way).
 */
#ifndef STRATA_EXEC_WORKER_CHILD_H
#define STRATA_EXEC_WORKER_CHILD_H

#include <stddef.h>

#include "core/endpoint.h"
#include "strata/worker.h"

/* Create the inner worker, run cfg->setup on it, and init it if `init`.
 * `label` names the child in messages. A traced parent's region `trace`
 * (NULL: none) takes the inner worker's events from before its setup, so the
 * process chips setup adds get regions of their own (drained into it, core/
 * trace_child.c). STRATA_OK and *out, or the failure (nothing left). */
int st_worker_child_bring_up(const strata_child_config *cfg, const char *label, int init,
                             st_trace_region *trace, strata_worker **out);

/* Run the orchestration callable ci with args as one run of inner and wait
 * for it. STRATA_OK, STRATA_ETASK (the run failed: msg is the run's error, its
 * path below included), STRATA_EENDPOINT (inner refused the run) or
 * STRATA_ENOMEM; msg (cap bytes) is "" on success. */
int st_worker_child_run(strata_worker *inner, const char *label, const st_callable_info *ci,
                        const strata_task_args *args, char *msg, size_t cap);

/* st_worker_child_run in two steps for a caller that must not block while
 * the run goes on (an MPI rank's serve loop): start submits the run (its
 * graph built when it returns; *run set on STRATA_OK, else msg says why and
 * the status is as st_worker_child_run's); finish, once strata_run_done(run),
 * releases it and returns its outcome as st_worker_child_run does. */
int st_worker_child_start(strata_worker *inner, const char *label, const st_callable_info *ci,
                          const strata_task_args *args, strata_run **run, char *msg, size_t cap);
int st_worker_child_finish(strata_run *run, char *msg, size_t cap);

/* The child's name in labels: cfg->name, else "L<level> child <worker_id>". */
void st_worker_child_name(char *out, size_t cap, const strata_child_config *cfg, int worker_id);

/* strata_worker_add_child for STRATA_HOST_THREAD. */
int st_worker_child_add_thread(strata_worker *parent, const strata_child_config *cfg,
                               int *worker_id);

/* strata_worker_add_child for STRATA_HOST_PROCESS. */
int st_worker_child_add_process(strata_worker *parent, const strata_child_config *cfg,
                                int *worker_id);

#endif
