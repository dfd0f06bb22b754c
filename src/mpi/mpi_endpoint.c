/* mpi/mpi_endpoint.c - an L3 child Worker on another MPI rank, rank 0's side.
 *
 * Owns: st_mpi_child_add (the endpoint of an MPI child and the session of
 * its L4), the endpoint operations the engine calls, the progress thread
 * that makes every MPI call of the session once init is done (task frames
 * and their IN data out, DONE frames and OUT data in, completions, control
 * calls, the heartbeat, the word to a child declared dead and to the
 * readers waiting for its copies, the shutdown at close), the bounded start-up
 * handshake, and the remote memory calls (mpi/remote_child.h); where each
 * tensor's bytes come from is mpi_copies.c's.
 * Must never: make an MPI call under the engine lock (dispatch only queues
 * the task and rings the session's bell), complete a dispatch twice, or wait
 * for a child without a bound (a silent child is declared dead after its
 * heartbeat_timeout_ns and its tasks fail with a message naming it).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exec/worker_child.h"
#include "ipc/wire_args.h"
#include "mpi/mpi_bell.h"
#include "mpi/mpi_env.h"
#include "mpi/mpi_session.h"
#include "mpi/mpi_symbol.h"
#include "mpi/mpi_xfer.h"
#include "mpi/remote_child.h"
#include "strata/mpi.h"
#include "core/buffer.h"
#include "util/alloc.h"
#include "util/assert.h"
#include "util/clock.h"
#include "util/error.h"
#include "util/growable.h"
#include "util/message.h"

static const st_endpoint_ops mpi_ep_ops;

mpi_ep *st_mpi_ep_of(st_endpoint *ep) {
    return ep && ep->ops == &mpi_ep_ops ? (mpi_ep *)ep : NULL;
}

static mpi_session *session_of(strata_worker *w) {
    st_endpoint *ep;
    for (int i = 0; (ep = st_worker_next_endpoint(w, i)) != NULL; i++)
        if (st_mpi_ep_of(ep))
            return ((mpi_ep *)ep)->s;
    return NULL;
}

static void ring(mpi_session *s) {
    st_event_bump(s->bell);
}

/* ---- Frames: small sends and receives outside the progress thread --------------------- */

int st_mpi_send_frame(int to, const uint8_t *frame, size_t len, const char *who) {
    MPI_Request req;
    char e[MPI_MAX_ERROR_STRING + 32];
    st_mpi_lock();
    int rc = st_mpi_isend(frame, (int)len, to, ST_MPI_TAG_FRAME, &req);
    st_mpi_unlock();
    if (rc != MPI_SUCCESS)
        return st_fail(STRATA_EENDPOINT, "%s: MPI_Isend to rank %d failed: %s", who, to,
                       st_mpi_strerror(rc, e, (int)sizeof e));
    st_backoff bo = {.busy = 1}; /* its frame is owed a completion */
    uint64_t deadline = st_deadline_after(10ull * 1000000000ull);
    for (;;) {
        int flag = 0;
        st_mpi_lock();
        rc = MPI_Test(&req, &flag, MPI_STATUS_IGNORE);
        st_mpi_unlock();
        if (rc != MPI_SUCCESS)
            return st_fail(STRATA_EENDPOINT, "%s: sending to rank %d failed: %s", who, to,
                           st_mpi_strerror(rc, e, (int)sizeof e));
        if (flag)
            return STRATA_OK;
        if (st_now_ns() > deadline)
            return st_fail(STRATA_ETIMEDOUT, "%s: rank %d took no frame within 10 s", who, to);
        st_backoff_idle(&bo);
    }
}

int st_mpi_recv_frame(int from, uint8_t *buf, size_t cap, size_t *len, uint64_t deadline,
                      const char *who) {
    st_backoff bo = {.busy = 1}; /* a frame is owed: a HELLO or a BYE */
    char e[MPI_MAX_ERROR_STRING + 32];
    for (;;) {
        int flag = 0, count = 0;
        MPI_Status st;
        st_mpi_lock();
        int rc = MPI_Iprobe(from, ST_MPI_TAG_FRAME, st_mpi_comm(), &flag, &st);
        if (rc == MPI_SUCCESS && flag) {
            MPI_Get_count(&st, MPI_BYTE, &count);
            if (count < 0 || (size_t)count > cap) { /* take it off the queue, then refuse it */
                uint8_t sink[ST_MPI_HDR_BYTES];
                MPI_Recv(sink, 0, MPI_BYTE, st.MPI_SOURCE, ST_MPI_TAG_FRAME, st_mpi_comm(),
                         MPI_STATUS_IGNORE);
                st_mpi_unlock();
                return st_fail(STRATA_EENDPOINT, "%s: rank %d sent a %d-byte frame (at most %zu)",
                               who, st.MPI_SOURCE, count, cap);
            }
            rc = MPI_Recv(buf, count, MPI_BYTE, st.MPI_SOURCE, ST_MPI_TAG_FRAME, st_mpi_comm(),
                          MPI_STATUS_IGNORE);
        }
        st_mpi_unlock();
        if (rc != MPI_SUCCESS)
            return st_fail(STRATA_EENDPOINT, "%s: receiving from rank %d failed: %s", who, from,
                           st_mpi_strerror(rc, e, (int)sizeof e));
        if (flag) {
            *len = (size_t)count;
            return STRATA_OK;
        }
        if (st_now_ns() > deadline)
            return STRATA_ETIMEDOUT;
        st_backoff_idle(&bo);
    }
}

/* ---- Adding a child ---------------------------------------------------------------------- */

static int make_session(strata_worker *parent, mpi_session **out) {
    mpi_session *s = st_calloc(1, sizeof *s);
    if (!s)
        return st_fail_nomem("strata_worker_add_child: the MPI session", sizeof *s);
    s->l4 = parent;
    s->my_rank = strata_mpi_rank();
    s->size = strata_mpi_size();
    s->bell = st_mpi_bell_mine(); /* the library's communicator is made: so are the bells */
    if (!s->bell)
        s->bell = &s->own_bell;
    pthread_mutex_init(&s->ctrl_mu, NULL);
    pthread_mutex_init(&s->writes_mu, NULL);
    st_dir_init(&s->dir);
    atomic_init(&s->cache_budget, ST_MPI_CACHE_BYTES);
    atomic_init(&s->drops_per_frame, ST_MPI_DROPS_MAX);
    *out = s;
    return STRATA_OK;
}

int st_mpi_child_add(strata_worker *parent, const strata_child_config *cfg, int *worker_id) {
    const char *what = "strata_worker_add_child";
    STRATA_TRY(st_mpi_ensure(what));
    int size = strata_mpi_size();
    if (cfg->rank < 1 || cfg->rank >= size)
        return st_fail(STRATA_EINVAL,
                       "%s: rank %d is not a child rank (1 .. %d: rank 0 runs the L4, and "
                       "mpirun -np %d started %d rank%s)",
                       what, cfg->rank, size - 1, size, size, size == 1 ? "" : "s");
    mpi_session *s = session_of(parent);
    int fresh = s == NULL;
    if (s) {
        for (int i = 0; i < s->n; i++)
            if (s->eps[i]->rank == cfg->rank)
                return st_fail(STRATA_EINVAL, "%s: rank %d already hosts child %s", what, cfg->rank,
                               s->eps[i]->base.label);
        if (s->n == ST_MPI_MAX_CHILDREN)
            return st_fail(STRATA_ECAPACITY, "%s: at most %d MPI children", what,
                           ST_MPI_MAX_CHILDREN);
    } else {
        STRATA_TRY(make_session(parent, &s));
    }
    mpi_ep *ep = st_calloc(1, sizeof *ep);
    if (!ep) {
        if (fresh)
            st_free(s);
        return st_fail_nomem("strata_worker_add_child: the child's endpoint", sizeof *ep);
    }
    int next_id = strata_worker_next_level_count(parent);
    ep->base.ops = &mpi_ep_ops;
    ep->base.capacity = ST_MPI_SLOTS;
    ep->base.staging = 0;
    ep->s = s;
    ep->rank = cfg->rank;
    ep->cfg = *cfg;
    st_worker_child_name(ep->name, sizeof ep->name, cfg, next_id);
    ep->cfg.name = NULL;
    ep->heartbeat_ns =
        cfg->heartbeat_timeout_ns ? cfg->heartbeat_timeout_ns : ST_MPI_HEARTBEAT_DEFAULT_NS;
    int rc = st_worker_add_endpoint(parent, &ep->base, worker_id);
    if (rc != STRATA_OK) {
        st_free(ep);
        if (fresh)
            st_free(s);
        return st_fail_prefix(rc, what);
    }
    snprintf(ep->base.label, sizeof ep->base.label, "%d (%s, rank %d)", *worker_id, ep->name,
             ep->rank);
    ep->index = s->n;
    s->eps[s->n++] = ep;
    if (fresh) { /* before init: no dispatch yet */
        st_worker_set_dispatch_observer(parent, st_mpi_observe_dispatch, s);
    }
    return STRATA_OK;
}

