/* exec/chip_endpoint.c - a chip as a thread-hosted next-level child of an L3
 * worker: the endpoint that drives an in-process chip through its lane.
 *
 * Owns: one endpoint thread per chip, the endpoint's two task records, the
 * native run ids it gives the lane (it is the lane's only admitter; each
 * task goes in under its run's lease, as dispatched), the chip program of
 * each worker callable (registered on the chip the first time a task of it
 * arrives), and the endpoint's operations (dispatch, activate, stop,
 * destroy).
 * Must never: block in dispatch or activate (they run under the engine lock:
 * they only record and signal), call the engine or the lane while holding
 * its own mutex, or complete a dispatch twice.
 *
 * Flow: dispatch records the task and wakes the thread; the thread submits
 * it to the lane (a leased submit, activated if its run is the head), waits
 * for it in the device (no polling), and completes it through
 * st_endpoint_complete(). Failures of the run come back as the task's error
 * (STRATA_ETASK); a chip that cannot take the task (poisoned, closed,
 * stopping) completes it as STRATA_EENDPOINT.
 */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "chip/chip_internal.h"
#include "chip/chip_worker.h"
#include "chip/run_lane.h"
#include "core/buffer.h"
#include "core/endpoint.h"
#include "exec/chip_endpoint.h"
#include "strata/chip.h"
#include "util/alloc.h"
#include "util/error.h"
#include "util/message.h"
#include "util/state_machine.h"
#include "util/thread_role.h"

/* ---- Programs --------------------------------------------------------------------- */

static strata_program_fn program_fn_of(const st_callable_info *ci) {
    strata_program_fn fn = NULL;
    _Static_assert(sizeof fn == sizeof ci->program, "a program function fits a pointer");
    memcpy(&fn, &ci->program, sizeof fn);
    return fn;
}

/* The chip's program for a worker callable: registered on this chip the
 * first time a task of it arrives, then found by the callable's id. */
static int program_for(chip_ep *ep, const st_callable_info *ci, strata_chip_program *out) {
    int32_t known = ep->chip_program[ci->id];
    if (known) {
        *out = known - 1;
        return STRATA_OK;
    }
    if (ci->kind != ST_CALLABLE_NEXT || !ci->program)
        return st_fail(STRATA_EINVAL,
                       "%s: '%s' is not a chip program (register it with "
                       "strata_worker_register_chip_program)",
                       ep->base.label, ci->name);
    strata_chip_program_desc desc = {.name = ci->name, .fn = program_fn_of(ci), .user = ci->user};
    STRATA_TRY(strata_chip_register_program(ep->chip, &desc, out));
    ep->chip_program[ci->id] = *out + 1;
    return STRATA_OK;
}

/* ---- The endpoint thread ------------------------------------------------------------- */

static void fill_completion(chip_task *t, int status, const char *msg) {
    t->comp.ref = t->d.ref;
    t->comp.member = t->d.member;
    t->comp.status = status;
    st_msg_format(t->comp.msg, sizeof t->comp.msg, "%s", status == STRATA_OK ? "" : msg);
}

/* Hand t's completion to the engine and free the record (mu not held). */
/* A task record's life (util/state_machine.h), moved under `mu`. */
typedef enum chip_task_transition {
    CHIP_T_DISPATCH, /* FREE -> QUEUED: the engine handed it over */
    CHIP_T_SUBMIT,   /* QUEUED -> SUBMITTED: the endpoint thread put it in the lane */
    CHIP_T_COMPLETE, /* QUEUED | SUBMITTED -> FREE: its completion went to the engine */
    CHIP_T_COUNT
} chip_task_transition;

static const char *const chip_task_state_names[] = {"FREE", "QUEUED", "SUBMITTED"};
static const st_sm_rule chip_task_rules[CHIP_T_COUNT] = {
    [CHIP_T_DISPATCH] = {ST_SM_BIT(CHIP_TASK_FREE), CHIP_TASK_QUEUED, "dispatch"},
    [CHIP_T_SUBMIT] = {ST_SM_BIT(CHIP_TASK_QUEUED), CHIP_TASK_SUBMITTED, "submit"},
    [CHIP_T_COMPLETE] = {ST_SM_BIT(CHIP_TASK_QUEUED) | ST_SM_BIT(CHIP_TASK_SUBMITTED),
                         CHIP_TASK_FREE, "complete"},
};
static const st_sm chip_task_machine = {"chip endpoint task", chip_task_state_names, 3,
                                        chip_task_rules, CHIP_T_COUNT};

