/* exec/worker_chip.c - chips in an L3 worker, the public worker-level calls:
 * adding a chip, chip programs of a worker, and chip device memory.
 *
 * Owns: creating a chip's endpoint (strata_worker_add_chip: a thread-hosted
 * chip endpoint, whose driver threads start at init, or a process chip
 * forked at init: exec/chip_child.c), registering a chip program as a
 * worker callable, and the chip buffers allocated through the worker, for
 * both hostings (their list, st_chip_buffers, lives in the endpoint record
 * of a thread chip or the parent's record of a process chip, under its
 * `mu`; a process chip's device calls are control calls to its process).
 * Must never: hold the engine lock while taking a buffer list's `mu` (the
 * endpoint is found first, with the lock taken and dropped inside
 * st_worker_next_endpoint), hold `mu` across a device or control call, or
 * hand out a buffer that is not in its chip's list.
 */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "core/buffer.h"
#include "core/endpoint.h"
#include "exec/chip_child.h"
#include "exec/chip_endpoint.h"
#include "strata/chip.h"
#include "util/alloc.h"
#include "util/error.h"
#include "util/growable.h"

static int add_thread_chip(strata_worker *w, const strata_chip_config *cfg, int *worker_id) {
    chip_ep *ep = st_calloc(1, sizeof *ep);
    if (!ep)
        return st_fail_nomem("strata_worker_add_chip: the chip endpoint", sizeof *ep);
    pthread_mutex_init(&ep->bufs.mu, NULL);
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
        pthread_mutex_destroy(&ep->bufs.mu);
        st_free(ep);
        return st_fail_msg(rc, msg);
    }
    snprintf(ep->base.label, sizeof ep->base.label, "%d (%s)", *worker_id,
             strata_chip_label(ep->chip));
    st_chip_ep_setup(ep); /* its threads start in the worker's init (chip_ep_start_threads) */
    return STRATA_OK;
}

int strata_worker_add_chip(strata_worker *w, const strata_chip_config *cfg, int *worker_id) {
    if (!w || !cfg || !worker_id)
        return st_fail(STRATA_EINVAL, "strata_worker_add_chip: worker, config and id must be set");
    switch (cfg->host) {
    case STRATA_HOST_THREAD:
        return add_thread_chip(w, cfg, worker_id);
    case STRATA_HOST_PROCESS:
        return st_chip_child_add(w, cfg, worker_id);
    case STRATA_HOST_MPI:
        return st_fail(STRATA_EINVAL,
                       "strata_worker_add_chip: host STRATA_HOST_MPI: a chip is a thread or a "
                       "process of its worker (STRATA_HOST_MPI is for strata_child_config.host "
                       "only)");
    default:
        return st_fail(STRATA_EINVAL, "strata_worker_add_chip: unknown host mode %d",
                       (int)cfg->host);
    }
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
    memcpy(&program, &desc->fn, sizeof program); /* see program_fn_of(), chip_driver.c */
    return st_register_next_level(w, desc->name, NULL, desc->user, program, out);
}

/* One chip of a worker, either hosting: its endpoint and buffer list, and
 * the chip itself when it lives in this process. */
typedef struct chip_ref {
    st_endpoint *ep;
    st_chip_buffers *bufs;
    strata_chip *chip; /* thread-hosted; NULL: a process chip (device calls are controls) */
} chip_ref;

static int chip_ref_of(st_endpoint *ep, chip_ref *out) {
    if (ep && ep->ops == &st_chip_ep_ops) {
        chip_ep *c = (chip_ep *)ep;
        *out = (chip_ref){.ep = ep, .bufs = &c->bufs, .chip = c->chip};
        return 1;
    }
    st_chip_child_arg *a = st_chip_child_of(ep);
    if (a) {
        *out = (chip_ref){.ep = ep, .bufs = &a->bufs, .chip = NULL};
        return 1;
    }
    return 0;
}

static int dev_malloc(const chip_ref *c, size_t n, void **dev) {
    return c->chip ? strata_chip_malloc(c->chip, n, dev) : st_chip_child_malloc(c->ep, n, dev);
}
static int dev_free(const chip_ref *c, void *dev) {
    return c->chip ? strata_chip_free(c->chip, dev) : st_chip_child_free(c->ep, dev);
}
static int dev_copy_to(const chip_ref *c, void *dst, const void *src, size_t n) {
    return c->chip ? strata_chip_copy_to(c->chip, dst, src, n)
                   : st_chip_child_copy_to(c->ep, dst, src, n);
}
static int dev_copy_from(const chip_ref *c, void *dst, const void *src, size_t n) {
    return c->chip ? strata_chip_copy_from(c->chip, dst, src, n)
                   : st_chip_child_copy_from(c->ep, dst, src, n);
}

/* The chip of worker id `id`, or 0 with an error. */
static int chip_of(strata_worker *w, int id, const char *what, chip_ref *out) {
    if (!w)
        return st_fail(STRATA_EINVAL, "%s: worker is NULL", what), 0;
    if (!chip_ref_of(st_worker_next_endpoint(w, id), out))
        return st_fail(STRATA_EINVAL, "%s: next-level worker %d is not a chip of this worker", what,
                       id),
               0;
    return 1;
}

