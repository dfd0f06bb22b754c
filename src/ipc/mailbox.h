/* ipc/mailbox.h - the shared-memory mailbox between a parent and one child
 * process (DESIGN §6): its fixed layout, the state words and who moves them,
 * the trailer identity both sides check, and the doorbells.
 *
 * Owns: the wire contract of a mailbox region (frame layout, state values,
 * protocol version, preparation dispositions, sticky words), the publication
 * discipline (payload first, then a release store of the state; the reader
 * acquires the state, then reads the payload) and the doorbell waits.
 * Must never: know what a task or a callable means (the exec layer does),
 * hold a lock, or trust a frame it reads: every value read from a frame is
 * checked before it is used (the peer may be broken or dead mid-write).
 *
 * A region is ST_MBOX_FRAMES frames of ST_MBOX_FRAME_BYTES each: frame 0 is
 * the control frame (startup handshake, control calls, shutdown, doorbells),
 * frames 1 and 2 are task frames 0 and 1. A child of capacity 1 uses task
 * frame 0 only; a chip child of capacity 2 uses both (the frame index never
 * orders execution: the dispatch id and activation do).
 *
 * Task frame states (P = parent, C = child):
 *   IDLE --P--> TASK_READY (its run is the head) | PREPARE_READY (staged)
 *   PREPARE_READY --C--> FRAME_STAGED          (validated; disposition written first)
 *   PREPARE_READY --P(CAS)--> TASK_READY       (activated before the child staged it)
 *   FRAME_STAGED --P(CAS)--> ACTIVATE          (its run became the head)
 *   TASK_LAUNCHED: reserved (its number kept), never written: a launch is
 *     told by the sticky `accepted` word; the state stays TASK_READY |
 *     ACTIVATE until TASK_DONE | TASK_FAILED
 *   any live state --C--> TASK_DONE | TASK_FAILED
 *   TASK_DONE | TASK_FAILED --P--> IDLE        (after the parent read the result)
 * Control frame states:
 *   IDLE --C--> INIT_READY | INIT_FAILED --P--> IDLE      (startup)
 *   IDLE --P--> CONTROL_REQUEST --C--> CONTROL_DONE --P--> IDLE
 *   any --P--> SHUTDOWN (always after the sticky shutdown word was set)
 */
#ifndef STRATA_IPC_MAILBOX_H
#define STRATA_IPC_MAILBOX_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "strata/types.h"
#include "util/futex.h"
#include "util/lease.h"

#define ST_MBOX_PROTOCOL 3u        /* task protocol version, in every frame */
#define ST_MBOX_FRAME_BYTES 65536u /* one frame */
#define ST_MBOX_FRAMES 3u          /* control + two task frames */
#define ST_MBOX_TASK_FRAMES 2u
#define ST_MBOX_REGION_BYTES (ST_MBOX_FRAME_BYTES * ST_MBOX_FRAMES)
#define ST_MBOX_DIGEST_BYTES 16u /* ST_DIGEST_BYTES (util/digest.h) */
#define ST_MBOX_ERR_BYTES 512u   /* error text, NUL included (STRATA_ERRMSG_MAX) */

/* State values: the numbering is part of the wire contract. */
typedef enum st_mbox_state {
    ST_MBOX_IDLE = 0,
    ST_MBOX_TASK_READY = 1,
    ST_MBOX_TASK_DONE = 2,
    ST_MBOX_SHUTDOWN = 3,
    ST_MBOX_CONTROL_REQUEST = 4,
    ST_MBOX_CONTROL_DONE = 5,
    ST_MBOX_INIT_READY = 6,
    ST_MBOX_INIT_FAILED = 7,
    ST_MBOX_FRAME_STAGED = 8,
    ST_MBOX_TASK_LAUNCHED = 9, /* reserved: never written (see above) */
    ST_MBOX_TASK_FAILED = 10,
    ST_MBOX_ACTIVATE = 11,
    ST_MBOX_PREPARE_READY = 12,
    ST_MBOX_STATE_COUNT
} st_mbox_state;

/* Preparation disposition of a staged task, in its own word (never mixed
 * with the phase): written by the child before FRAME_STAGED. */
typedef enum st_mbox_disposition {
    ST_MBOX_DISP_NONE = 0,
    ST_MBOX_DISP_VALIDATED_ONLY = 1,
    ST_MBOX_DISP_NATIVE_PREPARED = 2
} st_mbox_disposition;

