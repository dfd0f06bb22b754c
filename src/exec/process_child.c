/* exec/process_child.c - the serve loop every process child runs.
 *
 * Owns: the child's side of the mailbox for every kind of child: the startup
 * handshake (kind->init, then INIT_READY / INIT_FAILED), the check of each
 * frame it is handed (protocol, trailer, arguments, digest) before a kind
 * sees it, the child's table of callables (the snapshot inherited at fork,
 * plus REGISTER / UNREGISTER controls), control calls, the doorbell wait and
 * the exits (shutdown word, SHUTDOWN, the parent gone).
 * Must never: run in the parent, return into the parent's frames (the entry
 * returns its exit status to ipc/child_process.c, which _exit()s), trust a
 * frame it was handed, or outlive its parent by more than about a second
 * (the watchdog thread checks every 250 ms, even mid-task; the loop's park is
 * bounded too), or keep its siblings' mailboxes mapped.
 *
 * One loop per child process, on its main thread: its state is this file's
 * own (process-wide in the child). Per task frame the loop remembers the
 * dispatch it handed to the kind and whether it was staged:
 *   NONE --TASK_READY--> ACTIVE          (kind->task, run now)
 *   NONE --PREPARE_READY--> STAGING      (kind->task, stage it)
 *   STAGING --ACTIVATE | TASK_READY--> ACTIVE   (kind->activate)
 * A new dispatch id in the frame starts again from NONE.
 */
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "exec/process_endpoint.h"
#include "exec/process_wire.h"
#include "ipc/wire_args.h"
#include "util/alloc.h"
#include "util/clock.h"
#include "util/error.h"
#include "util/message.h"
#include "util/thread_role.h"

#define PARENT_CHECK_NS 500000000ull /* park at most this long between parent checks */
#define WATCHDOG_NS 250000000ull     /* the watchdog's period */
#define RING_DEFER_NS 5000ull /* a parked parent is rung this late, unless the result is taken */
#define TABLE_SLOTS (2u * ST_MAX_CALLABLES) /* open addressing by digest, power of two */

enum { PHASE_NONE = 0, PHASE_STAGING, PHASE_ACTIVE };

typedef struct child_frame {
    uint64_t dispatch_id; /* the dispatch handed to the kind (0: none yet) */
    int phase;
    strata_task_args args; /* decoded; valid until the frame is finished */
} child_frame;

static struct child_loop {
    st_proc_ep *p;
    const st_proc_ep_config *cfg;
    st_mbox *m;
    void *self;
    const st_callable_info *table[TABLE_SLOTS]; /* NULL: empty; `removed` marks a hole */
    uint32_t ntable;
    child_frame frames[ST_MBOX_TASK_FRAMES];
    pthread_t thread;  /* the loop's own thread */
    uint64_t ring_due; /* a deferred ring of the parent for frame 0 (st_now_ns; 0: none) */
} loop_;

static const st_callable_info removed_;

/* ---- the child's callables ---------------------------------------------- */

static uint32_t slot_of(const st_digest *d) {
    uint32_t h;
    memcpy(&h, d->bytes, sizeof h);
    return h & (TABLE_SLOTS - 1);
}

static const st_callable_info *table_find(const st_digest *d, uint32_t *at) {
    uint32_t i = slot_of(d);
    for (uint32_t n = 0; n < TABLE_SLOTS; n++, i = (i + 1) & (TABLE_SLOTS - 1)) {
        const st_callable_info *ci = loop_.table[i];
        if (!ci)
            return NULL;
        if (ci != &removed_ && st_digest_equal(&ci->digest, d)) {
            if (at)
                *at = i;
            return ci;
        }
    }
    return NULL;
}

static int table_put(const st_callable_info *ci) {
    uint32_t at;
    if (table_find(&ci->digest, &at)) {
        loop_.table[at] = ci; /* registered again under the same description */
        return STRATA_OK;
    }
    if (loop_.ntable >= ST_MAX_CALLABLES)
        return st_fail(STRATA_ECAPACITY, "%s: its table of callables is full (%d)",
                       loop_.cfg->label, ST_MAX_CALLABLES);
    uint32_t i = slot_of(&ci->digest);
    while (loop_.table[i] && loop_.table[i] != &removed_)
        i = (i + 1) & (TABLE_SLOTS - 1);
    loop_.table[i] = ci;
    loop_.ntable++;
    return STRATA_OK;
}

/* ---- what kinds call ---------------------------------------------------- */

