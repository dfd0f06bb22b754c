/* chip/chip_worker.c - the owner of one device and its native runs.
 *
 * Owns: backend + device lifetime (init with rollback, terminal finalize),
 * the per-slot native run state machine driven through the named
 * transitions of st_native_next(), epochs, the generation filter, and the
 * device memory / program calls.
 * Must never: call the backend with `mu` held, or touch a slot's storage
 * for a token whose epoch is not the slot's current one.
 */
#include "chip/chip_worker.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/alloc.h"
#include "util/assert.h"
#include "util/error.h"
#include "util/lease.h"
#include "util/state_machine.h"

typedef enum st_cw_state { ST_CW_PRISTINE = 0, ST_CW_READY, ST_CW_FINALIZED } st_cw_state;

typedef struct st_native_slot {
    st_native_phase phase;
    uint64_t epoch;
    uint64_t generation;
    uint64_t run_id;
    uint64_t dispatch_id;
    int wait_rc;           /* launch error kept by a reaped run */
    int permits_successor; /* prepared with overlap allowed (capability, no diagnostics) */
} st_native_slot;

struct st_chip_worker {
    strata_native_run storage[STRATA_BACKEND_MAX_DEPTH]; /* caller-owned native run storage */
    /* mu protects state, slots and filter. A leaf lock: the lane may hold its
     * own lock while taking this one, never the reverse; never held across a
     * backend call. */
    pthread_mutex_t mu;
    st_cw_state state;
    st_backend backend;
    void *dev;
    uint32_t depth;
    int concurrent_prepare;
    st_native_slot slots[STRATA_BACKEND_MAX_DEPTH];
    st_lease_filter filter; /* per lease slot */
    _Atomic uint64_t own_epochs;
    _Atomic uint64_t *epochs;
    char label[ST_CHIP_LABEL_MAX];
};

/* ---- State machine -------------------------------------------------------------- */

/* The native run slot's machine (util/state_machine.h). */
#define NBIT ST_SM_BIT
static const char *const native_phase_names[] = {"EMPTY",    "PREPARING", "PREPARED",
                                                 "LAUNCHED", "REAPED",    "FINALIZING"};
static const st_sm_rule native_rules[] = {
    [ST_NATIVE_BEGIN_PREPARE] = {NBIT(ST_NATIVE_EMPTY), ST_NATIVE_PREPARING, "begin-prepare"},
    [ST_NATIVE_PREPARE_OK] = {NBIT(ST_NATIVE_PREPARING), ST_NATIVE_PREPARED, "prepare-ok"},
    [ST_NATIVE_PREPARE_FAILED] = {NBIT(ST_NATIVE_PREPARING), ST_NATIVE_EMPTY, "prepare-failed"},
    [ST_NATIVE_LAUNCH_OK] = {NBIT(ST_NATIVE_PREPARED), ST_NATIVE_LAUNCHED, "launch-ok"},
    [ST_NATIVE_LAUNCH_REAPED] = {NBIT(ST_NATIVE_PREPARED), ST_NATIVE_REAPED, "launch-reaped"},
    [ST_NATIVE_COMPLETED] = {NBIT(ST_NATIVE_LAUNCHED), ST_NATIVE_REAPED, "completed"},
    [ST_NATIVE_BEGIN_FINALIZE] = {NBIT(ST_NATIVE_PREPARED) | NBIT(ST_NATIVE_LAUNCHED) |
                                      NBIT(ST_NATIVE_REAPED),
                                  ST_NATIVE_FINALIZING, "begin-finalize"},
    [ST_NATIVE_FINALIZED] = {NBIT(ST_NATIVE_FINALIZING), ST_NATIVE_EMPTY, "finalized"},
};
static const st_sm native_machine = {"native run slot", native_phase_names, ST_NATIVE_INVALID,
                                     native_rules,
                                     (uint32_t)(sizeof native_rules / sizeof native_rules[0])};