int st_mpi_is_child(strata_worker *w, int worker_id) {
    return st_mpi_ep_of(st_worker_next_endpoint(w, worker_id)) != NULL;
}

/* ---- Task slots ------------------------------------------------------------------------- */

/* A completion record free for a new result (mpi_ep.comp: one per slot, and
 * the engine counts every dispatch until its completion is handled, so one
 * is free whenever a result or a rejection is to be pushed). */
static st_completion *free_comp(mpi_ep *ep) {
    for (int i = 0; i < ST_MPI_SLOTS; i++)
        if (st_completion_free(&ep->comp[i]))
            return &ep->comp[i];
    /* unreachable while each task completes once and the engine keeps its
     * count; a debug build stops here rather than reuse a queued record */
    ST_ASSERT(0, "L4 child %s: no free completion record", ep->base.label);
    return &ep->comp[0];
}

static void mpi_dispatch(st_endpoint *base, const st_dispatch *d) {
    mpi_ep *ep = (mpi_ep *)base;
    if (atomic_load(&ep->dead)) {
        st_endpoint_complete_with(base, free_comp(ep), d, STRATA_EENDPOINT, "%s", ep->dead_msg);
        return;
    }
    if (atomic_load(&ep->stopping) || !ep->s->started) {
        st_endpoint_complete_with(base, free_comp(ep), d, STRATA_EENDPOINT,
                                  "%s is stopping; task rejected", base->label);
        return;
    }
    for (int i = 0; i < ST_MPI_SLOTS; i++) {
        mpi_task *t = &ep->task[i];
        if (atomic_load_explicit(&t->state, memory_order_acquire) != T_FREE)
            continue;
        t->d = *d;
        atomic_store_explicit(&t->state, T_QUEUED, memory_order_release);
        ring(ep->s);
        return;
    }
    st_endpoint_complete_with(base, free_comp(ep), d, STRATA_EENDPOINT,
                              "%s holds %d tasks already; task rejected", base->label,
                              ST_MPI_SLOTS);
}

/* The progress thread's pending completions, pushed after st_mpi_lock is dropped. */
typedef struct done_list {
    int n;
    struct {
        mpi_ep *ep;
        mpi_task *t;
        uint64_t ref;
        uint32_t member;
        int status;
        const char *msg;
    } v[ST_MPI_MAX_CHILDREN * ST_MPI_SLOTS];
} done_list;

static void task_finish(done_list *dl, mpi_ep *ep, mpi_task *t, int status, const char *msg) {
    if (t->finished)
        return; /* once per task: its completion is pushed at the end of the pass */
    t->finished = 1;
#ifdef STRATA_DEBUG_ASSERT
    for (int i = 0; i < dl->n; i++) /* each dispatch completes exactly once */
        ST_ASSERT(dl->v[i].t != t, "L4 child %s: slot %d finished twice", ep->base.label,
                  (int)(t - ep->task));
#endif
    for (int i = 0; i < STRATA_MAX_TENSORS; i++) {
        st_free(t->tmp[i]);
        st_free(t->tmp_out[i]);
        t->tmp[i] = t->tmp_out[i] = NULL;
    }
    t->nreq = 0;
    t->done_status = status;
    if (msg != t->done_msg)
        st_msg_format(t->done_msg, sizeof t->done_msg, "%s", msg ? msg : "");
    dl->v[dl->n].ep = ep;
    dl->v[dl->n].t = t;
    dl->v[dl->n].ref = t->d.ref;
    dl->v[dl->n].member = t->d.member;
    dl->v[dl->n].status = status;
    dl->v[dl->n].msg = t->done_msg;
    dl->n++;
}

/* Tell the engine of children found dead (it takes the engine lock: never
 * under st_mpi_lock, which is a leaf). */
static void tell_gone(mpi_session *s) {
    for (int i = 0; i < s->n; i++)
        if (atomic_load(&s->eps[i]->dead) && !s->eps[i]->gone_told) {
            s->eps[i]->gone_told = 1;
            st_endpoint_gone(&s->eps[i]->base);
        }
}

static void push_done(done_list *dl) {
    for (int i = 0; i < dl->n; i++) {
        mpi_ep *ep = dl->v[i].ep;
        st_completion *c = free_comp(ep);
        c->ref = dl->v[i].ref;
        c->member = dl->v[i].member;
        c->status = dl->v[i].status;
        c->t_start = c->t_end = 0;
        c->ran_on = -1;
        st_msg_format(c->msg, sizeof c->msg, "%s", dl->v[i].msg);
        /* the slot is free before the push: the engine may dispatch into it at once */
        dl->v[i].t->finished = 0;
        atomic_store_explicit(&dl->v[i].t->state, T_FREE, memory_order_release);
        st_endpoint_complete(&ep->base, c);
    }
    dl->n = 0;
}

/* Tell ep's rank it was declared dead (best effort: a dead rank never reads
 * it, a live one leaves at once instead of after four silent bounds). Test
 * seam STRATA_TEST_MPI_SILENT_DEATH=1 in rank 0's environment (never set in
 * use): not sent, as when the link to that rank is broken. */
static void say_declared_dead(mpi_ep *ep) {
    static int silent = -1; /* progress thread only */
    if (silent < 0) {
        const char *e = getenv("STRATA_TEST_MPI_SILENT_DEATH");
        silent = e && atoi(e) == 1;
    }
    if (silent)
        return;
    st_mpi_hdr h;
    st_mpi_hdr_init(&h, ST_MPI_DECLARED_DEAD, ep->base.worker_id);
    size_t n = strnlen(ep->dead_msg, sizeof ep->dead_msg - 1);
    h.body_bytes = (uint32_t)n;
    st_mpi_hdr_put(ep->dead_frame, &h);
    memcpy(ep->dead_frame + ST_MPI_HDR_BYTES, ep->dead_msg, n);
    MPI_Request r;
    if (st_mpi_isend(ep->dead_frame, (int)(ST_MPI_HDR_BYTES + n), ep->rank, ST_MPI_TAG_FRAME, &r) ==
        MPI_SUCCESS)
        MPI_Request_free(&r); /* dead_frame is written once and lives as long as ep */
}

static void mpi_failed(done_list *dl, mpi_ep *ep, const char *call, int rc);

/* Task t on reader ep had tensors placed PEER from holders now declared
 * dead: their SEND_TOs are no longer waited for, and the reader is told
 * (PEER_GONE, one per dead holder), so it stops waiting for those bytes and
 * fails the task (naming the holder's rank); rank 0 then takes its DONE as
 * for any failed task. Only a task whose frame went out and whose DONE has
 * not come (SENT) has a reader waiting. */
static void tell_holders_gone(done_list *dl, mpi_ep *ep, mpi_task *t) {
    int st = atomic_load(&t->state);
    if (atomic_load(&ep->dead) || t->finished || (st != T_SENT && st != T_RECV))
        return;
    const strata_task_args *a = t->d.args;
    for (uint32_t i = 0; i < a->ntensors; i++) {
        mpi_ep *b = t->holder[i];
        if (!b || !atomic_load(&b->dead) || (t->gone >> i & 1))
            continue;
        uint64_t mask = 0;
        for (uint32_t k = i; k < a->ntensors; k++)
            if (t->holder[k] == b && !(t->gone >> k & 1)) {
                mask |= 1ull << k;
                t->sendto_req[k] = MPI_REQUEST_NULL; /* left to MPI, as a dead peer's are */
            }
        t->gone |= mask;
        if (st != T_SENT)
            continue; /* its DONE came: the reader got past those bytes */
        st_mpi_hdr h;
        st_mpi_hdr_init(&h, ST_MPI_PEER_GONE, ep->base.worker_id);
        h.seq = t->d.dispatch_id;
        h.slot = (uint32_t)(t - ep->task);
        h.arg0 = mask;
        h.arg1 = (uint64_t)b->rank;
        st_mpi_hdr_put(t->gone_frame[i], &h);
        int rc = st_mpi_isend(t->gone_frame[i], ST_MPI_HDR_BYTES, ep->rank, ST_MPI_TAG_FRAME,
                              &t->req[t->nreq++]);
        if (rc != MPI_SUCCESS) {
            mpi_failed(dl, ep, "MPI_Isend of a PEER_GONE", rc);
            return;
        }
    }
}

