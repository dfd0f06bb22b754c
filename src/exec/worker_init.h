/* exec/worker_init.h - strata_worker_init in its two phases, for a parent
 * that brings up a child Worker hosted in its own process as part of its own
 * init (exec/worker_child.c's thread-hosted endpoint).
 *
 * Owns: the declarations of the phases worker_init.c runs for every worker.
 * Must never: be included outside src/exec/, or be used to start threads of a
 * tree before every process of that tree was forked.
 */
#ifndef STRATA_EXEC_WORKER_INIT_H
#define STRATA_EXEC_WORKER_INIT_H

#include "strata/worker.h"

/* Phase 1 of w's init: fork every process of w's subtree (its process subs
 * and next-level children, then recursively each thread-hosted child
 * Worker's own phase 1) and wait, bounded by w's startup_timeout_ns, until
 * every process it forked is ready. Starts no thread. On failure everything
 * is undone and w is as created. */
int st_worker_init_forks(strata_worker *w);
/* Phase 2: start every thread of w's subtree; w is RUNNING. On failure
 * everything, phase 1 included, is undone and w stays CREATED. */
int st_worker_init_threads(strata_worker *w);
/* Undo phase 1 of a CREATED worker (its parent's init failed after it). */
void st_worker_init_undo(strata_worker *w);

#endif