st_native_phase st_native_next(st_native_phase from, st_native_event ev) {
    return st_sm_allows(&native_machine, (uint32_t)from, (uint32_t)ev)
               ? (st_native_phase)native_rules[ev].to
               : ST_NATIVE_INVALID;
}

/* The ChipWorker's own lifecycle; it is made PRISTINE. */
typedef enum cw_transition {
    CW_T_INIT,     /* PRISTINE -> READY: the device is open */
    CW_T_FINALIZE, /* any -> FINALIZED: phase calls from now on are refused */
    CW_T_COUNT
} cw_transition;

static const char *const cw_state_names[] = {"PRISTINE", "READY", "FINALIZED"};
static const st_sm_rule cw_rules[CW_T_COUNT] = {
    [CW_T_INIT] = {NBIT(ST_CW_PRISTINE), ST_CW_READY, "init"},
    [CW_T_FINALIZE] = {NBIT(ST_CW_PRISTINE) | NBIT(ST_CW_READY) | NBIT(ST_CW_FINALIZED),
                       ST_CW_FINALIZED, "finalize"},
};
static const st_sm cw_machine = {"ChipWorker", cw_state_names, 3, cw_rules, CW_T_COUNT};

static void cw_move(st_chip_worker *cw, cw_transition t) {
    cw->state = (st_cw_state)st_sm_next(&cw_machine, (uint32_t)cw->state, t, "state");
}

const char *st_native_phase_name(st_native_phase p) {
    switch (p) {
    case ST_NATIVE_EMPTY:
        return "EMPTY";
    case ST_NATIVE_PREPARING:
        return "PREPARING";
    case ST_NATIVE_PREPARED:
        return "PREPARED";
    case ST_NATIVE_LAUNCHED:
        return "LAUNCHED";
    case ST_NATIVE_REAPED:
        return "REAPED";
    case ST_NATIVE_FINALIZING:
        return "FINALIZING";
    case ST_NATIVE_INVALID:
        break;
    }
    return "INVALID";
}

/* Apply a transition the caller has already validated (mu held). */
static void slot_apply(st_native_slot *s, st_native_event ev) {
    st_native_phase next = st_native_next(s->phase, ev);
    if (next == ST_NATIVE_INVALID)
        st_sm_illegal(&native_machine, (uint32_t)s->phase, (uint32_t)ev, "slot");
    s->phase = next;
    if (next == ST_NATIVE_EMPTY) {
        s->epoch = 0;
        s->wait_rc = 0;
        s->permits_successor = 0;
    }
}

void st_native_identity(const st_native_token *t, char *buf, size_t cap) {
    snprintf(buf, cap,
             "(run_id=%" PRIu64 " slot=%u generation=%" PRIu64 " dispatch_id=%" PRIu64
             " run_epoch=%" PRIu64 ")",
             t->run_id, t->slot, t->generation, t->dispatch_id, t->epoch);
}

/* ---- Lifecycle ---------------------------------------------------------------------- */

st_chip_worker *st_chip_worker_new(void) {
    size_t size = (sizeof(st_chip_worker) + 63) / 64 * 64;
    st_chip_worker *cw = st_aligned_alloc(64, size);
    if (!cw) {
        st_fail_nomem("the ChipWorker", size);
        return NULL;
    }
    memset(cw, 0, size);
    pthread_mutex_init(&cw->mu, NULL);
    cw->epochs = &cw->own_epochs;
    return cw;
}

static const char *not_ready_reason(const st_chip_worker *cw) {
    return cw->state == ST_CW_FINALIZED ? "was finalized" : "is not initialized";
}

/* Back to pristine after a failed init: nothing of the attempt survives. */
static void rollback_init(st_chip_worker *cw) {
    st_backend_unload(&cw->backend);
    cw->dev = NULL;
    cw->depth = 0;
    cw->concurrent_prepare = 0;
    cw->label[0] = '\0';
    cw->epochs = &cw->own_epochs;
    cw->state = ST_CW_PRISTINE;
}

