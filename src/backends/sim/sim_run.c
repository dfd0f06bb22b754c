/* backends/sim/sim_run.c - the native run phases of the sim backend.
 *
 * Owns: prepare (run the program, resolve its kernels), launch, poll, wait
 * and finalize of a run placed in caller-owned storage, the checks every
 * phase call makes on that storage, and the injected phase faults.
 * Must never: touch storage that fails the checks (not prepared, another
 * device, another epoch), write the acceptance word anywhere but at the real
 * launch, hold the device lock while a program runs or a waiter parks, or
 * let a failed prepare leave anything behind.
 *
 * Admission: at most two live runs per device; a second prepare is allowed
 * only while the other run is launched (it owns execution), and a launch
 * waits (STRATA_BACKEND_EBUSY) until the owner is finalized.
 */
#include <dlfcn.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sim_device.h"
#include "util/alloc.h"
#include "util/growable.h"
#include "util/message.h"

#define SIM_MAX_BLOCKS (1u << 20)

static sim_run *storage_run(strata_native_run *storage) {
    return (sim_run *)(void *)storage->bytes;
}

/* The checks every phase call after prepare makes. */
static sim_run *checked_run(sim_device *dev, strata_native_run *storage, uint64_t epoch,
                            const char *phase, strata_backend_msg *m, int *rc) {
    if (!dev || !storage) {
        *rc = sim_fail(m, STRATA_BACKEND_ERROR, "%s: NULL device or run storage", phase);
        return NULL;
    }
    sim_run *r = storage_run(storage);
    if (atomic_load_explicit(&r->magic, memory_order_acquire) != SIM_RUN_MAGIC) {
        *rc = sim_fail(m, STRATA_BACKEND_ESTALE,
                       "%s: the storage holds no prepared run (never prepared, or already "
                       "finalized)",
                       phase);
        return NULL;
    }
    if (r->dev != dev) {
        *rc = sim_fail(m, STRATA_BACKEND_ESTALE,
                       "%s: the prepared run belongs to a different device", phase);
        return NULL;
    }
    if (r->epoch != epoch) {
        *rc = sim_fail(m, STRATA_BACKEND_ESTALE,
                       "%s: epoch %llu is stale (the storage holds run epoch %llu)", phase,
                       (unsigned long long)epoch, (unsigned long long)r->epoch);
        return NULL;
    }
    return r;
}

/* ---- Prepare ------------------------------------------------------------------ */

typedef struct sim_build {
    sim_run *run;
    sim_device *dev;
    char msg[STRATA_BACKEND_MSG_MAX]; /* first failure while building */
} sim_build;

