/* chip/run_lane.c - the ChipRunLane: FIFO owner of the native runs of one chip.
 *
 * Owns: the run FIFO (at most two; activated runs first, then by dispatch
 * id), every run's lane phase (QUEUED -> PREPARED -> LAUNCHED -> TERMINAL,
 * and PREPARED -> QUEUED when an unactivated run yields its preparation to
 * an activated one), the pull-based progress
 * that prepares, launches, polls and finalizes them, the poison, drain and
 * close. See run_lane.h for the contract.
 * Must never: call the ChipWorker for a run another thread is waiting on in
 * the device (in_wait), hold the lane lock across a blocking device wait, or
 * use a run after retiring it without holding a reference.
 *
 * Locking: `mu` protects the lane and every run's lane-visible fields.
 * Launch, poll, finalize and the front's prepare run with it held (they are
 * bounded); two calls drop it: the blocking device wait, with the front
 * marked in_wait, and the early prepare of a successor, with the run marked
 * preparing (a prepare takes as long as the program's build, and the thread
 * waiting on the front must be able to finish it and hand its completion on
 * meanwhile). Nobody else touches a run so marked: while a successor is
 * being prepared the lane launches nothing, prepares nothing else and drains
 * nothing (those wait for the cv; the preparing thread moves the front on
 * when it is done). Lock order: lane mu, then the ChipWorker's mu (taken
 * inside st_cw_*).
 *
 * Reference counting: a run is referenced by its caller's handle and, while
 * queued, by the FIFO; the lane by its owner and by every run. Internal
 * functions hold a reference on any FIFO entry they may retire.
 */
#include "chip/run_lane.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "util/alloc.h"
#include "util/assert.h"
#include "util/clock.h"
#include "util/stamp.h"
#include "util/error.h"
#include "util/lease.h"
#include "util/message.h"
#include "util/state_machine.h"

#define ST_LANE_FIFO_MAX 2

struct st_lane_run {
    _Atomic uint32_t refs;
    st_run_lane *lane;
    uint32_t program;
    char program_name[STRATA_PROGRAM_NAME_MAX];
    strata_task_args args;
    strata_call_config cfg;
    uint32_t slot;  /* native run storage, picked by the lane */
    st_lease lease; /* leased: the pipeline lease; direct: only its generation (a counter) */
    uint64_t run_id;
    uint64_t dispatch_id;
    _Atomic uint32_t *accepted;
    uint32_t accepted_value;
    st_native_token token;
    st_lane_phase phase;
    strata_chip_disposition disposition; /* monotonic: VALIDATED_ONLY -> NATIVE_PREPARED */
    int leased;      /* admitted with a pipeline lease (generation filter applies) */
    int activated;   /* may launch once it is the front */
    int launched;    /* crossed its launch fence (sticky) */
    int fallback;    /* the backend refused an overlapping prepare: prepare it as the front */
    int in_wait;     /* a thread is blocked in the device wait on it */
    int preparing;   /* a thread is in its early native prepare, lane unlocked */
    int diagnostics; /* never overlaps another run's preparation */
    int timed;       /* its native phases are timed (the trace's chip phases) */
    st_lane_times times;
    st_error error; /* first error; read after TERMINAL */
};

struct st_run_lane {
    _Atomic uint32_t refs;
    pthread_mutex_t mu; /* see the file comment */
    pthread_cond_t cv;  /* broadcast on: a run retired or launched, activation, a device wait
                           returned, the FIFO changed */
    st_chip_worker *cw; /* NULL once closed */
    st_lane_run *fifo[ST_LANE_FIFO_MAX];
    uint32_t count;
    uint32_t depth;
    st_lease_filter leases;     /* newest lease generation admitted per lease slot */
    uint64_t direct_generation; /* counter of unleased (direct) runs */
    uint64_t yields;            /* native preparations given back (yield_unactivated) */
    st_error poison; /* STRATA_EPOISONED and the device failure's message, once poisoned */
    int closed;
    char label[ST_CHIP_LABEL_MAX];
};

/* ---- References ------------------------------------------------------------------- */

static void lane_drop(st_run_lane *lane) {
    if (atomic_fetch_sub_explicit(&lane->refs, 1, memory_order_acq_rel) != 1)
        return;
    pthread_cond_destroy(&lane->cv);
    pthread_mutex_destroy(&lane->mu);
    st_free(lane);
}

static void run_hold(st_lane_run *r) {
    atomic_fetch_add_explicit(&r->refs, 1, memory_order_relaxed);
}

static void run_drop(st_lane_run *r) {
    if (atomic_fetch_sub_explicit(&r->refs, 1, memory_order_acq_rel) != 1)
        return;
    st_run_lane *lane = r->lane;
    st_free(r);
    lane_drop(lane);
}

/* ---- Small helpers (mu held) ----------------------------------------------------------- */

