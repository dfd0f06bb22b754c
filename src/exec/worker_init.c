/* exec/worker_init.c - strata_worker_init: a worker starts with the endpoints
 * that host its sub workers, and its process children are forked and ready.
 *
 * Owns: the choice of endpoint for sub workers by sub_mode (threads of this
 * process, or process children: exec/sub_child.c), and bringing up every
 * child in two phases over the whole tree, so that no process is forked
 * while a thread of the tree runs. Phase 1 (forks): the sub children forked
 * by their factory, each pending process next-level child (chips, child
 * Workers added before init), recursively each thread-hosted child Worker's
 * own phase 1 (ops->start_forks), then a bounded wait for every process this
 * worker forked, which starts no thread. Phase 2 (threads): each
 * thread-hosted child Worker's phase 2 (ops->start_threads), the parent-side
 * thread of every process endpoint, then, by core, the thread-hosted sub
 * workers and the scheduler. It lives in exec/ because it names concrete
 * endpoints, which the engine (core/) must not know.
 * Must never: start a thread in phase 1, or leave a child it started (a
 * process, a thread, a thread-hosted child Worker's subtree) running when
 * init fails.
 */
#include "core/endpoint.h"
#include "exec/process_endpoint.h"
#include "exec/sub_child.h"
#include "exec/thread_endpoint.h"
#include "exec/worker_init.h"
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
        if (ep && ep->ops->start_forks)
            return 1;
    }
    return 0;
}

/* Undo both phases for every next-level child: a thread-hosted child Worker's
 * subtree stopped and reaped (ops->unstart), every process child reaped; the
 * sub children go with their endpoints (core destroys them). */
static void undo_children(st_engine *e) {
    int n = strata_worker_next_level_count(e);
    for (int i = 0; i < n; i++) {
        st_endpoint *ep = st_worker_next_endpoint(e, i);
        if (ep && ep->ops->unstart)
            ep->ops->unstart(ep);
        st_proc_ep_abandon(st_proc_ep_of(ep));
    }
}

/* Phase 1: fork the pending next-level children, run each thread-hosted
 * child's own fork phase, then wait for every process child (one deadline). */
static int fork_children(st_engine *e, st_endpoint *const *subs, int nsubs,
                         const st_sub_port *port) {
    uint64_t deadline = st_deadline_after(port->startup_timeout_ns);
    int n = strata_worker_next_level_count(e);
    int rc = STRATA_OK;
    for (int i = 0; i < n && rc == STRATA_OK; i++) {
        st_proc_ep *p = st_proc_ep_of(st_worker_next_endpoint(e, i));
        if (p)
            rc = st_proc_ep_spawn(p);
    }
    for (int i = 0; i < n && rc == STRATA_OK; i++) {
        st_endpoint *ep = st_worker_next_endpoint(e, i);
        if (ep && ep->ops->start_forks)
            rc = ep->ops->start_forks(ep);
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
    if (rc != STRATA_OK)
        st_fail_prefix(rc, "strata_worker_init"); /* core undoes it (undo_children) */
    return rc;
}

/* Phase 2: the thread-hosted children's threads, then the parent-side
 * threads of the process endpoints (subs included). */
static int thread_children(st_engine *e, st_endpoint *const *subs, int nsubs,
                           const st_sub_port *port) {
    (void)port;
    int n = strata_worker_next_level_count(e);
    int rc = STRATA_OK;
    for (int i = 0; i < n && rc == STRATA_OK; i++) {
        st_endpoint *ep = st_worker_next_endpoint(e, i);
        if (ep && ep->ops->start_threads)
            rc = ep->ops->start_threads(ep);
    }
    for (int i = 0; i < nsubs && rc == STRATA_OK; i++) {
        st_proc_ep *p = st_proc_ep_of(subs[i]);
        if (p)
            rc = st_proc_ep_start_thread(p);
    }
    for (int i = 0; i < n && rc == STRATA_OK; i++) {
        st_proc_ep *p = st_proc_ep_of(st_worker_next_endpoint(e, i));
        if (p)
            rc = st_proc_ep_start_thread(p);
    }
    if (rc != STRATA_OK)
        st_fail_prefix(rc, "strata_worker_init");
    return rc;
}

static st_start_plan plan_of(strata_worker *w) {
    int process_subs = st_worker_sub_mode(w) == STRATA_HOST_PROCESS;
    return (st_start_plan){
        .create_sub = process_subs ? st_sub_child_create : st_thread_endpoint_create,
        .fork_children = fork_children,
        .thread_children = thread_children,
        .undo_children = undo_children,
        .subs_fork = process_subs,
        .shared_arena = process_subs || has_process_children(w) || has_started_children(w),
    };
}

int st_worker_init_forks(strata_worker *w) {
    const st_start_plan plan = plan_of(w);
    return st_worker_start_forks(w, &plan);
}

int st_worker_init_threads(strata_worker *w) {
    const st_start_plan plan = plan_of(w);
    return st_worker_start_threads(w, &plan);
}

void st_worker_init_undo(strata_worker *w) {
    const st_start_plan plan = plan_of(w);
    st_worker_start_undo(w, &plan);
}

int strata_worker_init(strata_worker *w) {
    if (!w)
        return st_fail(STRATA_EINVAL, "strata_worker_init: worker is NULL");
    int rc = st_worker_init_forks(w); /* the whole tree forked, no thread of it started */
    if (rc == STRATA_OK)
        rc = st_worker_init_threads(w);
    return rc;
}