static int load_backend(const st_chip_worker_config *cfg, st_backend *b) {
    if (cfg->entry)
        return st_backend_from_entry(cfg->entry, cfg->entry_label, b);
    return st_backend_load(cfg->backend, b);
}

int st_chip_worker_init(st_chip_worker *cw, const st_chip_worker_config *cfg) {
    if (!cw || !cfg)
        return st_fail(STRATA_EINVAL, "ChipWorker init: NULL worker or config");
    pthread_mutex_lock(&cw->mu);
    st_cw_state state = cw->state;
    pthread_mutex_unlock(&cw->mu);
    if (state == ST_CW_FINALIZED)
        return st_fail(
            STRATA_ESTATE,
            "ChipWorker was finalized and cannot be initialized again: create a new one");
    if (state == ST_CW_READY)
        return st_fail(STRATA_ESTATE, "ChipWorker %s is already initialized", cw->label);
    if (cfg->device_id < 0)
        return st_fail(STRATA_EINVAL, "ChipWorker init: device id %d is negative (use >= 0)",
                       cfg->device_id);
    if (cfg->max_depth > STRATA_BACKEND_MAX_DEPTH)
        return st_fail(STRATA_EINVAL, "ChipWorker init: pipeline depth %u (use 0, 1 or 2)",
                       cfg->max_depth);

    int rc = load_backend(cfg, &cw->backend);
    if (rc != STRATA_OK) {
        rollback_init(cw);
        return rc;
    }
    const strata_backend_ops *ops = cw->backend.ops;
    snprintf(cw->label, sizeof cw->label, "chip %s:%d", ops->name, cfg->device_id);
    cw->depth = ops->contract.pipeline_depth;
    if (cfg->max_depth && cfg->max_depth < cw->depth)
        cw->depth = cfg->max_depth;
    cw->concurrent_prepare = cw->depth > 1 && ops->contract.concurrent_prepare;
    cw->epochs = cfg->epochs ? cfg->epochs : &cw->own_epochs;

    strata_backend_open_params p = {.abi_version = STRATA_BACKEND_ABI_VERSION,
                                    .device_id = cfg->device_id,
                                    .kernel_module = cfg->kernel_module,
                                    .cores = cfg->cores};
    strata_backend_msg m = {{0}};
    void *dev = NULL;
    int brc = ops->open(&p, &dev, &m);
    if (brc != 0 || !dev) {
        rc =
            st_fail(STRATA_EDEVICE, "%s: opening the device (backend '%s') failed with code %d: %s",
                    cw->label, cw->backend.path, brc, m.text[0] ? m.text : "(no message)");
        rollback_init(cw);
        return rc;
    }
    pthread_mutex_lock(&cw->mu);
    cw->dev = dev;
    memset(cw->slots, 0, sizeof cw->slots);
    st_lease_filter_reset(&cw->filter);
    cw_move(cw, CW_T_INIT);
    pthread_mutex_unlock(&cw->mu);
    return STRATA_OK;
}

/* Best effort: finish whatever a slot still holds (drains launched runs). */
static void cleanup_slots(st_chip_worker *cw) {
    for (uint32_t i = 0; i < STRATA_BACKEND_MAX_DEPTH; i++) {
        st_native_slot *s = &cw->slots[i];
        switch (s->phase) {
        case ST_NATIVE_PREPARED:
        case ST_NATIVE_LAUNCHED:
        case ST_NATIVE_REAPED: {
            strata_backend_msg m;
            cw->backend.ops->finalize(cw->dev, &cw->storage[i], s->epoch, &m);
            memset(s, 0, sizeof *s);
            break;
        }
        case ST_NATIVE_EMPTY:
        case ST_NATIVE_PREPARING:
        case ST_NATIVE_FINALIZING:
        case ST_NATIVE_INVALID:
            break;
        }
    }
}

