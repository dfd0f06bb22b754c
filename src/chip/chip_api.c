/* chip/chip_api.c - the public L2 API (include/strata/chip.h).
 *
 * Owns: strata_chip (a ChipWorker, its lane and the chip's program registry),
 * validation of every public argument, the sim injection knobs (strata/sim.h), and the
 * program-side calls (strata_program_launch / strata_program_fail).
 * Must never: let bad input reach the ChipWorker or the backend, or keep
 * state outside a chip (every chip is independent).
 *
 * A strata_chip_run is the lane's run handle under its public name.
 */
#include "strata/chip.h"
#include "strata/backend.h"
#include "strata/sim.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chip/chip_internal.h"
#include "chip/chip_worker.h"
#include "chip/run_lane.h"
#include "util/alloc.h"
#include "util/clock.h"
#include "util/error.h"
#include "util/message.h"
#include "util/registry.h"
#include "util/view.h"

#define ST_CHIP_MAX_PROGRAMS 64
#define ST_CHIP_MAX_CORES 64

/* A registered program: the payload of its entry in the chip's registry. */
typedef struct st_chip_program {
    uint32_t backend_id;
    char name[STRATA_PROGRAM_NAME_MAX];
} st_chip_program;

struct strata_chip {
    st_chip_worker *cw;
    st_run_lane *lane; /* closed by strata_chip_close, freed by strata_chip_destroy */
    int is_sim;
    int closed;           /* strata_chip_close ran: later work is ECLOSED */
    st_error close;       /* what close failed with, returned again on every call */
    pthread_mutex_t mu;   /* protects programs: every lookup takes it (ids are reused after an
                             unregistration); a leaf lock (backend calls made under it never call
                             back into strata) */
    st_registry programs; /* st_chip_program payloads (util/registry.h) */
    st_registry_entry program_entries[ST_CHIP_MAX_PROGRAMS];
};

/* The lane's handle. Queries take a const handle; the lane may still make
 * progress inside them (progress is pulled), which the caller cannot see. */
static st_lane_run *lane_run(const strata_chip_run *run) {
    return (st_lane_run *)(uintptr_t)run;
}

/* Work on a closed chip is refused the same way a closed worker refuses it. */
static int require_open(const strata_chip *chip, const char *what) {
    return chip->closed
               ? st_fail(STRATA_ECLOSED, "%s: %s is closed", what, st_chip_worker_label(chip->cw))
               : STRATA_OK;
}

/* ---- Configuration and injection ------------------------------------------------- */

void strata_chip_config_init(strata_chip_config *cfg) {
    if (!cfg)
        return;
    memset(cfg, 0, sizeof *cfg);
    cfg->backend = "sim";
    cfg->device_id = 0;
    cfg->sim_cores = 2;
}

static const char *fault_name(strata_sim_fault f) {
    switch (f) {
    case STRATA_SIM_FAULT_NONE:
        return "none";
    case STRATA_SIM_FAULT_PREPARE:
        return "prepare";
    case STRATA_SIM_FAULT_LAUNCH:
        return "launch";
    case STRATA_SIM_FAULT_POLL:
        return "poll";
    case STRATA_SIM_FAULT_WAIT:
        return "wait";
    case STRATA_SIM_FAULT_FINALIZE:
        return "finalize";
    case STRATA_SIM_FAULT_KERNEL:
        return "kernel";
    }
    return NULL;
}

static int validate_injection(const strata_sim_injection *inj) {
    if (!fault_name(inj->fault))
        return st_fail(STRATA_EINVAL, "sim injection: fault %d is not a strata_sim_fault",
                       (int)inj->fault);
    if (!memchr(inj->fault_kernel, '\0', sizeof inj->fault_kernel))
        return st_fail(STRATA_EINVAL, "sim injection: fault_kernel is not NUL-terminated");
    return STRATA_OK;
}