static void chip_task_move(chip_task *t, chip_task_transition tr) {
    t->state = (chip_task_state)st_sm_next(&chip_task_machine, (uint32_t)t->state, tr, "record");
}

static void complete_task(chip_ep *ep, chip_task *t) {
    if (t->run) {
        st_lane_run_release(t->run);
        t->run = NULL;
    }
    pthread_mutex_lock(&ep->mu);
    chip_task_move(t, CHIP_T_COMPLETE);
    pthread_mutex_unlock(&ep->mu);
    st_endpoint_complete(&ep->base, &t->comp);
}

/* The lane has room for one more task: it holds one native run per storage
 * slot of the chip. mu held. */
static int lane_has_room(chip_ep *ep) {
    uint32_t submitted = 0;
    for (int i = 0; i < CHIP_EP_TASKS; i++)
        submitted += ep->tasks[i].state == CHIP_TASK_SUBMITTED;
    return submitted < st_chip_worker_depth(st_chip_worker_of(ep->chip));
}

/* Put t into the lane. On failure t is completed as an endpoint failure. */
static void submit_task(chip_ep *ep, chip_task *t, int activated) {
    strata_chip_program prog;
    uint32_t backend_id = 0;
    char name[STRATA_PROGRAM_NAME_MAX];
    int rc = program_for(ep, t->d.callable, &prog);
    if (rc == STRATA_OK)
        rc = st_chip_program_info(ep->chip, prog, &backend_id, name, sizeof name);
    if (rc == STRATA_OK) {
        st_lane_request req = {
            .program = backend_id, .program_name = name, .args = t->d.args, .cfg = t->d.cfg};
        /* The run's own lease: the lane's generation filter sees the engine's
         * generations. Several tasks of one L3 run (one lease) can sit in the
         * lane at once, so each gets its own native run id on this chip (the
         * L3 run id names it in messages through the engine's prefix). */
        rc = st_lane_submit_leased(st_chip_lane(ep->chip), &req, t->d.lease, ++ep->native_runs,
                                   t->d.dispatch_id, activated, &t->run);
    }
    if (rc != STRATA_OK) { /* out of memory stays that: the chip itself is fine */
        fill_completion(t, rc == STRATA_ENOMEM ? STRATA_ENOMEM : STRATA_EENDPOINT,
                        strata_error_message());
        complete_task(ep, t);
        return;
    }
    pthread_mutex_lock(&ep->mu);
    t->lane_activated = activated;
    pthread_mutex_unlock(&ep->mu);
}

/* Wait for t in the device and complete it. */
static void finish_task(chip_ep *ep, chip_task *t) {
    int rc = st_lane_wait(t->run, UINT64_MAX);
    if (rc == STRATA_OK)
        fill_completion(t, STRATA_OK, "");
    else /* a chip that refuses work fails the endpoint; a failed run fails the task */
        fill_completion(
            t, rc == STRATA_EPOISONED || rc == STRATA_ECLOSED ? STRATA_EENDPOINT : STRATA_ETASK,
            st_lane_run_error(t->run));
    complete_task(ep, t);
}

/* The oldest task (by dispatch id) in `state`, or NULL. mu held. */
static chip_task *oldest(chip_ep *ep, chip_task_state state, int activated_only) {
    chip_task *best = NULL;
    for (int i = 0; i < CHIP_EP_TASKS; i++) {
        chip_task *t = &ep->tasks[i];
        if (t->state != state || (activated_only && !t->activated))
            continue;
        if (!best || t->d.dispatch_id < best->d.dispatch_id)
            best = t;
    }
    return best;
}

typedef enum chip_step { STEP_SUBMIT, STEP_ACTIVATE, STEP_FINISH, STEP_SLEEP, STEP_EXIT } chip_step;

/* What the thread does next, decided under mu. */
static chip_step next_step(chip_ep *ep, chip_task **out) {
    chip_task *q = oldest(ep, CHIP_TASK_QUEUED, 0);
    if (q && lane_has_room(ep)) {
        *out = q;
        return STEP_SUBMIT;
    }
    for (int i = 0; i < CHIP_EP_TASKS; i++) {
        chip_task *t = &ep->tasks[i];
        if (t->state == CHIP_TASK_SUBMITTED && t->activated && !t->lane_activated) {
            *out = t;
            return STEP_ACTIVATE;
        }
    }
    chip_task *s = oldest(ep, CHIP_TASK_SUBMITTED, 1);
    if (s) {
        *out = s;
        return STEP_FINISH;
    }
    int busy = q || oldest(ep, CHIP_TASK_SUBMITTED, 0);
    return ep->stopping && !busy ? STEP_EXIT : STEP_SLEEP;
}

