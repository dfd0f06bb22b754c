/* exec/sub_child.h - sub workers hosted as process children.
 *
 * Owns: the sub kind of process child (a task frame runs a host function)
 * and the factory strata_worker_init uses for STRATA_HOST_PROCESS.
 * Must never: be chosen by anything but sub_mode (exec/worker_init.c).
 */
#ifndef STRATA_EXEC_SUB_CHILD_H
#define STRATA_EXEC_SUB_CHILD_H

#include "exec/process_endpoint.h"

/* The sub kind: one task frame; a task runs the callable's host function in
 * the child and finishes with its status and strata_task_set_error text. A
 * next-level process endpoint may use it too (test next-level callables). */
extern const st_proc_kind st_sub_kind;

/* Create sub worker `index` of w as a process child and fork it (an
 * st_sub_endpoint_create_fn); readiness is awaited by the caller. */
int st_sub_child_create(strata_worker *w, int index, const st_sub_port *port, st_endpoint **out);

#endif
