/* backends/sim/sim_device.c - opening a simulated device and running its cores.
 *
 * Owns: device open/close, the injection knobs, memory and program calls,
 * and the simulated cores: a small pool of threads per device that execute
 * the blocks of the launched run, one launch after another.
 * Must never: run a kernel with the device lock held, busy-wait (idle cores
 * park on a condition variable; kernel delays sleep), or close a device
 * that still holds a native run.
 */
#include <dlfcn.h>
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <time.h>

#include "sim_device.h"
#include "util/alloc.h"
#include "util/futex.h"
#include "util/message.h"

int sim_fail(strata_backend_msg *m, int rc, const char *fmt, ...) {
    if (m) {
        va_list ap;
        va_start(ap, fmt);
        st_msg_formatv(m->text, sizeof m->text, fmt, ap);
        va_end(ap);
    }
    return rc;
}

/* ---- Simulated cores -------------------------------------------------------- */

typedef struct sim_core_arg {
    sim_device *dev;
    uint32_t core_id;
} sim_core_arg;

/* The last stretch of an injected delay is spun, not slept: a sleeper on a
 * shared machine wakes 30-150 us late (timer and scheduling latency), which
 * would make every simulated prepare and kernel that much longer than it
 * was asked to be, and a benchmark of the runtime around it would measure
 * the host's wake-up latency instead. The spin costs at most this much CPU
 * per delay. */
#define SIM_SPIN_TAIL_NS 200000ull

void sim_sleep_until_ns(uint64_t deadline_ns) {
    if (deadline_ns > sim_now_ns() + SIM_SPIN_TAIL_NS) {
        /* The default 50 us timer slack would stretch the sleep too. The
         * slack is per thread; restore the caller's. */
        int slack = prctl(PR_GET_TIMERSLACK, 0, 0, 0, 0);
        prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);
        uint64_t wake = deadline_ns - SIM_SPIN_TAIL_NS;
        struct timespec ts = {.tv_sec = (time_t)(wake / 1000000000ull),
                              .tv_nsec = (long)(wake % 1000000000ull)};
        while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR) {
        }
        if (slack > 0)
            prctl(PR_SET_TIMERSLACK, (unsigned long)slack, 0, 0, 0);
    }
    while (sim_now_ns() < deadline_ns)
        st_cpu_relax();
}

/* A block of the current launch is waiting for a core (mu held). */
static int block_available(const sim_device *dev) {
    const sim_run *r = dev->job;
    return r && !r->aborting && r->next_block < r->launches[r->cur].blocks;
}

/* The current launch is over: honour the kernel delay, then start the next
 * launch or complete the run (mu held; dropped while sleeping). */
static void advance_launch(sim_device *dev, sim_run *r) {
    if (!r->aborting && r->kernel_delay_ns) {
        uint64_t end = r->launch_start_ns + r->kernel_delay_ns;
        if (sim_now_ns() < end) {
            pthread_mutex_unlock(&dev->mu);
            sim_sleep_until_ns(end);
            pthread_mutex_lock(&dev->mu);
        }
    }
    if (r->aborting || r->cur + 1 == r->nlaunches) {
        dev->job = NULL;
        sim_completion_finish(&r->done, r->device_rc);
        return;
    }
    r->cur++;
    r->next_block = 0;
    r->blocks_done = 0;
    r->launch_start_ns = sim_now_ns();
    pthread_cond_broadcast(&dev->work_cv);
}

static int kernel_fault_hits(const sim_run *r, const sim_launch *l, uint32_t block) {
    return r->fault == SIM_FAULT_KERNEL && block == r->fault_block &&
           (r->fault_kernel[0] == '\0' || strcmp(r->fault_kernel, l->kernel) == 0);
}

static void record_block_failure(sim_run *r, const sim_launch *l, uint32_t block, int rc,
                                 const char *msg) {
    if (r->device_rc != 0)
        return;
    r->device_rc = rc;
    r->aborting = 1;
    st_msg_format(r->device_err, sizeof r->device_err,
                  "program '%s': kernel '%s' (launch %u of %u) block %u of %u failed with code "
                  "%d%s%s",
                  r->program_name, l->kernel, r->cur + 1, r->nlaunches, block, l->blocks, rc,
                  msg[0] ? ": " : "", msg);
}