/* ep was declared dead: the tasks of the other children that wait for its copies. */
static void tell_readers(done_list *dl, mpi_ep *dead) {
    mpi_session *s = dead->s;
    for (int c = 0; c < s->n; c++)
        if (s->eps[c] != dead)
            for (int k = 0; k < ST_MPI_SLOTS; k++)
                tell_holders_gone(dl, s->eps[c], &s->eps[c]->task[k]);
}

/* The child is dead: every task it holds fails with why (its requests are
 * left to MPI: a dead peer's sends and receives never complete, and their
 * memory stays allocated rather than be freed under them). */
static void declare_dead(done_list *dl, mpi_ep *ep, const char *why) {
    if (atomic_load(&ep->dead))
        return;
    st_msg_format(ep->dead_msg, sizeof ep->dead_msg, "%s", why);
    atomic_store(&ep->dead, 1); /* the engine is told after st_mpi_lock is dropped */
    /* this process's MPI_Finalize is bounded from now on, past the time the
     * rank takes to leave if it lives (mpi_serve.c: four silent bounds after
     * its HELLO, plus the startup bound if it never heard from rank 0) */
    st_mpi_note_peer_died(ep->cfg.worker.startup_timeout_ns + 5 * ep->heartbeat_ns + 5000000000ull);
    for (int i = 0; i < ST_MPI_SLOTS; i++) {
        mpi_task *t = &ep->task[i];
        if (atomic_load(&t->state) == T_FREE)
            continue;
        /* a QUEUED slot is finished here, so it leaves QUEUED: the progress
         * thread's QUEUED loop (which may be our caller) must not finish it again */
        int queued = T_QUEUED;
        atomic_compare_exchange_strong(&t->state, &queued, T_SENT);
        for (int k = 0; k < STRATA_MAX_TENSORS; k++)
            t->tmp[k] = t->tmp_out[k] = NULL; /* MPI may still hold them */
        task_finish(dl, ep, t, STRATA_EENDPOINT, ep->dead_msg);
    }
    mpi_ctrl *c = &ep->s->ctrl;
    uint32_t cs = atomic_load(&c->state.value);
    if ((cs == 1 || cs == 2) && c->ep == ep) {
        c->status = st_fail(STRATA_EENDPOINT, "%s", ep->dead_msg);
        st_msg_format(c->msg, sizeof c->msg, "%s", ep->dead_msg);
        c->has_req = 0;
        st_event_set(&c->state, 3);
    }
    say_declared_dead(ep);
    tell_readers(dl, ep);
    st_mpi_forget_holder(ep); /* its copies went with it: the directory forgets them */
}

static void mpi_failed(done_list *dl, mpi_ep *ep, const char *call, int rc) {
    char e[MPI_MAX_ERROR_STRING + 32], why[STRATA_ERRMSG_MAX];
    st_msg_format(why, sizeof why, "L4 child %s: %s failed: %s", ep->base.label, call,
                  st_mpi_strerror(rc, e, (int)sizeof e));
    declare_dead(dl, ep, why);
}

/* Test seam (tests/mpi/test_mpi_send_fails.c), never set in use: with
 * STRATA_TEST_MPI_FAIL_TASK_SEND=n in rank 0's environment the progress
 * thread holds a child's tasks until n are queued there, then the first one's
 * MPI_Isend reports failure (once per process). Progress thread only. */
static int g_test_fail_at = -1; /* -1: not read yet; 0: off */
static int g_test_fail_now;

static int test_hold_tasks(mpi_ep *ep) {
    if (g_test_fail_at < 0) {
        const char *e = getenv("STRATA_TEST_MPI_FAIL_TASK_SEND");
        g_test_fail_at = e ? atoi(e) : 0;
    }
    if (g_test_fail_at <= 0 || atomic_load(&ep->dead))
        return 0;
    int queued = 0;
    for (int k = 0; k < ST_MPI_SLOTS; k++)
        queued += atomic_load(&ep->task[k].state) == T_QUEUED;
    if (queued < g_test_fail_at)
        return 1;
    g_test_fail_at = 0;
    g_test_fail_now = 1;
    return 0;
}

/* QUEUED -> SENT: the frame (digest + arguments), then each IN tensor's bytes. */
static void send_task(done_list *dl, mpi_ep *ep, int slot) {
    mpi_task *t = &ep->task[slot];
    t->gone = 0;
    for (int i = 0; i < STRATA_MAX_TENSORS; i++) {
        t->holder[i] = NULL;
        t->sendto_req[i] = MPI_REQUEST_NULL;
    }
    st_mpi_apply_local_writes(ep->s); /* before any placement reads the directory */
    const strata_task_args *a = t->d.args;
    st_mpi_hdr h;
    st_mpi_hdr_init(&h, ST_MPI_TASK, ep->base.worker_id);
    h.seq = t->d.dispatch_id;
    h.slot = (uint32_t)slot;
    uint8_t *body = t->frame + ST_MPI_HDR_BYTES;
    memcpy(body, &t->d.callable->digest, sizeof(st_digest));
    size_t used = 0;
    size_t at = sizeof(st_digest) + 8;
    int rc = st_wire_args_encode(a, body + at, ST_WIRE_ARGS_MAX, &used);
    if (rc != STRATA_OK) {
        char why[STRATA_ERRMSG_MAX];
        st_msg_format(why, sizeof why, "%s: the task's arguments: %s", ep->base.label,
                      strata_error_message());
        atomic_store(&t->state, T_SENT);
        task_finish(dl, ep, t, STRATA_EENDPOINT, why);
        return;
    }
    for (uint32_t i = 0; i < a->ntensors; i++) {
        uint64_t n = st_xfer_bytes(&a->tensors[i]);
        if (st_xfer_dirs(&a->tensors[i], a->tags[i]) && n > (uint64_t)INT32_MAX) {
            char why[STRATA_ERRMSG_MAX];
            st_msg_format(why, sizeof why,
                          "%s: tensor %u touches %llu bytes; a tensor sent to another rank may "
                          "touch at most %d",
                          ep->base.label, i, (unsigned long long)n, INT32_MAX);
            atomic_store(&t->state, T_SENT);
            task_finish(dl, ep, t, STRATA_ETASK, why);
            return;
        }
    }
    t->nreq = 0;
    t->verify = 0;
    for (uint32_t i = 0; i < a->ntensors; i++) {
        mpi_ep *asked = NULL;
        rc = st_mpi_place_tensor(ep, t, slot, i, &asked);
        t->holder[i] = asked;
        if (rc != MPI_SUCCESS) /* the holder's failure: this task learns it below */
            mpi_failed(dl, asked, "MPI_Isend of a SEND_TO", rc);
    }
    at += used;
    for (uint32_t i = 0; i < a->ntensors; i++, at += 16)
        st_mpi_place_put(body + at, &t->place[i]);
    uint32_t most = atomic_load_explicit(&ep->s->drops_per_frame, memory_order_relaxed);
    uint32_t ndrop = ep->ndrops < most ? ep->ndrops : most;
    for (uint32_t k = 0; k < ndrop; k++, at += 8)
        st_mpi_put64(body + at, ep->drops[ep->ndrops - 1 - k]);
    ep->ndrops -= ndrop;
    st_mpi_put32(body + sizeof(st_digest), (uint32_t)used);
    st_mpi_put32(body + sizeof(st_digest) + 4, ndrop);
    h.body_bytes = (uint32_t)at;
    st_mpi_hdr_put(t->frame, &h);
    if (g_test_fail_now) { /* the seam above */
        g_test_fail_now = 0;
        t->req[t->nreq++] = MPI_REQUEST_NULL;
        rc = MPI_ERR_OTHER;
    } else {
        rc = st_mpi_isend(t->frame, (int)(ST_MPI_HDR_BYTES + h.body_bytes), ep->rank,
                          ST_MPI_TAG_FRAME, &t->req[t->nreq++]);
    }
    atomic_store(&t->state, T_SENT);
    if (rc != MPI_SUCCESS) {
        mpi_failed(dl, ep, "MPI_Isend of a task", rc);
        return;
    }
    for (uint32_t i = 0; i < a->ntensors; i++) {
        const strata_tensor *x = &a->tensors[i];
        if ((t->place[i].kind & 0xf) != ST_PLACE_ROOT)
            continue;
        uint64_t n = st_xfer_bytes(x);
        const void *src = strata_tensor_data(x);
        if (!st_xfer_contiguous(x)) { /* packed once (maybe for its digest already) */
            if (!t->tmp[i])
                t->tmp[i] = st_malloc(n ? n : 1);
            if (!t->tmp[i]) {
                mpi_failed(dl, ep, "packing a strided view (out of memory)", MPI_ERR_NO_MEM);
                return;
            }
            st_xfer_pack(x, t->tmp[i]);
            src = t->tmp[i];
        }
        rc = st_mpi_isend(src, (int)n, ep->rank, ST_MPI_TAG_DATA0 + slot * 64 + (int)i,
                          &t->req[t->nreq++]);
        if (rc != MPI_SUCCESS) {
            mpi_failed(dl, ep, "MPI_Isend of a task's data", rc);
            return;
        }
        atomic_fetch_add(&ep->bytes_sent, n);
    }
    /* the frame and the SEND_TOs are out: the copies move while they are checked */
    if (t->verify)
        rc = st_mpi_verify_copies(ep, t, slot);
    if (t->verify && rc != MPI_SUCCESS) {
        mpi_failed(dl, ep, "MPI_Isend of a verdict", rc);
        return;
    }
    tell_holders_gone(dl, ep, t); /* a holder found dead while this task was placed */
}