static void run_ident(const st_lane_run *r, char *buf, size_t cap) {
    snprintf(buf, cap,
             "(run_id=%" PRIu64 " slot=%u generation=%" PRIu64 " dispatch_id=%" PRIu64 ")",
             r->run_id, r->slot, r->lease.generation, r->dispatch_id);
}

/* The run failed with the message a callee left on this thread. */
static void fail_run(st_lane_run *r, int status) {
    st_error_set(&r->error, status, "%s", strata_error_message());
}

static int lane_poisoned(const st_run_lane *lane) {
    return st_error_status(&lane->poison) != STRATA_OK;
}

/* The first device failure poisons the lane with r's message. */
static void poison_lane(st_run_lane *lane, const st_lane_run *r) {
    st_error_set(&lane->poison, STRATA_EPOISONED, "%s", st_error_msg(&r->error));
}

/* f never starts: the lane is poisoned. */
static void fail_unstarted_poisoned(st_run_lane *lane, st_lane_run *f, const char *ident) {
    st_error_set(&f->error, STRATA_EPOISONED, "%s: run %s not started: the chip is poisoned: %s",
                 lane->label, ident, st_error_msg(&lane->poison));
}

/* A lane run's phases (util/state_machine.h); a run is made QUEUED. */
typedef enum lane_transition {
    LANE_T_PREPARE, /* QUEUED -> PREPARED: the backend prepared it natively */
    LANE_T_LAUNCH,  /* PREPARED -> LAUNCHED: it crossed its launch fence */
    LANE_T_FINISH,  /* QUEUED | PREPARED | LAUNCHED -> TERMINAL: ok or failed */
    LANE_T_YIELD,   /* PREPARED -> QUEUED: an unactivated run gave its native preparation
                       back so an activated one can be prepared ahead of it (H1) */
    LANE_T_COUNT
} lane_transition;

static const char *const lane_phase_names[] = {"QUEUED", "PREPARED", "LAUNCHED", "TERMINAL"};
static const st_sm_rule lane_rules[LANE_T_COUNT] = {
    [LANE_T_PREPARE] = {ST_SM_BIT(ST_LANE_QUEUED), ST_LANE_PREPARED, "prepare"},
    [LANE_T_LAUNCH] = {ST_SM_BIT(ST_LANE_PREPARED), ST_LANE_LAUNCHED, "launch"},
    [LANE_T_FINISH] = {ST_SM_BIT(ST_LANE_QUEUED) | ST_SM_BIT(ST_LANE_PREPARED) |
                           ST_SM_BIT(ST_LANE_LAUNCHED),
                       ST_LANE_TERMINAL, "finish"},
    [LANE_T_YIELD] = {ST_SM_BIT(ST_LANE_PREPARED), ST_LANE_QUEUED, "yield"},
};
static const st_sm lane_machine = {"lane run", lane_phase_names, 4, lane_rules, LANE_T_COUNT};

static void lane_move(st_lane_run *r, lane_transition t) {
    r->phase = (st_lane_phase)st_sm_next(&lane_machine, (uint32_t)r->phase, t, "phase");
}

/* The run is finished: TERMINAL and out of the FIFO (drops the FIFO's
 * reference: the caller must hold its own). */
static void retire(st_run_lane *lane, st_lane_run *r) {
    lane_move(r, LANE_T_FINISH);
    for (uint32_t i = 0; i < lane->count; i++) {
        if (lane->fifo[i] != r)
            continue;
        for (uint32_t j = i + 1; j < lane->count; j++)
            lane->fifo[j - 1] = lane->fifo[j];
        lane->fifo[--lane->count] = NULL;
        run_drop(r);
        break;
    }
    pthread_cond_broadcast(&lane->cv);
}

/* Finalize whatever the run holds on the device, then retire it. A finalize
 * failure is the run's error and poisons the lane. */
static void finish(st_run_lane *lane, st_lane_run *r) {
    if (r->phase == ST_LANE_PREPARED || r->phase == ST_LANE_LAUNCHED) {
        if (r->timed && r->phase == ST_LANE_LAUNCHED)
            r->times.complete = st_stamp();
        int rc = st_cw_finalize(lane->cw, &r->token);
        if (r->timed)
            r->times.finalize_end = st_stamp();
        if (rc != STRATA_OK) {
            fail_run(r, rc);
            poison_lane(lane, r);
        }
    }
    retire(lane, r);
}

static int report_poison(st_run_lane *lane) {
    return lane_poisoned(lane) ? st_fail(STRATA_EPOISONED, "%s is poisoned: %s", lane->label,
                                         st_error_msg(&lane->poison))
                               : STRATA_OK;
}

/* Refuse work on a closed or poisoned lane. */
static int require_usable(st_run_lane *lane) {
    if (lane->closed)
        return st_fail(STRATA_ECLOSED, "%s is closed: no more runs are accepted", lane->label);
    return report_poison(lane);
}

