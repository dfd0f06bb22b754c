/* exec/chip_endpoint.c - a chip as a thread-hosted next-level child of an L3
 * worker: the endpoint that drives an in-process chip through its lane, and
 * the worker-level calls for chip programs and chip device memory.
 *
 * Owns: one endpoint thread per chip, the endpoint's two task records, the
 * leases it mints for its lane (it is the lane's only admitter), the map from
 * worker callables to programs registered on the chip, and the chip buffers
 * allocated through the worker.
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
#include <stdlib.h>
#include <string.h>

#include "chip/chip_internal.h"
#include "core/buffer.h"
#include "core/endpoint.h"
#include "strata/chip.h"
#include "util/alloc.h"
#include "util/thread_role.h"
#include "util/error.h"

#define CHIP_EP_TASKS 2 /* tasks one chip can hold: a running one and a staged one */
#define CHIP_EP_PROGRAMS 64

typedef enum chip_task_state {
    CHIP_TASK_FREE = 0,
    CHIP_TASK_QUEUED,    /* dispatched, not yet in the lane */
    CHIP_TASK_SUBMITTED, /* in the lane */
} chip_task_state;

typedef struct chip_task {
    chip_task_state state;
    st_dispatch d; /* copy; d.args and d.cfg stay valid until the completion */
    int activated; /* its run is (or was) the head */
    int lane_activated;
    uint32_t slot;
    st_lane_run *run;
    st_completion comp; /* the engine holds it from completion until it dispatches anew */
} chip_task;

typedef struct chip_program_entry {
    const st_callable_info *ci;
    strata_chip_program prog;
} chip_program_entry;

typedef struct chip_buffer_entry {
    strata_buffer *b;
    void *dev;
    size_t nbytes;
} chip_buffer_entry;

typedef struct chip_ep {
    st_endpoint base;
    strata_chip *chip;
    pthread_t thread;
    int started;
    /* mu protects tasks[].state/activated, active_run, stopping and buffers.
     * A leaf lock: never held while calling the engine, the lane or the chip. */
    pthread_mutex_t mu;
    pthread_cond_t cv; /* the thread sleeps here: new task, activation, stop */
    chip_task tasks[CHIP_EP_TASKS];
    st_completion reject; /* for a dispatch that finds no free record */
    uint64_t active_run;  /* highest run id activated so far */
    int stopping;
    uint64_t lease_gen[STRATA_BACKEND_MAX_DEPTH];
    uint64_t native_runs; /* native run ids minted for the lane (endpoint thread only) */
    chip_program_entry programs[CHIP_EP_PROGRAMS]; /* endpoint thread only */
    int nprograms;
    chip_buffer_entry *buffers;
    size_t nbuffers, cap_buffers;
} chip_ep;

static const st_endpoint_ops chip_ep_ops;

/* ---- Programs --------------------------------------------------------------------- */

static strata_program_fn program_fn_of(const st_callable_info *ci) {
    strata_program_fn fn = NULL;
    _Static_assert(sizeof fn == sizeof ci->program, "a program function fits a pointer");
    memcpy(&fn, &ci->program, sizeof fn);
    return fn;
}

/* The chip's program for a worker callable, registered on first use. */
static int program_for(chip_ep *ep, const st_callable_info *ci, strata_chip_program *out) {
    for (int i = 0; i < ep->nprograms; i++)
        if (ep->programs[i].ci == ci) {
            *out = ep->programs[i].prog;
            return STRATA_OK;
        }
    if (ci->kind != ST_CALLABLE_NEXT || !ci->program)
        return st_fail(STRATA_EINVAL,
                       "%s: '%s' is not a chip program (register it with "
                       "strata_worker_register_chip_program)",
                       ep->base.label, ci->name);
    if (ep->nprograms == CHIP_EP_PROGRAMS)
        return st_fail(STRATA_ECAPACITY, "%s: more than %d chip programs used on one chip",
                       ep->base.label, CHIP_EP_PROGRAMS);
    strata_chip_program_desc desc = {.name = ci->name, .fn = program_fn_of(ci), .user = ci->user};
    STRATA_TRY(strata_chip_register_program(ep->chip, &desc, out));
    ep->programs[ep->nprograms++] = (chip_program_entry){.ci = ci, .prog = *out};
    return STRATA_OK;
}

/* ---- The endpoint thread ------------------------------------------------------------- */