/* A DONE frame: post the receives of the OUT tensors (straight into the L4's
 * buffer when the view is contiguous), or take the failure. */
static void task_done(done_list *dl, mpi_ep *ep, const st_mpi_hdr *h, const uint8_t *body) {
    if (h->slot >= ST_MPI_SLOTS || atomic_load(&ep->task[h->slot].state) != T_SENT ||
        ep->task[h->slot].d.dispatch_id != (uint32_t)h->seq) {
        char why[STRATA_ERRMSG_MAX];
        st_msg_format(why, sizeof why,
                      "L4 child %s answered a task it was not given (slot %u, dispatch %llu)",
                      ep->base.label, h->slot, (unsigned long long)h->seq);
        declare_dead(dl, ep, why);
        return;
    }
    mpi_task *t = &ep->task[h->slot];
    t->dropped = h->arg0; /* the copies the child does not keep (mpi_frame.h), ok or not */
    if (h->status != STRATA_OK) {
        int status =
            h->status == STRATA_ETASK || h->status == STRATA_ENOMEM ? h->status : STRATA_EENDPOINT;
        char msg[STRATA_ERRMSG_MAX];
        size_t n = h->body_bytes < sizeof msg - 1 ? h->body_bytes : sizeof msg - 1;
        memcpy(msg, body, n);
        msg[n] = '\0';
        t->done_status = status; /* nothing comes back; done once the sends are */
        mpi_ep *gone = NULL;
        for (uint32_t i = 0; i < t->d.args->ntensors && !gone; i++)
            if (t->gone >> i & 1)
                gone = t->holder[i];
        if (gone) /* the child names the holder's rank; rank 0 knows why it is gone */
            st_msg_format(t->done_msg, sizeof t->done_msg, "%s (%s)", msg, gone->dead_msg);
        else
            st_msg_format(t->done_msg, sizeof t->done_msg, "%s", msg);
        atomic_store(&t->state, T_RECV);
        return;
    }
    const strata_task_args *a = t->d.args;
    for (uint32_t i = 0; i < a->ntensors; i++) {
        const strata_tensor *x = &a->tensors[i];
        if (!(st_xfer_dirs(x, a->tags[i]) & ST_XFER_OUT))
            continue;
        uint64_t n = st_xfer_bytes(x);
        void *dst = strata_tensor_data(x);
        if (!st_xfer_contiguous(x)) {
            t->tmp_out[i] = st_malloc(n ? n : 1);
            if (!t->tmp_out[i]) {
                mpi_failed(dl, ep, "a strided view's receive buffer (out of memory)",
                           MPI_ERR_NO_MEM);
                return;
            }
            dst = t->tmp_out[i];
        }
        int rc = MPI_Irecv(dst, (int)n, MPI_BYTE, ep->rank,
                           ST_MPI_TAG_DATA0 + (int)h->slot * 64 + (int)i, st_mpi_comm(),
                           &t->req[t->nreq++]);
        if (rc != MPI_SUCCESS) {
            mpi_failed(dl, ep, "MPI_Irecv of a task's result", rc);
            return;
        }
        atomic_fetch_add(&ep->bytes_received, n);
    }
    t->done_status = STRATA_OK;
    t->done_msg[0] = '\0';
    atomic_store(&t->state, T_RECV);
}

/* RECV with every request done: unpack strided results, complete. */
/* Whether every SEND_TO of t has gone out; a failed one is its holder's
 * failure (the holder is declared dead, and t's child told). */
static int sendtos_out(done_list *dl, mpi_ep *ep, mpi_task *t) {
    int out = 1;
    for (uint32_t i = 0; i < t->d.args->ntensors; i++) {
        if (t->sendto_req[i] == MPI_REQUEST_NULL)
            continue;
        int flag = 0;
        int rc = MPI_Test(&t->sendto_req[i], &flag, MPI_STATUS_IGNORE);
        if (rc != MPI_SUCCESS) {
            t->sendto_req[i] = MPI_REQUEST_NULL;
            mpi_failed(dl, t->holder[i], "MPI_Isend of a SEND_TO", rc);
        } else if (!flag) {
            out = 0;
        }
    }
    return out || atomic_load(&ep->dead);
}

static int test_task(done_list *dl, mpi_ep *ep, mpi_task *t) {
    int flag = 0;
    int sent = sendtos_out(dl, ep, t);
    if (atomic_load(&ep->dead) || t->finished)
        return 1;
    int rc = MPI_Testall(t->nreq, t->req, &flag, MPI_STATUSES_IGNORE);
    if (rc != MPI_SUCCESS) {
        mpi_failed(dl, ep, "a task's transfer", rc);
        return 1;
    }
    if (!flag || !sent || atomic_load(&t->state) != T_RECV)
        return 0;
    const strata_task_args *a = t->d.args;
    if (t->done_status == STRATA_OK)
        for (uint32_t i = 0; i < a->ntensors; i++)
            if ((st_xfer_dirs(&a->tensors[i], a->tags[i]) & ST_XFER_OUT) && t->tmp_out[i])
                st_xfer_unpack(&a->tensors[i], t->tmp_out[i]);
    st_mpi_settle_copies(ep, t, t->done_status == STRATA_OK);
    task_finish(dl, ep, t, t->done_status, t->done_msg);
    return 1;
}

/* ---- Control calls ------------------------------------------------------------------------ */

static int ctrl_send(done_list *dl, mpi_session *s) {
    mpi_ctrl *c = &s->ctrl;
    if (atomic_load(&c->state.value) != 1)
        return 0;
    mpi_ep *ep = c->ep;
    if (atomic_load(&ep->dead)) {
        c->status = STRATA_EENDPOINT;
        st_msg_format(c->msg, sizeof c->msg, "%s", ep->dead_msg);
        st_event_set(&c->state, 3);
        return 1;
    }
    st_mpi_hdr h;
    st_mpi_hdr_init(&h, ST_MPI_CTRL, ep->base.worker_id);
    h.seq = c->seq;
    h.slot = (uint32_t)c->op;
    h.arg0 = c->arg0;
    h.arg1 = c->arg1;
    h.body_bytes = c->body_len;
    st_mpi_hdr_put(c->frame, &h);
    MPI_Request r;
    int rc = st_mpi_isend(c->frame, (int)(ST_MPI_HDR_BYTES + c->body_len), ep->rank,
                          ST_MPI_TAG_FRAME, &r);
    if (rc == MPI_SUCCESS)
        MPI_Request_free(&r); /* the reply says it arrived; c->frame lives until then */
    c->has_req = 0;
    if (rc == MPI_SUCCESS && c->op == ST_MPI_CTRL_COPY_TO && c->arg1) {
        rc = st_mpi_isend(c->src, (int)c->arg1, ep->rank, ST_MPI_TAG_CTRL_DATA, &c->req);
        c->has_req = rc == MPI_SUCCESS;
        atomic_fetch_add(&ep->bytes_sent, c->arg1);
    }
    atomic_store(&c->state.value, 2);
    if (rc != MPI_SUCCESS)
        mpi_failed(dl, ep, "MPI_Isend of a control call", rc);
    return 1;
}