void st_proc_task_finish(st_mbox *m, uint32_t frame, int status, const char *msg) {
    st_mbox_frame *f = st_mbox_task(m, frame);
    if (status == STRATA_OK) {
        f->status = STRATA_OK; /* no error text: the parent reads it only after a failure */
    } else {
        st_mbox_set_error(f, status, "%s", msg && msg[0] ? msg : "(no message)");
    }
    st_mbox_publish(f, status == STRATA_OK ? ST_MBOX_TASK_DONE : ST_MBOX_TASK_FAILED);
    st_event *bell = &st_mbox_control(m)->parent_bell;
    /* A parked parent-side thread is rung late when a caller may collect the
     * result instead (see settle_ring): only for a child of one frame, finished
     * on the loop's thread, so the loop sees the frame until it is taken. */
    if (frame == 0 && loop_.cfg && loop_.cfg->kind->frames == 1 &&
        pthread_equal(pthread_self(), loop_.thread) &&
        atomic_load_explicit(&bell->sleepers, memory_order_relaxed) != 0) {
        loop_.ring_due = st_now_ns() + RING_DEFER_NS;
        return;
    }
    st_mbox_ring(bell);
}

void st_proc_task_times(st_mbox *m, uint32_t frame, uint64_t t_start, uint64_t t_end) {
    st_mbox_frame *f = st_mbox_task(m, frame);
    f->t_start = t_start; /* published by the finish's release store */
    f->t_end = t_end;
}

int st_proc_child_timed(void) {
    return loop_.cfg && loop_.cfg->timed;
}

void st_proc_task_staged(st_mbox *m, uint32_t frame, st_mbox_disposition disp) {
    st_mbox_frame *f = st_mbox_task(m, frame);
    atomic_store_explicit(&f->disposition, (uint32_t)disp, memory_order_relaxed);
    /* Fails if the parent activated it first (PREPARE_READY -> TASK_READY):
     * the loop then sees TASK_READY for a staged frame and activates it. */
    st_mbox_cas(f, ST_MBOX_PREPARE_READY, ST_MBOX_FRAME_STAGED);
    st_mbox_ring(&st_mbox_control(m)->parent_bell);
}

void st_proc_task_accepted(st_mbox *m, uint32_t frame) {
    atomic_store_explicit(&st_mbox_task(m, frame)->accepted, 1, memory_order_release);
    st_mbox_ring(&st_mbox_control(m)->parent_bell);
}

void st_proc_child_wake(st_mbox *m) {
    st_mbox_ring(&st_mbox_control(m)->child_bell);
}

int st_proc_task_is_staged(st_mbox *m, uint32_t frame) {
    (void)m;
    return frame < ST_MBOX_TASK_FRAMES && loop_.frames[frame].phase == PHASE_STAGING;
}

/* ---- task frames -------------------------------------------------------- */

/* A result of frame 0 waits for its deferred ring: spin until the parent took
 * it (no ring: whoever took it needed none; a waiting caller does, through
 * the endpoint's lend), or RING_DEFER_NS passed (ring), or the child's bell
 * moved (1: serve first; the ring stays due). Yields as util/futex.c spins do. */
static int settle_ring(st_mbox_frame *ctl, uint32_t seen) {
    st_mbox_frame *f = st_mbox_task(loop_.m, 0);
    for (unsigned n = 1;; n++) {
        uint32_t st = st_mbox_state_of(f);
        if (st != ST_MBOX_TASK_DONE && st != ST_MBOX_TASK_FAILED) {
            loop_.ring_due = 0;
            return 0;
        }
        if (atomic_load_explicit(&ctl->child_bell.value, memory_order_acquire) != seen)
            return 1;
        st_cpu_relax();
        if (n < 32 || (n & 3) != 0)
            continue;
        if (st_now_ns() >= loop_.ring_due) {
            loop_.ring_due = 0;
            st_mbox_ring(&ctl->parent_bell);
            return 0;
        }
        sched_yield();
    }
}

static void refuse(uint32_t i, int status) {
    st_proc_task_finish(loop_.m, i, status, strata_error_message());
}