static int permits_successor(st_run_lane *lane, const st_lane_run *pred, int succ_diagnostics) {
    return st_chip_worker_supports_successor(lane->cw) && !pred->diagnostics && !succ_diagnostics &&
           pred->phase == ST_LANE_LAUNCHED;
}

/* ---- Preparation and launch (mu held) ------------------------------------------------- */

/* A successor's early prepare is in progress with the lane unlocked. */
static int lane_preparing(const st_run_lane *lane) {
    for (uint32_t i = 0; i < lane->count; i++)
        if (lane->fifo[i]->preparing)
            return 1;
    return 0;
}

typedef enum prepare_outcome { PREPARE_OK, PREPARE_FALLBACK, PREPARE_FAILED } prepare_outcome;

/* QUEUED -> PREPARED. A failed prepare retires the run (never poisons); an
 * overlapping prepare the backend refuses marks a successor for depth one.
 * A successor is prepared with mu dropped (marked preparing meanwhile; the
 * caller holds a reference), the front with it held. */
static prepare_outcome prepare_native(st_run_lane *lane, st_lane_run *r, int as_successor) {
    st_native_request req = {.slot = r->slot,
                             .leased = r->leased,
                             .lease = r->lease,
                             .run_id = r->run_id,
                             .dispatch_id = r->dispatch_id,
                             .program = r->program,
                             .args = &r->args,
                             .cfg = &r->cfg,
                             .diagnostics = r->diagnostics,
                             .accepted = r->accepted,
                             .accepted_value = r->accepted_value};
    int incompatible = 0;
    st_native_token token = {0};
    int rc;
    if (r->timed)
        r->times.prepare_start = st_stamp();
    if (as_successor) {
        st_chip_worker *cw = lane->cw; /* close drains first: it outlives the prepare */
        r->preparing = 1;
        pthread_mutex_unlock(&lane->mu);
        rc = st_cw_prepare(cw, &req, &token, &incompatible);
        pthread_mutex_lock(&lane->mu);
        r->preparing = 0;
        pthread_cond_broadcast(&lane->cv); /* launch, drain and abandon wait for this */
    } else {
        rc = st_cw_prepare(lane->cw, &req, &token, &incompatible);
    }
    if (r->timed)
        r->times.prepare_end = st_stamp();
    if (rc == STRATA_OK) {
        r->token = token;
        lane_move(r, LANE_T_PREPARE);
        r->disposition = STRATA_CHIP_NATIVE_PREPARED;
        return PREPARE_OK;
    }
    if (incompatible && as_successor) {
        r->fallback = 1; /* no generation spent: it is prepared again as the front */
        return PREPARE_FALLBACK;
    }
    fail_run(r, rc);
    retire(lane, r);
    return PREPARE_FAILED;
}

static void launch_front(st_run_lane *lane);

/* Prepare the back run early while the front executes, when allowed (mu
 * dropped during the prepare), then move the front on: it may have finished
 * meanwhile, and this run been activated behind it. */
static void prepare_successor_if_eligible(st_run_lane *lane, st_lane_run *r) {
    if (lane->count != 2 || lane->fifo[1] != r || r->phase != ST_LANE_QUEUED || r->fallback ||
        lane_preparing(lane))
        return;
    if (!permits_successor(lane, lane->fifo[0], r->diagnostics))
        return;
    run_hold(r);
    prepare_native(lane, r, 1);
    launch_front(lane);
    run_drop(r);
}

/* An activated front must be prepared while an unactivated run behind it
 * already holds a native preparation (it was prepared early behind a
 * predecessor that has finished since): the device allows no second prepare
 * beside a run that is not launched, so the unactivated one gives its
 * preparation back (finalized once; it is prepared again later, as a
 * successor or at its own activation) and the head's work goes first (H1).
 * A finalize failure is a device failure: the run fails and the lane is
 * poisoned. */
static void yield_unactivated(st_run_lane *lane) {
    for (uint32_t i = 1; i < lane->count; i++) {
        st_lane_run *r = lane->fifo[i];
        if (r->activated || r->phase != ST_LANE_PREPARED)
            continue;
        int rc = st_cw_finalize(lane->cw, &r->token);
        if (rc != STRATA_OK) {
            run_hold(r);
            fail_run(r, rc);
            poison_lane(lane, r);
            retire(lane, r);
            run_drop(r);
            return;
        }
        lane_move(r, LANE_T_YIELD);
        lane->yields++;
    }
}

/* Move the front as far as it may go without waiting: fail it on a poisoned
 * lane, else prepare and launch it once activated. Never throws an error at
 * the caller; failures become the front's error. */