int st_chip_worker_finalize(st_chip_worker *cw) {
    if (!cw)
        return st_fail(STRATA_EINVAL, "ChipWorker finalize: NULL worker");
    pthread_mutex_lock(&cw->mu);
    st_cw_state state = cw->state;
    cw_move(cw, CW_T_FINALIZE);
    pthread_mutex_unlock(&cw->mu);
    if (state != ST_CW_READY)
        return STRATA_OK;
    cleanup_slots(cw);
    strata_backend_msg m = {{0}};
    int brc = cw->backend.ops->close(cw->dev, &m);
    int rc = STRATA_OK;
    if (brc != 0) {
        /* The device refused: its threads may still run backend code, so the
         * library stays loaded (leaked) rather than unmapped under them. */
        rc = st_fail(STRATA_EDEVICE, "%s: closing the device failed with code %d: %s", cw->label,
                     brc, m.text);
        cw->backend.lib = NULL;
    }
    st_backend_unload(&cw->backend);
    cw->dev = NULL;
    st_lease_filter_reset(&cw->filter);
    return rc;
}

void st_chip_worker_free(st_chip_worker *cw) {
    if (!cw)
        return;
    st_chip_worker_finalize(cw);
    pthread_mutex_destroy(&cw->mu);
    st_free(cw);
}

const char *st_chip_worker_label(const st_chip_worker *cw) {
    return cw->label[0] ? cw->label : "chip (not initialized)";
}

const char *st_chip_worker_backend_name(const st_chip_worker *cw) {
    return cw->backend.ops ? cw->backend.ops->name : "";
}

uint32_t st_chip_worker_depth(const st_chip_worker *cw) {
    return cw->depth;
}

int st_chip_worker_initialized(const st_chip_worker *cw) {
    return cw->state == ST_CW_READY;
}

int st_chip_worker_supports_successor(const st_chip_worker *cw) {
    return cw->state == ST_CW_READY && cw->concurrent_prepare;
}

st_native_phase st_chip_worker_slot_phase(st_chip_worker *cw, uint32_t slot) {
    if (slot >= STRATA_BACKEND_MAX_DEPTH)
        return ST_NATIVE_INVALID;
    pthread_mutex_lock(&cw->mu);
    st_native_phase p = cw->slots[slot].phase;
    pthread_mutex_unlock(&cw->mu);
    return p;
}

int st_chip_worker_commit_lease(st_chip_worker *cw, st_lease lease) {
    pthread_mutex_lock(&cw->mu);
    int ok = st_lease_filter_commit(&cw->filter, lease);
    pthread_mutex_unlock(&cw->mu);
    return ok ? STRATA_OK
              : st_fail(STRATA_ESTALE, "%s: generation %" PRIu64 " of slot %u is stale", cw->label,
                        lease.generation, lease.slot);
}

/* ---- Native run phases -------------------------------------------------------------- */

static int mint_epoch(st_chip_worker *cw, uint64_t *out) {
    uint64_t cur = atomic_load_explicit(cw->epochs, memory_order_relaxed);
    do {
        if (cur == UINT64_MAX)
            return st_fail(STRATA_ECAPACITY, "%s: run epochs exhausted", cw->label);
    } while (!atomic_compare_exchange_weak_explicit(cw->epochs, &cur, cur + 1, memory_order_relaxed,
                                                    memory_order_relaxed));
    *out = cur + 1;
    return STRATA_OK;
}

/* Checks shared by every call that names a slot (mu held). */
static int require_ready(st_chip_worker *cw, const char *what) {
    if (cw->state != ST_CW_READY)
        return st_fail(STRATA_ESTATE, "%s: ChipWorker %s", what, not_ready_reason(cw));
    return STRATA_OK;
}

/* May a run be prepared in `slot` next to what the other slots hold? (mu
 * held) *ended: the refusal is only that the predecessor's finalize began (a
 * successor prepared with the lane unlocked can race the end of the run it
 * was to follow); the run can be prepared again as the front once the slot
 * is empty. */
