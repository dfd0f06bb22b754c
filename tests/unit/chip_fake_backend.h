/* tests/unit/chip_fake_backend.h - a scriptable in-process device backend for
 * the ChipWorker and ChipRunLane tests.
 *
 * Owns: a backend table (depth 2, with or without concurrent prepare) whose
 * every phase call is logged as an event ("prepare0", "launch1", ...) and
 * whose results the test scripts: one-shot return codes per phase, device
 * completion per slot (set by the test or automatically at launch), prepare
 * and finalize hooks, and a blocking wait that tells the test when it parked.
 * Must never: be linked into the library; it exists so lane behaviour can be
 * asserted event by event, deterministically.
 */
#ifndef STRATA_TEST_CHIP_FAKE_BACKEND_H
#define STRATA_TEST_CHIP_FAKE_BACKEND_H

#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "strata/backend.h"

/* Each test file uses a different subset of these helpers. */
#pragma GCC diagnostic ignored "-Wunused-function"

#define FAKE_MAGIC 0x454b4146u
#define FAKE_MAX_EVENTS 128

typedef struct fake_run {
    uint32_t magic;
    uint32_t slot;
    uint64_t epoch;
    void *dev;
    int launched;
    _Atomic uint32_t *accepted;
    uint32_t accepted_value;
} fake_run;

typedef struct fake_backend {
    char events[FAKE_MAX_EVENTS][24];
    int nevents;
    int polls, waits, opens, closes;
    int open_rc;       /* returned by open (0 = succeed) */
    int prepare_rc[2]; /* one-shot, per slot */
    int launch_rc;     /* one-shot */
    int launch_reaps;  /* a failed launch still reports the run complete */
    int poll_rc;       /* one-shot */
    int wait_rc;       /* one-shot */
    int finalize_rc;   /* one-shot */
    int complete[2];   /* the device finished the slot's run */
    int auto_complete; /* runs finish the instant they launch */
    int wait_entered;  /* waits that parked so far */
    void (*prepare_hook)(void *user, uint32_t slot, uint64_t generation);
    /* called by finalize before it logs, with fake_mu free (the slot is
     * FINALIZING in the worker meanwhile) */
    void (*finalize_hook)(void *user, uint32_t slot);
    void *hook_user;
    int dev_token;
} fake_backend;

static fake_backend fake; /* one per test executable; reset by fake_reset() */
static pthread_mutex_t fake_mu = PTHREAD_MUTEX_INITIALIZER; /* protects fake */
static pthread_cond_t fake_cv = PTHREAD_COND_INITIALIZER;   /* any change of fake */

static void fake_reset(void) {
    pthread_mutex_lock(&fake_mu);
    memset(&fake, 0, sizeof fake);
    pthread_mutex_unlock(&fake_mu);
}

/* mu held */
static void fake_event(const char *what, uint32_t slot) {
    if (fake.nevents < FAKE_MAX_EVENTS)
        snprintf(fake.events[fake.nevents++], sizeof fake.events[0], "%s%u", what, slot);
}

/* The phase events (prepare/launch/finalize/refuse/wait) joined with ',';
 * polls are counted, not listed. */
static const char *fake_trace(char *buf, size_t cap) {
    pthread_mutex_lock(&fake_mu);
    buf[0] = '\0';
    for (int i = 0; i < fake.nevents; i++) {
        if (strncmp(fake.events[i], "poll", 4) == 0)
            continue;
        size_t len = strlen(buf);
        snprintf(buf + len, cap - len, "%s%s", len ? "," : "", fake.events[i]);
    }
    pthread_mutex_unlock(&fake_mu);
    return buf;
}

static void fake_complete(uint32_t slot) {
    pthread_mutex_lock(&fake_mu);
    fake.complete[slot] = 1;
    pthread_cond_broadcast(&fake_cv);
    pthread_mutex_unlock(&fake_mu);
}

/* Block until `n` waits have parked in the device. */
static void fake_await_waiters(int n) {
    pthread_mutex_lock(&fake_mu);
    while (fake.wait_entered < n)
        pthread_cond_wait(&fake_cv, &fake_mu);
    pthread_mutex_unlock(&fake_mu);
}

static int fake_take(int *slot) {
    int rc = *slot;
    *slot = 0;
    return rc;
}

static fake_run *fake_storage(strata_native_run *s) {
    return (fake_run *)(void *)s->bytes;
}

static int fake_check(void *dev, strata_native_run *s, uint64_t epoch, strata_backend_msg *m) {
    fake_run *r = fake_storage(s);
    if (r->magic != FAKE_MAGIC || r->dev != dev || r->epoch != epoch) {
        snprintf(m->text, sizeof m->text, "fake: stale storage");
        return STRATA_BACKEND_ESTALE;
    }
    return 0;
}

