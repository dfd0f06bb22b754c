/* mpi/mpi_session.h - one L4 Worker's MPI children, as rank 0 and the other
 * ranks both see them.
 *
 * Owns: the endpoint of an MPI child (its rank, config copy, task slots,
 * heartbeat record), the session that groups the MPI children of one L4 (its
 * progress thread on rank 0, the doorbell, the one control call in flight),
 * and the calls between mpi_endpoint.c (rank 0) and mpi_serve.c (the
 * child's rank).
 * Must never: be included outside src/mpi/.
 *
 * Locks: the session's ctrl_mu serialises control calls of user threads (held
 * for a whole call, taken before nothing else of the library); st_mpi_lock
 * (mpi_env.h) is taken by the progress thread around each batch of MPI
 * calls, never while it waits for its doorbell. Task slots and the control
 * record move by atomic state words (below), each move made by one party.
 */
#ifndef STRATA_MPI_MPI_SESSION_H
#define STRATA_MPI_MPI_SESSION_H

#include <mpi.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "core/endpoint.h"
#include "mpi/mpi_directory.h"
#include "mpi/mpi_frame.h"
#include "strata/worker.h"
#include "util/futex.h"

#define ST_MPI_SLOTS                                                                               \
    2 /* tasks an MPI child holds at once: one runs, the next one's inputs travel */
#define ST_MPI_MAX_CHILDREN 256
#define ST_MPI_HEARTBEAT_DEFAULT_NS 2000000000ull
/* Bytes of copies (of L4 host views) rank 0 lets one child keep; past it the
 * oldest copies are dropped first (docs/guide.md "Multi-host"). */
#define ST_MPI_CACHE_BYTES (512ull << 20)

/* A task slot on rank 0. state moves:
 *   FREE -> QUEUED   dispatch (engine lock held; no MPI call)
 *   QUEUED -> SENT   progress thread: frame and IN data sent (Isend)
 *   SENT -> RECV     progress thread: DONE arrived, OUT data receives posted
 *   RECV/SENT -> FREE progress thread: every request done, result copied,
 *                    just before st_endpoint_complete */
enum { T_FREE = 0, T_QUEUED, T_SENT, T_RECV };

typedef struct mpi_task {
    _Atomic int state;
    st_dispatch d; /* d.args, d.callable, d.cfg stay valid until the completion */
    uint32_t seq;
    int nreq;
    MPI_Request req[3 * STRATA_MAX_TENSORS + 2]; /* frame, IN sends (or a stale copy's
                                                    bytes again), PEER_GONEs, the VERDICT, OUT
                                                    receives: the child's own traffic */
    /* The SEND_TO of tensor i and the child asked (placed PEER): kept apart
     * from req, as a failure there is the holder's, never this child's; a
     * holder declared dead is no longer waited for (its request left to MPI). */
    MPI_Request sendto_req[STRATA_MAX_TENSORS];
    struct mpi_ep *holder[STRATA_MAX_TENSORS];
    uint64_t gone; /* tensors whose holder was declared dead, the child told (PEER_GONE) */
    uint8_t gone_frame[STRATA_MAX_TENSORS][ST_MPI_HDR_BYTES]; /* one per dead holder */
    int finished;     /* progress thread: in the pass's done list (pushed, then FREE) */
    uint64_t verify;  /* tensors placed PEER | ST_PLACE_VERIFY (bit i: tensor i) */
    uint64_t dropped; /* tensors placed KEEP whose copy the child does not keep (DONE arg0) */
    uint8_t verdict[ST_MPI_HDR_BYTES];
    st_mpi_place place[STRATA_MAX_TENSORS]; /* where each tensor's bytes come from */
    uint8_t sendto[STRATA_MAX_TENSORS][ST_MPI_HDR_BYTES];
    void *tmp[STRATA_MAX_TENSORS];     /* packed strided views going out (freed at the end) */
    void *tmp_out[STRATA_MAX_TENSORS]; /* strided results coming in, unpacked at the end */
    int done_status;
    char done_msg[STRATA_ERRMSG_MAX];
    uint8_t frame[ST_MPI_HDR_BYTES + ST_MPI_BODY_MAX];
} mpi_task;

typedef struct mpi_session mpi_session;