static int check_successor_rule(st_chip_worker *cw, uint32_t slot, int allow_successor,
                                const char *ident, int *ended) {
    if (cw->slots[slot].phase != ST_NATIVE_EMPTY)
        return st_fail(STRATA_ESTATE, "%s: slot %u already owns an unfinished native run %s",
                       cw->label, slot, ident);
    int occupied = 0;
    for (uint32_t i = 0; i < cw->depth; i++) {
        const st_native_slot *o = &cw->slots[i];
        if (i == slot || o->phase == ST_NATIVE_EMPTY)
            continue;
        occupied++;
        int active = o->phase == ST_NATIVE_LAUNCHED || o->phase == ST_NATIVE_REAPED;
        *ended = allow_successor && o->permits_successor && o->phase == ST_NATIVE_FINALIZING;
        if (!allow_successor || !o->permits_successor || !active)
            return st_fail(STRATA_ESTATE,
                           "%s: preparing %s requires an active predecessor before staging a "
                           "successor (slot %u is %s%s)",
                           cw->label, ident, i, st_native_phase_name(o->phase),
                           allow_successor ? "" : "; overlap is not allowed for this run");
    }
    if (occupied > 1)
        return st_fail(STRATA_ESTATE, "%s: %s: the worker already owns a prepared successor",
                       cw->label, ident);
    return STRATA_OK;
}

/* Undo a PREPARING slot (mu held). */
static void abort_preparing(st_chip_worker *cw, uint32_t slot, uint64_t epoch) {
    st_native_slot *s = &cw->slots[slot];
    if (s->epoch == epoch && s->phase == ST_NATIVE_PREPARING)
        slot_apply(s, ST_NATIVE_PREPARE_FAILED);
}

int st_cw_prepare(st_chip_worker *cw, const st_native_request *req, st_native_token *out,
                  int *incompatible) {
    if (incompatible)
        *incompatible = 0;
    if (!cw || !req || !out || !req->args)
        return st_fail(STRATA_EINVAL, "prepare: NULL worker, request, token or arguments");
    st_native_token t = {.slot = req->slot,
                         .generation = req->lease.generation,
                         .run_id = req->run_id,
                         .dispatch_id = req->dispatch_id};
    char ident[160];
    STRATA_TRY(mint_epoch(cw, &t.epoch));
    st_native_identity(&t, ident, sizeof ident);

    pthread_mutex_lock(&cw->mu);
    int rc = require_ready(cw, "prepare");
    if (rc == STRATA_OK && req->slot >= cw->depth)
        rc = st_fail(STRATA_EINVAL, "%s: prepare %s: slot %u is outside the pipeline depth %u",
                     cw->label, ident, req->slot, cw->depth);
    int allow_successor = cw->concurrent_prepare && !req->diagnostics;
    int ended = 0;
    if (rc == STRATA_OK)
        rc = check_successor_rule(cw, req->slot, allow_successor, ident, &ended);
    if (rc != STRATA_OK && ended && incompatible)
        *incompatible = 1; /* raced the predecessor's end: prepare it again as the front */
    if (rc == STRATA_OK && req->leased && !st_lease_valid(req->lease))
        rc = st_fail(STRATA_EINVAL, "%s: prepare %s: invalid pipeline lease (slot %u)", cw->label,
                     ident, req->lease.slot);
    if (rc == STRATA_OK && req->leased && !st_lease_filter_admits(&cw->filter, req->lease))
        rc = st_fail(STRATA_ESTALE,
                     "%s: prepare %s: generation is stale (lease slot %u already admitted "
                     "generation %" PRIu64 ")",
                     cw->label, ident, req->lease.slot, cw->filter.newest[req->lease.slot]);
    if (rc != STRATA_OK) {
        pthread_mutex_unlock(&cw->mu);
        return rc;
    }
    st_native_slot *s = &cw->slots[req->slot];
    slot_apply(s, ST_NATIVE_BEGIN_PREPARE);
    s->epoch = t.epoch;
    s->generation = t.generation;
    s->run_id = t.run_id;
    s->dispatch_id = t.dispatch_id;
    s->wait_rc = 0;
    s->permits_successor = allow_successor;
    pthread_mutex_unlock(&cw->mu);

    strata_native_run_desc desc = {.slot = req->slot,
                                   .flags = req->diagnostics ? STRATA_NATIVE_DIAGNOSTICS : 0,
                                   .run_id = req->run_id,
                                   .generation = req->lease.generation,
                                   .dispatch_id = req->dispatch_id,
                                   .epoch = t.epoch,
                                   .accepted = req->accepted,
                                   .accepted_value = req->accepted_value};
    strata_backend_msg m = {{0}};
    strata_task_view args = strata_args_view(req->args); /* what the program reads */
    int brc = cw->backend.ops->prepare(cw->dev, &cw->storage[req->slot], req->program, &args,
                                       req->cfg, &desc, &m);

    pthread_mutex_lock(&cw->mu);
    if (brc != 0) {
        abort_preparing(cw, req->slot, t.epoch);
        pthread_mutex_unlock(&cw->mu);
        if (brc == STRATA_BACKEND_EINCOMPATIBLE && incompatible)
            *incompatible = 1;
        return st_fail(STRATA_EDEVICE, "%s: prepare failed with code %d %s: %s", cw->label, brc,
                       ident, m.text[0] ? m.text : "(no message)");
    }
    const char *lost = NULL;
    if (s->epoch != t.epoch || s->phase != ST_NATIVE_PREPARING)
        lost = "the slot changed hands while prepare was in progress";
    else if (req->leased && !st_lease_filter_commit(&cw->filter, req->lease))
        lost = "generation became stale while prepare was in progress";
    if (lost) {
        abort_preparing(cw, req->slot, t.epoch);
        pthread_mutex_unlock(&cw->mu);
        cw->backend.ops->finalize(cw->dev, &cw->storage[req->slot], t.epoch, &m);
        return st_fail(STRATA_ESTALE, "%s: prepare %s: %s", cw->label, ident, lost);
    }
    slot_apply(s, ST_NATIVE_PREPARE_OK);
    pthread_mutex_unlock(&cw->mu);
    *out = t;
    return STRATA_OK;
}

