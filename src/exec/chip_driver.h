/* exec/chip_driver.h - the one piece that drives a chip's lane for the tasks a
 * parent hands it: shared by the thread-hosted chip endpoint (chip_endpoint.c)
 * and the process-hosted chip (chip_child.c, in the chip's own process).
 *
 * Owns: the task records (FREE --dispatch--> QUEUED --submit--> SUBMITTED
 * --complete--> FREE), the two threads that serve them (control steps one at a
 * time: activation, then submits, head tasks before staged ones, releases;
 * at most one thread in a device wait), the leased submits under each task's
 * run lease with the native run ids the driver mints (the lane's only
 * admitter), the identity check at activation and the poison it sets, the
 * release of staged work at stop, the chip program of each callable
 * (registered on the chip the first time a task of it arrives), and the leaf
 * lock `mu` that protects all of it.
 * Must never: call its owner, the lane or the chip while holding `mu`, block
 * in dispatch / activate / stop (they run under the owner's locks: they only
 * record and signal), complete a task twice, or wait on a staged task before
 * its run was activated.
 *
 * An owner hands tasks over as st_dispatch records (d.ref, d.run_id, d.lease,
 * d.dispatch_id, d.staged, d.callable, d.args, d.cfg; args and cfg stay valid
 * until the task completes) and gets each result back exactly once through
 * its `complete` hook, called on a driver thread with no lock held, after the
 * record was freed. The hook gets the record's completion (ref, member,
 * status, msg) and the owner's tag for the task.
 */
#ifndef STRATA_EXEC_CHIP_DRIVER_H
#define STRATA_EXEC_CHIP_DRIVER_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "chip/run_lane.h"
#include "core/endpoint.h"
#include "strata/chip.h"
#include "util/error.h"
#include "util/futex.h"

/* Tasks one chip can hold: two of the head run (the lane prepares one while
 * the other executes) and one staged task of the successor run. */
#define CHIP_EP_TASKS 3
#define CHIP_EP_STAGING 1 /* staged tasks it takes at once (st_endpoint.staging) */

typedef enum chip_task_state {
    CHIP_TASK_FREE = 0,
    CHIP_TASK_QUEUED,    /* dispatched, not yet in the lane */
    CHIP_TASK_SUBMITTED, /* in the lane */
} chip_task_state;

typedef struct chip_task {
    chip_task_state state;
    st_dispatch d;      /* copy; d.args and d.cfg stay valid until the completion */
    uint64_t tag;       /* the owner's name for the task (a process chip: its frame) */
    int activated;      /* its run is (or was) the head */
    int lane_activated; /* the lane was told (st_lane_activate, or submitted activated) */
    int waiting;        /* a thread is in the device wait for it */
    st_lane_run *run;   /* its lane run once SUBMITTED (set and cleared under mu) */
    st_completion comp; /* filled before the record is freed; the owner's from then on */
} chip_task;

typedef struct st_chip_driver_hooks {
    void *owner;
    /* The task ended (c: its completion, status STRATA_OK, STRATA_ETASK,
     * STRATA_EENDPOINT or STRATA_ENOMEM); the record is free already, c is
     * held (st_completion_hold): no task takes the record until the owner
     * pushed c to the engine (and the engine handled it) or released it
     * (st_completion_release). */
    void (*complete)(void *owner, st_completion *c, uint64_t tag);
    /* A staged (unactivated) task went into the lane with disposition disp
     * (validated, or natively prepared already). May be NULL. */
    void (*staged)(void *owner, uint64_t tag, strata_chip_disposition disp);
    /* The task's lane run crossed its launch fence (seen when its device wait
     * returns, before complete; never before the real launch). May be NULL. */
    void (*launched)(void *owner, uint64_t tag);
    /* A timed task's native phases (as st_completion.native), before
     * complete, with its run and callable as dispatched. Called with the
     * driver's lock held (so the hook has one caller at a time, and the
     * record's next dispatch cannot race it): it must not block or call the
     * driver. May be NULL. */
    void (*phases)(void *owner, uint64_t run_id, uint32_t callable, const uint64_t native[5]);
} st_chip_driver_hooks;