static void launch_front(st_run_lane *lane) {
    if (lane->count == 0 || lane_preparing(lane))
        return; /* the preparing thread calls this again when it is done */
    st_lane_run *f = lane->fifo[0];
    run_hold(f);
    if (lane_poisoned(lane)) {
        if (f->phase == ST_LANE_QUEUED || f->phase == ST_LANE_PREPARED) {
            char ident[128];
            run_ident(f, ident, sizeof ident);
            fail_unstarted_poisoned(lane, f, ident);
            finish(lane, f);
        }
    } else if (f->activated && (f->phase == ST_LANE_QUEUED || f->phase == ST_LANE_PREPARED)) {
        if (f->phase == ST_LANE_QUEUED)
            yield_unactivated(lane);
        if (f->phase == ST_LANE_PREPARED || prepare_native(lane, f, 0) == PREPARE_OK) {
            if (f->timed)
                f->times.launch = st_stamp();
            int rc = st_cw_launch(lane->cw, &f->token);
            if (rc == STRATA_OK) {
                lane_move(f, LANE_T_LAUNCH);
                f->launched = 1;
                pthread_cond_broadcast(&lane->cv);
            } else {
                fail_run(f, rc);
                finish(lane, f); /* a clean finalize reclaims it without poison */
            }
        }
    }
    run_drop(f);
}

/* ---- Progress (mu held) ------------------------------------------------------------------ */

/* Drive `target` as far as it goes without blocking: 1 once it is TERMINAL. */
static int progress(st_run_lane *lane, st_lane_run *target) {
    if (target->phase == ST_LANE_TERMINAL)
        return 1;
    if (lane->count == 0) {
        st_error_set(&target->error, STRATA_ESTATE, "%s: the lane lost a nonterminal run",
                     lane->label);
        lane_move(target, LANE_T_FINISH);
        return 1;
    }
    if (lane->fifo[0] != target) { /* querying a successor drives its predecessor */
        st_lane_run *front = lane->fifo[0];
        run_hold(front);
        progress(lane, front);
        run_drop(front);
        if (target->phase == ST_LANE_TERMINAL)
            return 1;
        if (lane->fifo[0] != target)
            return 0;
    }
    launch_front(lane);
    if (lane->count == 2 && lane->fifo[0] == target)
        prepare_successor_if_eligible(lane, lane->fifo[1]);
    if (target->phase == ST_LANE_TERMINAL) {
        launch_front(lane);
        return 1;
    }
    if (target->phase != ST_LANE_LAUNCHED || target->in_wait)
        return 0;
    int complete = 0;
    int rc = st_cw_poll(lane->cw, &target->token, &complete);
    if (rc != STRATA_OK) {
        char msg[STRATA_ERRMSG_MAX];
        st_msg_format(msg, sizeof msg, "%s", strata_error_message());
        finish(lane, target); /* a finalize error (the device's own) wins over the poll's */
        st_error_set(&target->error, rc, "%s", msg);
        poison_lane(lane, target);
        launch_front(lane);
        return 1;
    }
    if (!complete)
        return 0;
    finish(lane, target);
    launch_front(lane); /* the successor crosses its launch fence right here */
    return 1;
}

/* Block in the device wait on the launched front (lane unlocked meanwhile),
 * then finish it and launch its successor. 0 if there was nothing to block
 * on (front not launched, or another thread already waits on it). */
static int block_on_front(st_run_lane *lane, uint64_t deadline_ns) {
    if (lane->count == 0)
        return 0;
    st_lane_run *f = lane->fifo[0];
    if (f->phase != ST_LANE_LAUNCHED || f->in_wait)
        return 0;
    run_hold(f);
    f->in_wait = 1;
    st_native_token token = f->token;
    st_chip_worker *cw = lane->cw;
    pthread_mutex_unlock(&lane->mu);

    int complete = 0;
    int rc = st_cw_wait(cw, &token, deadline_ns, &complete);
    char msg[STRATA_ERRMSG_MAX] = "";
    if (rc != STRATA_OK)
        st_msg_format(msg, sizeof msg, "%s", strata_error_message());

    pthread_mutex_lock(&lane->mu);
    f->in_wait = 0;
    if (rc != STRATA_OK) {
        st_error_set(&f->error, rc, "%s", msg);
        poison_lane(lane, f);
        finish(lane, f);
        launch_front(lane);
    } else if (complete) {
        finish(lane, f);
        launch_front(lane);
    }
    pthread_cond_broadcast(&lane->cv);
    run_drop(f);
    return 1;
}

/* Park on the lane until something changes or the deadline passes. */
static void park(st_run_lane *lane, uint64_t deadline_ns) {
    if (deadline_ns == UINT64_MAX) {
        pthread_cond_wait(&lane->cv, &lane->mu);
        return;
    }
    struct timespec ts = {.tv_sec = (time_t)(deadline_ns / 1000000000ull),
                          .tv_nsec = (long)(deadline_ns % 1000000000ull)};
    pthread_cond_timedwait(&lane->cv, &lane->mu, &ts);
}

/* f never starts: drain or close dropped it before it was activated. */
static void fail_dropped(st_run_lane *lane, st_lane_run *f, const char *ident) {
    st_error_set(&f->error, STRATA_ECANCELED,
                 "%s: run %s was dropped by drain/close before it was activated", lane->label,
                 ident);
}