static void *core_main(void *argp) {
    sim_core_arg *arg = argp;
    sim_device *dev = arg->dev;
    uint32_t core_id = arg->core_id;
    st_free(arg);
    pthread_mutex_lock(&dev->mu);
    for (;;) {
        while (!dev->stop && !block_available(dev))
            pthread_cond_wait(&dev->work_cv, &dev->mu);
        if (dev->stop)
            break;
        sim_run *r = dev->job;
        const sim_launch *l = &r->launches[r->cur];
        uint32_t block = r->next_block++;
        r->blocks_running++;
        int inject = kernel_fault_hits(r, l, block);
        pthread_mutex_unlock(&dev->mu);

        char msg[STRATA_BACKEND_MSG_MAX] = ""; /* it ends up inside a backend message */
        int rc;
        if (inject) {
            rc = r->fault_code;
            snprintf(msg, sizeof msg, "injected kernel fault");
        } else {
            strata_kernel_ctx k = {.block_idx = block,
                                   .block_count = l->blocks,
                                   .core_id = core_id,
                                   .nargs = l->nargs,
                                   .args = l->args,
                                   .msg = msg,
                                   .msg_cap = sizeof msg};
            rc = l->fn(&k);
            msg[sizeof msg - 1] = '\0';
        }

        pthread_mutex_lock(&dev->mu);
        r->blocks_running--;
        r->blocks_done++;
        if (rc != 0)
            record_block_failure(r, l, block, rc, msg);
        if (r->blocks_running == 0 && (r->aborting || r->blocks_done == l->blocks))
            advance_launch(dev, r);
    }
    pthread_mutex_unlock(&dev->mu);
    return NULL;
}

void sim_device_start_job(sim_device *dev, sim_run *run) {
    run->cur = 0;
    run->next_block = 0;
    run->blocks_done = 0;
    run->blocks_running = 0;
    run->aborting = 0;
    run->device_rc = 0;
    run->device_err[0] = '\0';
    run->launch_start_ns = sim_now_ns();
    if (run->nlaunches == 0) {
        sim_completion_finish(&run->done, 0); /* an empty program completes at launch */
        return;
    }
    dev->job = run;
    pthread_cond_broadcast(&dev->work_cv);
}

static void stop_cores(sim_device *dev) {
    pthread_mutex_lock(&dev->mu);
    dev->stop = 1;
    pthread_cond_broadcast(&dev->work_cv);
    pthread_mutex_unlock(&dev->mu);
    for (uint32_t i = 0; i < dev->started; i++)
        pthread_join(dev->cores[i], NULL);
    dev->started = 0;
}

/* dev->mu held. The cores not yet started (all of them at the first
 * launch; those a failed start left out at a later one). */
int sim_device_start_cores(sim_device *dev, strata_backend_msg *m) {
    for (uint32_t i = dev->started; i < dev->ncores; i++) {
        sim_core_arg *arg = st_malloc(sizeof *arg);
        if (!arg)
            return sim_fail(m, STRATA_BACKEND_ERROR,
                            "out of memory starting simulated core %u (%zu bytes)", i, sizeof *arg);
        *arg = (sim_core_arg){.dev = dev, .core_id = i};
        int err = pthread_create(&dev->cores[i], NULL, core_main, arg);
        if (err != 0) {
            st_free(arg);
            return sim_fail(m, STRATA_BACKEND_ERROR, "cannot start simulated core %u: %s", i,
                            strerror(err));
        }
        dev->started++;
    }
    return 0;
}

/* ---- Open / close ------------------------------------------------------------- */

static void destroy_device(sim_device *dev) {
    stop_cores(dev);
    if (dev->kernel_lib)
        dlclose(dev->kernel_lib);
    sim_memory_destroy(&dev->mem);
    pthread_cond_destroy(&dev->work_cv);
    pthread_mutex_destroy(&dev->mu);
    st_free(dev);
}