typedef struct mpi_ep {
    st_endpoint base;
    mpi_session *s;
    int rank;
    strata_child_config cfg; /* cfg.name not kept: name[] is it */
    char name[48];
    uint64_t heartbeat_ns;
    _Atomic int stopping; /* stop(): new dispatches are rejected */
    _Atomic int dead;     /* declared dead: tasks fail at once with dead_msg */
    int gone_told;        /* progress thread: st_endpoint_gone was called (outside st_mpi_lock) */
    char dead_msg[STRATA_ERRMSG_MAX];
    /* DECLARED_DEAD to the child's rank, sent once (MPI may read it after the send call) */
    uint8_t dead_frame[ST_MPI_HDR_BYTES + STRATA_ERRMSG_MAX];
    int ready;              /* HELLO OK arrived (rank 0) */
    int bye;                /* BYE arrived (rank 0, at close) */
    uint64_t last_heard_ns; /* progress thread: last frame from the child */
    uint64_t ping_sent_ns;  /* 0: no ping outstanding */
    /* PING to the child's rank: written once before the progress thread
     * starts, never again (MPI may still read it after a freed Isend) */
    uint8_t ping_frame[ST_MPI_HDR_BYTES];
    int index;            /* in the session's eps[] (the directory's holder bit) */
    uint64_t cache_bytes; /* bytes of copies the directory says it holds */
    uint64_t *drops;      /* cache ids it is to drop (sent with its next task) */
    uint32_t ndrops, capdrops;
    mpi_task task[ST_MPI_SLOTS];
    st_completion comp[ST_MPI_SLOTS];
    /* counters (progress thread writes; tests read after close or between runs) */
    _Atomic uint64_t bytes_sent, bytes_received;
} mpi_ep;

/* The one control call in flight (under ctrl_mu). state: 0 idle, 1 posted
 * (caller), 2 sent (progress thread), 3 done (progress thread; caller resets). */
typedef struct mpi_ctrl {
    st_event state;
    mpi_ep *ep;
    int op;
    uint64_t arg0, arg1;
    const void *src; /* COPY_TO */
    void *dst;       /* COPY_FROM */
    uint64_t result;
    int status;
    char msg[STRATA_ERRMSG_MAX];
    MPI_Request req;
    int has_req;
    uint64_t seq;
    uint32_t body_len; /* the control's body (REGISTER), in frame after the header */
    uint8_t frame[ST_MPI_HDR_BYTES + ST_MPI_CTRL_BODY_MAX];
} mpi_ctrl;

struct mpi_session {
    strata_worker *l4;
    int n;
    mpi_ep *eps[ST_MPI_MAX_CHILDREN];
    int my_rank;
    int size;             /* ranks in the job (MPI_COMM_WORLD's size) */
    int started;          /* progress thread runs */
    int served;           /* a non-root rank: the serve loop ran (never returns) */
    int spent;            /* closed, or init failed after the children were told */
    int destroyed;        /* endpoints destroyed so far */
    _Atomic int shutdown; /* 1: the progress thread is to say SHUTDOWN and leave; 2: it
                           * no longer serves control calls (ctrl_abandon) */
    /* Bumped by dispatch, stop and control calls, and (when it is this rank's
     * doorbell, mpi_bell.h) by the sends of the ranks of this host: the
     * progress thread parks on it. own_bell when the rank has no doorbell. */
    st_event *bell;
    st_event own_bell;
    pthread_t thread;
    pthread_mutex_t ctrl_mu; /* serialises control calls (see the top of this file) */
    mpi_ctrl ctrl;
    uint64_t ctrl_seq;
    uint64_t startup_deadline;
    /* Ranks with no child of this L4 ("bystanders") are pinged too, every
     * quarter of st_mpi_bystander_heartbeat_ns, unanswered: a bystander that
     * hears nothing for four of those periods takes rank 0 as gone and
     * leaves (bounded, like a child's rank). Progress thread only. */
    uint64_t bystander_ping_ns;
    uint64_t bystander_period_ns; /* a quarter of that bound; 0: every rank hosts a child */
    uint8_t bystander_ping[ST_MPI_HDR_BYTES]; /* constant, as ping_frame */
    st_directory dir;                         /* progress thread only */
    uint64_t use_clock; /* progress thread only: stamps st_dir_entry.last_use */
    /* Bytes of kept copies per child (ST_MPI_CACHE_BYTES; a test seam,
     * st_mpi_test_set_cache_budget, lowers it between runs). */
    _Atomic uint64_t cache_budget;
    /* Cache ids sent to drop per TASK frame (ST_MPI_DROPS_MAX; a test seam,
     * st_mpi_test_set_drops_per_frame, lowers it between runs). */
    _Atomic uint32_t drops_per_frame;
    /* Host tensors written by tasks that do not go to this session's
     * children (the dispatch observer appends them, under the engine lock),
     * taken by the progress thread before it places a task: the directory
     * drops the copies they overlap. writes_mu protects writes, nwrites,
     * capwrites and writes_lost; a leaf (taken under the engine lock or by
     * the progress thread under st_mpi_lock, nothing taken while held). */
    pthread_mutex_t writes_mu;
    strata_tensor *writes;
    uint32_t nwrites, capwrites;
    int writes_lost;            /* a write could not be recorded: every copy is checked again */
    _Atomic int writes_pending; /* nwrites > 0 || writes_lost (read without writes_mu) */
};