/* Empty the front: one step of drain/close (may block in the device). */
static void drain_front(st_run_lane *lane) {
    if (lane->count == 0)
        return;
    if (lane_preparing(lane)) {
        park(lane, UINT64_MAX); /* the preparing thread broadcasts when it is done */
        return;
    }
    st_lane_run *f = lane->fifo[0];
    run_hold(f);
    char ident[128];
    run_ident(f, ident, sizeof ident);
    if (f->phase == ST_LANE_QUEUED && lane_poisoned(lane)) {
        fail_unstarted_poisoned(lane, f, ident);
        retire(lane, f);
    } else if (f->phase == ST_LANE_QUEUED && !f->activated) {
        fail_dropped(lane, f, ident);
        retire(lane, f);
    } else {
        launch_front(lane);
        if (f->phase == ST_LANE_LAUNCHED) {
            if (f->in_wait)
                park(lane, UINT64_MAX); /* its waiter finishes it */
            else
                block_on_front(lane, UINT64_MAX);
        } else if (f->phase != ST_LANE_TERMINAL) {
            /* prepared but never activated (or poisoned): release it unlaunched */
            if (lane_poisoned(lane))
                fail_unstarted_poisoned(lane, f, ident);
            else
                fail_dropped(lane, f, ident);
            finish(lane, f);
        }
    }
    run_drop(f);
}

static int lane_nomem(const st_run_lane *lane) {
    char what[ST_CHIP_LABEL_MAX + 32];
    snprintf(what, sizeof what, "%s: admitting a run", lane->label);
    return st_fail_nomem(what, sizeof(st_lane_run));
}

/* ---- Lifecycle ------------------------------------------------------------------------------ */

int st_lane_create(st_chip_worker *cw, st_run_lane **out) {
    if (!cw || !out)
        return st_fail(STRATA_EINVAL, "lane create: NULL ChipWorker or output");
    if (!st_chip_worker_initialized(cw))
        return st_fail(STRATA_ESTATE, "lane create: the ChipWorker is not initialized");
    st_run_lane *lane = st_calloc(1, sizeof *lane);
    if (!lane)
        return st_fail_nomem("the chip's run lane", sizeof *lane);
    atomic_init(&lane->refs, 1);
    pthread_mutex_init(&lane->mu, NULL);
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(&lane->cv, &attr);
    pthread_condattr_destroy(&attr);
    lane->cw = cw;
    lane->depth = st_chip_worker_depth(cw);
    snprintf(lane->label, sizeof lane->label, "%s", st_chip_worker_label(cw));
    *out = lane;
    return STRATA_OK;
}

int st_lane_close(st_run_lane *lane) {
    if (!lane)
        return st_fail(STRATA_EINVAL, "lane close: NULL lane");
    pthread_mutex_lock(&lane->mu);
    if (!lane->closed) {
        lane->closed = 1; /* refuse submits while draining */
        while (lane->count > 0)
            drain_front(lane);
        lane->cw = NULL;
    }
    int rc = report_poison(lane);
    pthread_mutex_unlock(&lane->mu);
    return rc;
}

void st_lane_release(st_run_lane *lane) {
    if (!lane)
        return;
    st_lane_close(lane);
    lane_drop(lane);
}

int st_lane_drain(st_run_lane *lane) {
    if (!lane)
        return st_fail(STRATA_EINVAL, "lane drain: NULL lane");
    pthread_mutex_lock(&lane->mu);
    while (lane->count > 0)
        drain_front(lane);
    int rc = report_poison(lane);
    pthread_mutex_unlock(&lane->mu);
    return rc;
}

/* ---- Submission ------------------------------------------------------------------------------ */

static int validate_request(const st_lane_request *req) {
    if (!req || !req->args)
        return st_fail(STRATA_EINVAL, "submit: NULL request or arguments");
    if (req->cfg && (req->cfg->flags & ~STRATA_CALL_DIAGNOSTICS))
        return st_fail(STRATA_EINVAL,
                       "submit: call config flags 0x%x carry unknown bits (only "
                       "STRATA_CALL_DIAGNOSTICS is defined)",
                       req->cfg->flags);
    return STRATA_OK;
}

static st_lane_run *new_run(st_run_lane *lane, const st_lane_request *req) {
    st_lane_run *r = st_calloc(1, sizeof *r);
    if (!r)
        return NULL;
    atomic_init(&r->refs, 2); /* the caller's handle and the FIFO */
    r->lane = lane;
    atomic_fetch_add_explicit(&lane->refs, 1, memory_order_relaxed);
    r->program = req->program;
    snprintf(r->program_name, sizeof r->program_name, "%s",
             req->program_name ? req->program_name : "?");
    strata_args_copy(&r->args, req->args); /* args may be stored compactly */
    if (req->cfg)
        r->cfg = *req->cfg;
    r->diagnostics = (r->cfg.flags & STRATA_CALL_DIAGNOSTICS) != 0;
    r->accepted = req->accepted;
    r->accepted_value = req->accepted_value;
    r->timed = req->timed;
    r->phase = ST_LANE_QUEUED;
    r->disposition = STRATA_CHIP_VALIDATED_ONLY;
    return r;
}