static int fake_open(const strata_backend_open_params *p, void **dev, strata_backend_msg *m) {
    pthread_mutex_lock(&fake_mu);
    fake.opens++;
    int rc = fake.open_rc;
    pthread_mutex_unlock(&fake_mu);
    if (rc) {
        snprintf(m->text, sizeof m->text, "fake: open refused");
        return rc;
    }
    *dev = &fake.dev_token;
    return 0;
}

static int fake_close(void *dev, strata_backend_msg *m) {
    pthread_mutex_lock(&fake_mu);
    fake.closes++;
    pthread_mutex_unlock(&fake_mu);
    return 0;
}

static int fake_configure(void *dev, const char *k, const char *v, strata_backend_msg *m) {
    snprintf(m->text, sizeof m->text, "fake: no knobs");
    return STRATA_BACKEND_EUNSUPPORTED;
}

static int fake_mem_alloc(void *dev, uint64_t n, void **addr, strata_backend_msg *m) {
    snprintf(m->text, sizeof m->text, "fake: no memory");
    return STRATA_BACKEND_EUNSUPPORTED;
}

static int fake_mem_free(void *dev, void *addr, strata_backend_msg *m) {
    return STRATA_BACKEND_EUNSUPPORTED;
}

static int fake_copy(void *dev, void *dst, const void *src, uint64_t n, strata_backend_msg *m) {
    return STRATA_BACKEND_EUNSUPPORTED;
}

static uint64_t fake_committed(void *dev) {
    return 0;
}

static int fake_register(void *dev, const strata_backend_program *p, uint32_t *id,
                         strata_backend_msg *m) {
    *id = 0;
    return 0;
}

static int fake_unregister(void *dev, uint32_t id, strata_backend_msg *m) {
    return 0;
}

static int fake_prepare(void *dev, strata_native_run *s, uint32_t program,
                        const strata_task_view *args, const strata_call_config *cfg,
                        const strata_native_run_desc *d, strata_backend_msg *m) {
    fake_run *r = fake_storage(s);
    if (r->magic == FAKE_MAGIC) {
        snprintf(m->text, sizeof m->text, "fake: storage already prepared");
        return STRATA_BACKEND_ERROR;
    }
    if (fake.prepare_hook)
        fake.prepare_hook(fake.hook_user, d->slot, d->generation);
    pthread_mutex_lock(&fake_mu);
    int rc = fake_take(&fake.prepare_rc[d->slot]);
    if (rc) {
        fake_event("refuse", d->slot);
        pthread_mutex_unlock(&fake_mu);
        snprintf(m->text, sizeof m->text, "fake: prepare refused with %d", rc);
        return rc;
    }
    fake_event("prepare", d->slot);
    fake.complete[d->slot] = 0;
    pthread_mutex_unlock(&fake_mu);
    *r = (fake_run){.magic = FAKE_MAGIC,
                    .slot = d->slot,
                    .epoch = d->epoch,
                    .dev = dev,
                    .accepted = d->accepted,
                    .accepted_value = d->accepted_value};
    return 0;
}

static int fake_launch(void *dev, strata_native_run *s, uint64_t epoch, strata_backend_msg *m) {
    int rc = fake_check(dev, s, epoch, m);
    if (rc)
        return rc;
    fake_run *r = fake_storage(s);
    pthread_mutex_lock(&fake_mu);
    rc = fake_take(&fake.launch_rc);
    if (rc) {
        fake_event("badlaunch", r->slot);
        if (fake.launch_reaps)
            fake.complete[r->slot] = 1;
        pthread_mutex_unlock(&fake_mu);
        snprintf(m->text, sizeof m->text, "fake: launch failed with %d", rc);
        return rc;
    }
    fake_event("launch", r->slot);
    r->launched = 1;
    if (fake.auto_complete)
        fake.complete[r->slot] = 1;
    pthread_mutex_unlock(&fake_mu);
    if (r->accepted)
        atomic_store_explicit(r->accepted, r->accepted_value, memory_order_release);
    return 0;
}

static int fake_poll(void *dev, strata_native_run *s, uint64_t epoch, strata_backend_msg *m) {
    int rc = fake_check(dev, s, epoch, m);
    if (rc)
        return rc;
    fake_run *r = fake_storage(s);
    pthread_mutex_lock(&fake_mu);
    fake_event("poll", r->slot);
    fake.polls++;
    rc = fake_take(&fake.poll_rc);
    int done = fake.complete[r->slot];
    pthread_mutex_unlock(&fake_mu);
    if (rc) {
        snprintf(m->text, sizeof m->text, "fake: poll failed with %d", rc);
        return rc;
    }
    return done ? STRATA_BACKEND_COMPLETE : STRATA_BACKEND_NOT_READY;
}