static int injection_is_set(const strata_sim_injection *inj) {
    static const strata_sim_injection none;
    return memcmp(inj, &none, sizeof none) != 0;
}

/* Every knob is written, so a new injection replaces the old one entirely. */
static int apply_injection(strata_chip *chip, const strata_sim_injection *inj) {
    char v[32];
    snprintf(v, sizeof v, "%" PRIu64, inj->prepare_delay_ns);
    STRATA_TRY(st_cw_configure(chip->cw, "prepare_delay_ns", v));
    snprintf(v, sizeof v, "%" PRIu64, inj->kernel_delay_ns);
    STRATA_TRY(st_cw_configure(chip->cw, "kernel_delay_ns", v));
    STRATA_TRY(st_cw_configure(chip->cw, "fault", fault_name(inj->fault)));
    snprintf(v, sizeof v, "%d", inj->fault_code ? inj->fault_code : -5);
    STRATA_TRY(st_cw_configure(chip->cw, "fault_code", v));
    snprintf(v, sizeof v, "%u", inj->fault_run);
    STRATA_TRY(st_cw_configure(chip->cw, "fault_run", v));
    STRATA_TRY(st_cw_configure(chip->cw, "fault_kernel", inj->fault_kernel));
    snprintf(v, sizeof v, "%u", inj->fault_block);
    STRATA_TRY(st_cw_configure(chip->cw, "fault_block", v));
    return st_cw_configure(chip->cw, "refuse_overlap", inj->refuse_overlap ? "1" : "0");
}

int strata_chip_set_sim_injection(strata_chip *chip, const strata_sim_injection *inj) {
    if (!chip || !inj)
        return st_fail(STRATA_EINVAL, "strata_chip_set_sim_injection: NULL chip or injection");
    STRATA_TRY(require_open(chip, "strata_chip_set_sim_injection"));
    if (!chip->is_sim)
        return st_fail(STRATA_EINVAL, "%s: injection knobs exist only on the sim backend",
                       st_chip_worker_label(chip->cw));
    STRATA_TRY(validate_injection(inj));
    return apply_injection(chip, inj);
}

/* ---- Open / close ------------------------------------------------------------------ */

static int validate_config(const strata_chip_config *cfg) {
    if (!cfg->backend_entry && (!cfg->backend || !cfg->backend[0]))
        return st_fail(STRATA_EINVAL,
                       "strata_chip_open: backend is empty: set it to \"sim\" or a backend path");
    if (cfg->device_id < 0)
        return st_fail(STRATA_EINVAL, "strata_chip_open: device_id %d is negative (use >= 0)",
                       cfg->device_id);
    if (cfg->pipeline_depth > STRATA_BACKEND_MAX_DEPTH)
        return st_fail(STRATA_EINVAL, "strata_chip_open: pipeline_depth %u (use 0, 1 or 2)",
                       cfg->pipeline_depth);
    if (cfg->host == STRATA_HOST_MPI)
        return st_fail(STRATA_EINVAL,
                       "strata_chip_open: host STRATA_HOST_MPI: a chip is a thread or a process "
                       "of its worker (STRATA_HOST_MPI is for strata_child_config.host only)");
    if ((unsigned)cfg->host > STRATA_HOST_PROCESS)
        return st_fail(STRATA_EINVAL, "strata_chip_open: host mode %d is unknown", (int)cfg->host);
    if (cfg->sim_cores > ST_CHIP_MAX_CORES)
        return st_fail(STRATA_EINVAL, "strata_chip_open: sim_cores %u (at most %d)", cfg->sim_cores,
                       ST_CHIP_MAX_CORES);
    return cfg->sim ? validate_injection(cfg->sim) : STRATA_OK;
}

static void free_chip(strata_chip *chip) {
    st_lane_release(chip->lane);
    st_chip_worker_free(chip->cw);
    for (uint32_t i = 0; i < st_registry_count(&chip->programs); i++)
        st_free(st_registry_get(&chip->programs, (int32_t)i));
    pthread_mutex_destroy(&chip->mu);
    st_free(chip);
}

