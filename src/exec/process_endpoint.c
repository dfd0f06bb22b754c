/* exec/process_endpoint.c - the parent's side of a process child: its
 * mailbox, its fork and readiness, dispatch and activation into the task
 * frames, the parent-side thread that reads results back and watches the
 * child's liveness, control calls, and the bounded close.
 *
 * Owns: the st_proc_ep record, its leaf lock, its parent-side thread and its
 * child process (the pid is signalled and waited for only through
 * ipc/child_process.h).
 * Must never: block in dispatch or activate (they run under the engine lock),
 * take the engine lock, trust anything read back from a frame before the
 * identity check, or leave a child, a thread or a mapping behind on any path.
 *
 * Lifecycle (util/state_machine.h, moved under `lock`):
 *   NEW --spawn--> STARTING --ready--> SERVING --stop--> STOPPING
 *   NEW | STARTING | SERVING | STOPPING --reset--> NEW   (abandon / destroy)
 * Task frames move by the mailbox's rules (ipc/mailbox.h); this side writes
 * IDLE -> TASK_READY | PREPARE_READY, PREPARE_READY -> TASK_READY and
 * FRAME_STAGED -> ACTIVATE (CAS, at activation) and TASK_DONE | TASK_FAILED
 * -> IDLE (after reading the result).
 *
 * Threads: one parent-side thread per endpoint, started once the child is
 * ready and every process of the worker tree was forked
 * (st_proc_ep_start_thread). It parks on the parent doorbell with a 50 ms
 * timeout while nothing is in flight, and with a 2 ms timeout while
 * something is, probing the child's liveness at every timeout: a dead
 * child's in-flight tasks fail with its wait status within milliseconds,
 * and the engine learns it is gone (an idle child's death within 50 ms,
 * before a task is sent to it). A dispatch
 * rings that doorbell only while the thread is in (or about to enter) the
 * idle park (`idle_parked`): when it spins, parks with the short timeout or
 * runs the dispatch itself, the ring would only move the bell's cache line
 * away from the child, and wake nobody.
 * While a waiting caller lends (proc_lend hands finished results back and
 * completes them itself, core/helping.c), each lend renews a short lease
 * (`lend_until`), and while it holds the thread parks at once, with the
 * 2 ms timeout, instead of spinning: the caller collects, and the thread
 * would only take a core from it and the children. A child of one frame
 * rings a parked parent late (process_child.c: only if the result is still
 * there a few microseconds later), so a result the caller collects wakes
 * nobody, and one the caller left behind wakes the thread.
 *
 * Completion records: a frame record is used for a task only while neither
 * busy nor held / queued with the engine (st_completion_free); a rejection
 * takes such a record too (or reject_comp), held under `lock` before it is
 * pushed, so no record is ever pushed twice.
 */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "exec/process_endpoint.h"
#include "exec/process_wire.h"
#include "ipc/shm_region.h"
#include "ipc/wire_args.h"
#include "util/alloc.h"
#include "util/clock.h"
#include "util/error.h"
#include "util/message.h"
#include "util/state_machine.h"

#define PROBE_NS 2000000ull           /* park timeout while tasks are in flight */
#define IDLE_PROBE_NS 50000000ull     /* park timeout while idle: a death noticed within 50 ms */
#define LEASE_MIN_NS 20000ull         /* a lend's lease lasts max(spin_ns, this) */
#define REAP_READY_NS 2000000000ull   /* a served child gets this long to exit after SHUTDOWN */
#define REAP_STARTING_NS 200000000ull /* a child that never became ready */

typedef enum proc_life { LIFE_NEW = 0, LIFE_STARTING, LIFE_SERVING, LIFE_STOPPING } proc_life;
typedef enum proc_life_t {
    LIFE_T_SPAWN,
    LIFE_T_READY,
    LIFE_T_STOP,
    LIFE_T_RESET,
    LIFE_T_COUNT
} proc_life_t;
static const char *const life_names[] = {"NEW", "STARTING", "SERVING", "STOPPING"};
static const st_sm_rule life_rules[LIFE_T_COUNT] = {
    [LIFE_T_SPAWN] = {ST_SM_BIT(LIFE_NEW), LIFE_STARTING, "spawn"},
    [LIFE_T_READY] = {ST_SM_BIT(LIFE_STARTING), LIFE_SERVING, "ready"},
    [LIFE_T_STOP] = {ST_SM_BIT(LIFE_NEW) | ST_SM_BIT(LIFE_STARTING) | ST_SM_BIT(LIFE_SERVING) |
                         ST_SM_BIT(LIFE_STOPPING),
                     LIFE_STOPPING, "stop"},
    [LIFE_T_RESET] = {ST_SM_BIT(LIFE_NEW) | ST_SM_BIT(LIFE_STARTING) | ST_SM_BIT(LIFE_SERVING) |
                          ST_SM_BIT(LIFE_STOPPING),
                      LIFE_NEW, "reset"},
};
static const st_sm life_machine = {"process endpoint", life_names, 4, life_rules, LIFE_T_COUNT};