/* The token names the slot's current run and the slot is in one of the
 * phases `mask` allows (bit per phase). mu held. */
static int check_token(st_chip_worker *cw, const st_native_token *t, unsigned mask,
                       const char *what) {
    STRATA_TRY(require_ready(cw, what));
    char ident[160];
    st_native_identity(t, ident, sizeof ident);
    if (t->slot >= cw->depth || cw->slots[t->slot].epoch != t->epoch || t->epoch == 0)
        return st_fail(STRATA_ESTALE, "%s: %s %s: token is stale or already finalized", cw->label,
                       what, ident);
    st_native_phase p = cw->slots[t->slot].phase;
    if (!(mask & (1u << p)))
        return st_fail(STRATA_ESTALE, "%s: %s %s: token is used in the wrong phase (the run is %s)",
                       cw->label, what, ident, st_native_phase_name(p));
    return STRATA_OK;
}

#define PHASE_BIT(p) (1u << (p))

int st_cw_launch(st_chip_worker *cw, const st_native_token *t) {
    if (!cw || !t)
        return st_fail(STRATA_EINVAL, "launch: NULL worker or token");
    pthread_mutex_lock(&cw->mu);
    int rc = check_token(cw, t, PHASE_BIT(ST_NATIVE_PREPARED), "launch");
    pthread_mutex_unlock(&cw->mu);
    if (rc != STRATA_OK)
        return rc;
    strata_backend_msg m = {{0}};
    const strata_backend_ops *ops = cw->backend.ops;
    int brc = ops->launch(cw->dev, &cw->storage[t->slot], t->epoch, &m);
    if (brc == 0) {
        pthread_mutex_lock(&cw->mu);
        st_native_slot *s = &cw->slots[t->slot];
        if (s->epoch == t->epoch && s->phase == ST_NATIVE_PREPARED)
            slot_apply(s, ST_NATIVE_LAUNCH_OK);
        pthread_mutex_unlock(&cw->mu);
        return STRATA_OK;
    }
    /* Did anything reach the device? If it says the run is done, the run is
     * reaped with the launch error; otherwise it stays prepared. */
    strata_backend_msg pm;
    int prc = ops->poll(cw->dev, &cw->storage[t->slot], t->epoch, &pm);
    pthread_mutex_lock(&cw->mu);
    st_native_slot *s = &cw->slots[t->slot];
    if (prc == STRATA_BACKEND_COMPLETE && s->epoch == t->epoch && s->phase == ST_NATIVE_PREPARED) {
        slot_apply(s, ST_NATIVE_LAUNCH_REAPED);
        s->wait_rc = brc;
    }
    pthread_mutex_unlock(&cw->mu);
    char ident[160];
    st_native_identity(t, ident, sizeof ident);
    return st_fail(brc == STRATA_BACKEND_EBUSY ? STRATA_ESTATE : STRATA_EDEVICE,
                   "%s: launch failed with code %d %s: %s", cw->label, brc, ident,
                   m.text[0] ? m.text : "(no message)");
}