int strata_chip_open(const strata_chip_config *cfg, strata_chip **out) {
    if (!cfg || !out)
        return st_fail(STRATA_EINVAL, "strata_chip_open: NULL config or output");
    *out = NULL;
    STRATA_TRY(validate_config(cfg));
    strata_chip *chip = st_calloc(1, sizeof *chip);
    if (!chip)
        return st_fail_nomem("strata_chip_open: the chip", sizeof *chip);
    pthread_mutex_init(&chip->mu, NULL);
    st_registry_init(&chip->programs, chip->program_entries, ST_CHIP_MAX_PROGRAMS, "program",
                     "chip");
    chip->cw = st_chip_worker_new();
    if (!chip->cw) {
        free_chip(chip);
        return st_fail_prefix(STRATA_ENOMEM, "strata_chip_open");
    }
    st_chip_worker_config wc = {.backend = cfg->backend,
                                .entry = cfg->backend_entry,
                                .entry_label = cfg->backend ? cfg->backend : "in-process backend",
                                .device_id = cfg->device_id,
                                .kernel_module = cfg->kernel_module,
                                .cores = cfg->sim_cores,
                                .max_depth = cfg->pipeline_depth};
    int rc = st_chip_worker_init(chip->cw, &wc);
    if (rc == STRATA_OK) {
        chip->is_sim = strcmp(st_chip_worker_backend_name(chip->cw), "sim") == 0;
        if (cfg->sim && injection_is_set(cfg->sim))
            rc = chip->is_sim ? apply_injection(chip, cfg->sim)
                              : st_fail(STRATA_EINVAL,
                                        "%s: sim injection knobs are set but the backend is '%s'",
                                        st_chip_worker_label(chip->cw),
                                        st_chip_worker_backend_name(chip->cw));
    }
    if (rc == STRATA_OK)
        rc = st_lane_create(chip->cw, &chip->lane);
    if (rc != STRATA_OK) {
        free_chip(chip);
        return rc;
    }
    *out = chip;
    return STRATA_OK;
}

/* The first close: drain the lane (refusing submits), then close the device.
 * The poison, else a device error from closing, is the chip's close status. */
static void close_once(strata_chip *chip) {
    chip->closed = 1;
    int rc = st_lane_close(chip->lane);
    if (rc != STRATA_OK)
        st_error_set(&chip->close, rc, "%s", strata_error_message());
    int frc = st_chip_worker_finalize(chip->cw);
    if (frc != STRATA_OK) /* kept only if the lane was not poisoned: first error wins */
        st_error_set(&chip->close, frc, "%s", strata_error_message());
}

int strata_chip_close(strata_chip *chip) {
    if (!chip)
        return st_fail(STRATA_EINVAL, "strata_chip_close: NULL chip");
    if (!chip->closed)
        close_once(chip);
    return st_error_raise(&chip->close);
}

void strata_chip_destroy(strata_chip *chip) {
    if (!chip)
        return;
    if (!chip->closed)
        close_once(chip);
    free_chip(chip); /* the lane lives on while run handles still hold it */
}

const char *strata_chip_label(const strata_chip *chip) {
    return chip ? st_chip_worker_label(chip->cw) : "(no chip)";
}

/* ---- Programs ------------------------------------------------------------------------ */