/* What the parent remembers of the task in one frame (never read back from
 * the frame: the frame is only checked against it). */
typedef struct proc_rec {
    int busy;   /* a task is in the frame */
    int staged; /* published PREPARE_READY, not activated yet */
    st_mbox_trailer trailer;
    uint64_t ref;
    uint32_t member;
    char task[64]; /* the callable's name, for messages */
    st_completion comp;
} proc_rec;

struct st_proc_ep {
    st_endpoint base; /* first: the engine's handle */
    st_proc_ep_config cfg;
    st_shm shm;
    st_mbox *m;
    st_child child;
    pid_t pid; /* of the child last spawned (st_child clears its own once reaped) */
    uint32_t nframes;
    /* Protects life, served, recs, inflight and the dead reason, and serialises the
     * liveness probe (st_child_alive). A leaf lock: taken under the engine
     * lock by dispatch and activate, and under ctl_mu by control calls;
     * nothing is taken under it (completions are pushed after it is dropped). */
    st_mutex lock;
    uint32_t life;
    int served; /* the child reached SERVING since its spawn (its reap bound) */
    proc_rec recs[ST_MBOX_TASK_FRAMES];
    int inflight;
    _Atomic int dead; /* the child is gone: dead_why says how (written before) */
    char dead_why[256];
    int interrupted;           /* strata_worker_interrupt killed the child (under lock) */
    st_completion reject_comp; /* a rejection while no frame record is free */
    pthread_t thread;
    int thread_started;
    _Atomic int stopping;
    /* Serialises control calls (one control frame). Taken with no other lock
     * held, before `lock`. */
    pthread_mutex_t ctl_mu;
    int ctl_broken; /* a control call timed out unanswered: no other until its answer came */
    st_proc_frame_hook frame_hook;
    void *frame_hook_ctx;
    /* 1 while the parent-side thread is in (or about to enter) its unbounded
     * park: only then must a dispatch ring it. seq_cst: the thread stores it
     * before it reads `inflight` under `lock`; a dispatch loads it after it
     * raised `inflight` under `lock`, so one of the two sees the other. */
    _Atomic int idle_parked;
    /* Until when a lending caller collects this endpoint's results (st_now_ns;
     * 0: none): written by every lend, read by the thread before it waits. In
     * its own cache line, away from what dispatch and collect write. */
    _Alignas(64) _Atomic uint64_t lend_until;
    /* The park timeout while tasks are in flight (PROBE_NS; a test seam,
     * st_proc_ep_set_probe_ns, lengthens it so only a ring can wake the thread). */
    _Atomic uint64_t probe_ns;
};

static const st_endpoint_ops proc_ops;

static void life_move(st_proc_ep *p, proc_life_t t) {
    p->life = st_sm_next(&life_machine, p->life, t, "life");
}

/* ---- liveness ---------------------------------------------------------- */

/* Lock held. 1 if the child is known dead (probing it if not yet known). */
static int probe_dead_locked(st_proc_ep *p) {
    if (atomic_load(&p->dead))
        return 1;
    if (!p->child.exited && (p->child.pid == 0 || st_child_alive(&p->child)))
        return 0; /* never started, or running */
    snprintf(p->dead_why, sizeof p->dead_why, "%s (pid %d) %s%s", p->cfg.label, (int)p->pid,
             p->interrupted ? "was stopped by strata_worker_interrupt: " : "", p->child.why);
    atomic_store(&p->dead, 1);
    st_endpoint_gone(&p->base); /* no more sub tasks for it while another sub lives */
    return 1;
}

static int probe_dead(st_proc_ep *p) {
    st_mutex_lock(&p->lock);
    int d = probe_dead_locked(p);
    st_mutex_unlock(&p->lock);
    return d;
}

/* ---- reading results back (parent-side thread) ------------------------- */

static int completion_status(int child_status) {
    switch (child_status) {
    case STRATA_ETASK:
    case STRATA_ENOMEM:
    case STRATA_EENDPOINT:
        return child_status;
    default:
        return STRATA_EENDPOINT; /* the child refused the frame: a mailbox failure */
    }
}

/* Lock held. If frame i holds a finished task, fill its completion, free the
 * frame and return 1 (the caller completes rec->comp after unlocking). */
