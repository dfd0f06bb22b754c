/* exec/process_endpoint.h - a child worker hosted in its own process: the
 * parent's endpoint over the child's mailbox, and the kinds of child.
 *
 * Owns: the interface between the one process endpoint (parent side,
 * process_endpoint.c), the one child serve loop (child side,
 * process_child.c) and the kinds of child (sub worker: sub_child.c; chip:
 * chip_child.c; child Worker: worker_child.c). Each kind is a table of
 * functions run in the child; the endpoint and the loop are the same for all.
 * Must never: let a kind touch the mailbox's state words itself except
 * through the calls below (one place moves them), or run a kind's child
 * functions in the parent.
 *
 * Life of a process child:
 *   parent: st_proc_ep_create (allocates, maps the mailbox; nothing forked:
 *           strata_worker_add_chip / _add_child do this, so the worker id is
 *           known at once), then at strata_worker_init, before any engine
 *           thread of the worker starts, st_proc_ep_spawn forks every process
 *           child (the child runs kind->init, then INIT_READY / INIT_FAILED,
 *           then the serve loop); callables registered before the fork are in
 *           the child's inherited snapshot, later ones are broadcast (REGISTER).
 *   parent: st_proc_ep_wait_ready (bounded: a child that fails init, exits
 *           or hangs gives an error naming it), then, once every process of
 *           the worker tree is forked, st_proc_ep_start_thread; then the
 *           engine owns it as an st_endpoint (dispatch, activate, stop, destroy).
 *   parent: control calls (st_proc_ep_control) from any thread but the
 *           endpoint's own, one at a time, their errors carried back.
 *   child:  exits when the sticky shutdown word is set, when its parent is
 *           gone (checked at least every 500 ms while parked), or when a kind
 *           says so; always through _exit.
 */
#ifndef STRATA_EXEC_PROCESS_ENDPOINT_H
#define STRATA_EXEC_PROCESS_ENDPOINT_H

#include <stddef.h>
#include <stdint.h>

#include "core/endpoint.h"
#include "ipc/child_process.h"
#include "ipc/mailbox.h"

typedef struct st_proc_ep st_proc_ep;

/* What a kind of child does, in the child process. `self` is the kind's own
 * state, created by init in the child. */
typedef struct st_proc_kind {
    const char *name; /* "sub", "chip", "worker": in messages */
    uint32_t frames;  /* task frames the child serves: 1, or 2 (a chip that stages) */
    /* In the child, before INIT_READY: bring up whatever the child hosts
     * (a chip, a whole Worker and its own children). arg is the pointer given
     * to st_proc_ep_create (inherited across fork). Non-zero fails init with
     * strata_error_message() as the INIT_FAILED text. */
    int (*init)(void *arg, void **self);
    /* A task frame i became TASK_READY or PREPARE_READY (its payload checked
     * by the loop: protocol, trailer, arguments decoded into *args, digest
     * resolved to the callable's description). The kind either finishes it
     * synchronously (st_proc_task_finish) or keeps it and finishes it later
     * from poll or its own thread. */
    void (*task)(void *self, st_mbox *m, uint32_t frame, const strata_task_args *args,
                 const st_callable_info *callable);
    /* A staged frame was activated (FRAME_STAGED -> ACTIVATE, or activated
     * before staging). May be NULL for kinds that never stage. */
    void (*activate)(void *self, st_mbox *m, uint32_t frame);
    /* Once per loop iteration, and when the kind rang the child bell itself
     * (st_proc_child_wake): finish what completed. May be NULL. */
    void (*poll)(void *self, st_mbox *m);
    /* A control call (command, arg0/arg1, payload) other than REGISTER /
     * UNREGISTER / PING, which the loop handles. Returns a status; writes
     * result / payload into the control frame. NULL: every such command is
     * refused with STRATA_EINVAL. */
    int (*control)(void *self, st_mbox_frame *ctl);
    /* A callable was registered (or dropped) in the child's table: a kind
     * with children of its own forwards it (a child Worker). May be NULL. */
    int (*registered)(void *self, const st_callable_info *callable);
    /* Shutdown: finish or fail every task the kind still holds (each frame
     * ends TASK_DONE or TASK_FAILED exactly once), then tear down. */
    void (*shutdown)(void *self, st_mbox *m);
    /* In the parent, when the endpoint is destroyed (its child reaped) or its
     * creation failed after st_proc_ep_create: free kind_arg. Never called in
     * a child. May be NULL (kind_arg not owned by the endpoint). */
    void (*release)(void *kind_arg);
} st_proc_kind;

/* ---- Child side (called by kinds from the child process) ---- */

/* Finish task frame `frame` with status (STRATA_OK or the failure) and a
 * message: writes status and text, then publishes TASK_DONE / TASK_FAILED
 * and rings the parent. */
void st_proc_task_finish(st_mbox *m, uint32_t frame, int status, const char *msg);
/* In a timed child (st_proc_child_timed): the child's clock around the body
 * of frame `frame`, written before st_proc_task_finish publishes it. */
