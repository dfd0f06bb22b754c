/* core/dispatch.h - handing ready work to endpoints (dispatch.c).
 *
 * Owns: the dispatch step of the pass, and which sub worker the calling
 * thread hosts (set by st_endpoint_bind_thread, core/endpoint.h).
 * Must never: be called without the engine lock held (st_dispatch_ready).
 */
#ifndef STRATA_CORE_DISPATCH_H
#define STRATA_CORE_DISPATCH_H

#include "core/endpoint.h"
#include "strata/worker.h"

/* Dispatch the head run's ready tasks to endpoints with room, then stage
 * the successor's (core/endpoint.h, "Staging"). Lock held. */
void st_dispatch_ready(strata_worker *w);

/* The sub worker endpoint the calling thread hosts (st_endpoint_bind_thread), or NULL. */
st_endpoint *st_thread_sub_endpoint(void);

#endif