static int build_fail(sim_build *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static int build_fail(sim_build *b, const char *fmt, ...) {
    if (b->msg[0] == '\0') {
        va_list ap;
        va_start(ap, fmt);
        st_msg_formatv(b->msg, sizeof b->msg, fmt, ap);
        va_end(ap);
    }
    return STRATA_BACKEND_ERROR;
}

static void program_fail(strata_program_ctx *ctx, const char *msg) {
    sim_build *b = ctx->impl;
    build_fail(b, "%s", msg ? msg : "(no message)");
}

static int append_launch(sim_run *r, const sim_launch *l) {
    if (r->nlaunches == r->cap) {
        size_t bytes;
        sim_launch *n =
            st_grow_raw(r->launches, &r->cap, r->nlaunches + 1, sizeof *n, 4, NULL, &bytes);
        if (!n)
            return -1;
        r->launches = n;
    }
    r->launches[r->nlaunches++] = *l;
    return 0;
}

static int program_launch(strata_program_ctx *ctx, const char *kernel, uint32_t blocks,
                          const uint64_t *args, uint32_t nargs) {
    sim_build *b = ctx->impl;
    sim_run *r = b->run;
    if (!kernel || !kernel[0])
        return build_fail(b, "launch with a NULL or empty kernel name");
    if (strlen(kernel) >= STRATA_PROGRAM_NAME_MAX)
        return build_fail(b, "kernel name '%.32s...' is longer than %d bytes", kernel,
                          STRATA_PROGRAM_NAME_MAX - 1);
    if (nargs > STRATA_KERNEL_MAX_ARGS || (nargs && !args))
        return build_fail(b, "kernel '%s': %u argument words (at most %d, and args non-NULL)",
                          kernel, nargs, STRATA_KERNEL_MAX_ARGS);
    if (blocks == 0)
        blocks = ctx->block_dim;
    if (blocks == 0 || blocks > SIM_MAX_BLOCKS)
        return build_fail(b,
                          "kernel '%s': %u blocks (pass 1..%u blocks, or set block_dim in the "
                          "call config)",
                          kernel, blocks, SIM_MAX_BLOCKS);
    if (!b->dev->kernel_lib)
        return build_fail(b,
                          "kernel '%s': the chip has no kernel module (set "
                          "strata_chip_config.kernel_module)",
                          kernel);
    dlerror();
    void *sym = dlsym(b->dev->kernel_lib, kernel);
    if (!sym)
        return build_fail(b, "kernel '%s' not found in kernel module '%s'", kernel,
                          b->dev->kernel_path);
    sim_launch l = {.blocks = blocks, .nargs = nargs};
    /* A kernel module exports plain functions; dlsym returns them as data pointers. */
    memcpy(&l.fn, &sym, sizeof l.fn);
    snprintf(l.kernel, sizeof l.kernel, "%s", kernel);
    if (nargs)
        memcpy(l.args, args, nargs * sizeof args[0]);
    if (append_launch(r, &l) != 0)
        return build_fail(b, "out of memory enqueuing kernel '%s' (launch list of %zu bytes)",
                          kernel, (size_t)(r->cap ? r->cap * 2 : 4) * sizeof(sim_launch));
    return 0;
}

static int storage_is_zero(const strata_native_run *storage) {
    for (size_t i = 0; i < sizeof(sim_run); i++)
        if (storage->bytes[i])
            return 0;
    return 1;
}

static void remove_live(sim_device *dev, sim_run *r) {
    for (uint32_t i = 0; i < dev->nlive; i++)
        if (dev->live[i] == r) {
            dev->live[i] = dev->live[--dev->nlive];
            dev->live[dev->nlive] = NULL;
            return;
        }
}

/* Admit a new run next to the live ones and pick its fault (mu held). */
static int admit_prepare(sim_device *dev, sim_run *r, uint32_t program,
                         const strata_native_run_desc *desc, strata_backend_msg *m) {
    if (program >= SIM_MAX_PROGRAMS || !dev->programs[program].in_use)
        return sim_fail(m, STRATA_BACKEND_ERROR, "prepare: program id %u is not registered",
                        program);
    const char *pname = dev->programs[program].name;
    if (dev->nlive >= STRATA_BACKEND_MAX_DEPTH)
        return sim_fail(m, STRATA_BACKEND_ERROR,
                        "prepare of program '%s': the device already holds %u unfinished native "
                        "runs",
                        pname, dev->nlive);
    if (dev->nlive == 1) {
        sim_run *other = dev->live[0];
        if (other != dev->owner)
            return sim_fail(m, STRATA_BACKEND_ERROR,
                            "prepare of program '%s': run epoch %llu is prepared but not "
                            "launched; a successor requires an active predecessor",
                            pname, (unsigned long long)other->epoch);
        if (dev->inj.refuse_overlap || (desc->flags & STRATA_NATIVE_DIAGNOSTICS) ||
            (other->desc.flags & STRATA_NATIVE_DIAGNOSTICS))
            return sim_fail(m, STRATA_BACKEND_EINCOMPATIBLE,
                            "prepare of program '%s' cannot overlap run epoch %llu (%s); prepare "
                            "it after that run is finalized",
                            pname, (unsigned long long)other->epoch,
                            dev->inj.refuse_overlap ? "refuse_overlap is set"
                                                    : "diagnostics are device-wide");
    }
    uint64_t number = ++dev->prepared_runs;
    const sim_injection *inj = &dev->inj;
    if (inj->fault != SIM_FAULT_NONE && (inj->fault_run == 0 || inj->fault_run == number)) {
        r->fault = inj->fault;
        r->fault_code = inj->fault_code ? inj->fault_code : -5;
        r->fault_block = inj->fault_block;
        snprintf(r->fault_kernel, sizeof r->fault_kernel, "%s", inj->fault_kernel);
    }
    r->kernel_delay_ns = inj->kernel_delay_ns;
    snprintf(r->program_name, sizeof r->program_name, "%s", pname);
    dev->live[dev->nlive++] = r;
    dev->programs[program].live_runs++;
    return 0;
}

static void release_live(sim_device *dev, sim_run *r) {
    pthread_mutex_lock(&dev->mu);
    remove_live(dev, r);
    if (dev->owner == r)
        dev->owner = NULL;
    if (r->program < SIM_MAX_PROGRAMS && dev->programs[r->program].live_runs)
        dev->programs[r->program].live_runs--;
    pthread_mutex_unlock(&dev->mu);
}

/* Leave the storage as it was before prepare: all zero. */
static void clear_run(sim_run *r) {
    st_free(r->launches);
    memset((void *)r, 0, sizeof *r);
}

static int prepare_fail(sim_device *dev, sim_run *r, strata_backend_msg *m, int rc, const char *fmt,
                        ...) __attribute__((format(printf, 5, 6)));

static int prepare_fail(sim_device *dev, sim_run *r, strata_backend_msg *m, int rc, const char *fmt,
                        ...) {
    if (m) {
        va_list ap;
        va_start(ap, fmt);
        st_msg_formatv(m->text, sizeof m->text, fmt, ap);
        va_end(ap);
    }
    release_live(dev, r);
    clear_run(r);
    return rc;
}

int sim_prepare(void *devp, strata_native_run *storage, uint32_t program,
                const strata_task_view *args, const strata_call_config *cfg,
                const strata_native_run_desc *desc, strata_backend_msg *m) {
    sim_device *dev = devp;
    if (!dev || !storage || !desc)
        return sim_fail(m, STRATA_BACKEND_ERROR, "prepare: NULL device, storage or descriptor");
    if (((uintptr_t)storage & 63u) != 0)
        return sim_fail(m, STRATA_BACKEND_ERROR, "prepare: run storage is not 64-byte aligned");
    if (desc->epoch == 0 || desc->slot >= STRATA_BACKEND_MAX_DEPTH || desc->reserved)
        return sim_fail(m, STRATA_BACKEND_ERROR,
                        "prepare: descriptor has epoch 0, slot %u >= %u or reserved bits set",
                        desc->slot, STRATA_BACKEND_MAX_DEPTH);
    sim_run *r = storage_run(storage);
    uint64_t magic = atomic_load_explicit(&r->magic, memory_order_acquire);
    if (magic == SIM_RUN_MAGIC)
        return sim_fail(m, STRATA_BACKEND_ERROR,
                        "prepare: the storage already contains a prepared run (epoch %llu); "
                        "finalize it first",
                        (unsigned long long)r->epoch);
    if (!storage_is_zero(storage))
        return sim_fail(m, STRATA_BACKEND_ERROR,
                        "prepare: the run storage is not zero-initialized");

    r->dev = dev;
    r->epoch = desc->epoch;
    r->desc = *desc;
    r->program = program;
    pthread_mutex_lock(&dev->mu);
    int rc = admit_prepare(dev, r, program, desc, m);
    strata_program_fn fn = rc == 0 ? dev->programs[program].fn : NULL;
    void *user = rc == 0 ? dev->programs[program].user : NULL;
    uint64_t delay = dev->inj.prepare_delay_ns;
    pthread_mutex_unlock(&dev->mu);
    if (rc != 0) {
        memset((void *)r, 0, sizeof *r);
        return rc;
    }

    if (delay)
        sim_sleep_until_ns(sim_now_ns() + delay);

    sim_build b = {.run = r, .dev = dev};
    strata_program_ctx ctx = {.abi_version = STRATA_BACKEND_ABI_VERSION,
                              .block_dim = cfg ? cfg->block_dim : 0,
                              .program = r->program_name,
                              .impl = &b,
                              .launch = program_launch,
                              .fail = program_fail};
    int prc = fn(&ctx, args, user);
    if (prc != 0 || b.msg[0])
        return prepare_fail(dev, r, m, STRATA_BACKEND_ERROR,
                            "program '%s' failed while enqueuing its launches (code %d): %s",
                            r->program_name, prc, b.msg[0] ? b.msg : "(no message)");
    if (r->fault == SIM_FAULT_PREPARE)
        return prepare_fail(dev, r, m, r->fault_code,
                            "injected prepare fault in program '%s' (code %d)", r->program_name,
                            r->fault_code);
    r->phase = SIM_RUN_PREPARED;
    atomic_store_explicit(&r->magic, SIM_RUN_MAGIC, memory_order_release);
    return 0;
}

/* ---- Launch, poll, wait ------------------------------------------------------------ */

static const char *first_kernel(const sim_run *r) {
    return r->nlaunches ? r->launches[0].kernel : "(none)";
}

int sim_launch_run(void *devp, strata_native_run *storage, uint64_t epoch, strata_backend_msg *m) {
    sim_device *dev = devp;
    int rc = 0;
    sim_run *r = checked_run(dev, storage, epoch, "launch", m, &rc);
    if (!r)
        return rc;
    pthread_mutex_lock(&dev->mu);
    if (r->phase != SIM_RUN_PREPARED)
        rc = sim_fail(m, STRATA_BACKEND_ERROR, "launch of program '%s': the run already launched",
                      r->program_name);
    else if (dev->owner && dev->owner != r)
        rc = sim_fail(m, STRATA_BACKEND_EBUSY,
                      "launch of program '%s': run epoch %llu still owns the device; launch "
                      "after it is finalized",
                      r->program_name, (unsigned long long)dev->owner->epoch);
    else if (r->fault == SIM_FAULT_LAUNCH)
        rc = sim_fail(m, r->fault_code,
                      "injected launch fault: program '%s', kernel '%s' (launch 1 of %u) was "
                      "not started (code %d)",
                      r->program_name, first_kernel(r), r->nlaunches, r->fault_code);
    if (rc == 0)
        rc = sim_device_start_cores(dev, m); /* once started, nothing to do */
    if (rc == 0) {
        dev->owner = r;
        r->phase = SIM_RUN_RUNNING;
        sim_completion_reset(&r->done, 1);
        sim_device_start_job(dev, r);
        /* The launch is real now: publish acceptance, never earlier. */
        if (r->desc.accepted)
            atomic_store_explicit(r->desc.accepted, r->desc.accepted_value, memory_order_release);
    }
    pthread_mutex_unlock(&dev->mu);
    return rc;
}

static int completion_result(sim_run *r, uint32_t state, const char *phase, strata_backend_msg *m) {
    switch (state) {
    case SIM_DONE_COMPLETE:
        return STRATA_BACKEND_COMPLETE;
    case SIM_DONE_NOT_READY:
        return STRATA_BACKEND_NOT_READY;
    default:
        return sim_fail(m, STRATA_BACKEND_ERROR, "%s of program '%s': the run was abandoned", phase,
                        r->program_name);
    }
}

int sim_poll(void *devp, strata_native_run *storage, uint64_t epoch, strata_backend_msg *m) {
    int rc = 0;
    sim_run *r = checked_run(devp, storage, epoch, "poll", m, &rc);
    if (!r)
        return rc;
    if (r->phase != SIM_RUN_RUNNING)
        return sim_fail(m, STRATA_BACKEND_ERROR, "poll of program '%s': the run was never launched",
                        r->program_name);
    if (r->fault == SIM_FAULT_POLL)
        return sim_fail(m, r->fault_code, "injected poll fault: program '%s' (code %d)",
                        r->program_name, r->fault_code);
    if (r->fault == SIM_FAULT_WAIT)
        return STRATA_BACKEND_NOT_READY; /* only the (failing) wait can observe this run */
    return completion_result(r, sim_completion_state(&r->done), "poll", m);
}

int sim_wait(void *devp, strata_native_run *storage, uint64_t epoch, uint64_t deadline_ns,
             strata_backend_msg *m) {
    int rc = 0;
    sim_run *r = checked_run(devp, storage, epoch, "wait", m, &rc);
    if (!r)
        return rc;
    if (r->phase != SIM_RUN_RUNNING)
        return sim_fail(m, STRATA_BACKEND_ERROR, "wait of program '%s': the run was never launched",
                        r->program_name);
    if (r->fault == SIM_FAULT_WAIT)
        return sim_fail(m, r->fault_code, "injected wait fault: program '%s' (code %d)",
                        r->program_name, r->fault_code);
    return completion_result(r, sim_completion_wait(&r->done, deadline_ns), "wait", m);
}

/* ---- Finalize ------------------------------------------------------------------------ */

int sim_finalize(void *devp, strata_native_run *storage, uint64_t epoch, strata_backend_msg *m) {
    sim_device *dev = devp;
    int rc = 0;
    sim_run *r = checked_run(dev, storage, epoch, "finalize", m, &rc);
    if (!r)
        return rc;
    int launched = r->phase == SIM_RUN_RUNNING;
    if (launched)
        sim_completion_wait(&r->done, UINT64_MAX); /* drain: never release a running run */
    atomic_store_explicit(&r->magic, 0, memory_order_release);
    release_live(dev, r);
    if (r->fault == SIM_FAULT_FINALIZE)
        rc = sim_fail(m, r->fault_code, "injected finalize fault: program '%s' (code %d)",
                      r->program_name, r->fault_code);
    else if (launched && r->device_rc != 0)
        rc = sim_fail(m, r->device_rc, "%s", r->device_err);
    clear_run(r);
    return rc;
}