/* Control commands (control frame `command`). */
typedef enum st_mbox_command {
    ST_MBOX_CMD_NONE = 0,
    ST_MBOX_CMD_MALLOC = 1,     /* arg0 bytes -> result device address */
    ST_MBOX_CMD_FREE = 2,       /* arg0 device address */
    ST_MBOX_CMD_COPY_TO = 3,    /* arg0 device dst, arg1 bytes; payload: the bytes */
    ST_MBOX_CMD_COPY_FROM = 4,  /* arg0 device src, arg1 bytes -> payload: the bytes */
    ST_MBOX_CMD_REGISTER = 5,   /* payload: an encoded callable description */
    ST_MBOX_CMD_UNREGISTER = 6, /* digest */
    ST_MBOX_CMD_PING = 7,       /* nothing: answers CONTROL_DONE (tests, benchmarks) */
    ST_MBOX_CMD_COUNT
} st_mbox_command;

/* The identity both sides check: the parent writes it with the task, the
 * child checks it before staging and again at activation, the parent checks
 * it at every event it reads back. */
typedef struct st_mbox_trailer {
    uint64_t protocol; /* ST_MBOX_PROTOCOL */
    uint64_t run_id;   /* != 0 */
    uint64_t lease_slot;
    uint64_t generation;  /* lease generation, != 0 */
    uint64_t dispatch_id; /* per endpoint, from 1 */
} st_mbox_trailer;

/* Bytes of a frame before the argument area. */
#define ST_MBOX_HEAD_BYTES 128u
/* Bytes of a frame after it: error text, the control-only words, the
 * sticky shutdown word. */
#define ST_MBOX_TAIL_BYTES (ST_MBOX_ERR_BYTES + 64u)
/* Bytes of encoded arguments (or control payload) one frame carries. */
#define ST_MBOX_ARGS_CAP (ST_MBOX_FRAME_BYTES - ST_MBOX_HEAD_BYTES - ST_MBOX_TAIL_BYTES)

/* The layout puts what one task publication writes and the child reads in
 * the head's two cache lines, right before the argument bytes: line 0 holds
 * the state, what the child writes back (status) and the identity both sides
 * check (protocol, trailer); line 1 the rest of the task (lease, config,
 * disposition and launch words, digest) and, in the control frame, the
 * doorbells. What only control calls or failures use (command, arguments,
 * result, error text) and the sticky shutdown word sit in the tail, which a
 * task round trip never touches. */
typedef struct st_mbox_frame {
    /* ---- head line 0 (bytes 0..63) ---- */
    _Atomic uint32_t state;  /* st_mbox_state: release store after the payload */
    int32_t status;          /* STRATA_OK or the failure's status (task or control) */
    uint32_t payload_bytes;  /* used bytes of payload[] */
    uint32_t member;         /* task: group member index */
    uint64_t protocol;       /* ST_MBOX_PROTOCOL, written with every publication */
    st_mbox_trailer trailer; /* 40 bytes: the identity both sides check */
    /* ---- head line 1 (bytes 64..127) ---- */
    st_lease lease;                       /* task: its run's pipeline lease (16 bytes) */
    strata_call_config cfg;               /* task: its call config (8 bytes) */
    _Atomic uint32_t disposition;         /* st_mbox_disposition (task frames) */
    _Atomic uint32_t accepted;            /* sticky: 1 once the task crossed its launch fence */
    uint8_t digest[ST_MBOX_DIGEST_BYTES]; /* task / register / unregister: the callable */
    /* control frame only: the doorbells (st_event: value + sleepers, futex words). */
    st_event child_bell;  /* the parent rings it after publishing for the child */
    st_event parent_bell; /* the child rings it after publishing for the parent */
    /* ---- payload ---- */
    uint8_t payload[ST_MBOX_ARGS_CAP]; /* encoded arguments (ipc/wire_args.h) or control bytes */
    /* ---- tail (ST_MBOX_TAIL_BYTES) ---- */
    char error[ST_MBOX_ERR_BYTES]; /* NUL-terminated failure text */
    uint64_t command;              /* control frame: st_mbox_command; task frames: 0 */
    uint64_t arg0, arg1;           /* control arguments */
    uint64_t result;               /* control result */
    _Atomic uint32_t shutdown;     /* sticky (control frame): 1 once the parent stops */
    _Atomic uint32_t taken;        /* task frames: the dispatch id (low 32 bits) of the task the
                                      child last took (its checks began); the parent reads it
                                      only when the child died, to tell a task that never started.
                                      In the tail: written by the child alone, never on a line
                                      the parent reads per task */
    uint64_t t_start, t_end;       /* task frames, timed children only (process_endpoint.h): the
                                      child's clock around the body; the parent reads and clears
                                      them with the result */
    uint8_t tail_pad2_[64 - 56];
} st_mbox_frame;

