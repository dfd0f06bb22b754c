/* exec/thread_endpoint.h - sub workers hosted as threads of this process.
 *
 * Owns: the creation call of thread-hosted sub workers and the per-thread
 * task error message behind strata_task_set_error().
 * Must never: be used for work that must survive a crash of the task (use a
 * process-hosted worker for that).
 */
#ifndef STRATA_EXEC_THREAD_ENDPOINT_H
#define STRATA_EXEC_THREAD_ENDPOINT_H

#include "core/endpoint.h"

/* Start sub worker `index` of w as a thread of this process (an
 * st_sub_endpoint_create_fn: exec/worker_init.c hands it to the engine). */
int st_thread_endpoint_create(strata_worker *w, int index, const st_sub_port *port,
                              st_endpoint **out);

/* Run a callable body on the current thread and fill c (status + message);
 * the body reads `worker` as its worker index (strata_task_view.worker).
 * Shared by every endpoint that executes host functions. */
void st_run_host_callable(const st_dispatch *d, uint32_t worker, st_completion *c);

#endif