int strata_chip_register_program(strata_chip *chip, const strata_chip_program_desc *desc,
                                 strata_chip_program *out) {
    if (!chip || !desc || !out)
        return st_fail(STRATA_EINVAL, "strata_chip_register_program: NULL chip, desc or output");
    STRATA_TRY(require_open(chip, "strata_chip_register_program"));
    if (!desc->fn)
        return st_fail(STRATA_EINVAL, "strata_chip_register_program: program function is NULL");
    if (!desc->name || !desc->name[0] || strlen(desc->name) >= STRATA_PROGRAM_NAME_MAX)
        return st_fail(STRATA_EINVAL, "strata_chip_register_program: the name must be 1..%d bytes",
                       STRATA_PROGRAM_NAME_MAX - 1);
    st_chip_program *p = st_malloc(sizeof *p);
    if (!p)
        return st_fail_nomem("strata_chip_register_program: the program's record", sizeof *p);
    snprintf(p->name, sizeof p->name, "%s", desc->name);
    pthread_mutex_lock(&chip->mu);
    int32_t id = -1;
    int rc = st_registry_add(&chip->programs, p->name, p, st_chip_worker_label(chip->cw), &id);
    if (rc == STRATA_OK) {
        strata_backend_program bp = {.name = desc->name, .fn = desc->fn, .user = desc->user};
        rc = st_cw_register_program(chip->cw, &bp, &p->backend_id);
        if (rc != STRATA_OK) /* no reader saw it: every lookup holds mu */
            st_registry_remove(&chip->programs, id);
    }
    pthread_mutex_unlock(&chip->mu);
    if (rc != STRATA_OK) {
        st_free(p);
        return rc;
    }
    *out = id;
    return STRATA_OK;
}

/* Copy of a registered program's entry, or an error naming the id. */
static int find_program(strata_chip *chip, strata_chip_program prog, st_chip_program *out) {
    pthread_mutex_lock(&chip->mu);
    const st_chip_program *p = st_registry_get(&chip->programs, prog);
    if (p)
        *out = *p;
    pthread_mutex_unlock(&chip->mu);
    return p ? STRATA_OK
             : st_fail(STRATA_EINVAL, "%s: program id %d is not registered on this chip",
                       st_chip_worker_label(chip->cw), (int)prog);
}

int strata_chip_unregister_program(strata_chip *chip, strata_chip_program prog) {
    if (!chip)
        return st_fail(STRATA_EINVAL, "strata_chip_unregister_program: NULL chip");
    STRATA_TRY(require_open(chip, "strata_chip_unregister_program"));
    st_chip_program p;
    STRATA_TRY(find_program(chip, prog, &p));
    if (st_lane_program_in_use(chip->lane, p.backend_id))
        return st_fail(STRATA_ESTATE,
                       "%s: program '%s' has queued or live runs; wait for them before "
                       "unregistering",
                       st_chip_worker_label(chip->cw), p.name);
    pthread_mutex_lock(&chip->mu);
    int rc = st_cw_unregister_program(chip->cw, p.backend_id);
    if (rc == STRATA_OK)
        st_free(st_registry_remove(&chip->programs, prog));
    pthread_mutex_unlock(&chip->mu);
    return rc;
}

int strata_program_launch(strata_program_ctx *ctx, const char *kernel, uint32_t blocks,
                          const uint64_t *args, uint32_t nargs) {
    if (!ctx || !ctx->launch)
        return st_fail(STRATA_EINVAL, "strata_program_launch: NULL program context");
    if (ctx->abi_version != STRATA_BACKEND_ABI_VERSION)
        return st_fail(STRATA_EABI,
                       "strata_program_launch: program context of ABI version %u, expected %u",
                       ctx->abi_version, STRATA_BACKEND_ABI_VERSION);
    int rc = ctx->launch(ctx, kernel, blocks, args, nargs);
    return rc == 0 ? STRATA_OK
                   : st_fail(STRATA_EINVAL, "program '%s': launch of kernel '%s' refused (%d)",
                             ctx->program ? ctx->program : "?", kernel ? kernel : "(null)", rc);
}

void strata_program_fail(strata_program_ctx *ctx, const char *fmt, ...) {
    if (!ctx || !ctx->fail || !fmt)
        return;
    char buf[STRATA_BACKEND_MSG_MAX]; /* the backend's limit: it takes the message as is */
    va_list ap;
    va_start(ap, fmt);
    st_msg_formatv(buf, sizeof buf, fmt, ap);
    va_end(ap);
    ctx->fail(ctx, buf);
}