/* Lowest native run storage slot no queued run uses (mu held), or depth if none. */
static uint32_t free_slot(const st_run_lane *lane) {
    for (uint32_t s = 0; s < lane->depth; s++) {
        int used = 0;
        for (uint32_t i = 0; i < lane->count; i++)
            used |= lane->fifo[i]->slot == s;
        if (!used)
            return s;
    }
    return lane->depth;
}

/* Checks of a leased submit, in order (mu held). */
static int check_leased(st_run_lane *lane, st_lease lease, uint64_t run_id, uint64_t dispatch_id,
                        int activated) {
    STRATA_TRY(require_usable(lane));
    if (!st_lease_valid(lease))
        return st_fail(STRATA_EINVAL,
                       "%s: invalid pipeline lease {slot %u, generation %" PRIu64
                       "}: the slot must be < %u and the generation non-zero",
                       lane->label, lease.slot, lease.generation, ST_LEASE_SLOTS);
    if (!st_lease_filter_admits(&lane->leases, lease))
        return st_fail(STRATA_ESTALE,
                       "%s: generation %" PRIu64 " of slot %u is stale (the slot already saw "
                       "generation %" PRIu64 ")",
                       lane->label, lease.generation, lease.slot, lane->leases.newest[lease.slot]);
    for (uint32_t i = 0; i < lane->count; i++) {
        const st_lane_run *q = lane->fifo[i];
        if (q->leased &&
            ((run_id && q->run_id == run_id) || (dispatch_id && q->dispatch_id == dispatch_id)))
            return st_fail(STRATA_EINVAL,
                           "%s: duplicate run or dispatch identity (run_id=%" PRIu64
                           " dispatch_id=%" PRIu64 " is already queued)",
                           lane->label, run_id, dispatch_id);
    }
    if (lane->count >= ST_LANE_FIFO_MAX || free_slot(lane) >= lane->depth)
        return st_fail(STRATA_ECAPACITY,
                       "%s: capacity exceeded before native preparation (%u runs queued)",
                       lane->label, lane->count);
    if (activated && lane->count && lane->fifo[0]->phase == ST_LANE_LAUNCHED &&
        dispatch_id < lane->fifo[0]->dispatch_id)
        return st_fail(STRATA_ESTATE,
                       "%s: dispatch_id %" PRIu64
                       " cannot reorder before the active dispatch %" PRIu64,
                       lane->label, dispatch_id, lane->fifo[0]->dispatch_id);
    return STRATA_OK;
}

/* Whether r goes ahead of q in the FIFO: activated runs first, then by
 * dispatch id (after equal ids); a launched run is never passed. */
static int goes_ahead(const st_lane_run *r, const st_lane_run *q) {
    if (q->phase == ST_LANE_LAUNCHED || q->in_wait)
        return 0;
    if (r->activated != q->activated)
        return r->activated;
    return q->dispatch_id > r->dispatch_id;
}

/* Insert in FIFO order: activated first, then by dispatch id (mu held; room
 * checked). This is the order that keeps a staged (unactivated) successor
 * from ever standing ahead of the head run's later work (hazard H1: the head
 * could never finish, so the successor would never be activated). */
static void insert_ordered(st_run_lane *lane, st_lane_run *r) {
    uint32_t at = lane->count;
    while (at > 0 && goes_ahead(r, lane->fifo[at - 1])) {
        lane->fifo[at] = lane->fifo[at - 1];
        at--;
    }
    lane->fifo[at] = r;
    lane->count++;
    pthread_cond_broadcast(&lane->cv);
}

/* r was activated: move it ahead of the unactivated runs (mu held). */
static void reorder_activated(st_run_lane *lane, st_lane_run *r) {
    for (uint32_t i = 0; i < lane->count; i++) {
        if (lane->fifo[i] != r)
            continue;
        for (uint32_t j = i + 1; j < lane->count; j++)
            lane->fifo[j - 1] = lane->fifo[j];
        lane->count--;
        insert_ordered(lane, r);
        return;
    }
}

/* After a run entered the FIFO: launch it if it is the front, else maybe
 * prepare it early. */
static void start_admitted(st_run_lane *lane, st_lane_run *r) {
    if (lane->fifo[0] == r) {
        launch_front(lane);
        if (lane->count == 2)
            prepare_successor_if_eligible(lane, lane->fifo[1]);
    } else {
        prepare_successor_if_eligible(lane, r);
    }
}