/* The MPI endpoint behind ep, or NULL. */
mpi_ep *st_mpi_ep_of(st_endpoint *ep);

/* Where tensor i of task t (in slot `slot`) on ep comes from (t->place[i]),
 * asking a holder for a SEND_TO when another child has a valid copy
 * (*asked: that holder; the request in t->sendto_req[i]). MPI_SUCCESS, or the MPI error of that
 * send (mpi_copies.c; progress thread, st_mpi_lock held). */
int st_mpi_place_tensor(mpi_ep *ep, mpi_task *t, int slot, uint32_t i, mpi_ep **asked);

/* The dispatch observer of the L4 (core/endpoint.h): a task for any
 * endpoint but this session's has its written host tensors recorded. */
void st_mpi_observe_dispatch(void *ctx, st_endpoint *ep, const st_dispatch *d);

/* The recorded writes applied to the directory: the copies they overlap are
 * dropped (progress thread, st_mpi_lock held; before placing a task). */
void st_mpi_apply_local_writes(mpi_session *s);

/* After task t's frame and data went out: the copies placed for checking
 * (t->verify) are checked against the host bytes, the directory updated, the
 * VERDICT sent, and a stale copy's bytes sent again from here (mpi_copies.c;
 * progress thread, st_mpi_lock held). MPI_SUCCESS or the MPI error. */
int st_mpi_verify_copies(mpi_ep *ep, mpi_task *t, int slot);

/* After task t on ep ended (ok: it succeeded and its OUT bytes are in the
 * host's buffer): copies its writes made stale go, its own kept copies are
 * valid (or, when it failed, those it only read), except the ones the
 * child says it does not keep (t->dropped), which are forgotten. Entries of its views that
 * no child holds any more go (mpi_copies.c). */
void st_mpi_settle_copies(mpi_ep *ep, mpi_task *t, int ok);

/* ep was declared dead: the copies the directory records on it are gone
 * with it, and the entries no other child holds and no task in flight
 * places go too (mpi_copies.c; progress thread, st_mpi_lock held, after
 * ep's tasks were finished). */
void st_mpi_forget_holder(mpi_ep *ep);

/* The heartbeat bound of a rank with no child of s (a bystander): the
 * longest of the children's heartbeat_timeout_ns, so both sides agree on it
 * from the same program's configs; and the start-up bound it allows rank 0
 * before the first ping (the longest startup_timeout_ns). */
uint64_t st_mpi_bystander_heartbeat_ns(const mpi_session *s);
uint64_t st_mpi_bystander_startup_ns(const mpi_session *s);

/* A non-root rank: serve as the child whose config has this rank (or as no
 * child), then exit. Never returns. */
_Noreturn void st_mpi_serve(mpi_session *s);

/* Send a frame (blocking-free: Isend, then a backed-off test loop) to rank
 * `to`; st_mpi_lock must not be held (it is taken per test). STRATA_OK or
 * STRATA_EENDPOINT with a message. */
int st_mpi_send_frame(int to, const uint8_t *frame, size_t len, const char *who);

/* Wait (backed off, bounded by deadline) for a frame from rank `from` into
 * buf (cap bytes); *len its size. STRATA_OK, STRATA_ETIMEDOUT, STRATA_EENDPOINT. */
int st_mpi_recv_frame(int from, uint8_t *buf, size_t cap, size_t *len, uint64_t deadline,
                      const char *who);

#endif