/* ---- Device memory ------------------------------------------------------------------ */

int strata_chip_malloc(strata_chip *chip, size_t nbytes, void **dev) {
    if (!chip || !dev)
        return st_fail(STRATA_EINVAL, "strata_chip_malloc: NULL chip or output");
    STRATA_TRY(require_open(chip, "strata_chip_malloc"));
    if (nbytes == 0)
        return st_fail(STRATA_EINVAL, "strata_chip_malloc: 0 bytes requested");
    return st_cw_malloc(chip->cw, nbytes, dev);
}

int strata_chip_free(strata_chip *chip, void *dev) {
    if (!chip || !dev)
        return st_fail(STRATA_EINVAL, "strata_chip_free: NULL chip or device address");
    STRATA_TRY(require_open(chip, "strata_chip_free"));
    return st_cw_free(chip->cw, dev);
}

int strata_chip_copy_to(strata_chip *chip, void *dev_dst, const void *host_src, size_t n) {
    if (!chip || !dev_dst || !host_src)
        return st_fail(STRATA_EINVAL, "strata_chip_copy_to: NULL chip, device or host address");
    STRATA_TRY(require_open(chip, "strata_chip_copy_to"));
    return st_cw_copy_to(chip->cw, dev_dst, host_src, n);
}

int strata_chip_copy_from(strata_chip *chip, void *host_dst, const void *dev_src, size_t n) {
    if (!chip || !host_dst || !dev_src)
        return st_fail(STRATA_EINVAL, "strata_chip_copy_from: NULL chip, host or device address");
    STRATA_TRY(require_open(chip, "strata_chip_copy_from"));
    return st_cw_copy_from(chip->cw, host_dst, dev_src, n);
}

uint64_t strata_chip_committed_bytes(const strata_chip *chip) {
    return chip ? st_cw_committed(chip->cw) : 0;
}

int strata_chip_tensor(void *dev, uint64_t nbytes, strata_dtype dtype, int rank,
                       const int64_t *shape, strata_tensor *out) {
    if (!dev || !shape || !out)
        return st_fail(STRATA_EINVAL, "strata_chip_tensor: NULL device address, shape or output");
    /* An L2 tensor belongs to no L3 worker: identity 0, owner -1. */
    st_view_memory m = {dev, nbytes, {0, 0, -1}, STRATA_MEM_DEVICE};
    return st_view_build(&m, 0, dtype, rank, shape, NULL, "strata_chip_tensor", out);
}

/* ---- Runs ---------------------------------------------------------------------------- */

static int validate_args(const strata_chip *chip, const strata_task_args *args) {
    const char *label = st_chip_worker_label(chip->cw);
    if (args->invalid)
        return st_fail(STRATA_EINVAL,
                       "%s: the task arguments are marked invalid (an earlier add failed)", label);
    if (args->ntensors > STRATA_MAX_TENSORS || args->nscalars > STRATA_MAX_SCALARS ||
        args->payload_bytes > STRATA_MAX_PAYLOAD)
        return st_fail(STRATA_EINVAL,
                       "%s: %u tensors / %u scalars / %u payload bytes (at most %d / %d / %d)",
                       label, args->ntensors, args->nscalars, args->payload_bytes,
                       STRATA_MAX_TENSORS, STRATA_MAX_SCALARS, STRATA_MAX_PAYLOAD);
    for (uint32_t i = 0; i < args->ntensors; i++)
        if (args->tensors[i].rank > STRATA_MAX_RANK || args->tags[i] > STRATA_NO_DEP)
            return st_fail(STRATA_EINVAL, "%s: tensor argument %u has rank %u or tag %u", label, i,
                           args->tensors[i].rank, args->tags[i]);
    return STRATA_OK;
}