int st_lane_submit_leased(st_run_lane *lane, const st_lane_request *req, st_lease lease,
                          uint64_t run_id, uint64_t dispatch_id, int activated, st_lane_run **out) {
    if (!lane || !out)
        return st_fail(STRATA_EINVAL, "submit: NULL lane or output");
    *out = NULL;
    STRATA_TRY(validate_request(req));
    pthread_mutex_lock(&lane->mu);
    int rc = check_leased(lane, lease, run_id, dispatch_id, activated);
    st_lane_run *r = rc == STRATA_OK ? new_run(lane, req) : NULL;
    if (rc == STRATA_OK && !r)
        rc = lane_nomem(lane);
    if (rc != STRATA_OK) {
        pthread_mutex_unlock(&lane->mu);
        return rc;
    }
    st_lease_filter_commit(&lane->leases, lease); /* checked above, under the same mu */
    r->slot = free_slot(lane);
    r->lease = lease;
    r->run_id = run_id;
    r->dispatch_id = dispatch_id;
    r->leased = 1;
    r->activated = activated != 0;
    insert_ordered(lane, r);
    start_admitted(lane, r);
    pthread_mutex_unlock(&lane->mu);
    *out = r;
    return STRATA_OK;
}

int st_lane_submit_direct(st_run_lane *lane, const st_lane_request *req, st_lane_run **out) {
    if (!lane || !out)
        return st_fail(STRATA_EINVAL, "submit: NULL lane or output");
    *out = NULL;
    STRATA_TRY(validate_request(req));
    int diagnostics = req->cfg && (req->cfg->flags & STRATA_CALL_DIAGNOSTICS);
    pthread_mutex_lock(&lane->mu);
    int rc = require_usable(lane);
    /* Admission: wait (in the device) until the new run can stand behind a
     * launched front that allows a successor, or alone. */
    while (rc == STRATA_OK && lane->count > 0) {
        if (lane->count == 1 && permits_successor(lane, lane->fifo[0], diagnostics))
            break;
        drain_front(lane);
        rc = require_usable(lane);
        if (rc == STRATA_OK)
            launch_front(lane);
    }
    uint32_t slot = rc == STRATA_OK ? free_slot(lane) : 0;
    if (rc == STRATA_OK && slot >= lane->depth)
        rc = st_fail(STRATA_ESTATE, "%s: no free pipeline slot after admission", lane->label);
    if (rc == STRATA_OK && lane->direct_generation == UINT64_MAX)
        rc = st_fail(STRATA_ECAPACITY, "%s: direct run counter exhausted", lane->label);
    st_lane_run *r = rc == STRATA_OK ? new_run(lane, req) : NULL;
    if (rc == STRATA_OK && !r)
        rc = lane_nomem(lane);
    if (rc != STRATA_OK) {
        pthread_mutex_unlock(&lane->mu);
        return rc;
    }
    /* Direct runs use their own counter and never touch the leased
     * generation marks (nor, below, the ChipWorker's filter). */
    uint64_t gen = ++lane->direct_generation;
    r->slot = slot;
    r->lease = (st_lease){.generation = gen};
    r->run_id = gen;
    r->activated = 1;
    lane->fifo[lane->count++] = r;
    pthread_cond_broadcast(&lane->cv);
    start_admitted(lane, r);
    pthread_mutex_unlock(&lane->mu);
    *out = r;
    return STRATA_OK;
}

/* ---- Run handle calls ------------------------------------------------------------------------ */

int st_lane_activate(st_lane_run *r) {
    if (!r)
        return st_fail(STRATA_EINVAL, "activate: empty run handle");
    st_run_lane *lane = r->lane;
    pthread_mutex_lock(&lane->mu);
    if (r->phase == ST_LANE_TERMINAL) {
        int status = st_error_raise(&r->error);
        pthread_mutex_unlock(&lane->mu);
        return status;
    }
    if (!r->activated) {
        r->activated = 1;
        reorder_activated(lane, r);
    }
    launch_front(lane);
    if (lane->count == 2 && lane->fifo[0] == r)
        prepare_successor_if_eligible(lane, lane->fifo[1]);
    pthread_cond_broadcast(&lane->cv);
    pthread_mutex_unlock(&lane->mu);
    return STRATA_OK;
}

int st_lane_abandon(st_lane_run *r) {
    if (!r)
        return st_fail(STRATA_EINVAL, "abandon: empty run handle");
    st_run_lane *lane = r->lane;
    pthread_mutex_lock(&lane->mu);
    while (r->preparing)
        pthread_cond_wait(&lane->cv, &lane->mu);
    char ident[128];
    run_ident(r, ident, sizeof ident);
    int rc = STRATA_OK;
    if (r->phase == ST_LANE_TERMINAL) {
        pthread_mutex_unlock(&lane->mu);
        return STRATA_OK;
    }
    if (r->phase == ST_LANE_LAUNCHED) {
        pthread_mutex_unlock(&lane->mu);
        return st_fail(STRATA_ESTATE,
                       "%s: cannot abandon a launched run %s: it runs to completion; wait for it",
                       lane->label, ident);
    }
    if (r->phase == ST_LANE_PREPARED) {
        rc = st_cw_finalize(lane->cw, &r->token);
        if (rc != STRATA_OK) {
            fail_run(r, rc);
            poison_lane(lane, r);
        }
    }
    st_error_set(&r->error, STRATA_ECANCELED, "%s: run %s was abandoned before it launched",
                 lane->label, ident);
    retire(lane, r);
    launch_front(lane);
    if (rc != STRATA_OK)
        st_error_raise(&r->error);
    pthread_mutex_unlock(&lane->mu);
    return rc;
}

