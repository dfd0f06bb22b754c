/* exec/worker_init.c - strata_worker_init: a worker starts with the endpoints
 * that host its sub workers.
 *
 * Owns: the choice of endpoint for sub workers (threads of this process; the
 * process mailbox of DESIGN §6 is to be chosen here by sub_mode). It lives in
 * exec/ because it names a concrete endpoint, which the engine (core/) must
 * not know.
 * Must never: start or stop anything itself: core's st_worker_start creates
 * the sub workers through the factory it is given, in its own order.
 */
#include "core/endpoint.h"
#include "exec/thread_endpoint.h"

int strata_worker_init(strata_worker *w) {
    return st_worker_start(w, st_thread_endpoint_create);
}