static int take_result_locked(st_proc_ep *p, uint32_t i) {
    proc_rec *rec = &p->recs[i];
    if (!rec->busy)
        return 0;
    st_mbox_frame *f = st_mbox_task(p->m, i);
    uint32_t st = st_mbox_state_of(f);
    if (st != ST_MBOX_TASK_DONE && st != ST_MBOX_TASK_FAILED)
        return 0;
    st_completion *c = &rec->comp;
    st_completion_hold(c); /* pushed after the unlock; no dispatch picks it meanwhile */
    c->ref = rec->ref;
    c->member = rec->member;
    c->ran_on = -1;
    c->t_start = c->t_end = 0;
    uint64_t t_start = f->t_start, t_end = f->t_end;
    f->t_start = f->t_end = 0;
    if (st_mbox_check_identity(f, &rec->trailer, p->cfg.label) != STRATA_OK) {
        c->status = STRATA_EENDPOINT; /* its times are not this dispatch's: not copied */
        st_msg_format(c->msg, sizeof c->msg, "task '%s': result frame refused: %s", rec->task,
                      strata_error_message());
    } else {
        if (p->cfg.timed) { /* kinds that measure nothing leave them 0: not measured; the
                               engine bounds the rest (core/trace.c) */
            c->t_start = t_start;
            c->t_end = t_end;
        }
        if (st == ST_MBOX_TASK_DONE && f->status == STRATA_OK) {
            c->status = STRATA_OK;
            c->msg[0] = '\0';
        } else {
            c->status = completion_status(f->status == STRATA_OK ? STRATA_ETASK : f->status);
            st_mbox_get_error(f, c->msg, sizeof c->msg);
            if (!c->msg[0])
                st_msg_format(c->msg, sizeof c->msg, "%s: task '%s' failed with status %d",
                              p->cfg.label, rec->task, (int)f->status);
        }
    }
    st_mbox_publish(f, ST_MBOX_IDLE); /* the child never writes an IDLE frame */
    rec->busy = 0;
    rec->staged = 0;
    p->inflight--;
    return 1;
}

/* Complete every finished task; then, if the child is dead, fail the rest. */
static int collect(st_proc_ep *p, int check_dead) {
    st_completion *done[ST_MBOX_TASK_FRAMES];
    int n = 0;
    st_mutex_lock(&p->lock);
    for (uint32_t i = 0; i < p->nframes; i++)
        if (take_result_locked(p, i))
            done[n++] = &p->recs[i].comp;
    if (check_dead && p->inflight > 0 && probe_dead_locked(p)) {
        for (uint32_t i = 0; i < p->nframes; i++) {
            proc_rec *rec = &p->recs[i];
            if (!rec->busy)
                continue;
            if (take_result_locked(p, i)) { /* it finished just before the child died */
                done[n++] = &rec->comp;
                continue;
            }
            /* dead: nothing writes the frame any more */
            int started =
                atomic_load(&st_mbox_task(p->m, i)->taken) == (uint32_t)rec->trailer.dispatch_id;
            st_completion_hold(&rec->comp);
            rec->comp.ref = rec->ref;
            rec->comp.member = rec->member;
            rec->comp.status = STRATA_EENDPOINT;
            rec->comp.t_start = rec->comp.t_end = 0; /* no time from a dead child */
            rec->comp.ran_on = -1;
            st_msg_format(rec->comp.msg, sizeof rec->comp.msg,
                          started ? "%s while running task '%s'"
                                  : "%s before task '%s' started (it never ran)",
                          p->dead_why, rec->task);
            rec->busy = 0;
            rec->staged = 0;
            p->inflight--;
            done[n++] = &rec->comp;
        }
    }
    st_mutex_unlock(&p->lock);
    for (int k = 0; k < n; k++)
        st_endpoint_complete(&p->base, done[k]);
    return n;
}

static void *proc_thread_main(void *arg) {
    st_proc_ep *p = arg;
    st_event *bell = &st_mbox_control(p->m)->parent_bell;
    if (p->base.is_sub) /* a scheduler pass here hands the next sub task to this child: a
                           chain stays on one child, whose loop is still spinning */
        st_endpoint_bind_thread(&p->base);
    int idle_probed = 0; /* the last wait was an idle park that timed out */
    for (;;) {
        uint32_t seen = atomic_load_explicit(&bell->value, memory_order_acquire);
        if (collect(p, 0)) {
            idle_probed = 0;
            continue;
        }
        st_mutex_lock(&p->lock);
        int inflight = p->inflight;
        st_mutex_unlock(&p->lock);
        if (inflight == 0 && atomic_load(&p->stopping))
            return NULL;
        int lent = atomic_load_explicit(&p->lend_until, memory_order_relaxed) > st_now_ns();
        if (inflight == 0 && !lent) {
            atomic_store(&p->idle_parked, 1);
            st_mutex_lock(&p->lock); /* a dispatch since the read above did not ring */
            inflight = p->inflight;
            st_mutex_unlock(&p->lock);
            int timed_out = 0;
            if (inflight == 0 && !atomic_load(&p->stopping))
                /* spin only on the first park after work: a re-park after an
                 * idle probe parks at once (idle CPU) */
                timed_out = st_mbox_wait_bell(bell, seen, idle_probed ? 0 : p->cfg.spin_ns,
                                              st_deadline_after(IDLE_PROBE_NS)) != 0;
            atomic_store(&p->idle_parked, 0);
            idle_probed = timed_out;
            if (timed_out && !atomic_load(&p->dead))
                probe_dead(p); /* an idle child's death, noticed before a task goes to it */
            continue;
        }
        /* In flight, or a caller collects: park with the probe's timeout (a
         * dispatch does not ring it: idle_parked is 0), at once while lent. */
        uint64_t probe = atomic_load_explicit(&p->probe_ns, memory_order_relaxed);
        if (st_mbox_wait_bell(bell, seen, lent ? 0 : p->cfg.spin_ns, st_deadline_after(probe)) != 0)
            collect(p, 1); /* nothing for a probe's time: is the child still there? */
    }
}