void *st_chip_ep_main(void *arg) {
    chip_ep *ep = arg;
    st_thread_serve(ep->base.engine); /* chip programs here must not wait on this worker */
    for (;;) {
        chip_task *t = NULL;
        pthread_mutex_lock(&ep->mu);
        chip_step step;
        while ((step = next_step(ep, &t)) == STEP_SLEEP)
            pthread_cond_wait(&ep->cv, &ep->mu);
        int activated = t ? t->activated : 0;
        if (step == STEP_SUBMIT)
            chip_task_move(t, CHIP_T_SUBMIT); /* room reserved; submit_task settles it */
        if (step == STEP_ACTIVATE)
            t->lane_activated = 1;
        pthread_mutex_unlock(&ep->mu);
        switch (step) {
        case STEP_SUBMIT:
            submit_task(ep, t, activated);
            break;
        case STEP_ACTIVATE:
            st_lane_activate(t->run); /* a failed run reports at its wait */
            break;
        case STEP_FINISH:
            finish_task(ep, t);
            break;
        case STEP_EXIT:
            return NULL;
        case STEP_SLEEP:
            break;
        }
    }
}

/* ---- Endpoint operations (engine lock held: record and signal only) -------------------- */

static void chip_ep_dispatch(st_endpoint *base, const st_dispatch *d) {
    chip_ep *ep = (chip_ep *)base;
    pthread_mutex_lock(&ep->mu);
    chip_task *t = NULL;
    for (int i = 0; i < CHIP_EP_TASKS && !t; i++)
        if (ep->tasks[i].state == CHIP_TASK_FREE)
            t = &ep->tasks[i];
    int stopping = ep->stopping;
    if (t && !stopping) {
        t->d = *d;
        t->run = NULL;
        t->lane_activated = 0;
        t->activated = d->run_id <= ep->active_run;
        chip_task_move(t, CHIP_T_DISPATCH);
        pthread_cond_signal(&ep->cv);
    }
    pthread_mutex_unlock(&ep->mu);
    if (!t || stopping)
        st_endpoint_complete_with(base, t ? &t->comp : &ep->reject, d, STRATA_EENDPOINT,
                                  "%s is %s; task rejected", base->label,
                                  stopping ? "stopping" : "holding two tasks already");
}

static void chip_ep_activate(st_endpoint *base, uint64_t run_id) {
    chip_ep *ep = (chip_ep *)base;
    pthread_mutex_lock(&ep->mu);
    if (run_id > ep->active_run)
        ep->active_run = run_id;
    for (int i = 0; i < CHIP_EP_TASKS; i++)
        if (ep->tasks[i].state != CHIP_TASK_FREE && ep->tasks[i].d.run_id <= run_id)
            ep->tasks[i].activated = 1;
    pthread_cond_signal(&ep->cv);
    pthread_mutex_unlock(&ep->mu);
}

static void chip_ep_stop(st_endpoint *base) {
    chip_ep *ep = (chip_ep *)base;
    pthread_mutex_lock(&ep->mu);
    ep->stopping = 1;
    pthread_cond_signal(&ep->cv);
    pthread_mutex_unlock(&ep->mu);
}

static void chip_ep_destroy(st_endpoint *base) {
    chip_ep *ep = (chip_ep *)base;
    if (ep->started)
        pthread_join(ep->thread, NULL);
    strata_chip_destroy(ep->chip); /* finishes the lane; frees the device memory left */
    for (size_t i = 0; i < ep->nbuffers; i++)
        st_buffer_destroy_device(ep->buffers[i].b);
    st_free(ep->buffers);
    pthread_cond_destroy(&ep->cv);
    pthread_mutex_destroy(&ep->mu);
    st_free(ep);
}

const st_endpoint_ops st_chip_ep_ops = {
    .dispatch = chip_ep_dispatch,
    .progress = NULL,
    .activate = chip_ep_activate,
    .stop = chip_ep_stop,
    .destroy = chip_ep_destroy,
};
