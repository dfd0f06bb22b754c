/* exec/chip_driver.c - drives a chip's lane for the tasks an owner hands it:
 * the one implementation behind the thread-hosted chip endpoint
 * (chip_endpoint.c) and the process-hosted chip (chip_child.c).
 *
 * Owns: what chip_driver.h lists: the task records and their state machine,
 * the two serving threads and their steps, leased submits, activation with
 * its identity check and poison, releases at stop or poison, the chip
 * program of each callable.
 * It implements the staging contract of core/endpoint.h ("Staging").
 * Must never: call the owner, the lane or the chip while holding its own
 * mutex, launch or wait in the device for a staged task before its run is
 * activated, let a staged task take the lane's last place for the head's
 * work, or complete a task twice.
 *
 * Flow: dispatch records the task and wakes the threads; a thread submits it
 * to the lane (a leased submit: activated if its run is the head, else
 * unactivated, where the lane validates it and prepares it early if it may),
 * activates it when activate names its run, waits for it in the device (no
 * polling; one thread at most, so the other stays free to submit) and hands
 * the completion to the owner. Failures of the run come back as the task's
 * error (STRATA_ETASK); a chip that cannot take the task (poisoned lane or
 * endpoint, closed, stopping) completes it as STRATA_EENDPOINT.
 */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "chip/chip_internal.h"