int strata_chip_submit(strata_chip *chip, strata_chip_program prog, const strata_task_args *args,
                       const strata_call_config *cfg, strata_chip_run **out) {
    if (!chip || !args || !out)
        return st_fail(STRATA_EINVAL, "strata_chip_submit: NULL chip, args or output");
    *out = NULL;
    STRATA_TRY(require_open(chip, "strata_chip_submit"));
    STRATA_TRY(validate_args(chip, args));
    st_chip_program p;
    STRATA_TRY(find_program(chip, prog, &p));
    st_lane_request req = {
        .program = p.backend_id, .program_name = p.name, .args = args, .cfg = cfg};
    st_lane_run *r = NULL;
    STRATA_TRY(st_lane_submit_direct(chip->lane, &req, &r));
    *out = (strata_chip_run *)(void *)r;
    return STRATA_OK;
}

int strata_chip_run_wait_until(strata_chip_run *run, uint64_t deadline_ns) {
    if (!run)
        return st_fail(STRATA_EINVAL, "strata_chip_run_wait: NULL run");
    return st_lane_wait(lane_run(run), deadline_ns);
}

int strata_chip_run_wait(strata_chip_run *run, uint64_t timeout_ns) {
    return strata_chip_run_wait_until(run, st_deadline_after(timeout_ns));
}

int strata_chip_run_done(const strata_chip_run *run) {
    return run ? st_lane_done(lane_run(run)) : 0;
}

int strata_chip_run_status(const strata_chip_run *run) {
    return run ? st_lane_run_status(lane_run(run))
               : st_fail(STRATA_EINVAL, "strata_chip_run_status: NULL run");
}

const char *strata_chip_run_error(const strata_chip_run *run) {
    return run ? st_lane_run_error(lane_run(run)) : "";
}

int strata_chip_run_launched(const strata_chip_run *run) {
    return run ? st_lane_run_launched(lane_run(run)) : 0;
}

strata_chip_disposition strata_chip_run_disposition(const strata_chip_run *run) {
    return run ? st_lane_run_disposition(lane_run(run)) : STRATA_CHIP_VALIDATED_ONLY;
}

uint64_t strata_chip_run_id(const strata_chip_run *run) {
    return run ? st_lane_run_id(lane_run(run)) : 0;
}

void strata_chip_run_release(strata_chip_run *run) {
    st_lane_run_release(lane_run(run));
}

int strata_chip_run_sync(strata_chip *chip, strata_chip_program prog, const strata_task_args *args,
                         const strata_call_config *cfg) {
    strata_chip_run *run = NULL;
    STRATA_TRY(strata_chip_submit(chip, prog, args, cfg, &run));
    int rc = strata_chip_run_wait_until(run, UINT64_MAX);
    strata_chip_run_release(run);
    return rc;
}

/* ---- Lane queries ---------------------------------------------------------------------- */

int strata_chip_poisoned(const strata_chip *chip) {
    return chip ? st_lane_poisoned(chip->lane) : 0;
}

int strata_chip_drain(strata_chip *chip) {
    if (!chip)
        return st_fail(STRATA_EINVAL, "strata_chip_drain: NULL chip");
    return st_lane_drain(chip->lane);
}

/* ---- For the L3 chip endpoint (chip/chip_internal.h) -------------------------------------- */

st_run_lane *st_chip_lane(strata_chip *chip) {
    return chip->lane;
}

st_chip_worker *st_chip_worker_of(strata_chip *chip) {
    return chip->cw;
}

int st_chip_program_info(strata_chip *chip, strata_chip_program prog, uint32_t *backend_id,
                         char *name, size_t cap) {
    st_chip_program p;
    STRATA_TRY(find_program(chip, prog, &p));
    *backend_id = p.backend_id;
    snprintf(name, cap, "%s", p.name);
    return STRATA_OK;
}