static int load_kernel_module(sim_device *dev, const char *path, strata_backend_msg *m) {
    if (!path || !path[0])
        return 0;
    if (strlen(path) >= sizeof dev->kernel_path)
        return sim_fail(m, STRATA_BACKEND_ERROR, "kernel module path is longer than %zu bytes",
                        sizeof dev->kernel_path - 1);
    snprintf(dev->kernel_path, sizeof dev->kernel_path, "%s", path);
    dev->kernel_lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!dev->kernel_lib) {
        const char *why = dlerror();
        return sim_fail(m, STRATA_BACKEND_ERROR, "cannot load kernel module '%s': %s", path,
                        why ? why : "unknown dlopen error");
    }
    return 0;
}

int sim_open(const strata_backend_open_params *p, void **out, strata_backend_msg *m) {
    if (!p || !out)
        return sim_fail(m, STRATA_BACKEND_ERROR, "open: NULL parameters");
    if (p->abi_version != STRATA_BACKEND_ABI_VERSION)
        return sim_fail(m, STRATA_BACKEND_ERROR, "open: parameters of ABI version %u, expected %u",
                        p->abi_version, STRATA_BACKEND_ABI_VERSION);
    if (p->device_id < 0)
        return sim_fail(m, STRATA_BACKEND_ERROR, "open: device id %d is negative", p->device_id);
    uint32_t cores = p->cores ? p->cores : SIM_DEFAULT_CORES;
    if (cores > SIM_MAX_CORES)
        return sim_fail(m, STRATA_BACKEND_ERROR, "open: %u simulated cores requested, at most %d",
                        cores, SIM_MAX_CORES);
    sim_device *dev = st_calloc(1, sizeof *dev);
    if (!dev)
        return sim_fail(m, STRATA_BACKEND_ERROR, "open: out of memory for the device (%zu bytes)",
                        sizeof *dev);
    dev->device_id = p->device_id;
    dev->ncores = cores;
    if (sim_memory_init(&dev->mem) != 0) {
        st_free(dev);
        return sim_fail(m, STRATA_BACKEND_ERROR, "open: cannot initialise device memory");
    }
    pthread_mutex_init(&dev->mu, NULL);
    pthread_cond_init(&dev->work_cv, NULL);
    /* The cores start at the first launch, not here: a chip is opened when
     * it is added to a worker, before the worker's init forks its process
     * children, and no thread may run at those forks. */
    int rc = load_kernel_module(dev, p->kernel_module, m);
    if (rc != 0) {
        destroy_device(dev);
        return rc;
    }
    *out = dev;
    return 0;
}

int sim_close(void *devp, strata_backend_msg *m) {
    sim_device *dev = devp;
    if (!dev)
        return sim_fail(m, STRATA_BACKEND_ERROR, "close: NULL device");
    pthread_mutex_lock(&dev->mu);
    uint32_t live = dev->nlive;
    pthread_mutex_unlock(&dev->mu);
    if (live)
        return sim_fail(m, STRATA_BACKEND_ERROR,
                        "close refused: %u native run(s) still prepared or executing; finalize "
                        "them first",
                        live);
    destroy_device(dev);
    return 0;
}

/* ---- Injection knobs --------------------------------------------------------------- */

static int parse_u64(const char *value, uint64_t *out) {
    char *end;
    errno = 0;
    unsigned long long v = strtoull(value, &end, 0);
    if (errno || end == value || *end || value[0] == '-')
        return -1;
    *out = v;
    return 0;
}

static int parse_fault(const char *value, sim_fault *out) {
    static const char *const names[] = {"none", "prepare",  "launch", "poll",
                                        "wait", "finalize", "kernel"};
    for (int i = 0; i < (int)(sizeof names / sizeof names[0]); i++)
        if (strcmp(value, names[i]) == 0) {
            *out = (sim_fault)i;
            return 0;
        }
    return -1;
}

/* Tests: the v-th allocation of this library on the configuring thread
 * fails (alloc_fail_after: only that one; alloc_fail_from: it and every later
 * one); 0 turns the hook off. Unlike the other knobs this is not per device:
 * the hook belongs to the library's copy of util/alloc.c. */