int st_lane_done(st_lane_run *r) {
    if (!r)
        return 0;
    st_run_lane *lane = r->lane;
    pthread_mutex_lock(&lane->mu);
    int done = progress(lane, r);
    pthread_mutex_unlock(&lane->mu);
    return done;
}

int st_lane_wait(st_lane_run *r, uint64_t deadline_ns) {
    if (!r)
        return st_fail(STRATA_EINVAL, "wait: empty run handle");
    st_run_lane *lane = r->lane;
    pthread_mutex_lock(&lane->mu);
    while (!progress(lane, r)) {
        if (st_now_ns() >= deadline_ns) {
            char ident[128];
            run_ident(r, ident, sizeof ident);
            pthread_mutex_unlock(&lane->mu);
            return st_fail(STRATA_ETIMEDOUT,
                           "%s: run %s did not finish before the deadline (it is still live; "
                           "wait again)",
                           lane->label, ident);
        }
        if (!block_on_front(lane, deadline_ns))
            park(lane, deadline_ns); /* front not activated, or another thread waits on it */
    }
    int status = st_error_raise(&r->error); /* the same error on every wait */
    pthread_mutex_unlock(&lane->mu);
    return status;
}

int st_lane_run_status(st_lane_run *r) {
    pthread_mutex_lock(&r->lane->mu);
    int s = r->phase == ST_LANE_TERMINAL ? st_error_status(&r->error) : STRATA_OK;
    pthread_mutex_unlock(&r->lane->mu);
    return s;
}

const char *st_lane_run_error(st_lane_run *r) {
    pthread_mutex_lock(&r->lane->mu);
    const char *e = r->phase == ST_LANE_TERMINAL ? st_error_msg(&r->error) : "";
    pthread_mutex_unlock(&r->lane->mu);
    return e;
}

int st_lane_run_launched(st_lane_run *r) {
    pthread_mutex_lock(&r->lane->mu);
    int l = r->launched;
    pthread_mutex_unlock(&r->lane->mu);
    return l;
}

void st_lane_run_times(st_lane_run *r, st_lane_times *out) {
    pthread_mutex_lock(&r->lane->mu);
    *out = r->times;
    pthread_mutex_unlock(&r->lane->mu);
}

strata_chip_disposition st_lane_run_disposition(st_lane_run *r) {
    pthread_mutex_lock(&r->lane->mu);
    strata_chip_disposition d = r->disposition;
    pthread_mutex_unlock(&r->lane->mu);
    return d;
}

st_lane_phase st_lane_run_phase(st_lane_run *r) {
    pthread_mutex_lock(&r->lane->mu);
    st_lane_phase p = r->phase;
    pthread_mutex_unlock(&r->lane->mu);
    return p;
}

st_lease st_lane_run_lease(const st_lane_run *r) {
    return r->lease;
}

uint64_t st_lane_run_dispatch_id(const st_lane_run *r) {
    return r->dispatch_id;
}

void st_lane_run_retain(st_lane_run *r) {
    run_hold(r);
}

uint64_t st_lane_yields(st_run_lane *lane) {
    pthread_mutex_lock(&lane->mu);
    uint64_t n = lane->yields;
    pthread_mutex_unlock(&lane->mu);
    return n;
}

uint64_t st_lane_run_id(const st_lane_run *r) {
    return r->run_id;
}

uint32_t st_lane_run_slot(const st_lane_run *r) {
    return r->slot;
}

void st_lane_run_release(st_lane_run *r) {
    if (r)
        run_drop(r);
}

int st_lane_poisoned(st_run_lane *lane) {
    pthread_mutex_lock(&lane->mu);
    int p = lane_poisoned(lane);
    pthread_mutex_unlock(&lane->mu);
    return p;
}

int st_lane_program_in_use(st_run_lane *lane, uint32_t program) {
    pthread_mutex_lock(&lane->mu);
    int used = 0;
    for (uint32_t i = 0; i < lane->count; i++)
        used |= lane->fifo[i]->program == program;
    pthread_mutex_unlock(&lane->mu);
    return used;
}

uint32_t st_lane_count(st_run_lane *lane) {
    pthread_mutex_lock(&lane->mu);
    uint32_t n = lane->count;
    pthread_mutex_unlock(&lane->mu);
    return n;
}