static void ctrl_reply(done_list *dl, mpi_ep *ep, const st_mpi_hdr *h, const uint8_t *body) {
    mpi_ctrl *c = &ep->s->ctrl;
    if (atomic_load(&c->state.value) != 2 || c->ep != ep || h->seq != c->seq) {
        char why[STRATA_ERRMSG_MAX];
        st_msg_format(why, sizeof why, "L4 child %s answered a control call it was not sent (%llu)",
                      ep->base.label, (unsigned long long)h->seq);
        declare_dead(dl, ep, why);
        return;
    }
    c->status = h->status;
    c->result = h->arg0;
    if (c->status == STRATA_OK && c->op == ST_MPI_CTRL_TRAFFIC) {
        if (h->body_bytes != 7 * 8) {
            c->status = STRATA_EENDPOINT;
            st_msg_format(c->msg, sizeof c->msg, "a traffic reply of %u bytes", h->body_bytes);
            c->op = -c->op;
            return;
        }
        uint64_t *f = c->dst;
        for (int k = 0; k < 7; k++)
            f[k] = st_mpi_get64(body + 8 * k);
        c->op = -c->op;
        return;
    }
    size_t n = h->body_bytes < sizeof c->msg - 1 ? h->body_bytes : sizeof c->msg - 1;
    memcpy(c->msg, body, n);
    c->msg[n] = '\0';
    if (c->status == STRATA_OK && c->op == ST_MPI_CTRL_COPY_FROM && c->arg1) {
        int rc = MPI_Irecv(c->dst, (int)c->arg1, MPI_BYTE, ep->rank, ST_MPI_TAG_CTRL_DATA,
                           st_mpi_comm(), &c->req);
        if (rc != MPI_SUCCESS) {
            mpi_failed(dl, ep, "MPI_Irecv of copied data", rc);
            return;
        }
        c->has_req = 1;
        atomic_fetch_add(&ep->bytes_received, c->arg1);
    }
    c->op = -c->op; /* replied: done once its data request is */
}

static int ctrl_test(done_list *dl, mpi_session *s) {
    mpi_ctrl *c = &s->ctrl;
    if (atomic_load(&c->state.value) != 2)
        return 0;
    if (c->has_req) {
        int flag = 0;
        int rc = MPI_Test(&c->req, &flag, MPI_STATUS_IGNORE);
        if (rc != MPI_SUCCESS) {
            mpi_failed(dl, c->ep, "a control call's transfer", rc);
            return 1;
        }
        if (!flag)
            return 0;
        c->has_req = 0;
        c->ep->last_heard_ns = st_now_ns(); /* the child took or sent the bytes: it lives */
    }
    if (c->op >= 0) /* no reply yet */
        return 0;
    st_event_set(&c->state, 3);
    return 1;
}

/* The progress thread is leaving (close): a control call posted or sent is
 * finished with STRATA_ESTATE, and shutdown becomes 2 first, so a caller
 * that posts after this looks sees 2 and withdraws its call (both sides
 * store, then load: seq_cst, one of them sees the other). */
static void ctrl_abandon(mpi_session *s) {
    mpi_ctrl *c = &s->ctrl;
    atomic_store(&s->shutdown, 2);
    uint32_t cs = 1;
    /* 1 -> 2 claims a posted call (its caller may be withdrawing it) */
    if (!atomic_compare_exchange_strong(&c->state.value, &cs, 2) && cs != 2)
        return;
    c->status = STRATA_ESTATE;
    st_msg_format(c->msg, sizeof c->msg, "%s", "the worker is closing; control call not done");
    c->has_req = 0; /* a transfer still in flight is left to MPI, as for a dead child */
    st_event_set(&c->state, 3);
}

/* Run one control call on child ep through the progress thread. */
static int ctrl_call_body(mpi_ep *ep, int op, uint64_t arg0, uint64_t arg1, const void *src,
                          void *dst, uint64_t *result, const uint8_t *body, uint32_t body_len,
                          const char *what) {
    mpi_session *s = ep->s;
    if (!s->started || atomic_load(&s->shutdown))
        return st_fail(STRATA_ESTATE,
                       "%s: %s is not running (between strata_worker_init and "
                       "strata_worker_close)",
                       what, ep->base.label);
    if (atomic_load(&ep->dead))
        return st_fail(STRATA_EENDPOINT, "%s: %s", what, ep->dead_msg);
    pthread_mutex_lock(&s->ctrl_mu);
    mpi_ctrl *c = &s->ctrl;
    c->ep = ep;
    c->op = op;
    c->arg0 = arg0;
    c->arg1 = arg1;
    c->src = src;
    c->dst = dst;
    c->status = STRATA_OK;
    c->msg[0] = '\0';
    c->seq = ++s->ctrl_seq;
    c->body_len = body_len;
    if (body_len)
        memcpy(c->frame + ST_MPI_HDR_BYTES, body, body_len);
    st_event_set(&c->state, 1);
    ring(s);
    uint32_t posted = 1; /* the thread left before it could see the call: withdrawn */
    if (atomic_load(&s->shutdown) == 2 &&
        atomic_compare_exchange_strong(&c->state.value, &posted, 0)) {
        pthread_mutex_unlock(&s->ctrl_mu);
        return st_fail(STRATA_ESTATE, "%s: %s is closing", what, ep->base.label);
    }
    while (atomic_load(&c->state.value) != 3)
        st_event_wait(&c->state, atomic_load(&c->state.value), 20000, UINT64_MAX);
    int rc = c->status;
    char msg[STRATA_ERRMSG_MAX];
    st_msg_format(msg, sizeof msg, "%s", c->msg);
    if (result)
        *result = c->result;
    atomic_store(&c->state.value, 0);
    pthread_mutex_unlock(&s->ctrl_mu);
    if (rc != STRATA_OK)
        return st_fail(rc, "%s: %s: %s", what, ep->base.label, msg);
    return STRATA_OK;
}

static int ctrl_call(mpi_ep *ep, int op, uint64_t arg0, uint64_t arg1, const void *src, void *dst,
                     uint64_t *result, const char *what) {
    return ctrl_call_body(ep, op, arg0, arg1, src, dst, result, NULL, 0, what);
}

/* ---- The progress thread ------------------------------------------------------------------- */

static mpi_ep *ep_of_rank(mpi_session *s, int rank) {
    for (int i = 0; i < s->n; i++)
        if (s->eps[i]->rank == rank)
            return s->eps[i];
    return NULL;
}

/* Take every frame that has arrived. */
static int poll_frames(done_list *dl, mpi_session *s, uint8_t *buf) {
    int did = 0;
    for (int k = 0; k < 64; k++) {
        int flag = 0, count = 0;
        MPI_Status st;
        if (MPI_Iprobe(MPI_ANY_SOURCE, ST_MPI_TAG_FRAME, st_mpi_comm(), &flag, &st) !=
                MPI_SUCCESS ||
            !flag)
            return did;
        did = 1;
        MPI_Get_count(&st, MPI_BYTE, &count);
        mpi_ep *ep = ep_of_rank(s, st.MPI_SOURCE);
        int too_big = count < 0 || (size_t)count > ST_MPI_HDR_BYTES + ST_MPI_BODY_MAX;
        MPI_Recv(buf, too_big ? 0 : count, MPI_BYTE, st.MPI_SOURCE, ST_MPI_TAG_FRAME, st_mpi_comm(),
                 MPI_STATUS_IGNORE);
        if (!ep)
            continue; /* not one of this L4's children: nothing to answer */
        ep->last_heard_ns = st_now_ns();
        st_mpi_hdr h;
        char why[256], msg[STRATA_ERRMSG_MAX];
        if (too_big) {
            st_msg_format(msg, sizeof msg, "L4 child %s sent a %d-byte frame", ep->base.label,
                          count);
            declare_dead(dl, ep, msg);
            continue;
        }
        if (st_mpi_hdr_get(buf, (size_t)count, &h, why, sizeof why) != STRATA_OK) {
            st_msg_format(msg, sizeof msg, "L4 child %s sent a bad frame: %s", ep->base.label, why);
            declare_dead(dl, ep, msg);
            continue;
        }
        const uint8_t *body = buf + ST_MPI_HDR_BYTES;
        switch (h.type) {
        case ST_MPI_DONE:
            task_done(dl, ep, &h, body);
            /* its requests are often done already (no OUT data): completed in
             * this pass, without another probe first */
            if (h.slot < ST_MPI_SLOTS && atomic_load(&ep->task[h.slot].state) == T_RECV &&
                !ep->task[h.slot].finished && !atomic_load(&ep->dead))
                (void)test_task(dl, ep, &ep->task[h.slot]);
            if (dl->n)
                return did; /* pushed first: the engine's next dispatch waits on it */
            break;
        case ST_MPI_REPLY:
            ctrl_reply(dl, ep, &h, body);
            break;
        case ST_MPI_PONG:
            ep->ping_sent_ns = 0;
            break;
        case ST_MPI_BYE:
            ep->bye = 1;
            break;
        default:
            st_msg_format(msg, sizeof msg, "L4 child %s sent an unexpected frame of type %u",
                          ep->base.label, h.type);
            declare_dead(dl, ep, msg);
        }
    }
    return did;
}