static void arm_alloc_hook(const char *key, uint64_t v) {
    if (v == 0)
        st_alloc_hook_off();
    else
        st_alloc_fail_after(
            v, strcmp(key, "alloc_fail_from") == 0 ? ST_ALLOC_FAIL_FROM : ST_ALLOC_FAIL_ONCE,
            ST_ALLOC_THIS_THREAD);
}

/* Apply one knob to inj (mu held). */
static int apply_knob(sim_injection *inj, const char *key, const char *value,
                      strata_backend_msg *m) {
    uint64_t v = 0;
    if (strcmp(key, "fault") == 0) {
        if (parse_fault(value, &inj->fault) != 0)
            return sim_fail(m, STRATA_BACKEND_ERROR,
                            "configure: fault '%s' is not one of none, prepare, launch, poll, "
                            "wait, finalize, kernel",
                            value);
        return 0;
    }
    if (strcmp(key, "fault_kernel") == 0) {
        if (strlen(value) >= sizeof inj->fault_kernel)
            return sim_fail(m, STRATA_BACKEND_ERROR, "configure: fault_kernel name too long");
        snprintf(inj->fault_kernel, sizeof inj->fault_kernel, "%s", value);
        return 0;
    }
    if (strcmp(key, "fault_code") == 0) {
        char *end;
        errno = 0;
        long c = strtol(value, &end, 0);
        if (errno || end == value || *end || c == 0 || c < INT32_MIN || c > INT32_MAX)
            return sim_fail(m, STRATA_BACKEND_ERROR,
                            "configure: fault_code '%s' must be a non-zero 32-bit integer", value);
        inj->fault_code = (int32_t)c;
        return 0;
    }
    if (parse_u64(value, &v) != 0)
        return sim_fail(m, STRATA_BACKEND_ERROR,
                        "configure: value '%s' of '%s' is not a non-negative integer", value, key);
    if (strcmp(key, "prepare_delay_ns") == 0)
        inj->prepare_delay_ns = v;
    else if (strcmp(key, "kernel_delay_ns") == 0)
        inj->kernel_delay_ns = v;
    else if (strcmp(key, "fault_run") == 0 && v <= UINT32_MAX)
        inj->fault_run = (uint32_t)v;
    else if (strcmp(key, "fault_block") == 0 && v <= UINT32_MAX)
        inj->fault_block = (uint32_t)v;
    else if (strcmp(key, "refuse_overlap") == 0)
        inj->refuse_overlap = v != 0;
    else if (strcmp(key, "alloc_fail_after") == 0 || strcmp(key, "alloc_fail_from") == 0)
        arm_alloc_hook(key, v);
    else
        return sim_fail(m, STRATA_BACKEND_ERROR,
                        "configure: unknown or out-of-range knob '%s' (known: prepare_delay_ns, "
                        "kernel_delay_ns, fault, fault_code, fault_run, fault_kernel, "
                        "fault_block, refuse_overlap, alloc_fail_after, alloc_fail_from)",
                        key);
    return 0;
}

int sim_configure(void *devp, const char *key, const char *value, strata_backend_msg *m) {
    sim_device *dev = devp;
    if (!dev || !key || !value)
        return sim_fail(m, STRATA_BACKEND_ERROR, "configure: NULL device, key or value");
    pthread_mutex_lock(&dev->mu);
    int rc = apply_knob(&dev->inj, key, value, m);
    pthread_mutex_unlock(&dev->mu);
    return rc;
}

/* ---- Memory ------------------------------------------------------------------------ */

int sim_mem_alloc(void *devp, uint64_t nbytes, void **addr, strata_backend_msg *m) {
    sim_device *dev = devp;
    if (!dev || !addr)
        return sim_fail(m, STRATA_BACKEND_ERROR, "malloc: NULL device or output");
    return sim_memory_alloc(&dev->mem, nbytes, addr, m);
}