/* A run the backend reports finished becomes REAPED (mu taken here). */
static void mark_completed(st_chip_worker *cw, const st_native_token *t) {
    pthread_mutex_lock(&cw->mu);
    st_native_slot *s = &cw->slots[t->slot];
    if (s->epoch == t->epoch && s->phase == ST_NATIVE_LAUNCHED)
        slot_apply(s, ST_NATIVE_COMPLETED);
    pthread_mutex_unlock(&cw->mu);
}

/* poll and wait share everything but the backend call. */
static int observe(st_chip_worker *cw, const st_native_token *t, int blocking, uint64_t deadline,
                   int *complete) {
    const char *what = blocking ? "wait" : "poll";
    if (!cw || !t || !complete)
        return st_fail(STRATA_EINVAL, "%s: NULL worker, token or output", what);
    *complete = 0;
    pthread_mutex_lock(&cw->mu);
    int rc = check_token(cw, t, PHASE_BIT(ST_NATIVE_LAUNCHED) | PHASE_BIT(ST_NATIVE_REAPED), what);
    int reaped = rc == STRATA_OK && cw->slots[t->slot].phase == ST_NATIVE_REAPED;
    pthread_mutex_unlock(&cw->mu);
    if (rc != STRATA_OK)
        return rc;
    if (reaped) {
        *complete = 1;
        return STRATA_OK;
    }
    strata_backend_msg m = {{0}};
    const strata_backend_ops *ops = cw->backend.ops;
    int brc = blocking ? ops->wait(cw->dev, &cw->storage[t->slot], t->epoch, deadline, &m)
                       : ops->poll(cw->dev, &cw->storage[t->slot], t->epoch, &m);
    if (brc == STRATA_BACKEND_NOT_READY)
        return STRATA_OK;
    if (brc == STRATA_BACKEND_COMPLETE) {
        mark_completed(cw, t);
        *complete = 1;
        return STRATA_OK;
    }
    char ident[160];
    st_native_identity(t, ident, sizeof ident);
    return st_fail(STRATA_EDEVICE, "%s: %s failed with code %d %s: %s", cw->label, what, brc, ident,
                   m.text[0] ? m.text : "(no message)");
}

int st_cw_poll(st_chip_worker *cw, const st_native_token *t, int *complete) {
    return observe(cw, t, 0, 0, complete);
}

int st_cw_wait(st_chip_worker *cw, const st_native_token *t, uint64_t deadline_ns, int *complete) {
    return observe(cw, t, 1, deadline_ns, complete);
}