#include "chip/chip_worker.h"
#include "chip/run_lane.h"
#include "core/endpoint.h"
#include "exec/chip_driver.h"
#include "strata/chip.h"
#include "util/clock.h"
#include "util/error.h"
#include "util/futex.h"
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
static int program_for(st_chip_driver *ep, const st_callable_info *ci, strata_chip_program *out) {
    int32_t known = ep->chip_program[ci->id];
    if (known) {
        *out = known - 1;
        return STRATA_OK;
    }
    if (ci->kind != ST_CALLABLE_NEXT || !ci->program)
        return st_fail(STRATA_EINVAL,
                       "%s: '%s' is not a chip program (register it with "
                       "strata_worker_register_chip_program)",
                       ep->label, ci->name);
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

/* The native phases of a timed task into its completion (none: zeros). */
static void native_times(chip_task *t, st_lane_run *run) {
    st_lane_times lt = {0};
    if (run && t->d.timed)
        st_lane_run_times(run, &lt);
    uint64_t v[5] = {lt.prepare_start, lt.prepare_end, lt.launch, lt.complete, lt.finalize_end};
    memcpy(t->comp.native, v, sizeof v);
}

/* Free the record, then hand t's completion to the owner (mu not held). */
static void complete_task(st_chip_driver *ep, chip_task *t) {
    pthread_mutex_lock(&ep->mu);
    st_lane_run *run = t->run;
    uint64_t tag = t->tag;
    native_times(t, run);
    if (t->d.timed && ep->hooks.phases) /* under mu: the trace lane's one writer at a time */
        ep->hooks.phases(ep->hooks.owner, t->d.run_id,
                         t->d.callable ? (uint32_t)t->d.callable->id : 0, t->comp.native);
    t->run = NULL;
    t->waiting = 0;
    st_completion_hold(&t->comp);       /* no dispatch takes the record until the owner is done */
    chip_task_move(t, CHIP_T_COMPLETE); /* this thread re-decides next: nobody to wake */
    pthread_mutex_unlock(&ep->mu);
    st_lane_run_release(run);
    ep->hooks.complete(ep->hooks.owner, &t->comp, tag);
}

/* How many SUBMITTED records are (activated only: not yet) activated. mu held. */
static uint32_t submitted(const st_chip_driver *ep, int unactivated_only) {
    uint32_t n = 0;
    for (int i = 0; i < CHIP_EP_TASKS; i++)
        n += ep->tasks[i].state == CHIP_TASK_SUBMITTED &&
             (!unactivated_only || !ep->tasks[i].activated);
    return n;
}

/* The lane takes one more task: it holds one native run per storage slot of
 * the chip. A staged (unactivated) task goes in only if a place stays for an
 * activated one: a chip of depth 1 never holds a staged task in its lane,
 * since a head task dispatched later could not get in (H1). mu held. */
static int lane_takes(const st_chip_driver *ep, int activated) {
    uint32_t depth = st_chip_worker_depth(st_chip_worker_of(ep->chip));
    if (submitted(ep, 0) >= depth)
        return 0;
    return activated || submitted(ep, 1) + 1 < depth;
}

/* Put t into the lane. On failure t is completed as an endpoint failure. */
static void submit_task(st_chip_driver *ep, chip_task *t, int activated) {
    strata_chip_program prog;
    uint32_t backend_id = 0;
    char name[STRATA_PROGRAM_NAME_MAX];
    st_lane_run *run = NULL;
    int rc = program_for(ep, t->d.callable, &prog);
    if (rc == STRATA_OK)
        rc = st_chip_program_info(ep->chip, prog, &backend_id, name, sizeof name);
    if (rc == STRATA_OK) {
        st_lane_request req = {.program = backend_id,
                               .program_name = name,
                               .args = t->d.args,
                               .cfg = t->d.cfg,
                               .timed = t->d.timed};
        /* The run's own lease: the lane's generation filter sees the engine's
         * generations. Several tasks of one L3 run (one lease) can sit in the
         * lane at once, so each gets its own native run id on this chip (the
         * L3 run id names it in messages through the engine's prefix). A
         * staged task goes in unactivated: validated, and prepared early
         * where the lane allows, never launched before activation. */
        rc = st_lane_submit_leased(st_chip_lane(ep->chip), &req, t->d.lease, ++ep->native_runs,
                                   t->d.dispatch_id, activated, &run);
    }
    if (rc != STRATA_OK) { /* out of memory stays that: the chip itself is fine */
        fill_completion(t, rc == STRATA_ENOMEM ? STRATA_ENOMEM : STRATA_EENDPOINT,
                        strata_error_message());
        complete_task(ep, t);
        return;
    }
    strata_chip_disposition disp =
        activated ? STRATA_CHIP_VALIDATED_ONLY : st_lane_run_disposition(run);
    pthread_mutex_lock(&ep->mu);
    t->run = run;
    t->lane_activated = activated;
    uint64_t tag = t->tag; /* its device wait is decided after this step (wake_idle) */
    pthread_mutex_unlock(&ep->mu);
    if (!activated && ep->hooks.staged)
        ep->hooks.staged(ep->hooks.owner, tag, disp);
}

/* Wait for t in the device and complete it. t is activated: the thread
 * never blocks on a staged task. */
static void finish_task(st_chip_driver *ep, chip_task *t) {
    int rc = st_lane_wait(t->run, UINT64_MAX);
    if (ep->hooks.launched && st_lane_run_launched(t->run))
        ep->hooks.launched(ep->hooks.owner, t->tag); /* t is this thread's until completed */
    if (rc == STRATA_OK)
        fill_completion(t, STRATA_OK, "");
    else /* a chip that refuses work fails the endpoint; a failed run fails the task */
        fill_completion(
            t, rc == STRATA_EPOISONED || rc == STRATA_ECLOSED ? STRATA_EENDPOINT : STRATA_ETASK,
            st_lane_run_error(t->run));
    pthread_mutex_lock(&ep->mu);
    if (st_error_status(&ep->poison) != STRATA_OK) /* poisoned meanwhile: it fails with it */
        fill_completion(t, STRATA_EENDPOINT, st_error_msg(&ep->poison));
    pthread_mutex_unlock(&ep->mu);
    complete_task(ep, t);
}

/* The oldest activated task in the lane no thread waits for yet. mu held. */
static chip_task *next_to_finish(st_chip_driver *ep) {
    chip_task *best = NULL;
    for (int i = 0; i < CHIP_EP_TASKS; i++) {
        chip_task *t = &ep->tasks[i];
        if (t->state != CHIP_TASK_SUBMITTED || !t->lane_activated || t->waiting || !t->run)
            continue;
        if (!best || t->d.dispatch_id < best->d.dispatch_id)
            best = t;
    }
    return best;
}

static int any_busy(const st_chip_driver *ep) {
    for (int i = 0; i < CHIP_EP_TASKS; i++)
        if (ep->tasks[i].state != CHIP_TASK_FREE)
            return 1;
    return 0;
}

/* Complete t without running it (poisoned endpoint, or stopped before its
 * run was activated): release what the lane holds for it (a prepared run is
 * finalized once; a launched one can only be waited for), then complete it
 * as STRATA_EENDPOINT with `why`. */
static void release_task(st_chip_driver *ep, chip_task *t, const char *why) {
    if (t->run && st_lane_abandon(t->run) == STRATA_ESTATE)
        st_lane_wait(t->run, UINT64_MAX); /* launched: it runs to completion */
    fill_completion(t, STRATA_EENDPOINT, why);
    complete_task(ep, t);
}

/* The identity the lane holds for t's run against t's dispatch, at
 * activation: 1 if they match, else the endpoint is poisoned (mu held). */
static int activation_identity_ok(st_chip_driver *ep, const chip_task *t) {
    st_lease held = st_lane_run_lease(t->run);
    uint64_t held_dispatch = st_lane_run_dispatch_id(t->run);
    if (held.slot == t->d.lease.slot && held.generation == t->d.lease.generation &&
        held_dispatch == t->d.dispatch_id)
        return 1;
    st_error_set(&ep->poison, STRATA_EENDPOINT,
                 "%s is poisoned: stale identity at activation of run %llu: the lane holds "
                 "{lease slot %u, generation %llu, dispatch %llu}, the dispatch is {lease slot "
                 "%u, generation %llu, dispatch %u}",
                 ep->label, (unsigned long long)t->d.run_id, held.slot,
                 (unsigned long long)held.generation, (unsigned long long)held_dispatch,
                 t->d.lease.slot, (unsigned long long)t->d.lease.generation, t->d.dispatch_id);
    return 0;
}

static int poisoned(const st_chip_driver *ep) {
    return st_error_status(&ep->poison) != STRATA_OK;
}

/* The oldest task (by dispatch id) in `state` whose activation is `act`
 * (-1: either), or NULL. mu held. */
static chip_task *oldest(st_chip_driver *ep, chip_task_state state, int act) {
    chip_task *best = NULL;
    for (int i = 0; i < CHIP_EP_TASKS; i++) {
        chip_task *t = &ep->tasks[i];
        if (t->state != state || (act >= 0 && t->activated != act))
            continue;
        if (!best || t->d.dispatch_id < best->d.dispatch_id)
            best = t;
    }
    return best;
}

typedef enum chip_step {
    STEP_SUBMIT,   /* put a QUEUED task into the lane */
    STEP_ACTIVATE, /* tell the lane a submitted task's run is the head */
    STEP_FINISH,   /* wait for an activated task in the device and complete it */
    STEP_RELEASE,  /* complete a task unlaunched (poison, or stop before activation) */
    STEP_SLEEP,
    STEP_EXIT
} chip_step;

/* A control step (submit, activate, release) is what only one thread at a
 * time may do: the lane must see submits in dispatch order. */
static chip_step control_step(st_chip_driver *ep, chip_task **out) {
    if (poisoned(ep)) { /* release everything nobody waits for; the waiter fails the rest */
        chip_task *t = oldest(ep, CHIP_TASK_QUEUED, -1);
        for (int i = 0; i < CHIP_EP_TASKS && !t; i++)
            if (ep->tasks[i].state == CHIP_TASK_SUBMITTED && !ep->tasks[i].waiting)
                t = &ep->tasks[i];
        *out = t;
        return t ? STEP_RELEASE : STEP_SLEEP;
    }
    for (int i = 0; i < CHIP_EP_TASKS; i++) {
        chip_task *t = &ep->tasks[i];
        if (t->state == CHIP_TASK_SUBMITTED && t->activated && !t->lane_activated) {
            *out = t;
            return STEP_ACTIVATE;
        }
    }
    chip_task *q = oldest(ep, CHIP_TASK_QUEUED, 1);
    if (q && lane_takes(ep, 1)) {
        *out = q;
        return STEP_SUBMIT;
    }
    if (ep->stopping) { /* staged work whose run was never activated: release it */
        chip_task *t = oldest(ep, CHIP_TASK_QUEUED, 0);
        if (!t)
            t = oldest(ep, CHIP_TASK_SUBMITTED, 0); /* never waited for: not activated */
        if (t) {
            *out = t;
            return STEP_RELEASE;
        }
    }
    q = oldest(ep, CHIP_TASK_QUEUED, 0);
    if (q && lane_takes(ep, 0)) {
        *out = q;
        return STEP_SUBMIT;
    }
    return STEP_SLEEP;
}

/* What a thread does next, decided under mu. Both threads of the endpoint
 * run this loop. Control steps first: activation (the successor launches
 * right after its predecessor), then submits (a task is prepared while the
 * one before it executes; head tasks before staged ones). Then the device
 * wait for the oldest activated task, which one thread at most is in, so the
 * other is free to submit the next task the moment it arrives (a staged
 * successor is built by the caller while the head's task executes). */
static chip_step next_step(st_chip_driver *ep, chip_task **out) {
    if (!ep->controlling) {
        chip_step st = control_step(ep, out);
        if (st != STEP_SLEEP) {
            ep->controlling = 1;
            return st;
        }
    }
    if (ep->in_device_wait < (ep->nthreads > 1 ? ep->nthreads - 1 : 1)) {
        chip_task *s = next_to_finish(ep);
        if (s) {
            s->waiting = 1;
            ep->in_device_wait++;
            *out = s;
            return STEP_FINISH;
        }
    }
    return ep->stopping && !any_busy(ep) ? STEP_EXIT : STEP_SLEEP;
}

/* Whether a thread that is not serving a step now would find one. mu held. */
static int step_for_idle(st_chip_driver *ep) {
    chip_task *t = NULL;
    if (!ep->controlling && control_step(ep, &t) != STEP_SLEEP)
        return 1;
    if (ep->in_device_wait < (ep->nthreads > 1 ? ep->nthreads - 1 : 1) && next_to_finish(ep))
        return 1;
    return ep->stopping && !any_busy(ep);
}

/* Wake one sleeping thread if there is a step for it (mu held). Both threads
 * decide from the same state, so a thread that finds nothing to do leaves
 * nothing for the other either: only a change, or a step one of them takes
 * while another is left, needs a wake. */
static void wake_idle(st_chip_driver *ep) {
    if (ep->sleeping > 0 && step_for_idle(ep))
        pthread_cond_signal(&ep->cv);
}

/* The driver whose serving thread this is (NULL on any other thread): the
 * owner's calls made from inside a hook leave the step to that thread, which
 * re-decides when the hook returns (a wake there would only make the two
 * threads race for the same step). */
static _Thread_local const st_chip_driver *serving;

/* Run a claimed step (mu held on entry and on return; dropped meanwhile).
 * Returns the step it ran (an activation whose identity check failed is a
 * release). */
static chip_step run_step(st_chip_driver *ep, chip_step step, chip_task *t, char *why, size_t cap) {
    int activated = t->activated;
    if (step == STEP_SUBMIT)
        chip_task_move(t, CHIP_T_SUBMIT); /* room reserved; submit_task settles it */
    /* Only lane-activated records nobody claimed are waited for:
     * lane_activated is set once the lane was told, and a record this
     * thread releases is claimed first (so it is completed once). */
    if (step == STEP_ACTIVATE && !activation_identity_ok(ep, t))
        step = STEP_RELEASE;
    if (step == STEP_RELEASE) {
        t->waiting = 1;
        if (poisoned(ep))
            st_msg_format(why, cap, "%s", st_error_msg(&ep->poison));
        else
            st_msg_format(why, cap,
                          "%s stopped before run %llu became the head: its staged task "
                          "(dispatch %u) was released unlaunched",
                          ep->label, (unsigned long long)t->d.run_id, t->d.dispatch_id);
    }
    pthread_mutex_unlock(&ep->mu);
    switch (step) {
    case STEP_SUBMIT:
        submit_task(ep, t, activated);
        break;
    case STEP_ACTIVATE:
        st_lane_activate(t->run); /* a failed run reports at its wait */
        pthread_mutex_lock(&ep->mu);
        t->lane_activated = 1;
        pthread_mutex_unlock(&ep->mu);
        break;
    case STEP_FINISH:
        finish_task(ep, t);
        break;
    case STEP_RELEASE:
        release_task(ep, t, why);
        break;
    default:
        break;
    }
    pthread_mutex_lock(&ep->mu);
    return step;
}

static void *chip_ep_serve(st_chip_driver *ep) {
    char why[STRATA_ERRMSG_MAX];
    serving = ep;
    chip_step last = STEP_SLEEP;
    pthread_mutex_lock(&ep->mu);
    for (;;) {
        chip_task *t = NULL;
        chip_step step;
        int spin = last == STEP_FINISH && ep->spin_ns > 0;
        while ((step = next_step(ep, &t)) == STEP_SLEEP) {
            if (spin) { /* the owner's next dispatch or activation often follows */
                spin = 0;
                uint32_t seen = atomic_load(&ep->changes.value);
                pthread_mutex_unlock(&ep->mu);
                st_event_wait(&ep->changes, seen, ep->spin_ns, st_now_ns() + ep->spin_ns);
                pthread_mutex_lock(&ep->mu);
                continue;
            }
            ep->sleeping++;
            pthread_cond_wait(&ep->cv, &ep->mu);
            ep->sleeping--;
        }
        if (step == STEP_EXIT)
            break;
        wake_idle(ep); /* a step is left for the other thread (say, a wait beside a submit) */
        step = run_step(ep, step, t, why, sizeof why);
        last = step;
        if (step == STEP_FINISH)
            ep->in_device_wait--;
        else
            ep->controlling = 0; /* this thread re-decides first; it wakes the other if needed */
    }
    serving = NULL;
    pthread_cond_broadcast(&ep->cv); /* the other thread leaves too */
    pthread_mutex_unlock(&ep->mu);
    return NULL;
}

static void *driver_second_main(void *arg) {
    st_chip_driver *ep = arg;
    st_thread_serve(ep->serves); /* chip programs here must not wait on that worker */
    return chip_ep_serve(ep);
}

static void *driver_main(void *arg) {
    st_chip_driver *ep = arg;
    st_thread_serve(ep->serves); /* chip programs here must not wait on that worker */
    pthread_mutex_lock(&ep->mu);
    ep->has_waiter = pthread_create(&ep->waiter, NULL, driver_second_main, ep) == 0;
    ep->nthreads = ep->has_waiter ? 2 : 1;
    pthread_mutex_unlock(&ep->mu);
    chip_ep_serve(ep);
    if (ep->has_waiter)
        pthread_join(ep->waiter, NULL); /* it leaves on the same condition */
    return NULL;
}

int st_chip_driver_tasks(st_chip_driver *ep, st_chip_ep_task_info *out, int max) {
    chip_task *busy[CHIP_EP_TASKS];
    st_lane_run *runs[CHIP_EP_TASKS] = {0};
    int n = 0;
    pthread_mutex_lock(&ep->mu);
    for (int i = 0; i < CHIP_EP_TASKS; i++) { /* oldest dispatch first */
        chip_task *t = &ep->tasks[i];
        if (t->state == CHIP_TASK_FREE)
            continue;
        int at = n++;
        while (at > 0 && busy[at - 1]->d.dispatch_id > t->d.dispatch_id) {
            busy[at] = busy[at - 1];
            at--;
        }
        busy[at] = t;
    }
    for (int i = 0; i < n && i < max; i++) {
        chip_task *t = busy[i];
        out[i] = (st_chip_ep_task_info){.state = (int)t->state,
                                        .run_id = t->d.run_id,
                                        .dispatch_id = t->d.dispatch_id,
                                        .tag = t->tag,
                                        .staged = t->d.staged,
                                        .activated = t->activated,
                                        .in_lane = t->run != NULL};
        runs[i] = t->run;
        if (runs[i])
            st_lane_run_retain(runs[i]);
    }
    pthread_mutex_unlock(&ep->mu);
    for (int i = 0; i < n && i < max; i++) {
        if (!runs[i])
            continue;
        out[i].launched = st_lane_run_launched(runs[i]);
        out[i].disposition = st_lane_run_disposition(runs[i]);
        st_lane_run_release(runs[i]);
    }
    return n;
}

/* ---- What the owner calls (its locks may be held: record and signal only) ------------ */

void st_chip_driver_init(st_chip_driver *ep, strata_chip *chip, const char *label,
                         const void *serves, const st_chip_driver_hooks *hooks) {
    memset(ep, 0, sizeof *ep);
    ep->chip = chip;
    ep->label = label;
    ep->serves = serves;
    ep->hooks = *hooks;
    st_error_init(&ep->poison);
    pthread_mutex_init(&ep->mu, NULL);
    pthread_cond_init(&ep->cv, NULL);
}

int st_chip_driver_start(st_chip_driver *ep) {
    if (pthread_create(&ep->thread, NULL, driver_main, ep) != 0) {
        pthread_mutex_lock(&ep->mu);
        ep->stopping = 1; /* every dispatch is refused */
        pthread_mutex_unlock(&ep->mu);
        return st_fail(STRATA_ENOMEM, "%s: cannot start the chip's threads", ep->label);
    }
    ep->started = 1;
    return STRATA_OK;
}

/* mu held. A record a task may take: FREE, and its completion no longer the
 * owner's or the engine's (core/endpoint.h: st_completion_free). */
static int record_free(chip_task *t) {
    return t->state == CHIP_TASK_FREE && st_completion_free(&t->comp);
}

int st_chip_driver_dispatch(st_chip_driver *ep, const st_dispatch *d, uint64_t tag, int record,
                            char *why, size_t cap, st_completion **spare) {
    pthread_mutex_lock(&ep->mu);
    chip_task *t = NULL;
    if (record >= 0 && record < CHIP_EP_TASKS)
        t = record_free(&ep->tasks[record]) ? &ep->tasks[record] : NULL;
    for (int i = 0; i < CHIP_EP_TASKS && !t && record < 0; i++)
        if (record_free(&ep->tasks[i]))
            t = &ep->tasks[i];
    int rc = STRATA_OK;
    if (poisoned(ep)) {
        st_msg_format(why, cap, "%s; task rejected", st_error_msg(&ep->poison));
        rc = STRATA_EENDPOINT;
    } else if (!t || ep->stopping) {
        st_msg_format(why, cap, "%s is %s; task rejected", ep->label,
                      ep->stopping ? "stopping" : "holding all its tasks already");
        rc = STRATA_EENDPOINT;
    } else {
        t->d = *d;
        t->tag = tag;
        t->run = NULL;
        t->lane_activated = 0;
        t->activated = !d->staged || d->run_id <= ep->active_run;
        chip_task_move(t, CHIP_T_DISPATCH);
        st_event_bump(&ep->changes);
        if (serving != ep && !ep->owner_serves)
            wake_idle(ep);
    }
    if (spare)
        *spare = NULL;
    if (rc != STRATA_OK && spare && t) {
        st_completion_hold(
            &t->comp); /* the owner's rejection takes the record it would have used */
        *spare = &t->comp;
    }
    pthread_mutex_unlock(&ep->mu);
    return rc;
}

void st_chip_driver_activate(st_chip_driver *ep, uint64_t run_id) {
    pthread_mutex_lock(&ep->mu);
    if (run_id > ep->active_run)
        ep->active_run = run_id;
    for (int i = 0; i < CHIP_EP_TASKS; i++)
        if (ep->tasks[i].state != CHIP_TASK_FREE && ep->tasks[i].d.run_id <= run_id)
            ep->tasks[i].activated = 1;
    st_event_bump(&ep->changes);
    if (serving != ep && !ep->owner_serves)
        wake_idle(ep);
    pthread_mutex_unlock(&ep->mu);
}

int st_chip_driver_serve_now(st_chip_driver *ep) {
    char why[STRATA_ERRMSG_MAX];
    int ran = 0;
    pthread_mutex_lock(&ep->mu);
    chip_task *t = NULL;
    chip_step step = ep->controlling ? STEP_SLEEP : control_step(ep, &t);
    if (step == STEP_SUBMIT || step == STEP_ACTIVATE) {
        ep->controlling = 1;
        run_step(ep, step, t, why, sizeof why);
        ep->controlling = 0;
        ran = 1;
    }
    wake_idle(ep); /* what is left: the device wait of what it launched, a release */
    pthread_mutex_unlock(&ep->mu);
    return ran;
}

void st_chip_driver_poison(st_chip_driver *ep, const char *msg) {
    pthread_mutex_lock(&ep->mu);
    st_error_set(&ep->poison, STRATA_EENDPOINT, "%s", msg);
    pthread_cond_broadcast(&ep->cv);
    pthread_mutex_unlock(&ep->mu);
}

void st_chip_driver_stop(st_chip_driver *ep) {
    pthread_mutex_lock(&ep->mu);
    ep->stopping = 1;
    pthread_cond_broadcast(&ep->cv);
    pthread_mutex_unlock(&ep->mu);
}

void st_chip_driver_unstart(st_chip_driver *ep) {
    if (ep->started) {
        st_chip_driver_stop(ep);
        pthread_join(ep->thread, NULL);
    }
    pthread_mutex_lock(&ep->mu); /* also after a failed start, which set stopping */
    ep->started = 0;
    ep->stopping = 0; /* a later start serves again */
    ep->has_waiter = 0;
    ep->nthreads = 0;
    pthread_mutex_unlock(&ep->mu);
}

void st_chip_driver_destroy(st_chip_driver *ep) {
    if (ep->started)
        pthread_join(ep->thread, NULL);
    ep->started = 0;
    pthread_cond_destroy(&ep->cv);
    pthread_mutex_destroy(&ep->mu);
}