/* A child's serve loop answers no ping while it moves a control call's bytes
 * (COPY_TO / COPY_FROM): while that transfer's request is pending its silence
 * bound grows by this much per byte (16 ns: 62.5 MB/s, far below any link),
 * so a healthy child is not declared dead with MPI still holding the
 * caller's memory, and a dead one still is within a bound. */
#define CTRL_XFER_NS_PER_BYTE 16ull

uint64_t st_mpi_bystander_heartbeat_ns(const mpi_session *s) {
    uint64_t ns = 0;
    for (int i = 0; i < s->n; i++)
        if (s->eps[i]->heartbeat_ns > ns)
            ns = s->eps[i]->heartbeat_ns;
    return ns ? ns : ST_MPI_HEARTBEAT_DEFAULT_NS;
}

uint64_t st_mpi_bystander_startup_ns(const mpi_session *s) {
    uint64_t ns = 0;
    for (int i = 0; i < s->n; i++)
        if (s->eps[i]->cfg.worker.startup_timeout_ns > ns)
            ns = s->eps[i]->cfg.worker.startup_timeout_ns;
    return ns;
}

/* Every rank with no child of this L4 gets an unanswered PING each quarter
 * of the bystander bound: it leaves when they stop (rank 0 gone), instead
 * of waiting for a SHUTDOWN that will never come. A failed send is not
 * an error of any child: nothing here is waited on. */
static void ping_bystanders(mpi_session *s, uint64_t now) {
    if (!s->bystander_period_ns || now - s->bystander_ping_ns <= s->bystander_period_ns)
        return;
    s->bystander_ping_ns = now;
    for (int r = 1; r < s->size; r++) {
        if (ep_of_rank(s, r))
            continue;
        MPI_Request req;
        if (st_mpi_isend(s->bystander_ping, ST_MPI_HDR_BYTES, r, ST_MPI_TAG_FRAME, &req) ==
            MPI_SUCCESS)
            MPI_Request_free(&req); /* the frame is constant and outlives the send */
    }
}

static void heartbeat(done_list *dl, mpi_session *s) {
    uint64_t now = st_now_ns();
    const mpi_ctrl *c = &s->ctrl;
    ping_bystanders(s, now);
    for (int i = 0; i < s->n; i++) {
        mpi_ep *ep = s->eps[i];
        if (atomic_load(&ep->dead) || ep->bye)
            continue;
        uint64_t bound = ep->heartbeat_ns;
        if (atomic_load(&c->state.value) == 2 && c->ep == ep && c->has_req)
            bound += c->arg1 * CTRL_XFER_NS_PER_BYTE;
        if (now - ep->last_heard_ns > bound) {
            char why[STRATA_ERRMSG_MAX];
            st_msg_format(why, sizeof why,
                          "L4 child %s stopped answering: no frame for %llu ms "
                          "(heartbeat_timeout_ns %llu ms); its rank is taken as dead",
                          ep->base.label, (unsigned long long)((now - ep->last_heard_ns) / 1000000),
                          (unsigned long long)(ep->heartbeat_ns / 1000000));
            declare_dead(dl, ep, why);
            continue;
        }
        if (!ep->ping_sent_ns && now - ep->last_heard_ns > ep->heartbeat_ns / 4) {
            MPI_Request r;
            int rc = st_mpi_isend(ep->ping_frame, ST_MPI_HDR_BYTES, ep->rank, ST_MPI_TAG_FRAME, &r);
            if (rc != MPI_SUCCESS) {
                mpi_failed(dl, ep, "MPI_Isend of a heartbeat", rc);
                continue;
            }
            MPI_Request_free(&r); /* ping_frame is constant and outlives the send */
            ep->ping_sent_ns = now;
        }
    }
}

/* Close: SHUTDOWN to every live child, then BYE from each (bounded). */
static void say_shutdown(mpi_session *s, uint8_t *buf) {
    uint8_t frame[ST_MPI_HDR_BYTES];
    int size = strata_mpi_size();
    for (int r = 1; r < size; r++) { /* ranks with no child wait for this too */
        mpi_ep *ep = ep_of_rank(s, r);
        if (ep && atomic_load(&ep->dead))
            continue;
        st_mpi_hdr h;
        st_mpi_hdr_init(&h, ST_MPI_SHUTDOWN, ep ? ep->base.worker_id : -1);
        h.arg0 = st_mpi_finalize_bound(); /* its MPI_Finalize is to be bounded too (0: no) */
        st_mpi_hdr_put(frame, &h);
        (void)st_mpi_send_frame(r, frame, sizeof frame, "strata_worker_close");
    }
    for (int i = 0; i < s->n; i++) {
        mpi_ep *ep = s->eps[i];
        /* its L3 closes first (its runs are over by now): a few seconds past the heartbeat */
        uint64_t deadline = st_deadline_after(ep->heartbeat_ns + 5000000000ull);
        while (!atomic_load(&ep->dead) && !ep->bye) {
            size_t len = 0;
            if (st_mpi_recv_frame(ep->rank, buf, ST_MPI_HDR_BYTES + ST_MPI_BODY_MAX, &len, deadline,
                                  "strata_worker_close") != STRATA_OK)
                break; /* silent past its bound: not waited for any longer */
            st_mpi_hdr h;
            char why[128];
            if (st_mpi_hdr_get(buf, len, &h, why, sizeof why) == STRATA_OK && h.type == ST_MPI_BYE)
                ep->bye = 1;
        }
    }
}

/* When nothing is outstanding (no task at a child, no control call, no ping
 * unanswered), no frame can arrive before the next ping is due: that time;
 * else 0. A dispatch or a control call rings the bell and ends the park. */
static uint64_t quiet_until(mpi_session *s) {
    if (atomic_load(&s->ctrl.state.value) != 0 || atomic_load(&s->shutdown))
        return 0;
    uint64_t until = UINT64_MAX;
    for (int i = 0; i < s->n; i++) {
        mpi_ep *ep = s->eps[i];
        if (atomic_load(&ep->dead))
            continue;
        if (ep->ping_sent_ns)
            return 0;
        for (int k = 0; k < ST_MPI_SLOTS; k++)
            if (atomic_load(&ep->task[k].state) != T_FREE)
                return 0;
        uint64_t due = ep->last_heard_ns + ep->heartbeat_ns / 4 + 1;
        if (due < until)
            until = due;
    }
    if (s->bystander_period_ns) { /* the bystanders' ping is due too */
        uint64_t due = s->bystander_ping_ns + s->bystander_period_ns + 1;
        if (due < until)
            until = due;
    }
    return until == UINT64_MAX ? 0 : until;
}

/* What the progress thread owns, allocated before it starts (so that init
 * fails, rather than a thread that cannot serve and leaves every task and
 * control call waiting); the thread frees it. */
typedef struct progress_arg {
    mpi_session *s;
    uint8_t *buf;
    done_list *dl;
} progress_arg;

/* Whether rank 0 waits on a child for something: a task in flight (sent,
 * or its results coming) or a control call. Sets the back-off's busy. */
static int owed_an_answer(mpi_session *s) {
    uint32_t c = atomic_load(&s->ctrl.state.value);
    if (c == 1 || c == 2) /* posted or sent; 3 is done (mpi_session.h) */
        return 1;
    for (int i = 0; i < s->n; i++)
        for (int k = 0; k < ST_MPI_SLOTS; k++) {
            int st = atomic_load_explicit(&s->eps[i]->task[k].state, memory_order_relaxed);
            if (st == T_SENT || st == T_RECV)
                return 1;
        }
    return 0;
}

