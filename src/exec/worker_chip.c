/* exec/worker_chip.c - chips in an L3 worker, the public worker-level calls:
 * adding a chip, chip programs of a worker, and chip device memory.
 *
 * Owns: creating a chip endpoint and starting its thread
 * (strata_worker_add_chip), registering a chip program as a worker callable,
 * and the chip buffers allocated through the worker (their list lives in the
 * endpoint record, under its `mu`).
 * Must never: hold the engine lock while taking an endpoint's `mu` (the
 * endpoint is found first, with the lock taken and dropped inside
 * st_worker_next_endpoint), or hand out a buffer that is not in its chip's
 * list.
 */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "core/buffer.h"
#include "core/endpoint.h"
#include "exec/chip_endpoint.h"
#include "strata/chip.h"
#include "util/alloc.h"
#include "util/error.h"
#include "util/growable.h"

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
    ep->base.ops = &st_chip_ep_ops;
    ep->base.capacity = CHIP_EP_TASKS; /* two of the head run and a staged successor's */
    ep->base.staging = CHIP_EP_STAGING;
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
    if (pthread_create(&ep->thread, NULL, st_chip_ep_main, ep) != 0) {
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
    memcpy(&program, &desc->fn, sizeof program); /* see program_fn_of(), chip_endpoint.c */
    return st_register_next_level(w, desc->name, NULL, desc->user, program, out);
}

/* The chip endpoint of worker id `id`, or NULL with an error. */
static chip_ep *chip_of(strata_worker *w, int id, const char *what) {
    if (!w) {
        st_fail(STRATA_EINVAL, "%s: worker is NULL", what);
        return NULL;
    }
    st_endpoint *ep = st_worker_next_endpoint(w, id);
    if (!ep || ep->ops != &st_chip_ep_ops) {
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
        if (base->ops != &st_chip_ep_ops)
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
        chip_buffer_entry *nb =
            st_grow(ep->buffers, &ep->cap_buffers, ep->nbuffers + 1, sizeof *nb, 16, NULL,
                    "strata_worker_chip_malloc: the chip's buffer list");
        if (nb)
            ep->buffers = nb;
        else
            rc = STRATA_ENOMEM;
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