static void fill_completion(chip_task *t, int status, const char *msg) {
    t->comp.ref = t->d.ref;
    t->comp.member = t->d.member;
    t->comp.status = status;
    snprintf(t->comp.msg, sizeof t->comp.msg, "%s", status == STRATA_OK ? "" : msg);
}

/* Hand t's completion to the engine and free the record (mu not held). */
static void complete_task(chip_ep *ep, chip_task *t) {
    if (t->run) {
        st_lane_run_release(t->run);
        t->run = NULL;
    }
    pthread_mutex_lock(&ep->mu);
    t->state = CHIP_TASK_FREE;
    pthread_mutex_unlock(&ep->mu);
    st_endpoint_complete(&ep->base, &t->comp);
}

/* A lane slot no submitted task holds, or depth if none. mu held. */
static uint32_t free_lane_slot(chip_ep *ep) {
    uint32_t depth = st_chip_worker_depth(st_chip_worker_of(ep->chip));
    for (uint32_t s = 0; s < depth; s++) {
        int used = 0;
        for (int i = 0; i < CHIP_EP_TASKS; i++)
            used |= ep->tasks[i].state == CHIP_TASK_SUBMITTED && ep->tasks[i].slot == s;
        if (!used)
            return s;
    }
    return depth;
}

/* Put t into the lane. On failure t is completed as an endpoint failure. */
static void submit_task(chip_ep *ep, chip_task *t, uint32_t slot, int activated) {
    strata_chip_program prog;
    uint32_t backend_id = 0;
    char name[STRATA_PROGRAM_NAME_MAX];
    int rc = program_for(ep, t->d.callable, &prog);
    if (rc == STRATA_OK)
        rc = st_chip_program_info(ep->chip, prog, &backend_id, name, sizeof name);
    if (rc == STRATA_OK) {
        st_lane_request req = {
            .program = backend_id, .program_name = name, .args = t->d.args, .cfg = t->d.cfg};
        st_lane_lease lease = {.slot = slot, .generation = ++ep->lease_gen[slot]};
        /* Several tasks of one L3 run can sit in the lane at once, so each gets
         * its own native run id on this chip (the L3 run id names it in messages
         * through the engine's prefix). */
        rc = st_lane_submit_leased(st_chip_lane(ep->chip), &req, lease, ++ep->native_runs,
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
static chip_step next_step(chip_ep *ep, chip_task **out, uint32_t *slot) {
    chip_task *q = oldest(ep, CHIP_TASK_QUEUED, 0);
    if (q && (*slot = free_lane_slot(ep)) < STRATA_BACKEND_MAX_DEPTH &&
        *slot < st_chip_worker_depth(st_chip_worker_of(ep->chip))) {
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

static void *chip_ep_main(void *arg) {
    chip_ep *ep = arg;
    st_thread_serve(ep->base.engine); /* chip programs here must not wait on this worker */
    for (;;) {
        chip_task *t = NULL;
        uint32_t slot = 0;
        pthread_mutex_lock(&ep->mu);
        chip_step step;
        while ((step = next_step(ep, &t, &slot)) == STEP_SLEEP)
            pthread_cond_wait(&ep->cv, &ep->mu);
        int activated = t ? t->activated : 0;
        if (step == STEP_SUBMIT) {
            t->state = CHIP_TASK_SUBMITTED; /* slot reserved; submit_task settles it */
            t->slot = slot;
        }
        if (step == STEP_ACTIVATE)
            t->lane_activated = 1;
        pthread_mutex_unlock(&ep->mu);
        switch (step) {
        case STEP_SUBMIT:
            submit_task(ep, t, slot, activated);
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
        t->state = CHIP_TASK_QUEUED;
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

static const st_endpoint_ops chip_ep_ops = {
    .dispatch = chip_ep_dispatch,
    .progress = NULL,
    .activate = chip_ep_activate,
    .stop = chip_ep_stop,
    .destroy = chip_ep_destroy,
};

/* ---- Worker-level calls ----------------------------------------------------------------- */

int strata_worker_add_chip(strata_worker *w, const strata_chip_config *cfg, int *worker_id) {
    if (!w || !cfg || !worker_id)
        return st_fail(STRATA_EINVAL, "strata_worker_add_chip: worker, config and id must be set");
    if (cfg->host != STRATA_HOST_THREAD)
        return st_fail(STRATA_EINVAL,
                       "strata_worker_add_chip: host mode %d is not available in this version "
                       "(use STRATA_HOST_THREAD)",
                       (int)cfg->host);
    chip_ep *ep = st_calloc(1, sizeof *ep);
    if (!ep)
        return st_fail_nomem("strata_worker_add_chip: the chip endpoint", sizeof *ep);
    pthread_mutex_init(&ep->mu, NULL);
    pthread_cond_init(&ep->cv, NULL);
    ep->base.ops = &chip_ep_ops;
    ep->base.capacity = CHIP_EP_TASKS; /* a running task and one prepared behind it */
    int rc = strata_chip_open(cfg, &ep->chip);
    if (rc == STRATA_OK)
        rc = st_worker_add_endpoint(w, &ep->base, worker_id);
    if (rc != STRATA_OK) {
        char msg[STRATA_ERRMSG_MAX];
        snprintf(msg, sizeof msg, "%s", strata_error_message());
        strata_chip_destroy(ep->chip);
        pthread_cond_destroy(&ep->cv);
        pthread_mutex_destroy(&ep->mu);
        st_free(ep);
        return st_fail_msg(rc, msg);
    }
    snprintf(ep->base.label, sizeof ep->base.label, "%d (%s)", *worker_id,
             strata_chip_label(ep->chip));
    /* From here the worker owns the endpoint: a failure leaves it to close. */
    if (pthread_create(&ep->thread, NULL, chip_ep_main, ep) != 0) {
        pthread_mutex_lock(&ep->mu);
        ep->stopping = 1; /* every dispatch is rejected */
        pthread_mutex_unlock(&ep->mu);
        return st_fail(STRATA_ENOMEM, "strata_worker_add_chip: cannot start the endpoint thread");
    }
    ep->started = 1;
    return STRATA_OK;
}

int strata_worker_register_chip_program(strata_worker *w, const strata_chip_program_desc *desc,
                                        strata_callable *out) {
    if (!w || !desc || !out)
        return st_fail(
            STRATA_EINVAL,
            "strata_worker_register_chip_program: worker, desc and out must not be NULL");
    if (!desc->fn)
        return st_fail(STRATA_EINVAL,
                       "strata_worker_register_chip_program: '%s': program function is NULL",
                       desc->name ? desc->name : "?");
    if (!desc->name || strlen(desc->name) >= STRATA_PROGRAM_NAME_MAX)
        return st_fail(STRATA_EINVAL,
                       "strata_worker_register_chip_program: the name must be 1..%d characters",
                       STRATA_PROGRAM_NAME_MAX - 1);
    void *program;
    memcpy(&program, &desc->fn, sizeof program); /* see program_fn_of() */
    return st_register_next_level(w, desc->name, NULL, desc->user, program, out);
}

/* The chip endpoint of worker id `id`, or NULL with an error. */
static chip_ep *chip_of(strata_worker *w, int id, const char *what) {
    if (!w) {
        st_fail(STRATA_EINVAL, "%s: worker is NULL", what);
        return NULL;
    }
    st_endpoint *ep = st_worker_next_endpoint(w, id);
    if (!ep || ep->ops != &chip_ep_ops) {
        st_fail(STRATA_EINVAL, "%s: next-level worker %d is not a chip of this worker", what, id);
        return NULL;
    }
    return (chip_ep *)ep;
}

/* The chip endpoint holding buffer b, or NULL with an error. */
static chip_ep *owner_of(strata_worker *w, const strata_buffer *b, const char *what) {
    if (!w || !b) {
        st_fail(STRATA_EINVAL, "%s: worker and buffer must not be NULL", what);
        return NULL;
    }
    st_endpoint *base;
    for (int id = 0; (base = st_worker_next_endpoint(w, id)) != NULL; id++) {
        if (base->ops != &chip_ep_ops)
            continue;
        chip_ep *ep = (chip_ep *)base;
        pthread_mutex_lock(&ep->mu);
        for (size_t i = 0; i < ep->nbuffers; i++)
            if (ep->buffers[i].b == b) {
                pthread_mutex_unlock(&ep->mu);
                return ep;
            }
        pthread_mutex_unlock(&ep->mu);
    }
    st_fail(STRATA_EINVAL,
            "%s: the buffer is not chip memory of this worker (allocate it with "
            "strata_worker_chip_malloc; it may have been freed)",
            what);
    return NULL;
}

int strata_worker_chip_malloc(strata_worker *w, int worker_id, size_t nbytes, strata_buffer **out) {
    const char *what = "strata_worker_chip_malloc";
    if (!out)
        return st_fail(STRATA_EINVAL, "%s: out is NULL", what);
    *out = NULL;
    chip_ep *ep = chip_of(w, worker_id, what);
    if (!ep)
        return STRATA_EINVAL;
    void *dev = NULL;
    STRATA_TRY(strata_chip_malloc(ep->chip, nbytes, &dev));
    strata_buffer *b = NULL;
    int rc = strata_buffer_wrap(w, dev, nbytes, &b); /* gives it a worker-wide identity */
    if (rc == STRATA_OK)
        st_buffer_mark_device(b, worker_id); /* its views are this chip's device memory */
    pthread_mutex_lock(&ep->mu);
    if (rc == STRATA_OK && ep->nbuffers == ep->cap_buffers) {
        size_t cap = ep->cap_buffers ? ep->cap_buffers * 2 : 16;
        chip_buffer_entry *nb = st_realloc(ep->buffers, cap * sizeof *nb);
        if (nb) {
            ep->buffers = nb;
            ep->cap_buffers = cap;
        } else {
            rc = st_fail_nomem("strata_worker_chip_malloc: growing the chip's buffer list",
                               cap * sizeof *nb);
        }
    }
    if (rc == STRATA_OK)
        ep->buffers[ep->nbuffers++] = (chip_buffer_entry){.b = b, .dev = dev, .nbytes = nbytes};
    pthread_mutex_unlock(&ep->mu);
    if (rc != STRATA_OK) {
        st_buffer_destroy_device(b);
        strata_chip_free(ep->chip, dev);
        return rc;
    }
    *out = b;
    return STRATA_OK;
}

int strata_worker_chip_tensor(strata_worker *w, const strata_buffer *b, uint64_t offset,
                              strata_dtype dtype, int rank, const int64_t *shape,
                              const int64_t *strides, strata_tensor *out) {
    chip_ep *ep = owner_of(w, b, "strata_worker_chip_tensor");
    if (!ep)
        return STRATA_EINVAL;
    STRATA_TRY(strata_tensor_view(b, offset, dtype, rank, shape, strides, out));
    out->mem = STRATA_MEM_DEVICE;
    out->ident.owner = ep->base.worker_id;
    return STRATA_OK;
}

/* [offset, offset+n) inside the buffer, else an error. */
static int check_range(const chip_ep *ep, const strata_buffer *b, uint64_t offset, size_t n,
                       const char *what) {
    size_t size = strata_buffer_size(b);
    if (offset > size || n > size - offset)
        return st_fail(STRATA_EINVAL,
                       "%s: %zu bytes at offset %llu run past the %zu-byte buffer on %s", what, n,
                       (unsigned long long)offset, size, ep->base.label);
    return STRATA_OK;
}

int strata_worker_chip_copy_to(strata_worker *w, strata_buffer *b, uint64_t offset, const void *src,
                               size_t n) {
    const char *what = "strata_worker_chip_copy_to";
    chip_ep *ep = owner_of(w, b, what);
    if (!ep)
        return STRATA_EINVAL;
    STRATA_TRY(check_range(ep, b, offset, n, what));
    return strata_chip_copy_to(ep->chip, (char *)strata_buffer_data(b) + offset, src, n);
}

int strata_worker_chip_copy_from(strata_worker *w, const strata_buffer *b, uint64_t offset,
                                 void *dst, size_t n) {
    const char *what = "strata_worker_chip_copy_from";
    chip_ep *ep = owner_of(w, b, what);
    if (!ep)
        return STRATA_EINVAL;
    STRATA_TRY(check_range(ep, b, offset, n, what));
    return strata_chip_copy_from(ep->chip, dst, (const char *)strata_buffer_data(b) + offset, n);
}

int strata_worker_chip_free(strata_worker *w, strata_buffer *b) {
    const char *what = "strata_worker_chip_free";
    chip_ep *ep = owner_of(w, b, what);
    if (!ep)
        return STRATA_EINVAL;
    void *dev = NULL;
    pthread_mutex_lock(&ep->mu); /* find it again: a concurrent free may have won */
    for (size_t i = 0; i < ep->nbuffers && !dev; i++)
        if (ep->buffers[i].b == b) {
            dev = ep->buffers[i].dev;
            ep->buffers[i] = ep->buffers[--ep->nbuffers];
        }
    pthread_mutex_unlock(&ep->mu);
    if (!dev)
        return st_fail(STRATA_EINVAL, "%s: the buffer was already freed", what);
    int rc = strata_chip_free(ep->chip, dev);
    st_buffer_destroy_device(b);
    return rc;
}