/* ---- the engine's calls ------------------------------------------------ */

/* Lock held: a record for a rejection, held until it is pushed (after the
 * unlock). One whose frame is not busy and whose record the engine is done
 * with; the engine's capacity count includes rejections, so one exists unless
 * the engine oversteps it, and reject_comp is the last resort. */
static st_completion *reject_record_locked(st_proc_ep *p) {
    st_completion *c = &p->reject_comp;
    for (uint32_t i = 0; i < p->nframes; i++)
        if (!p->recs[i].busy && st_completion_free(&p->recs[i].comp)) {
            c = &p->recs[i].comp;
            break;
        }
    st_completion_hold(c);
    return c;
}

static void reject(st_proc_ep *p, st_completion *c, const st_dispatch *d, int status,
                   const char *why) {
    st_endpoint_complete_with(&p->base, c, d, status, "%s", why);
}

/* A staged dispatch (its run is not the head yet: core/endpoint.h, Staging)
 * is published PREPARE_READY; the child may validate and prepare it, never
 * launch it before activation. */
static int dispatch_staged(const st_dispatch *d) {
    return d->staged;
}

static void proc_dispatch(st_endpoint *ep, const st_dispatch *d) {
    st_proc_ep *p = (st_proc_ep *)ep;
    char why[STRATA_ERRMSG_MAX];
    st_mutex_lock(&p->lock);
    if (atomic_load(&p->dead)) { /* no probe here: a syscall per task, under the engine lock */
        st_msg_format(why, sizeof why, "%s; task '%s' not started", p->dead_why, d->callable->name);
        st_completion *c = reject_record_locked(p);
        st_mutex_unlock(&p->lock);
        reject(p, c, d, STRATA_EENDPOINT, why);
        return;
    }
    uint32_t i = 0;
    while (i < p->nframes && (p->recs[i].busy || !st_completion_free(&p->recs[i].comp)))
        i++;
    if (p->life != LIFE_SERVING || i == p->nframes) {
        st_msg_format(why, sizeof why, "%s is %s; task '%s' rejected", p->cfg.label,
                      p->life != LIFE_SERVING ? "not serving" : "busy", d->callable->name);
        st_completion *c = reject_record_locked(p);
        st_mutex_unlock(&p->lock);
        reject(p, c, d, STRATA_EENDPOINT, why);
        return;
    }
    st_mbox_frame *f = st_mbox_task(p->m, i);
    size_t used = 0;
    if (st_wire_args_encode(d->args, f->payload, ST_MBOX_ARGS_CAP, &used) != STRATA_OK) {
        st_msg_format(why, sizeof why, "%s: task '%s': %s", p->cfg.label, d->callable->name,
                      strata_error_message());
        st_completion *c = reject_record_locked(p);
        st_mutex_unlock(&p->lock);
        reject(p, c, d, STRATA_EENDPOINT, why);
        return;
    }
    proc_rec *rec = &p->recs[i];
    rec->trailer = (st_mbox_trailer){
        .protocol = ST_MBOX_PROTOCOL,
        .run_id = d->run_id,
        .lease_slot = d->lease.slot,
        .generation = d->lease.generation,
        .dispatch_id = d->dispatch_id,
    };
    rec->ref = d->ref;
    rec->member = d->member;
    /* a bounded copy, not snprintf: this runs per task under the engine lock */
    size_t nlen = strnlen(d->callable->name, sizeof rec->task - 1);
    memcpy(rec->task, d->callable->name, nlen);
    rec->task[nlen] = '\0';
    rec->staged = dispatch_staged(d);
    rec->busy = 1;
    p->inflight++;
    st_mbox_task_prepare(f, &rec->trailer, &d->lease, d->cfg, d->member, d->callable->digest.bytes);
    f->payload_bytes = (uint32_t)used;
    if (p->frame_hook)
        p->frame_hook(p, f, p->frame_hook_ctx);
    st_mbox_publish(f, rec->staged ? ST_MBOX_PREPARE_READY : ST_MBOX_TASK_READY);
    st_mutex_unlock(&p->lock);
    st_mbox_frame *ctl = st_mbox_control(p->m);
    st_mbox_ring(&ctl->child_bell);
    if (atomic_load(&p->idle_parked)) /* it parks with a timeout from now on */
        st_mbox_ring(&ctl->parent_bell);
}

/* Lock held. A staged frame with a disposition the protocol does not have:
 * the child is broken; the endpoint is treated as dead (its tasks fail with
 * this message at the next probe, later ones are rejected with it). */