static int fake_wait(void *dev, strata_native_run *s, uint64_t epoch, uint64_t deadline,
                     strata_backend_msg *m) {
    int rc = fake_check(dev, s, epoch, m);
    if (rc)
        return rc;
    fake_run *r = fake_storage(s);
    pthread_mutex_lock(&fake_mu);
    fake_event("wait", r->slot);
    fake.waits++;
    rc = fake_take(&fake.wait_rc);
    if (rc) {
        pthread_mutex_unlock(&fake_mu);
        snprintf(m->text, sizeof m->text, "fake: wait failed with %d", rc);
        return rc;
    }
    fake.wait_entered++;
    pthread_cond_broadcast(&fake_cv);
    while (!fake.complete[r->slot]) {
        if (deadline == UINT64_MAX) {
            pthread_cond_wait(&fake_cv, &fake_mu);
            continue;
        }
        struct timespec now;
        clock_gettime(CLOCK_MONOTONIC, &now);
        uint64_t n = (uint64_t)now.tv_sec * 1000000000ull + (uint64_t)now.tv_nsec;
        if (n >= deadline)
            break;
        /* the condvar uses CLOCK_REALTIME; a short relative slice is enough here */
        struct timespec rt;
        clock_gettime(CLOCK_REALTIME, &rt);
        uint64_t slice = deadline - n < 1000000ull ? deadline - n : 1000000ull;
        rt.tv_nsec += (long)slice;
        if (rt.tv_nsec >= 1000000000l) {
            rt.tv_sec++;
            rt.tv_nsec -= 1000000000l;
        }
        pthread_cond_timedwait(&fake_cv, &fake_mu, &rt);
    }
    int done = fake.complete[r->slot];
    pthread_mutex_unlock(&fake_mu);
    return done ? STRATA_BACKEND_COMPLETE : STRATA_BACKEND_NOT_READY;
}

static int fake_finalize(void *dev, strata_native_run *s, uint64_t epoch, strata_backend_msg *m) {
    int rc = fake_check(dev, s, epoch, m);
    if (rc)
        return rc;
    fake_run *r = fake_storage(s);
    if (fake.finalize_hook)
        fake.finalize_hook(fake.hook_user, r->slot);
    pthread_mutex_lock(&fake_mu);
    fake_event("finalize", r->slot);
    rc = fake_take(&fake.finalize_rc);
    pthread_mutex_unlock(&fake_mu);
    memset(s->bytes, 0, sizeof(fake_run));
    if (rc)
        snprintf(m->text, sizeof m->text, "fake: finalize failed with %d", rc);
    return rc;
}

#define FAKE_OPS(concurrent)                                                                       \
    {                                                                                              \
        .abi_version = STRATA_BACKEND_ABI_VERSION, .struct_size = sizeof(strata_backend_ops),      \
        .name = "fake",                                                                            \
        .contract = {.abi_version = STRATA_BACKEND_ABI_VERSION,                                    \
                     .pipeline_depth = 2,                                                          \
                     .concurrent_prepare = (concurrent),                                           \
                     .run_storage_bytes = sizeof(fake_run)},                                       \
        .open = fake_open, .close = fake_close, .configure = fake_configure,                       \
        .mem_alloc = fake_mem_alloc, .mem_free = fake_mem_free, .copy_to = fake_copy,              \
        .copy_from = fake_copy, .committed_bytes = fake_committed,                                 \
        .register_program = fake_register, .unregister_program = fake_unregister,                  \
        .prepare = fake_prepare, .launch = fake_launch, .poll = fake_poll, .wait = fake_wait,      \
        .finalize = fake_finalize                                                                  \
    }

static const strata_backend_ops fake_ops_capable = FAKE_OPS(1);
static const strata_backend_ops fake_ops_serial = FAKE_OPS(0);

/* Depth 2 with concurrent prepare. */
static const strata_backend_ops *fake_entry_capable(uint32_t v, uint32_t *mine) {
    *mine = STRATA_BACKEND_ABI_VERSION;
    return v == STRATA_BACKEND_ABI_VERSION ? &fake_ops_capable : NULL;
}

/* Depth 2 without concurrent prepare (a successor is never prepared early). */
static const strata_backend_ops *fake_entry_serial(uint32_t v, uint32_t *mine) {
    *mine = STRATA_BACKEND_ABI_VERSION;
    return v == STRATA_BACKEND_ABI_VERSION ? &fake_ops_serial : NULL;
}

#endif
