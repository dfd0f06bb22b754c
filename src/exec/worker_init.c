/* exec/worker_init.c - strata_worker_init: a worker starts with the endpoints
 * that host its sub workers, and its process children are forked and ready.
 *
 * Owns: the choice of endpoint for sub workers by sub_mode (threads of this
 * process, or process children: exec/sub_child.c), and bringing up every
 * child with every fork before the worker's first thread: the sub children
 * forked by their factory, then each pending process next-level child
 * (chips, child Workers added before init), a bounded wait for all of them,
 * then the thread-hosted next-level children that start at init (child
 * Workers: ops->start); thread-hosted sub workers are made last, by core. It lives
 * in exec/ because it names concrete endpoints, which the engine (core/) must
 * not know.
 * Must never: start an engine thread (core's st_worker_start does, after
 * this), or leave a child it started running when init fails.
 */
#include "core/endpoint.h"
#include "exec/process_endpoint.h"
#include "exec/sub_child.h"
#include "exec/thread_endpoint.h"
#include "util/clock.h"
#include "util/error.h"

static int has_process_children(strata_worker *w) {
    int n = strata_worker_next_level_count(w);
    for (int i = 0; i < n; i++)
        if (st_proc_ep_of(st_worker_next_endpoint(w, i)))
            return 1;
    return 0;
}

/* Next-level children that start at init (child Workers): the subtree below
 * them may hold processes, which must see this worker's buffers. */
static int has_started_children(strata_worker *w) {
    int n = strata_worker_next_level_count(w);
    for (int i = 0; i < n; i++) {
        st_endpoint *ep = st_worker_next_endpoint(w, i);
        if (ep && ep->ops->start)
            return 1;
    }
    return 0;
}

static void abandon_next_level(strata_worker *w) {
    int n = strata_worker_next_level_count(w);
    for (int i = 0; i < n; i++)
        st_proc_ep_abandon(st_proc_ep_of(st_worker_next_endpoint(w, i)));
}

/* Fork the pending next-level children, wait for every process child, then
 * start the thread-hosted children that start at init (after the forks: they
 * start threads). */
static int start_children(st_engine *e, st_endpoint *const *subs, int nsubs,
                          const st_sub_port *port) {
    uint64_t deadline = st_deadline_after(port->startup_timeout_ns);
    int n = strata_worker_next_level_count(e);
    int rc = STRATA_OK;
    for (int i = 0; i < n && rc == STRATA_OK; i++) {
        st_proc_ep *p = st_proc_ep_of(st_worker_next_endpoint(e, i));
        if (p)
            rc = st_proc_ep_spawn(p);
    }
    for (int i = 0; i < nsubs && rc == STRATA_OK; i++) {
        st_proc_ep *p = st_proc_ep_of(subs[i]);
        if (p)
            rc = st_proc_ep_wait_ready(p, deadline);
    }
    for (int i = 0; i < n && rc == STRATA_OK; i++) {
        st_proc_ep *p = st_proc_ep_of(st_worker_next_endpoint(e, i));
        if (p)
            rc = st_proc_ep_wait_ready(p, deadline);
    }
    for (int i = 0; i < n && rc == STRATA_OK; i++) { /* thread-hosted children that start now */
        st_endpoint *ep = st_worker_next_endpoint(e, i);
        if (ep && ep->ops->start)
            rc = ep->ops->start(ep);
    }
    if (rc != STRATA_OK) {
        st_fail_prefix(rc, "strata_worker_init");
        abandon_next_level(e); /* every one reaped; the sub children go with their endpoints */
    }
    return rc;
}

int strata_worker_init(strata_worker *w) {
    if (!w)
        return st_fail(STRATA_EINVAL, "strata_worker_init: worker is NULL");
    int process_subs = st_worker_sub_mode(w) == STRATA_HOST_PROCESS;
    const st_start_plan plan = {
        .create_sub = process_subs ? st_sub_child_create : st_thread_endpoint_create,
        .start_children = start_children,
        .subs_fork = process_subs,
        .shared_arena = process_subs || has_process_children(w) || has_started_children(w),
    };
    return st_worker_start(w, &plan);
}