static void poison_locked(st_proc_ep *p, uint32_t frame, uint32_t disp) {
    if (atomic_load(&p->dead))
        return;
    snprintf(p->dead_why, sizeof p->dead_why,
             "%s (pid %d) is poisoned: staged frame %u has disposition %u (not VALIDATED_ONLY or "
             "NATIVE_PREPARED)",
             p->cfg.label, (int)p->pid, frame, disp);
    atomic_store(&p->dead, 1);
}

static void proc_activate(st_endpoint *ep, uint64_t run_id) {
    st_proc_ep *p = (st_proc_ep *)ep;
    int rang = 0;
    int poisoned = atomic_load(&p->dead);
    st_mutex_lock(&p->lock);
    for (uint32_t i = 0; i < p->nframes; i++) {
        proc_rec *rec = &p->recs[i];
        if (!rec->busy || !rec->staged || rec->trailer.run_id > run_id) /* runs <= run_id */
            continue;
        st_mbox_frame *f = st_mbox_task(p->m, i);
        if (st_mbox_cas(f, ST_MBOX_PREPARE_READY, ST_MBOX_TASK_READY)) {
            rec->staged = 0;
            rang = 1;
            continue;
        }
        if (st_mbox_state_of(f) != ST_MBOX_FRAME_STAGED)
            continue;
        /* The child wrote the disposition before FRAME_STAGED (the acquire above). */
        uint32_t disp = atomic_load_explicit(&f->disposition, memory_order_relaxed);
        if (disp != ST_MBOX_DISP_VALIDATED_ONLY && disp != ST_MBOX_DISP_NATIVE_PREPARED) {
            poison_locked(p, i, disp);
            continue;
        }
        if (st_mbox_cas(f, ST_MBOX_FRAME_STAGED, ST_MBOX_ACTIVATE)) {
            rec->staged = 0;
            rang = 1;
        }
    }
    poisoned = !poisoned && atomic_load(&p->dead);
    st_mutex_unlock(&p->lock);
    if (poisoned)
        st_endpoint_gone(&p->base);
    if (rang)
        st_mbox_ring(&st_mbox_control(p->m)->child_bell);
}

static void proc_stop(st_endpoint *ep) {
    st_proc_ep *p = (st_proc_ep *)ep;
    st_mutex_lock(&p->lock);
    life_move(p, LIFE_T_STOP);
    st_mutex_unlock(&p->lock);
    atomic_store(&p->stopping, 1);
    st_mbox_ring(&st_mbox_control(p->m)->parent_bell);
}

/* Stop the child (sticky shutdown word, SHUTDOWN, the doorbell), reap it
 * within a bound (then SIGKILL), and join the parent-side thread. The
 * endpoint is NEW again: spawn may start a fresh child. Idempotent. */
static void shut_down(st_proc_ep *p) {
    st_mbox_frame *ctl = st_mbox_control(p->m);
    atomic_store(&p->stopping, 1);
    if (p->thread_started) {
        st_mbox_ring(&ctl->parent_bell);
        pthread_join(p->thread, NULL);
        p->thread_started = 0;
    }
    if (p->child.pid != 0) {
        st_mutex_lock(&p->lock);
        int served = p->served; /* not the life: init_failed stops a child never ready first */
        st_mutex_unlock(&p->lock);
        atomic_store(&ctl->shutdown, 1);
        st_mbox_publish(ctl, ST_MBOX_SHUTDOWN);
        st_mbox_ring(&ctl->child_bell);
        st_child_reap(&p->child, st_deadline_after(served ? REAP_READY_NS : REAP_STARTING_NS));
    }
    st_mutex_lock(&p->lock);
    life_move(p, LIFE_T_RESET);
    st_mutex_unlock(&p->lock);
}

static void proc_destroy(st_endpoint *ep) {
    st_proc_ep *p = (st_proc_ep *)ep;
    shut_down(p);
    if (p->cfg.kind->release)
        p->cfg.kind->release(p->cfg.kind_arg);
    st_shm_destroy(&p->shm);
    pthread_mutex_destroy(&p->ctl_mu);
    st_free(p);
}

static int proc_registered(st_endpoint *ep, const st_callable_info *ci) {
    st_proc_ep *p = (st_proc_ep *)ep;
    st_wire_callable w;
    memset(&w, 0, sizeof w);
    w.kind = (uint32_t)ci->kind;
    w.id = ci->id;
    snprintf(w.name, sizeof w.name, "%s", ci->name);
    w.fn = (uint64_t)(uintptr_t)ci->fn;
    w.user = (uint64_t)(uintptr_t)ci->user;
    w.program = (uint64_t)(uintptr_t)ci->program;
    /* No deadline: a child answers between two tasks (a long task delays it), and
     * its death is noticed by the probe while waiting. */
    return st_proc_ep_control(p, ST_MBOX_CMD_REGISTER, 0, 0, &w, sizeof w, NULL, 0, NULL,
                              UINT64_MAX);
}