static void *progress_main(void *arg) {
    progress_arg *pa = arg;
    mpi_session *s = pa->s;
    uint8_t *buf = pa->buf;
    done_list *dl = pa->dl;
    st_free(pa);
    uint64_t now = st_now_ns();
    for (int i = 0; i < s->n; i++)
        s->eps[i]->last_heard_ns = now;
    st_mpi_precise_sleeps();
    st_backoff bo = {0};
    int skipped = 0; /* the last pass left the task tests out */
    for (;;) {
        uint32_t bell = atomic_load(&s->bell->value);
        int did = 0;
        st_mpi_lock();
        for (int i = 0; i < s->n; i++) {
            mpi_ep *ep = s->eps[i];
            if (test_hold_tasks(ep))
                continue;
            for (int k = 0; k < ST_MPI_SLOTS; k++)
                if (atomic_load_explicit(&ep->task[k].state, memory_order_acquire) == T_QUEUED) {
                    if (atomic_load(&ep->dead)) {
                        atomic_store(&ep->task[k].state, T_SENT);
                        task_finish(dl, ep, &ep->task[k], STRATA_EENDPOINT, ep->dead_msg);
                    } else {
                        send_task(dl, ep, k);
                    }
                    did = 1;
                }
        }
        did |= ctrl_send(dl, s);
        did |= poll_frames(dl, s, buf);
        /* a completion goes out first (the engine's next dispatch may wait on
         * it); the other tasks are tested in the next pass, never skipped twice */
        int skip = dl->n && !skipped;
        skipped = skip;
        for (int i = 0; i < s->n && !skip; i++)
            for (int k = 0; k < ST_MPI_SLOTS; k++) {
                mpi_task *t = &s->eps[i]->task[k];
                int st = atomic_load(&t->state);
                if ((st == T_SENT || st == T_RECV) && !t->finished &&
                    !atomic_load(&s->eps[i]->dead))
                    did |= test_task(dl, s->eps[i], t);
            }
        did |= ctrl_test(dl, s);
        heartbeat(dl, s);
        st_mpi_unlock();
        tell_gone(s);
        push_done(dl);
        if (atomic_load(&s->shutdown)) {
            ctrl_abandon(s);
            say_shutdown(s, buf);
            break;
        }
        if (did) {
            st_backoff_reset(&bo);
            continue;
        }
        bo.busy = owed_an_answer(s);
        uint64_t ns = st_backoff_step(&bo);
        if (!ns)
            continue;
        /* park on the bell for the back-off's sleep; with nothing outstanding no
         * frame can come: park until the next heartbeat is due */
        uint64_t deadline = st_deadline_after(ns);
        uint64_t quiet = quiet_until(s);
        if (quiet > deadline)
            deadline = quiet;
        st_event_wait(s->bell, bell, 0, deadline);
    }
    st_free(buf);
    st_free(dl);
    return NULL;
}

/* ---- Endpoint operations --------------------------------------------------------------------- */

static void mpi_stop(st_endpoint *base) {
    mpi_ep *ep = (mpi_ep *)base;
    atomic_store(&ep->stopping, 1);
}

static void session_stop_thread(mpi_session *s) {
    if (s->started) {
        atomic_store(&s->shutdown, 1);
        ring(s);
        pthread_join(s->thread, NULL);
        s->started = 0;
    }
}

static void session_free(mpi_session *s) {
    st_worker_set_dispatch_observer(s->l4, NULL, NULL); /* it dispatches no more: destroyed */
    pthread_mutex_destroy(&s->ctrl_mu);
    pthread_mutex_destroy(&s->writes_mu);
    st_free(s->writes);
    st_dir_free(&s->dir);
    st_free(s);
}

static void mpi_destroy(st_endpoint *base) {
    mpi_ep *ep = (mpi_ep *)base;
    mpi_session *s = ep->s;
    session_stop_thread(s);
    s->spent = 1;
    st_free(ep->drops);
    if (++s->destroyed == s->n)
        session_free(s);
    st_free(ep);
}

/* Phase 1 of init. Rank 0: wait (bounded) for this child's HELLO. Another
 * rank: serve as its child, then exit (never returns). */
static int mpi_start_forks(st_endpoint *base) {
    mpi_ep *ep = (mpi_ep *)base;
    mpi_session *s = ep->s;
    if (s->my_rank != 0) {
        s->served = 1;
        st_mpi_serve(s);
    }
    if (s->spent)
        return st_fail(STRATA_ESTATE,
                       "%s: its rank was shut down by an earlier failed strata_worker_init or "
                       "a close; MPI children cannot be started again",
                       base->label);
    if (ep->ready)
        return STRATA_OK;
    if (!s->startup_deadline)
        s->startup_deadline = st_deadline_after(ep->cfg.worker.startup_timeout_ns);
    uint8_t *buf = st_malloc(ST_MPI_HDR_BYTES + ST_MPI_BODY_MAX);
    if (!buf)
        return st_fail_nomem("strata_worker_init: a frame buffer", ST_MPI_HDR_BYTES);
    size_t len = 0;
    int rc = st_mpi_recv_frame(ep->rank, buf, ST_MPI_HDR_BYTES + ST_MPI_BODY_MAX, &len,
                               s->startup_deadline, "strata_worker_init");
    if (rc == STRATA_ETIMEDOUT) {
        st_free(buf);
        return st_fail(STRATA_ETIMEDOUT,
                       "L4 child %s did not report ready within startup_timeout_ns (%llu ms): "
                       "is rank %d running the same program and calling strata_worker_init?",
                       base->label,
                       (unsigned long long)(ep->cfg.worker.startup_timeout_ns / 1000000), ep->rank);
    }
    st_mpi_hdr h;
    char why[256];
    if (rc == STRATA_OK && st_mpi_hdr_get(buf, len, &h, why, sizeof why) != STRATA_OK)
        rc = st_fail(STRATA_EENDPOINT, "L4 child %s: bad start-up frame: %s", base->label, why);
    else if (rc == STRATA_OK && h.type != ST_MPI_HELLO)
        rc = st_fail(STRATA_EENDPOINT, "L4 child %s: frame type %u before its HELLO", base->label,
                     h.type);
    else if (rc == STRATA_OK && h.status != STRATA_OK) {
        char msg[STRATA_ERRMSG_MAX];
        size_t n = h.body_bytes < sizeof msg - 1 ? h.body_bytes : sizeof msg - 1;
        memcpy(msg, buf + ST_MPI_HDR_BYTES, n);
        msg[n] = '\0';
        rc = st_fail(h.status, "L4 child %s failed to start on rank %d: %s", base->label, ep->rank,
                     msg);
    }
    st_free(buf);
    if (rc == STRATA_OK)
        ep->ready = 1;
    return rc;
}

/* The constant PING frames (mpi_ep.ping_frame, the bystanders') and the
 * bystanders' ping period, before the progress thread that sends them
 * starts (the children are fixed by then). */
static void write_pings(mpi_session *s) {
    int bystanders = 0;
    for (int r = 1; r < s->size && !bystanders; r++)
        bystanders = ep_of_rank(s, r) == NULL;
    s->bystander_period_ns = bystanders ? st_mpi_bystander_heartbeat_ns(s) / 4 : 0;
    st_mpi_hdr h;
    for (int i = 0; i < s->n; i++) {
        st_mpi_hdr_init(&h, ST_MPI_PING, s->eps[i]->base.worker_id);
        st_mpi_hdr_put(s->eps[i]->ping_frame, &h);
    }
    st_mpi_hdr_init(&h, ST_MPI_PING, -1);
    st_mpi_hdr_put(s->bystander_ping, &h);
}

static int mpi_start_threads(st_endpoint *base) {
    mpi_ep *ep = (mpi_ep *)base;
    mpi_session *s = ep->s;
    if (s->started)
        return STRATA_OK;
    for (int i = 0; i < s->n; i++)
        if (!s->eps[i]->ready)
            return STRATA_OK; /* the last child's call starts it */
    progress_arg *pa = st_calloc(1, sizeof *pa);
    if (pa) {
        pa->s = s;
        pa->buf = st_malloc(ST_MPI_HDR_BYTES + ST_MPI_BODY_MAX);
        pa->dl = st_calloc(1, sizeof *pa->dl);
    }
    if (!pa || !pa->buf || !pa->dl) {
        if (pa) {
            st_free(pa->buf);
            st_free(pa->dl);
        }
        st_free(pa);
        return st_fail_nomem("strata_worker_init: the MPI progress thread's buffers",
                             ST_MPI_HDR_BYTES + ST_MPI_BODY_MAX);
    }
    write_pings(s);
    if (pthread_create(&s->thread, NULL, progress_main, pa) != 0) {
        st_free(pa->buf);
        st_free(pa->dl);
        st_free(pa);
        return st_fail(STRATA_ENOMEM, "strata_worker_init: cannot start the MPI progress thread");
    }
    s->started = 1;
    return STRATA_OK;
}

/* Init failed: the children's ranks are told to shut down (they exit), so
 * the session is spent. */
static void mpi_unstart(st_endpoint *base) {
    mpi_ep *ep = (mpi_ep *)base;
    mpi_session *s = ep->s;
    if (s->spent || s->my_rank != 0)
        return;
    s->spent = 1;
    if (s->started) {
        session_stop_thread(s);
        return;
    }
    uint8_t *buf = st_malloc(ST_MPI_HDR_BYTES + ST_MPI_BODY_MAX);
    if (buf)
        say_shutdown(s, buf);
    st_free(buf);
}