/* A new dispatch in frame i: check it, then hand it to the kind. */
static void take_task(uint32_t i, st_mbox_frame *f, const st_proc_kind *kind) {
    const char *who = loop_.cfg->label;
    child_frame *cf = &loop_.frames[i];
    st_mbox_prefetch_task(f);
    /* Which dispatch this child took: the parent reads it only after this
     * process died, so relaxed is enough; the id is the frame's as it is
     * (its checks come next), compared by the parent with its own record. */
    atomic_store_explicit(&f->taken, (uint32_t)f->trailer.dispatch_id, memory_order_relaxed);
    if (st_mbox_check_frame(f, who) != STRATA_OK) {
        refuse(i, STRATA_EENDPOINT);
        return;
    }
    /* One read (through a volatile view, as the frame's identity is read): the
     * parent may write the word meanwhile, and the length checked must be the
     * length decoded. */
    uint32_t nbytes = ((const volatile st_mbox_frame *)f)->payload_bytes;
    if (nbytes > ST_MBOX_ARGS_CAP) {
        st_fail(STRATA_EINVAL, "%s: oversized arguments: %u bytes in a frame of %u", who,
                (unsigned)nbytes, (unsigned)ST_MBOX_ARGS_CAP);
        refuse(i, STRATA_EENDPOINT);
        return;
    }
    if (st_wire_args_decode(f->payload, nbytes, &cf->args, who) != STRATA_OK) {
        refuse(i, STRATA_EENDPOINT);
        return;
    }
    st_digest d;
    memcpy(d.bytes, f->digest, sizeof d.bytes);
    const st_callable_info *ci = table_find(&d, NULL);
    if (!ci) {
        char hex[ST_DIGEST_HEX];
        st_digest_hex(&d, hex);
        st_fail(STRATA_EINVAL, "%s: unknown callable digest %s (not registered in this child)", who,
                hex);
        refuse(i, STRATA_EENDPOINT);
        return;
    }
    kind->task(loop_.self, loop_.m, i, &cf->args, ci);
}

/* 1 if frame i moved. */
static int serve_frame(uint32_t i, const st_proc_kind *kind) {
    st_mbox_frame *f = st_mbox_task(loop_.m, i);
    uint32_t st = st_mbox_state_of(f);
    if (st != ST_MBOX_TASK_READY && st != ST_MBOX_PREPARE_READY && st != ST_MBOX_ACTIVATE)
        return 0;
    child_frame *cf = &loop_.frames[i];
    uint64_t id = f->trailer.dispatch_id;
    if (id != cf->dispatch_id || cf->phase == PHASE_NONE) {
        if (st == ST_MBOX_ACTIVATE) { /* activation of a frame we never staged */
            cf->dispatch_id = id;
            cf->phase = PHASE_ACTIVE;
            st_fail(STRATA_EENDPOINT, "%s: ACTIVATE for dispatch %llu that was never staged",
                    loop_.cfg->label, (unsigned long long)id);
            refuse(i, STRATA_EENDPOINT);
            return 1;
        }
        cf->dispatch_id = id;
        cf->phase = st == ST_MBOX_PREPARE_READY ? PHASE_STAGING : PHASE_ACTIVE;
        take_task(i, f, kind);
        return 1;
    }
    if (cf->phase == PHASE_STAGING && (st == ST_MBOX_TASK_READY || st == ST_MBOX_ACTIVATE)) {
        cf->phase = PHASE_ACTIVE;
        if (st_mbox_check_frame(f, loop_.cfg->label) != STRATA_OK) {
            refuse(i, STRATA_EENDPOINT);
            return 1;
        }
        if (kind->activate)
            kind->activate(loop_.self, loop_.m, i);
        else
            st_proc_task_finish(loop_.m, i, STRATA_EENDPOINT,
                                "a staged task of a kind that "
                                "cannot activate");
        return 1;
    }
    return 0;
}

/* The task frames in the order they must be served: a new dispatch before a
 * later one. The parent publishes dispatches in id order but into whichever
 * frame is free, so frame 1 may hold dispatch n and frame 0 dispatch n + 1;
 * served by index, n + 1 would reach the chip's lane first, launch, and n
 * would be refused there ("cannot reorder before the active dispatch"). The
 * id is read after the state's acquire, as serve_frame reads it; a frame
 * that is not live sorts last (its id is not looked at). */
static void serving_order(uint32_t nframes, uint32_t order[ST_MBOX_TASK_FRAMES]) {
    uint64_t key[ST_MBOX_TASK_FRAMES];
    for (uint32_t i = 0; i < nframes; i++) {
        st_mbox_frame *f = st_mbox_task(loop_.m, i);
        uint32_t st = st_mbox_state_of(f);
        int live =
            st == ST_MBOX_TASK_READY || st == ST_MBOX_PREPARE_READY || st == ST_MBOX_ACTIVATE;
        key[i] = live ? ((const volatile st_mbox_frame *)f)->trailer.dispatch_id : UINT64_MAX;
        uint32_t at = i;
        while (at > 0 && key[order[at - 1]] > key[i]) { /* insertion: at most two frames */
            order[at] = order[at - 1];
            at--;
        }
        order[at] = i;
    }
}