/* A thread waiting for its run (core/helping.c) cannot run a task in another
 * process, but it can hand back what the child finished: it completes the
 * result itself instead of waiting for this endpoint's thread to wake up
 * (one cross-core hand-off fewer per task while someone waits). */
static int proc_lend(st_endpoint *ep, uint64_t max_run_id, uint32_t worker) {
    st_proc_ep *p = (st_proc_ep *)ep;
    (void)max_run_id; /* a result is handed back whatever its run */
    (void)worker;     /* no body runs here */
    uint64_t span = p->cfg.spin_ns > LEASE_MIN_NS ? p->cfg.spin_ns : LEASE_MIN_NS;
    atomic_store_explicit(&p->lend_until, st_now_ns() + span, memory_order_relaxed);
    int any = 0;
    for (uint32_t i = 0; i < p->nframes && !any; i++) {
        uint32_t st = st_mbox_state_of(st_mbox_task(p->m, i));
        any = st == ST_MBOX_TASK_DONE || st == ST_MBOX_TASK_FAILED;
    }
    return any && collect(p, 0) > 0;
}

/* A child running a task is killed: nothing less stops a task body in
 * another process. Its death is then found and reported by the parent-side
 * thread as any crash is (collect), with the reason saying who killed it. */
static void proc_interrupt(st_endpoint *ep) {
    st_proc_ep *p = (st_proc_ep *)ep;
    st_mutex_lock(&p->lock);
    if (p->inflight > 0 && !atomic_load(&p->dead) && p->child.pid > 0 && !p->child.exited) {
        p->interrupted = 1;
        kill(p->child.pid, SIGKILL); /* not reaped (probe_dead_locked reaps under this lock) */
    }
    st_mutex_unlock(&p->lock);
    st_mbox_ring(&st_mbox_control(p->m)->parent_bell);
}

static const st_endpoint_ops proc_ops = {
    .dispatch = proc_dispatch,
    .progress = NULL,
    .activate = proc_activate,
    .stop = proc_stop,
    .destroy = proc_destroy,
    .lend = proc_lend,
    .registered = proc_registered,
    .interrupt = proc_interrupt,
};

/* ---- creation, fork, readiness ----------------------------------------- */

int st_proc_ep_create(st_engine *e, const st_proc_ep_config *cfg, st_proc_ep **out) {
    *out = NULL;
    if (!cfg || !cfg->kind || cfg->kind->frames < 1 || cfg->kind->frames > ST_MBOX_TASK_FRAMES ||
        !cfg->kind->init || !cfg->kind->task || !cfg->kind->shutdown)
        return st_fail(STRATA_EINVAL,
                       "process endpoint: a kind with 1..%u frames, init, task "
                       "and shutdown is needed",
                       ST_MBOX_TASK_FRAMES);
    st_proc_ep *p = st_calloc(1, sizeof *p);
    if (!p)
        return st_fail_nomem("process endpoint: its record", sizeof *p);
    p->cfg = *cfg;
    p->cfg.label[sizeof p->cfg.label - 1] = '\0';
    if (p->cfg.startup_timeout_ns == 0)
        p->cfg.startup_timeout_ns = 30ull * 1000000000ull;
    int rc = st_shm_create(p->cfg.label, ST_MBOX_REGION_BYTES, &p->shm);
    if (rc != STRATA_OK) {
        st_free(p);
        return rc;
    }
    p->m = p->shm.base;
    st_mbox_init(p->m);
    p->nframes = cfg->kind->frames;
    pthread_mutex_init(&p->ctl_mu, NULL);
    p->base.ops = &proc_ops;
    p->base.engine = e;
    p->base.is_sub = cfg->is_sub;
    p->base.worker_id = cfg->worker_id;
    p->base.capacity = (int)p->nframes;
    atomic_init(&p->base.last_cpu, -1);
    atomic_init(&p->base.gone, 0);
    snprintf(p->base.label, sizeof p->base.label, "%s", p->cfg.label);
    atomic_init(&p->probe_ns, PROBE_NS);
    p->life = LIFE_NEW;
    *out = p;
    return STRATA_OK;
}

static int child_entry(void *arg) {
    return st_proc_child_main(arg);
}

int st_proc_ep_spawn(st_proc_ep *p) {
    st_mutex_lock(&p->lock);
    uint32_t life = p->life;
    st_mutex_unlock(&p->lock);
    if (life != LIFE_NEW)
        return STRATA_OK; /* started already */
    st_mbox_init(p->m);
    atomic_store(&p->dead, 0);
    atomic_store(&p->stopping, 0);
    atomic_store(&p->idle_parked, 0);
    atomic_store(&p->lend_until, 0);
    atomic_store(&p->base.gone, 0);
    p->ctl_broken = 0;
    p->inflight = 0;
    memset(p->recs, 0, sizeof p->recs);
    p->served = 0;
    memset(&p->child, 0, sizeof p->child);
    int rc = st_child_spawn(&p->child, p->cfg.label, child_entry, p);
    if (rc != STRATA_OK)
        return st_fail_prefix(rc, p->cfg.label);
    p->pid = p->child.pid;
    p->base.pid = (int)p->child.pid;
    st_mutex_lock(&p->lock);
    life_move(p, LIFE_T_SPAWN);
    st_mutex_unlock(&p->lock);
    return STRATA_OK;
}