/* A mapped region: the three frames. */
typedef struct st_mbox {
    st_mbox_frame frames[ST_MBOX_FRAMES];
} st_mbox;

static inline st_mbox_frame *st_mbox_control(st_mbox *m) {
    return &m->frames[0];
}
static inline st_mbox_frame *st_mbox_task(st_mbox *m, uint32_t i) {
    return &m->frames[1 + i];
}

/* Reset a freshly mapped region before any child exists: every frame IDLE,
 * protocol written, sticky words 0. */
void st_mbox_init(st_mbox *m);

/* ---- Publication (the writer: payload first, then the state) ---- */

/* Release-store `state` into f (after every payload byte was written). */
static inline void st_mbox_publish(st_mbox_frame *f, st_mbox_state state) {
    atomic_store_explicit(&f->state, (uint32_t)state, memory_order_release);
}
/* Acquire-load the state (then the payload may be read). */
static inline uint32_t st_mbox_state_of(st_mbox_frame *f) {
    return atomic_load_explicit(&f->state, memory_order_acquire);
}
/* Ask at once for the lines a task's reader goes on to read (head line 1 and
 * the payload's used lines), after it acquired the state: the checks and the
 * decoder read them in order, and the payload's counts say where its later
 * fields lie, so each miss would wait for the one before (measured:
 * bench_mailbox's round trip 0.21 -> 0.19 us). Only a hint: it reads
 * nothing, and stays inside the frame whatever payload_bytes says. */
static inline void st_mbox_prefetch_task(const st_mbox_frame *f) {
    uint32_t n = ((const volatile st_mbox_frame *)f)->payload_bytes;
    if (n > ST_MBOX_ARGS_CAP)
        n = ST_MBOX_ARGS_CAP;
    __builtin_prefetch(&f->lease);
    for (uint32_t off = 0; off < n; off += 64)
        __builtin_prefetch(f->payload + off);
}

/* Compare-and-swap from -> to (acq_rel); 1 if it moved. */
int st_mbox_cas(st_mbox_frame *f, st_mbox_state from, st_mbox_state to);

/* Write a failure (status + text, truncated with "..." as st_msg_format) into f;
 * the caller publishes the state afterwards. */
void st_mbox_set_error(st_mbox_frame *f, int status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Copy f's error text into out (always NUL-terminated, even if the peer
 * left none). */
void st_mbox_get_error(const st_mbox_frame *f, char *out, size_t cap);

/* Fill a task frame's identity and config for dispatch `t` before the state
 * is published: clears status, accepted and disposition. The error text is
 * left alone: a reader reads it only after a failure (TASK_FAILED or a status
 * other than STRATA_OK), and whoever fails writes it first. */
void st_mbox_task_prepare(st_mbox_frame *f, const st_mbox_trailer *t, const st_lease *lease,
                          const strata_call_config *cfg, uint32_t member,
                          const uint8_t digest[ST_MBOX_DIGEST_BYTES]);

/* Check the frame's protocol and trailer against `expect` (the child checks
 * the frame against itself: protocol, non-zero ids, lease == trailer; the
 * parent against its private record). STRATA_OK; STRATA_EENDPOINT for a
 * wrong protocol version or a malformed trailer, STRATA_ESTALE for an
 * identity that is not the expected one; the message (st_fail) starts with
 * `who` and names the field and both values. */
int st_mbox_check_frame(const st_mbox_frame *f, const char *who);
int st_mbox_check_identity(const st_mbox_frame *f, const st_mbox_trailer *expect, const char *who);

/* ---- Doorbells: spin briefly, then park on the futex in the region ---- */

/* Ring: bump the bell and wake a parked peer (no syscall if none parked). */
void st_mbox_ring(st_event *bell);
/* Wait until bell's value differs from `seen` (spin spin_ns, then park),
 * or deadline_ns passes (-1). Returns 0 when rung. */
int st_mbox_wait_bell(st_event *bell, uint32_t seen, uint32_t spin_ns, uint64_t deadline_ns);

#endif