/* The chip holding buffer b, or 0 with an error. */
static int owner_of(strata_worker *w, const strata_buffer *b, const char *what, chip_ref *out) {
    if (!w || !b)
        return st_fail(STRATA_EINVAL, "%s: worker and buffer must not be NULL", what), 0;
    st_endpoint *base;
    for (int id = 0; (base = st_worker_next_endpoint(w, id)) != NULL; id++) {
        if (!chip_ref_of(base, out))
            continue;
        pthread_mutex_lock(&out->bufs->mu);
        for (size_t i = 0; i < out->bufs->n; i++)
            if (out->bufs->v[i].b == b) {
                pthread_mutex_unlock(&out->bufs->mu);
                return 1;
            }
        pthread_mutex_unlock(&out->bufs->mu);
    }
    st_fail(STRATA_EINVAL,
            "%s: the buffer is not chip memory of this worker (allocate it with "
            "strata_worker_chip_malloc; it may have been freed)",
            what);
    return 0;
}

int strata_worker_chip_malloc(strata_worker *w, int worker_id, size_t nbytes, strata_buffer **out) {
    const char *what = "strata_worker_chip_malloc";
    if (!out)
        return st_fail(STRATA_EINVAL, "%s: out is NULL", what);
    *out = NULL;
    chip_ref c;
    if (!chip_of(w, worker_id, what, &c))
        return STRATA_EINVAL;
    void *dev = NULL;
    STRATA_TRY(dev_malloc(&c, nbytes, &dev));
    strata_buffer *b = NULL;
    int rc = strata_buffer_wrap(w, dev, nbytes, &b); /* gives it a worker-wide identity */
    if (rc == STRATA_OK)
        st_buffer_mark_device(b, worker_id); /* its views are this chip's device memory */
    pthread_mutex_lock(&c.bufs->mu);
    if (rc == STRATA_OK && c.bufs->n == c.bufs->cap) {
        chip_buffer_entry *nb = st_grow(c.bufs->v, &c.bufs->cap, c.bufs->n + 1, sizeof *nb, 16,
                                        NULL, "strata_worker_chip_malloc: the chip's buffer list");
        if (nb)
            c.bufs->v = nb;
        else
            rc = STRATA_ENOMEM;
    }
    if (rc == STRATA_OK)
        c.bufs->v[c.bufs->n++] = (chip_buffer_entry){.b = b, .dev = dev, .nbytes = nbytes};
    pthread_mutex_unlock(&c.bufs->mu);
    if (rc != STRATA_OK) {
        char keep[STRATA_ERRMSG_MAX];
        snprintf(keep, sizeof keep, "%s", strata_error_message());
        st_buffer_destroy_device(b);
        dev_free(&c, dev);
        return st_fail_msg(rc, keep);
    }
    *out = b;
    return STRATA_OK;
}

int strata_worker_chip_tensor(strata_worker *w, const strata_buffer *b, uint64_t offset,
                              strata_dtype dtype, int rank, const int64_t *shape,
                              const int64_t *strides, strata_tensor *out) {
    chip_ref c;
    if (!owner_of(w, b, "strata_worker_chip_tensor", &c))
        return STRATA_EINVAL;
    STRATA_TRY(strata_tensor_view(b, offset, dtype, rank, shape, strides, out));
    out->mem = STRATA_MEM_DEVICE;
    out->ident.owner = c.ep->worker_id;
    return STRATA_OK;
}

/* [offset, offset+n) inside the buffer, else an error. */
static int check_range(const chip_ref *c, const strata_buffer *b, uint64_t offset, size_t n,
                       const char *what) {
    size_t size = strata_buffer_size(b);
    if (offset > size || n > size - offset)
        return st_fail(STRATA_EINVAL,
                       "%s: %zu bytes at offset %llu run past the %zu-byte buffer on %s", what, n,
                       (unsigned long long)offset, size, c->ep->label);
    return STRATA_OK;
}

int strata_worker_chip_copy_to(strata_worker *w, strata_buffer *b, uint64_t offset, const void *src,
                               size_t n) {
    const char *what = "strata_worker_chip_copy_to";
    chip_ref c;
    if (!owner_of(w, b, what, &c))
        return STRATA_EINVAL;
    STRATA_TRY(check_range(&c, b, offset, n, what));
    return dev_copy_to(&c, (char *)strata_buffer_data(b) + offset, src, n);
}

int strata_worker_chip_copy_from(strata_worker *w, const strata_buffer *b, uint64_t offset,
                                 void *dst, size_t n) {
    const char *what = "strata_worker_chip_copy_from";
    chip_ref c;
    if (!owner_of(w, b, what, &c))
        return STRATA_EINVAL;
    STRATA_TRY(check_range(&c, b, offset, n, what));
    return dev_copy_from(&c, dst, (const char *)strata_buffer_data(b) + offset, n);
}

int strata_worker_chip_free(strata_worker *w, strata_buffer *b) {
    const char *what = "strata_worker_chip_free";
    chip_ref c;
    if (!owner_of(w, b, what, &c))
        return STRATA_EINVAL;
    void *dev = NULL;
    pthread_mutex_lock(&c.bufs->mu); /* find it again: a concurrent free may have won */
    for (size_t i = 0; i < c.bufs->n && !dev; i++)
        if (c.bufs->v[i].b == b) {
            dev = c.bufs->v[i].dev;
            c.bufs->v[i] = c.bufs->v[--c.bufs->n];
        }
    pthread_mutex_unlock(&c.bufs->mu);
    if (!dev)
        return st_fail(STRATA_EINVAL, "%s: the buffer was already freed", what);
    int rc = dev_free(&c, dev);
    st_buffer_destroy_device(b);
    return rc;
}