/* An orchestration callable registered on the L4 after init: the child's
 * rank registers it on its own copy of the L4, its function found by object
 * and offset (mpi/mpi_symbol.h); `user` goes as its value (it must mean the
 * same on every rank: NULL, or a number). Other kinds never run on a child. */
static int mpi_registered(st_endpoint *base, const st_callable_info *ci) {
    mpi_ep *ep = (mpi_ep *)base;
    strata_orch_fn fn = st_callable_orch(ci);
    if (!fn)
        return STRATA_OK;
    st_symbol_ref ref;
    void *fp;
    _Static_assert(sizeof fp == sizeof fn, "a function fits a pointer");
    memcpy(&fp, &fn, sizeof fp);
    int rc = st_symbol_name(fp, &ref);
    if (rc != STRATA_OK)
        return st_fail_prefix(rc, base->label);
    uint8_t body[ST_MPI_CTRL_BODY_MAX];
    size_t lo = strlen(ref.object), ls = strlen(ref.symbol), ln = strlen(ci->name);
    if (24 + lo + ls + ln > sizeof body)
        return st_fail(STRATA_EINVAL, "%s: the path of %s is too long to send", base->label,
                       ref.object);
    st_mpi_put64(body, ref.offset);
    st_mpi_put64(body + 8, (uint64_t)(uintptr_t)ci->user);
    st_mpi_put32(body + 16, (uint32_t)lo | (uint32_t)ls << 16);
    st_mpi_put32(body + 20, (uint32_t)ln);
    memcpy(body + 24, ref.object, lo);
    memcpy(body + 24 + lo, ref.symbol, ls);
    memcpy(body + 24 + lo + ls, ci->name, ln);
    return ctrl_call_body(ep, ST_MPI_CTRL_REGISTER, 0, 0, NULL, NULL, NULL, body,
                          (uint32_t)(24 + lo + ls + ln), "register");
}

static const st_endpoint_ops mpi_ep_ops = {
    .dispatch = mpi_dispatch,
    .progress = NULL,
    .activate = NULL,
    .stop = mpi_stop,
    .destroy = mpi_destroy,
    .lend = NULL,
    .registered = mpi_registered,
    .start_forks = mpi_start_forks,
    .start_threads = mpi_start_threads,
    .unstart = mpi_unstart,
};

/* ---- Remote memory -----------------------------------------------------------------------------
 */

int st_mpi_remote_malloc(strata_worker *w, int worker_id, size_t nbytes, strata_buffer **out) {
    const char *what = "strata_worker_remote_malloc";
    mpi_ep *ep = st_mpi_ep_of(st_worker_next_endpoint(w, worker_id));
    uint64_t addr = 0;
    STRATA_TRY(ctrl_call(ep, ST_MPI_CTRL_MALLOC, 0, nbytes, NULL, NULL, &addr, what));
    strata_buffer *b = NULL;
    /* The handle's data pointer is the address on the child's rank: never
     * dereferenced here, it names the memory in task frames. */
    int rc = strata_buffer_wrap(w, (void *)(uintptr_t)addr, nbytes, &b);
    if (rc != STRATA_OK) {
        char keep[STRATA_ERRMSG_MAX];
        st_msg_format(keep, sizeof keep, "%s", strata_error_message());
        (void)ctrl_call(ep, ST_MPI_CTRL_FREE, addr, 0, NULL, NULL, NULL, what);
        return st_fail_msg(rc, keep);
    }
    st_buffer_mark_device(b, worker_id); /* its views are refused on every other child */
    *out = b;
    return STRATA_OK;
}

/* What both remote copies check first: the size, and that the endpoint is still
 * there. The child's address of the copy in *addr, its endpoint in *ep. */
static int remote_copy_target(strata_worker *w, int worker_id, const strata_buffer *b,
                              uint64_t offset, size_t n, const char *what, uint64_t *addr,
                              mpi_ep **ep) {
    if (n > (size_t)INT32_MAX)
        return st_fail(STRATA_EINVAL, "%s: %zu bytes in one copy (at most %d)", what, n, INT32_MAX);
    *addr = (uint64_t)(uintptr_t)strata_buffer_data(b) + offset;
    *ep = st_mpi_ep_of(st_worker_next_endpoint(w, worker_id));
    if (!*ep) /* close let go of the endpoint: the memory went with its rank */
        return st_fail(STRATA_ESTATE, "%s: worker %d was closed; only the handle is left", what,
                       worker_id);
    return STRATA_OK;
}

int st_mpi_remote_copy_to(strata_worker *w, int worker_id, strata_buffer *b, uint64_t offset,
                          const void *src, size_t n) {
    const char *what = "strata_worker_remote_copy_to";
    uint64_t addr = 0;
    mpi_ep *ep = NULL;
    STRATA_TRY(remote_copy_target(w, worker_id, b, offset, n, what, &addr, &ep));
    return ctrl_call(ep, ST_MPI_CTRL_COPY_TO, addr, n, src, NULL, NULL, what);
}

int st_mpi_remote_copy_from(strata_worker *w, int worker_id, const strata_buffer *b,
                            uint64_t offset, void *dst, size_t n) {
    const char *what = "strata_worker_remote_copy_from";
    uint64_t addr = 0;
    mpi_ep *ep = NULL;
    STRATA_TRY(remote_copy_target(w, worker_id, b, offset, n, what, &addr, &ep));
    return ctrl_call(ep, ST_MPI_CTRL_COPY_FROM, addr, n, NULL, dst, NULL, what);
}

int st_mpi_remote_free(strata_worker *w, int worker_id, strata_buffer *b) {
    mpi_ep *ep = st_mpi_ep_of(st_worker_next_endpoint(w, worker_id));
    uint64_t addr = (uint64_t)(uintptr_t)strata_buffer_data(b);
    int rc = STRATA_OK;
    /* after close (or a dead child) the memory went with its rank: only the handle is left */
    if (ep && ep->s->started && !atomic_load(&ep->dead) && !atomic_load(&ep->s->shutdown))
        rc =
            ctrl_call(ep, ST_MPI_CTRL_FREE, addr, 0, NULL, NULL, NULL, "strata_worker_remote_free");
    st_buffer_destroy_device(b);
    return rc;
}

int st_mpi_test_set_cache_budget(strata_worker *w, int worker_id, uint64_t bytes) {
    mpi_ep *ep = st_mpi_ep_of(st_worker_next_endpoint(w, worker_id));
    if (!ep)
        return st_fail(STRATA_EINVAL, "st_mpi_test_set_cache_budget: worker %d is not an MPI child",
                       worker_id);
    atomic_store_explicit(&ep->s->cache_budget, bytes ? bytes : ST_MPI_CACHE_BYTES,
                          memory_order_relaxed);
    return STRATA_OK;
}

int st_mpi_test_set_drops_per_frame(strata_worker *w, int worker_id, uint32_t n) {
    mpi_ep *ep = st_mpi_ep_of(st_worker_next_endpoint(w, worker_id));
    if (!ep || n > ST_MPI_DROPS_MAX)
        return st_fail(STRATA_EINVAL,
                       "st_mpi_test_set_drops_per_frame: worker %d is not an MPI child, or %u "
                       "is over %u",
                       worker_id, n, ST_MPI_DROPS_MAX);
    atomic_store_explicit(&ep->s->drops_per_frame, n ? n : ST_MPI_DROPS_MAX, memory_order_relaxed);
    return STRATA_OK;
}

int st_mpi_test_dir_entries(strata_worker *w, int worker_id, uint32_t *out) {
    mpi_ep *ep = st_mpi_ep_of(st_worker_next_endpoint(w, worker_id));
    if (!ep || !out)
        return st_fail(STRATA_EINVAL, "st_mpi_test_dir_entries: worker %d is not an MPI child",
                       worker_id);
    st_mpi_lock(); /* the progress thread changes the directory under it only */
    *out = ep->s->dir.n;
    st_mpi_unlock();
    return STRATA_OK;
}

int st_mpi_child_traffic(strata_worker *w, int worker_id, st_mpi_traffic *out) {
    mpi_ep *ep = st_mpi_ep_of(st_worker_next_endpoint(w, worker_id));
    if (!ep || !out)
        return st_fail(STRATA_EINVAL, "st_mpi_child_traffic: worker %d is not an MPI child",
                       worker_id);
    uint64_t f[7];
    _Static_assert(sizeof(st_mpi_traffic) == sizeof f, "seven counters");
    STRATA_TRY(ctrl_call(ep, ST_MPI_CTRL_TRAFFIC, 0, 0, NULL, f, NULL, "st_mpi_child_traffic"));
    memcpy(out, f, sizeof f);
    return STRATA_OK;
}