int sim_mem_free(void *devp, void *addr, strata_backend_msg *m) {
    sim_device *dev = devp;
    if (!dev)
        return sim_fail(m, STRATA_BACKEND_ERROR, "free: NULL device");
    return sim_memory_free(&dev->mem, addr, m);
}

int sim_copy_to(void *devp, void *dst, const void *src, uint64_t n, strata_backend_msg *m) {
    sim_device *dev = devp;
    if (!dev || !src)
        return sim_fail(m, STRATA_BACKEND_ERROR, "copy to device: NULL device or host source");
    int rc = sim_memory_check_range(&dev->mem, dst, n, "copy to device", m);
    if (rc == 0 && n)
        memcpy(dst, src, (size_t)n);
    return rc;
}

int sim_copy_from(void *devp, void *dst, const void *src, uint64_t n, strata_backend_msg *m) {
    sim_device *dev = devp;
    if (!dev || !dst)
        return sim_fail(m, STRATA_BACKEND_ERROR, "copy from device: NULL device or host target");
    int rc = sim_memory_check_range(&dev->mem, src, n, "copy from device", m);
    if (rc == 0 && n)
        memcpy(dst, src, (size_t)n);
    return rc;
}

uint64_t sim_committed(void *devp) {
    sim_device *dev = devp;
    return dev ? sim_memory_committed(&dev->mem) : 0;
}

/* ---- Programs ------------------------------------------------------------------------ */

int sim_register_program(void *devp, const strata_backend_program *p, uint32_t *id,
                         strata_backend_msg *m) {
    sim_device *dev = devp;
    if (!dev || !p || !id || !p->fn || !p->name || !p->name[0])
        return sim_fail(m, STRATA_BACKEND_ERROR,
                        "register program: NULL device, output, function or empty name");
    if (strlen(p->name) >= STRATA_PROGRAM_NAME_MAX)
        return sim_fail(m, STRATA_BACKEND_ERROR,
                        "register program: name '%.32s...' is longer than %d bytes", p->name,
                        STRATA_PROGRAM_NAME_MAX - 1);
    pthread_mutex_lock(&dev->mu);
    int free_slot = -1;
    for (int i = 0; i < SIM_MAX_PROGRAMS; i++) {
        if (dev->programs[i].in_use && strcmp(dev->programs[i].name, p->name) == 0) {
            pthread_mutex_unlock(&dev->mu);
            return sim_fail(m, STRATA_BACKEND_ERROR,
                            "register program: '%s' is already registered on this device", p->name);
        }
        if (!dev->programs[i].in_use && free_slot < 0)
            free_slot = i;
    }
    if (free_slot < 0) {
        pthread_mutex_unlock(&dev->mu);
        return sim_fail(m, STRATA_BACKEND_ERROR,
                        "register program '%s': all %d program slots are in use; unregister one",
                        p->name, SIM_MAX_PROGRAMS);
    }
    sim_program *prog = &dev->programs[free_slot];
    *prog = (sim_program){.in_use = 1, .fn = p->fn, .user = p->user};
    snprintf(prog->name, sizeof prog->name, "%s", p->name);
    pthread_mutex_unlock(&dev->mu);
    *id = (uint32_t)free_slot;
    return 0;
}

int sim_unregister_program(void *devp, uint32_t id, strata_backend_msg *m) {
    sim_device *dev = devp;
    if (!dev)
        return sim_fail(m, STRATA_BACKEND_ERROR, "unregister program: NULL device");
    pthread_mutex_lock(&dev->mu);
    int rc = 0;
    if (id >= SIM_MAX_PROGRAMS || !dev->programs[id].in_use)
        rc = sim_fail(m, STRATA_BACKEND_ERROR, "unregister program: id %u is not registered", id);
    else if (dev->programs[id].live_runs)
        rc = sim_fail(m, STRATA_BACKEND_ERROR,
                      "unregister program '%s' refused: %u native run(s) of it are prepared or "
                      "executing",
                      dev->programs[id].name, dev->programs[id].live_runs);
    else
        memset(&dev->programs[id], 0, sizeof dev->programs[id]);
    pthread_mutex_unlock(&dev->mu);
    return rc;
}