int st_proc_ep_wait_ready(st_proc_ep *p, uint64_t deadline_ns) {
    st_mutex_lock(&p->lock);
    uint32_t life = p->life;
    st_mutex_unlock(&p->lock);
    if (life == LIFE_SERVING)
        return STRATA_OK;
    if (life != LIFE_STARTING)
        return st_fail(STRATA_ESTATE, "%s: not started", p->cfg.label);
    st_mbox_frame *ctl = st_mbox_control(p->m);
    int pid = (int)p->pid;
    for (;;) {
        uint32_t seen = atomic_load_explicit(&ctl->parent_bell.value, memory_order_acquire);
        uint32_t st = st_mbox_state_of(ctl);
        if (st == ST_MBOX_INIT_READY)
            break;
        if (st == ST_MBOX_INIT_FAILED) {
            char text[ST_MBOX_ERR_BYTES];
            st_mbox_get_error(ctl, text, sizeof text);
            shut_down(p);
            return st_fail(STRATA_EENDPOINT, "%s (pid %d): init failed: %s", p->cfg.label, pid,
                           text[0] ? text : "(no message)");
        }
        if (probe_dead(p)) {
            char why[sizeof p->dead_why];
            snprintf(why, sizeof why, "%s", p->dead_why);
            shut_down(p);
            return st_fail(STRATA_EENDPOINT, "%s during startup", why);
        }
        uint64_t now = st_now_ns();
        if (now >= deadline_ns) {
            shut_down(p);
            return st_fail(STRATA_ETIMEDOUT,
                           "%s (pid %d): not ready within startup_timeout_ns (%llu ms); killed",
                           p->cfg.label, pid,
                           (unsigned long long)(p->cfg.startup_timeout_ns / 1000000ull));
        }
        uint64_t until = now + PROBE_NS < deadline_ns ? now + PROBE_NS : deadline_ns;
        st_mbox_wait_bell(&ctl->parent_bell, seen, p->cfg.spin_ns, until);
    }
    st_mbox_publish(ctl, ST_MBOX_IDLE);
    atomic_store(&p->stopping, 0);
    st_mutex_lock(&p->lock);
    life_move(p, LIFE_T_READY);
    p->served = 1;
    st_mutex_unlock(&p->lock);
    return STRATA_OK;
}

int st_proc_ep_start_thread(st_proc_ep *p) {
    if (p->thread_started)
        return STRATA_OK;
    if (p->life != LIFE_SERVING)
        return st_fail(STRATA_ESTATE, "%s: not ready", p->cfg.label);
    if (pthread_create(&p->thread, NULL, proc_thread_main, p) != 0) {
        shut_down(p);
        return st_fail(STRATA_ENOMEM, "%s: could not start its parent-side thread", p->cfg.label);
    }
    p->thread_started = 1;
    return STRATA_OK;
}

void st_proc_ep_abandon(st_proc_ep *p) {
    if (p)
        shut_down(p);
}

void st_proc_ep_unmap_sibling(st_proc_ep *p) {
    st_shm_destroy(&p->shm); /* this process's copy of the record only */
    p->m = NULL;
}

st_endpoint *st_proc_ep_endpoint(st_proc_ep *p) {
    return &p->base;
}

st_proc_ep *st_proc_ep_of(st_endpoint *ep) {
    return ep && ep->ops == &proc_ops ? (st_proc_ep *)ep : NULL;
}

st_child *st_proc_ep_child(st_proc_ep *p) {
    return &p->child;
}

void st_proc_ep_set_probe_ns(st_proc_ep *p, uint64_t ns) {
    atomic_store_explicit(&p->probe_ns, ns, memory_order_relaxed);
}

st_mbox *st_proc_ep_mbox(st_proc_ep *p) {
    return p->m;
}

const st_proc_ep_config *st_proc_ep_config_of(const st_proc_ep *p) {
    return &p->cfg;
}

void st_proc_ep_set_frame_hook(st_proc_ep *p, st_proc_frame_hook fn, void *ctx) {
    p->frame_hook = fn;
    p->frame_hook_ctx = ctx;
}

/* ---- control calls ----------------------------------------------------- */

static const char *command_name(st_mbox_command c) {
    static const char *const names[ST_MBOX_CMD_COUNT] = {
        "NONE", "MALLOC", "FREE", "COPY_TO", "COPY_FROM", "REGISTER", "UNREGISTER", "PING"};
    return (unsigned)c < ST_MBOX_CMD_COUNT ? names[c] : "?";
}