void st_proc_task_times(st_mbox *m, uint32_t frame, uint64_t t_start, uint64_t t_end);
/* 1 if this child reports task times (its config's `timed`), else 0. */
int st_proc_child_timed(void);
/* Publish the disposition then FRAME_STAGED for a staged frame. */
void st_proc_task_staged(st_mbox *m, uint32_t frame, st_mbox_disposition disp);
/* Set the sticky acceptance word of a frame (the task crossed its launch
 * fence) and ring the parent. */
void st_proc_task_accepted(st_mbox *m, uint32_t frame);
/* Wake the child's own serve loop from another thread of the child. */
void st_proc_child_wake(st_mbox *m);
/* In kind->task: 1 if frame `frame` was handed over staged (PREPARE_READY:
 * stage it with st_proc_task_staged and wait for kind->activate), 0 if its
 * run is the head (run it). The loop decides once per dispatch, so a kind
 * never races the parent's activation by reading the state word itself. */
int st_proc_task_is_staged(st_mbox *m, uint32_t frame);
/* The child's serve loop (process_child.c): the entry of every process child
 * (the endpoint's st_child_entry). Returns the child's exit status. */
int st_proc_child_main(st_proc_ep *p);

/* In a child: unmap the mailbox of p, a sibling's endpoint inherited with the
 * fork (a wild write in one child must not reach another's frames). */
void st_proc_ep_unmap_sibling(st_proc_ep *p);

/* ---- Parent side ---- */

typedef struct st_proc_ep_config {
    const st_proc_kind *kind;
    void *kind_arg;              /* handed to kind->init in the child (inherited by fork) */
    int is_sub;                  /* 1: a sub worker endpoint; 0: next-level */
    int worker_id;               /* sub index or next-level worker id (-1: assigned later) */
    char label[64];              /* "sub 1", "chip sim:0", "L3 child 1" */
    uint32_t spin_ns;            /* spin before parking (both sides) */
    uint64_t startup_timeout_ns; /* bound on init (st_proc_ep_wait_ready) */
    int timed; /* the child reports its clock around each body (st_proc_task_times) */
} st_proc_ep_config;

/* Allocate p and map its mailbox (0600, unlinked at once). Nothing forked. */
int st_proc_ep_create(st_engine *e, const st_proc_ep_config *cfg, st_proc_ep **out);
/* Fork the child; returns at once (children initialise in parallel). */
int st_proc_ep_spawn(st_proc_ep *p);
/* Wait (bounded by deadline_ns) for INIT_READY; on INIT_FAILED, an early exit
 * or the deadline: an error naming the child, and the child is reaped. Starts
 * no thread (more processes of the tree may be forked after it). */
int st_proc_ep_wait_ready(st_proc_ep *p, uint64_t deadline_ns);
/* Start the endpoint's parent-side thread (the child is ready: after
 * st_proc_ep_wait_ready, once every process of the worker tree was forked).
 * Idempotent. On failure the child is reaped. */
int st_proc_ep_start_thread(st_proc_ep *p);
/* The st_endpoint of p (its ops are the process endpoint's). */
st_endpoint *st_proc_ep_endpoint(st_proc_ep *p);
/* p of an endpoint, or NULL if ep is not a process endpoint. */
st_proc_ep *st_proc_ep_of(st_endpoint *ep);
/* Stop and reap a child that never became an engine endpoint (failed startup). */
void st_proc_ep_abandon(st_proc_ep *p);
/* A control call: command, arguments, payload in / out (out may be NULL);
 * blocks the caller until CONTROL_DONE, the child's death or deadline_ns.
 * Returns the child's status with its message (prefixed with the label and
 * the command), or STRATA_EENDPOINT if the child died meanwhile. */
int st_proc_ep_control(st_proc_ep *p, st_mbox_command cmd, uint64_t arg0, uint64_t arg1,
                       const void *in, size_t in_bytes, void *out, size_t out_cap, uint64_t *result,
                       uint64_t deadline_ns);
/* The child (pid, liveness) of p. */
st_child *st_proc_ep_child(st_proc_ep *p);
/* The mailbox of p (the child's view is the same region). */
st_mbox *st_proc_ep_mbox(st_proc_ep *p);
/* Test seam: the parent-side thread's park timeout while tasks are in flight
 * (2 ms by default), read at each park. A test lengthens it so that only the
 * child's ring can wake the thread. */
void st_proc_ep_set_probe_ns(st_proc_ep *p, uint64_t ns);
/* The configuration p was created with (the child reads it after the fork). */
const st_proc_ep_config *st_proc_ep_config_of(const st_proc_ep *p);

/* Test seam: called by dispatch with the task frame filled, just before its
 * state is published (a test corrupts the frame there). NULL clears it. */
typedef void (*st_proc_frame_hook)(st_proc_ep *p, st_mbox_frame *f, void *ctx);
void st_proc_ep_set_frame_hook(st_proc_ep *p, st_proc_frame_hook fn, void *ctx);

#endif