int st_cw_finalize(st_chip_worker *cw, const st_native_token *t) {
    if (!cw || !t)
        return st_fail(STRATA_EINVAL, "finalize: NULL worker or token");
    unsigned mask =
        PHASE_BIT(ST_NATIVE_PREPARED) | PHASE_BIT(ST_NATIVE_LAUNCHED) | PHASE_BIT(ST_NATIVE_REAPED);
    pthread_mutex_lock(&cw->mu);
    int rc = check_token(cw, t, mask, "finalize");
    int wait_rc = 0;
    if (rc == STRATA_OK) {
        st_native_slot *s = &cw->slots[t->slot];
        wait_rc = s->wait_rc;
        slot_apply(s, ST_NATIVE_BEGIN_FINALIZE);
    }
    pthread_mutex_unlock(&cw->mu);
    if (rc != STRATA_OK)
        return rc;
    strata_backend_msg m = {{0}};
    int brc = cw->backend.ops->finalize(cw->dev, &cw->storage[t->slot], t->epoch, &m);
    pthread_mutex_lock(&cw->mu);
    slot_apply(&cw->slots[t->slot], ST_NATIVE_FINALIZED); /* the storage is empty either way */
    pthread_mutex_unlock(&cw->mu);
    int code = brc != 0 ? brc : wait_rc;
    if (code == 0)
        return STRATA_OK;
    char ident[160];
    st_native_identity(t, ident, sizeof ident);
    return st_fail(STRATA_EDEVICE, "%s: finalize failed with code %d %s: %s", cw->label, code,
                   ident, brc != 0 && m.text[0] ? m.text : "the launch failed");
}

/* ---- Device memory, programs, knobs ---------------------------------------------------- */

/* Run a backend call that needs a ready worker; format its failure. */
#define CW_BACKEND_CALL(cw, what, call)                                                            \
    do {                                                                                           \
        if (!(cw))                                                                                 \
            return st_fail(STRATA_EINVAL, "%s: NULL chip worker", what);                           \
        pthread_mutex_lock(&(cw)->mu);                                                             \
        int ready_rc_ = require_ready((cw), what);                                                 \
        pthread_mutex_unlock(&(cw)->mu);                                                           \
        if (ready_rc_ != STRATA_OK)                                                                \
            return ready_rc_;                                                                      \
        strata_backend_msg m = {{0}};                                                              \
        int brc_ = (call);                                                                         \
        if (brc_ != 0)                                                                             \
            return st_fail(STRATA_EDEVICE, "%s: %s failed: %s", (cw)->label, what,                 \
                           m.text[0] ? m.text : "(no message)");                                   \
        return STRATA_OK;                                                                          \
    } while (0)

int st_cw_malloc(st_chip_worker *cw, uint64_t nbytes, void **dev) {
    CW_BACKEND_CALL(cw, "malloc", cw->backend.ops->mem_alloc(cw->dev, nbytes, dev, &m));
}

int st_cw_free(st_chip_worker *cw, void *addr) {
    CW_BACKEND_CALL(cw, "free", cw->backend.ops->mem_free(cw->dev, addr, &m));
}

int st_cw_copy_to(st_chip_worker *cw, void *dst_dev, const void *src, uint64_t n) {
    CW_BACKEND_CALL(cw, "copy to device", cw->backend.ops->copy_to(cw->dev, dst_dev, src, n, &m));
}

int st_cw_copy_from(st_chip_worker *cw, void *dst, const void *src_dev, uint64_t n) {
    CW_BACKEND_CALL(cw, "copy from device",
                    cw->backend.ops->copy_from(cw->dev, dst, src_dev, n, &m));
}

int st_cw_register_program(st_chip_worker *cw, const strata_backend_program *p, uint32_t *id) {
    CW_BACKEND_CALL(cw, "register program", cw->backend.ops->register_program(cw->dev, p, id, &m));
}

int st_cw_unregister_program(st_chip_worker *cw, uint32_t id) {
    CW_BACKEND_CALL(cw, "unregister program", cw->backend.ops->unregister_program(cw->dev, id, &m));
}

int st_cw_configure(st_chip_worker *cw, const char *key, const char *value) {
    CW_BACKEND_CALL(cw, "configure", cw->backend.ops->configure(cw->dev, key, value, &m));
}

uint64_t st_cw_committed(st_chip_worker *cw) {
    if (!cw || cw->state != ST_CW_READY)
        return 0;
    return cw->backend.ops->committed_bytes(cw->dev);
}