/* ---- control calls ------------------------------------------------------ */

static int do_register(st_mbox_frame *ctl, const st_proc_kind *kind) {
    const char *who = loop_.cfg->label;
    if (ctl->payload_bytes != sizeof(st_wire_callable))
        return st_fail(STRATA_EINVAL, "%s: REGISTER with %u payload bytes (a description is %zu)",
                       who, (unsigned)ctl->payload_bytes, sizeof(st_wire_callable));
    st_wire_callable w;
    memcpy(&w, ctl->payload, sizeof w);
    if (memchr(w.name, '\0', sizeof w.name) == NULL || w.name[0] == '\0' ||
        (w.kind != ST_CALLABLE_SUB && w.kind != ST_CALLABLE_NEXT && w.kind != ST_CALLABLE_ORCH))
        return st_fail(STRATA_EINVAL, "%s: REGISTER: malformed description", who);
    st_callable_info *ci = st_calloc(1, sizeof *ci);
    if (!ci)
        return st_fail_nomem("REGISTER: the child's record", sizeof *ci);
    ci->id = w.id;
    memcpy(ci->name, w.name, sizeof ci->name);
    ci->kind = (st_callable_kind)w.kind;
    ci->fn = (strata_sub_fn)(uintptr_t)w.fn;
    ci->user = (void *)(uintptr_t)w.user;
    ci->program = (void *)(uintptr_t)w.program;
    ci->digest = st_digest_callable((int)ci->kind, ci->name);
    if (memcmp(ci->digest.bytes, ctl->digest, sizeof ci->digest.bytes) != 0) {
        st_free(ci);
        return st_fail(STRATA_EINVAL,
                       "%s: REGISTER: '%s': the digest does not match the "
                       "description",
                       who, w.name);
    }
    int rc = kind->registered ? kind->registered(loop_.self, ci) : STRATA_OK;
    if (rc == STRATA_OK)
        rc = table_put(ci);
    if (rc != STRATA_OK) /* records are never freed once in the table: a task may hold one */
        st_free(ci);
    return rc;
}

static int do_unregister(st_mbox_frame *ctl) {
    st_digest d;
    memcpy(d.bytes, ctl->digest, sizeof d.bytes);
    uint32_t at;
    if (!table_find(&d, &at))
        return st_fail(STRATA_EINVAL, "%s: UNREGISTER: no such callable", loop_.cfg->label);
    loop_.table[at] = &removed_;
    loop_.ntable--;
    return STRATA_OK;
}

static void serve_control(st_mbox_frame *ctl, const st_proc_kind *kind) {
    st_clear_error();
    int rc;
    if (ctl->protocol != ST_MBOX_PROTOCOL) {
        rc = st_fail(STRATA_EENDPOINT, "%s: control frame of protocol %llu (this child speaks %u)",
                     loop_.cfg->label, (unsigned long long)ctl->protocol, ST_MBOX_PROTOCOL);
    } else {
        switch (ctl->command) {
        case ST_MBOX_CMD_REGISTER:
            rc = do_register(ctl, kind);
            break;
        case ST_MBOX_CMD_UNREGISTER:
            rc = do_unregister(ctl);
            break;
        case ST_MBOX_CMD_PING:
            rc = STRATA_OK;
            break;
        default:
            rc = kind->control
                     ? kind->control(loop_.self, ctl)
                     : st_fail(STRATA_EINVAL,
                               "%s: command %llu is not served by a %s "
                               "child",
                               loop_.cfg->label, (unsigned long long)ctl->command, kind->name);
            break;
        }
    }
    if (rc == STRATA_OK) {
        ctl->status = STRATA_OK;
        ctl->error[0] = '\0';
    } else {
        st_mbox_set_error(ctl, rc, "%s", strata_error_message());
    }
    st_mbox_publish(ctl, ST_MBOX_CONTROL_DONE);
    st_mbox_ring(&ctl->parent_bell);
}

/* ---- the watchdog ------------------------------------------------------- */

/* One thread per child process: every 250 ms it checks that the parent that
 * spawned this child lives, and ends the process at once (no graceful
 * shutdown: nobody would read it) when it does not, whatever the loop thread
 * is doing (a long sub task, a child Worker's whole run, a device wait). Once
 * it signalled `started` it only sleeps and calls getppid: it holds no lock
 * and allocates nothing, so forks made later in this process (a child
 * Worker's own children) cannot inherit a lock it held. */
