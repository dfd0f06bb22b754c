/* core/helping.h - waiting threads that run their run's sub tasks.
 *
 * Owns: the calls strata_run_wait uses to help, and the retirement bit of the
 * handshake (see helping.c).
 * Must never: be used for a bounded wait (a task may outlast the deadline).
 */
#ifndef STRATA_CORE_HELPING_H
#define STRATA_CORE_HELPING_H

#include <stdint.h>

#include "core/run.h"

/* Set in st_run.help_state when the run retires; the rest counts helpers. */
#define ST_HELP_RETIRED 0x80000000u

/* 1 if this thread may run sub tasks while it waits for r: the worker allows
 * it, and the thread is neither a sub worker nor running a lent task. */
int st_help_allowed_here(const st_run *r);

/* Wait while r's phase is `phase`: spin taking lendable sub tasks, then park.
 * Returns when the phase moved on (callers re-check). */
void st_wait_helping(st_run *r, uint32_t phase);

#endif