typedef struct st_chip_driver {
    strata_chip *chip;  /* not owned */
    const char *label;  /* the owner's label, in messages (outlives the driver) */
    const void *serves; /* the worker its threads serve (util/thread_role.h), or NULL */
    st_chip_driver_hooks hooks;
    /* Two threads serve the tasks, alike: at most one of them is in a device
     * wait at a time, so the other can submit (and prepare) the next task the
     * moment it arrives. */
    pthread_t thread; /* the driver thread; it starts and joins the second */
    int started;
    pthread_t waiter;   /* the second thread */
    int has_waiter;     /* 0: it could not be started; one thread does everything */
    int nthreads;       /* threads serving (mu) */
    int controlling;    /* a thread is in a control step: submit, activate, release (mu) */
    int in_device_wait; /* threads in a device wait (mu) */
    int sleeping;       /* threads blocked on cv (mu) */
    /* Set by the owner before start: */
    int owner_serves; /* it calls st_chip_driver_serve_now after dispatch and activate */
    uint32_t spin_ns; /* a thread that completed a task watches `changes` this long
                         before it sleeps (0: it sleeps at once) */
    /* mu protects tasks[] (state, d, tag, activated, lane_activated, waiting,
     * run), active_run, stopping, poison and the threads' roles. A leaf lock:
     * never held while calling the owner, the lane or the chip. */
    pthread_mutex_t mu;
    /* Both threads sleep here. A thread is woken only when there is a step
     * for it (a task to submit, activate, release or wait for, or the exit):
     * by the owner's calls, and by a serving thread that takes a step while
     * another one is left (each serving thread re-decides after every step,
     * so a change it makes itself, in a hook included, wakes nobody). */
    pthread_cond_t cv;
    st_event changes; /* bumped by dispatch and activate (under mu): what a spinning
                         thread watches, with mu dropped */
    chip_task tasks[CHIP_EP_TASKS];
    uint64_t active_run; /* highest run id activated so far */
    int stopping;
    st_error poison;      /* set once (a stale identity at activation): every task fails with it */
    uint64_t native_runs; /* native run ids minted for the lane (driver threads only) */
    /* Per callable id: its program on this chip + 1, 0 until a task of it
     * first arrives here (driver threads only). An index from the owner's
     * registry into the chip's, not a third table of programs. */
    int32_t chip_program[ST_MAX_CALLABLES];
} st_chip_driver;

/* Set the driver up over chip (nothing started). */
void st_chip_driver_init(st_chip_driver *drv, strata_chip *chip, const char *label,
                         const void *serves, const st_chip_driver_hooks *hooks);
/* Start the driver's threads. STRATA_OK, or STRATA_ENOMEM (nothing started:
 * the driver then refuses every task as stopping). */
int st_chip_driver_start(st_chip_driver *drv);
/* Undo a start whose worker's init failed (no task was dispatched): stop and
 * join its threads if they run; a later start serves again (after a failed
 * start too). */
void st_chip_driver_unstart(st_chip_driver *drv);
/* Take a task (never blocks). record: the record to use (0..CHIP_EP_TASKS-1),
 * or -1 for any free one. STRATA_OK, or STRATA_EENDPOINT with why (cap bytes)
 * when the driver is stopping or poisoned or has no free record: the owner
 * then completes it itself, on *spare if not NULL (the completion of the free
 * record it would have used, held for the owner: no task takes that record
 * until the engine handled the rejection), else on one of its own. spare may
 * be NULL. */
int st_chip_driver_dispatch(st_chip_driver *drv, const st_dispatch *d, uint64_t tag, int record,
                            char *why, size_t cap, st_completion **spare);
/* Run run_id (and every earlier one) became the head: their tasks may launch. */
void st_chip_driver_activate(st_chip_driver *drv, uint64_t run_id);
/* For an owner that may block (no lock of its own held, not a hook): run the
 * submit or activation that is due, if no serving thread is in a control
 * step, on the calling thread, instead of waking a serving thread for it
 * (with owner_serves set, dispatch and activate leave that to this call).
 * A submit may prepare the task (the program's build). A serving thread is
 * woken for what is left (the device wait, a release). 1 if it ran a step. */
int st_chip_driver_serve_now(st_chip_driver *drv);
/* Poison the driver (first reason wins): every task it holds and every later
 * one fails with STRATA_EENDPOINT and this message. */
void st_chip_driver_poison(st_chip_driver *drv, const char *msg);
/* Refuse new tasks; staged ones never activated are released unlaunched,
 * the rest finish. Never blocks. */
void st_chip_driver_stop(st_chip_driver *drv);
/* After stop: join the threads (each task completed once by then), free the
 * lock. The chip is the owner's. */
void st_chip_driver_destroy(st_chip_driver *drv);

/* What a test may see of one busy task record (st_chip_driver_tasks). */
typedef struct st_chip_ep_task_info {
    int state; /* chip_task_state */
    uint64_t run_id;
    uint32_t dispatch_id;
    uint64_t tag;
    int staged;    /* dispatched as staged (its run was not the head) */
    int activated; /* its run is the head now */
    int in_lane;   /* submitted to the lane */
    int launched;  /* its lane run crossed its launch fence */
    strata_chip_disposition disposition;
} st_chip_ep_task_info;

/* The busy task records, oldest dispatch first (at most max); the count of
 * busy records. Takes mu, then the lane's. */
int st_chip_driver_tasks(st_chip_driver *drv, st_chip_ep_task_info *out, int max);

#endif
