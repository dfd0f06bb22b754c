/* exec/sub_child.c - the sub kind of process child: host functions run in a
 * forked process.
 *
 * Owns: what a sub child does with a task frame (run the function on the
 * decoded arguments, finish the frame with the result) and the factory of
 * process-hosted sub workers.
 * Must never: touch the mailbox's state words itself (process_child.c's calls
 * do), or keep a task past its finish.
 */
#include <stdio.h>

#include "exec/sub_child.h"
#include "exec/thread_endpoint.h"
#include "util/alloc.h"
#include "util/error.h"

typedef struct sub_self {
    uint32_t worker; /* the sub's index: the worker index its bodies read */
    const strata_task_args *args[ST_MBOX_TASK_FRAMES];
    const st_callable_info *callable[ST_MBOX_TASK_FRAMES];
} sub_self;

static int sub_init(void *arg, void **self) {
    sub_self *s = st_calloc(1, sizeof *s);
    if (!s)
        return st_fail_nomem("sub child: its state", sizeof *s);
    s->worker = (uint32_t)(uintptr_t)arg;
    *self = s;
    return STRATA_OK;
}

static void sub_run(sub_self *s, st_mbox *m, uint32_t frame) {
    static const strata_call_config no_cfg;
    st_dispatch d = {
        .callable = s->callable[frame],
        .args = s->args[frame],
        .cfg = &no_cfg,
        .caller_cpu = -1,
        .timed = (uint8_t)st_proc_child_timed(),
    };
    st_completion c;
    st_run_host_callable(&d, s->worker, &c);
    if (d.timed)
        st_proc_task_times(m, frame, c.t_start, c.t_end);
    st_proc_task_finish(m, frame, c.status, c.msg);
}

static void sub_task(void *self, st_mbox *m, uint32_t frame, const strata_task_args *args,
                     const st_callable_info *callable) {
    sub_self *s = self;
    s->args[frame] = args;
    s->callable[frame] = callable;
    if (st_proc_task_is_staged(m, frame)) { /* nothing to prepare: runs when activated */
        st_proc_task_staged(m, frame, ST_MBOX_DISP_VALIDATED_ONLY);
        return;
    }
    sub_run(s, m, frame);
}

static void sub_activate(void *self, st_mbox *m, uint32_t frame) {
    sub_run(self, m, frame);
}

static void sub_shutdown(void *self, st_mbox *m) {
    (void)m; /* every task finished synchronously: nothing held */
    st_free(self);
}

const st_proc_kind st_sub_kind = {
    .name = "sub",
    .frames = 1,
    .init = sub_init,
    .task = sub_task,
    .activate = sub_activate,
    .poll = NULL,
    .control = NULL,
    .registered = NULL,
    .shutdown = sub_shutdown,
};

int st_sub_child_create(strata_worker *w, int index, const st_sub_port *port, st_endpoint **out) {
    st_proc_ep_config cfg = {
        .kind = &st_sub_kind,
        .kind_arg = (void *)(uintptr_t)index, /* the sub's index, read in the child */
        .is_sub = 1,
        .worker_id = index,
        .spin_ns = port->spin_ns,
        .startup_timeout_ns = port->startup_timeout_ns,
        .timed = port->timed,
    };
    snprintf(cfg.label, sizeof cfg.label, "sub %d", index);
    st_proc_ep *p;
    int rc = st_proc_ep_create(w, &cfg, &p);
    if (rc != STRATA_OK)
        return st_fail_prefix(rc, "strata_worker_init");
    rc = st_proc_ep_spawn(p);
    if (rc != STRATA_OK) {
        st_endpoint *ep = st_proc_ep_endpoint(p);
        ep->ops->destroy(ep);
        return st_fail_prefix(rc, "strata_worker_init");
    }
    *out = st_proc_ep_endpoint(p);
    return STRATA_OK;
}
