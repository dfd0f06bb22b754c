/* tests/support/test_endpoint.h - a scriptable in-process next-level endpoint
 * for tests: it plugs into the engine's endpoint interface like a chip does.
 *
 * Owns: one worker thread that executes dispatched tasks with scripted
 * delays, failures and (in manual mode) a completion order chosen by the test.
 * Must never: be built into the library (it is compiled into the tests only)
 * or used as a production endpoint; it logs every dispatch.
 */
#ifndef STRATA_TEST_ENDPOINT_H
#define STRATA_TEST_ENDPOINT_H

#include <stdint.h>

#include "core/endpoint.h"

typedef struct st_test_ep st_test_ep;

typedef struct st_test_ep_config {
    uint64_t delay_ns; /* sleep before completing each task */
    int manual;        /* hold each task until st_test_ep_finish() completes it */
    uint32_t fail_nth; /* fail the n-th dispatch (1-based, 0 = never) */
    int fail_status;   /* STRATA_ETASK (default) or STRATA_EENDPOINT */
} st_test_ep_config;

/* One entry per dispatch, in dispatch order. */
typedef struct st_test_ep_record {
    uint64_t run_id;
    st_lease lease; /* the dispatch's lease (its run's) */
    uint64_t ref;
    uint32_t member;
    uint32_t dispatch_id;
    uint64_t scalar0; /* first scalar argument, 0 if none (lets tests name tasks) */
} st_test_ep_record;

/* Add a test endpoint to w (before strata_worker_init); returns its worker id. */
int st_test_ep_add(strata_worker *w, const st_test_ep_config *cfg, int *worker_id,
                   st_test_ep **out);

/* Dispatch log. */
uint32_t st_test_ep_count(st_test_ep *ep);
st_test_ep_record st_test_ep_record_at(st_test_ep *ep, uint32_t i);
/* Activations seen (run ids in order). */
uint32_t st_test_ep_activations(st_test_ep *ep, uint64_t *ids, uint32_t max);

/* Manual mode: wait until a task is held (up to timeout_ns), then complete it
 * with status/msg. Returns 0, or -1 if no task arrived in time. */
int st_test_ep_finish(st_test_ep *ep, int status, const char *msg, uint64_t timeout_ns);
/* Manual mode: 1 if a task is currently held. */
int st_test_ep_holding(st_test_ep *ep);

#endif