static st_event watchdog_started;

static void *watchdog_main(void *arg) {
    (void)arg;
    st_event_set(&watchdog_started, 1);
    const struct timespec period = {0, (long)WATCHDOG_NS};
    for (;;) {
        nanosleep(&period, NULL);
        if (!st_child_parent_alive())
            st_child_exit(3);
    }
    return NULL;
}

static void start_watchdog(void) {
    pthread_t t;
    atomic_store(&watchdog_started.value, 0);
    if (pthread_create(&t, NULL, watchdog_main, NULL) != 0)
        return; /* the loop still checks its parent at every 500 ms park */
    pthread_detach(t);
    while (atomic_load_explicit(&watchdog_started.value, memory_order_acquire) == 0)
        st_event_wait(&watchdog_started, 0, 0, UINT64_MAX);
}

/* The mailboxes of this child's siblings, mapped before the forks: unmapped,
 * so only this child's own frames are reachable from here. */
static void unmap_siblings(st_proc_ep *p) {
    st_engine *e = st_proc_ep_endpoint(p)->engine;
    st_endpoint *ep;
    for (int i = 0; (ep = st_engine_endpoint(e, i)) != NULL; i++) {
        st_proc_ep *q = st_proc_ep_of(ep);
        if (q && q != p)
            st_proc_ep_unmap_sibling(q);
    }
}

/* ---- the loop ----------------------------------------------------------- */

int st_proc_child_main(st_proc_ep *p) {
    memset(&loop_, 0, sizeof loop_);
    loop_.thread = pthread_self();
    loop_.p = p;
    loop_.cfg = st_proc_ep_config_of(p);
    loop_.m = st_proc_ep_mbox(p);
    const st_proc_kind *kind = loop_.cfg->kind;
    st_mbox_frame *ctl = st_mbox_control(loop_.m);
    st_endpoint *ep = st_proc_ep_endpoint(p);
    st_thread_serve(ep->engine); /* calls that would wait for the parent worker are refused */
    start_watchdog();
    unmap_siblings(p);
    /* The snapshot inherited at fork: the parent's records, copied with the
     * address space (never written by the parent in this copy). */
    uint32_t n = st_engine_callable_count(ep->engine);
    int rc = STRATA_OK;
    for (uint32_t i = 0; i < n && rc == STRATA_OK; i++) {
        const st_callable_info *ci = st_engine_callable(ep->engine, i);
        if (ci)
            rc = table_put(ci);
    }
    if (rc == STRATA_OK)
        rc = kind->init(loop_.cfg->kind_arg, &loop_.self);
    if (rc != STRATA_OK) {
        st_mbox_set_error(ctl, rc, "%s", strata_error_message());
        st_mbox_publish(ctl, ST_MBOX_INIT_FAILED);
        st_mbox_ring(&ctl->parent_bell);
        return 1;
    }
    st_mbox_publish(ctl, ST_MBOX_INIT_READY);
    st_mbox_ring(&ctl->parent_bell);
    int status = 0;
    for (;;) {
        uint32_t seen = atomic_load_explicit(&ctl->child_bell.value, memory_order_acquire);
        if (atomic_load_explicit(&ctl->shutdown, memory_order_acquire) ||
            st_mbox_state_of(ctl) == ST_MBOX_SHUTDOWN)
            break;
        int moved = 0;
        if (st_mbox_state_of(ctl) == ST_MBOX_CONTROL_REQUEST) {
            serve_control(ctl, kind);
            moved = 1;
        }
        uint32_t order[ST_MBOX_TASK_FRAMES];
        serving_order(kind->frames, order);
        for (uint32_t k = 0; k < kind->frames; k++)
            moved |= serve_frame(order[k], kind);
        if (kind->poll)
            kind->poll(loop_.self, loop_.m);
        if (moved)
            continue;
        if (loop_.ring_due && settle_ring(ctl, seen))
            continue;
        if (st_mbox_wait_bell(&ctl->child_bell, seen, loop_.cfg->spin_ns,
                              st_deadline_after(PARENT_CHECK_NS)) != 0 &&
            !st_child_parent_alive()) {
            status = 3; /* orphaned: nobody will read what we would do */
            break;
        }
    }
    kind->shutdown(loop_.self, loop_.m);
    return status;
}