int st_proc_ep_control(st_proc_ep *p, st_mbox_command cmd, uint64_t arg0, uint64_t arg1,
                       const void *in, size_t in_bytes, void *out, size_t out_cap, uint64_t *result,
                       uint64_t deadline_ns) {
    const char *cname = command_name(cmd);
    if (in_bytes > ST_MBOX_ARGS_CAP || (in_bytes && !in))
        return st_fail(STRATA_EINVAL, "%s: %s: %zu payload bytes (at most %u)", p->cfg.label, cname,
                       in_bytes, (unsigned)ST_MBOX_ARGS_CAP);
    pthread_mutex_lock(&p->ctl_mu);
    int rc = STRATA_OK;
    st_mbox_frame *ctl = st_mbox_control(p->m);
    st_mutex_lock(&p->lock);
    uint32_t life = p->life;
    st_mutex_unlock(&p->lock);
    if (life != LIFE_SERVING) {
        rc = st_fail(STRATA_ESTATE, "%s: %s: the child is not serving", p->cfg.label, cname);
        goto out;
    }
    if (p->ctl_broken && st_mbox_state_of(ctl) == ST_MBOX_CONTROL_DONE) {
        st_mbox_publish(ctl, ST_MBOX_IDLE); /* the late answer came: dropped, frame usable */
        p->ctl_broken = 0;
    }
    if (p->ctl_broken) {
        rc = st_fail(STRATA_EENDPOINT,
                     "%s: %s: an earlier control call timed out and is still unanswered",
                     p->cfg.label, cname);
        goto out;
    }
    if (probe_dead(p)) {
        rc = st_fail(STRATA_EENDPOINT, "%s; %s not sent", p->dead_why, cname);
        goto out;
    }
    ctl->command = (uint64_t)cmd;
    ctl->arg0 = arg0;
    ctl->arg1 = arg1;
    ctl->result = 0;
    ctl->status = STRATA_OK;
    ctl->protocol = ST_MBOX_PROTOCOL;
    ctl->error[0] = '\0';
    if (cmd == ST_MBOX_CMD_REGISTER && in_bytes == sizeof(st_wire_callable)) {
        const st_wire_callable *wc = in;
        st_digest d = st_digest_callable((int)wc->kind, wc->name);
        memcpy(ctl->digest, d.bytes, sizeof ctl->digest);
    }
    if (in_bytes)
        memcpy(ctl->payload, in, in_bytes);
    ctl->payload_bytes = (uint32_t)in_bytes;
    st_mbox_publish(ctl, ST_MBOX_CONTROL_REQUEST);
    st_mbox_ring(&ctl->child_bell);
    for (;;) {
        uint32_t seen = atomic_load_explicit(&ctl->parent_bell.value, memory_order_acquire);
        if (st_mbox_state_of(ctl) == ST_MBOX_CONTROL_DONE)
            break;
        if (probe_dead(p)) {
            rc = st_fail(STRATA_EENDPOINT, "%s during control call %s", p->dead_why, cname);
            goto out;
        }
        uint64_t now = st_now_ns();
        if (now >= deadline_ns) {
            p->ctl_broken = 1;
            rc = st_fail(STRATA_ETIMEDOUT, "%s: control call %s not answered in time", p->cfg.label,
                         cname);
            goto out;
        }
        uint64_t until = now + PROBE_NS < deadline_ns ? now + PROBE_NS : deadline_ns;
        st_mbox_wait_bell(&ctl->parent_bell, seen, p->cfg.spin_ns, until);
    }
    rc = ctl->status;
    if (result)
        *result = ctl->result;
    if (rc == STRATA_OK && cmd == ST_MBOX_CMD_COPY_FROM && ctl->payload_bytes != arg1) {
        /* a short (or long) answer would leave part of out unwritten: refused */
        st_mbox_publish(ctl, ST_MBOX_IDLE);
        rc = st_fail(STRATA_EENDPOINT, "%s: COPY_FROM: the child answered %u bytes of %llu",
                     p->cfg.label, (unsigned)ctl->payload_bytes, (unsigned long long)arg1);
        goto out;
    }
    if (rc == STRATA_OK && out && out_cap) {
        size_t n = ctl->payload_bytes <= ST_MBOX_ARGS_CAP ? ctl->payload_bytes : 0;
        memcpy(out, ctl->payload, n < out_cap ? n : out_cap);
    }
    if (rc != STRATA_OK) {
        char text[ST_MBOX_ERR_BYTES];
        st_mbox_get_error(ctl, text, sizeof text);
        if (rc > 0 || rc < STRATA_ECANCELED)
            rc = STRATA_EENDPOINT; /* not a status: the child is broken */
        st_fail(rc, "%s: %s: %s", p->cfg.label, cname, text[0] ? text : "(no message)");
    }
    st_mbox_publish(ctl, ST_MBOX_IDLE);
out:
    pthread_mutex_unlock(&p->ctl_mu);
    return rc;
}
