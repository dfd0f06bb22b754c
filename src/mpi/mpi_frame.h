/* mpi/mpi_frame.h - the frames rank 0 and a child's rank exchange.
 *
 * Owns: the message tags of the library's communicator, the fixed frame
 * header (ST_MPI_HDR_BYTES, explicit little-endian field encoding, static
 * asserts on the layout), the frame types, what each one's body and fields
 * mean, and the bounds-checked decode of a header.
 * Every frame is one MPI message on ST_MPI_TAG_FRAME: header, then body.
 *   HELLO    child -> 0   status: its bring-up; body: the error text if it failed
 *   TASK     0 -> child   seq: dispatch id, slot: task slot; body: the task body
 *                         below; then one data message per tensor placed ROOT
 *                         (mpi_xfer.h), and one from the holder rank per tensor
 *                         placed PEER (that rank got a SEND_TO first)
 *   DONE     child -> 0   seq, slot: the task's; status; body: the error text;
 *                         then one data message per OUT host tensor; arg0:
 *                         the tensors (bit i: tensor i) whose copy the child
 *                         does not keep (it could not make it, or the one
 *                         named was unusable; for a failed task also those
 *                         it wrote and those whose bytes never all came)
 *   CTRL     0 -> child   seq: control id, slot: ST_MPI_CTRL_*, arg0/arg1 below
 *   REPLY    child -> 0   seq: the control's id; status; arg0: result; body: error text
 *   PING / PONG           seq echoed (the heartbeat)
 *   SEND_TO  0 -> holder  arg0: cache id, arg1: bytes, slot: the destination rank,
 *                         seq: the tag: send that copy there (0 bytes if it is
 *                         missing: the receiver fails its task, naming it)
 *   VERDICT, PEER_GONE    0 -> a reader (below)
 *   DECLARED_DEAD 0 -> child  rank 0 gave up on it (below)
 *   SHUTDOWN 0 -> child   close: the child tears down, answers BYE, exits
 *   BYE      child -> 0
 * The TASK body: st_digest callable (16 bytes), u32 args_bytes, u32 ndrop,
 * the arguments (args_bytes, ipc/wire_args.h), one st_mpi_place per tensor
 * (16 bytes each: where its bytes come from and the cache id they are kept
 * under), u64 drop[ndrop] (cache ids the rank is to drop first).
 * Must never: trust a received length, type or version (st_mpi_hdr_get
 * checks each), or change a field's offset without bumping ST_MPI_VERSION.
 */
#ifndef STRATA_MPI_MPI_FRAME_H
#define STRATA_MPI_MPI_FRAME_H

#include <stddef.h>
#include <stdint.h>

#define ST_MPI_MAGIC 0x504d5453u /* "STMP" */
#define ST_MPI_VERSION 1u
#define ST_MPI_HDR_BYTES 48u
#define ST_MPI_CTRL_BODY_MAX 768u /* a REGISTER control's body, the largest */
/* Cache ids dropped per TASK frame; the rest wait for a later frame, and
 * rank 0 takes a waiting drop back when the id is kept there again. */
#define ST_MPI_DROPS_MAX 128u
#define ST_MPI_BODY_MAX (16u + 8u + 16384u + 64u * 16u + ST_MPI_DROPS_MAX * 8u)

/* Tags of the library's communicator. */
enum {
    ST_MPI_TAG_FRAME = 1,     /* frames */
    ST_MPI_TAG_CTRL_DATA = 2, /* the bytes of a COPY_TO / COPY_FROM control */
    ST_MPI_TAG_DATA0 = 16     /* task data: ST_MPI_TAG_DATA0 + slot * 64 + tensor index */
};

typedef enum st_mpi_type {
    ST_MPI_HELLO = 1,
    ST_MPI_TASK,
    ST_MPI_DONE,
    ST_MPI_CTRL,
    ST_MPI_REPLY,
    ST_MPI_PING,
    ST_MPI_PONG,
    ST_MPI_SHUTDOWN, /* rank 0 -> every rank at close: arg0 the bound on its MPI_Finalize
                             (ns) if a rank of the job was declared dead, else 0 */
    ST_MPI_BYE,
    ST_MPI_SEND_TO,
    ST_MPI_VERDICT,       /* rank 0 -> a reader: slot, seq (dispatch id), arg0: the tensors placed
                             ST_PLACE_VERIFY, arg1: those of them stale (rank 0's bytes follow) */
    ST_MPI_PEER_GONE,     /* rank 0 -> a reader: slot, seq (dispatch id), arg0: the tensors placed
                             PEER whose holder rank 0 declared dead, arg1: that rank; the reader
                             stops waiting for those bytes and fails the task */
    ST_MPI_DECLARED_DEAD, /* rank 0 -> a child it declared dead; body: why. The child leaves
                             (status 0): rank 0 has failed its tasks and sends it nothing more */
    ST_MPI_TYPE_END
} st_mpi_type;

/* CTRL operations (the header's slot). */
typedef enum st_mpi_ctrl {
    ST_MPI_CTRL_MALLOC = 1, /* arg1: bytes; reply arg0: the address on the child */
    ST_MPI_CTRL_FREE,       /* arg0: the address */
    ST_MPI_CTRL_COPY_TO,    /* arg0: destination address, arg1: bytes (a data message follows) */
    ST_MPI_CTRL_COPY_FROM,  /* arg0: source address, arg1: bytes (data follows the reply) */
    ST_MPI_CTRL_TRAFFIC,    /* reply body: st_mpi_traffic as 7 u64 (the child's own counts) */
    ST_MPI_CTRL_REGISTER,   /* body: an orchestration callable registered after init: u64
                               offset, u64 user, u16 object, symbol and name lengths, u16 0,
                               then the three strings (mpi/mpi_symbol.h) */
    ST_MPI_CTRL_END
} st_mpi_ctrl;

typedef struct st_mpi_hdr {
    uint32_t magic;
    uint16_t version;
    uint16_t type;
    int32_t worker_id; /* the child the frame is about */
    int32_t status;
    uint64_t seq;
    uint32_t slot;
    uint32_t body_bytes;
    uint64_t arg0, arg1;
} st_mpi_hdr;

/* Where a task's tensor comes from on the child (TASK body). */
typedef enum st_mpi_place_kind {
    ST_PLACE_NONE = 0, /* device memory (remote memory of the child), or OUT only */
    ST_PLACE_ROOT,     /* its bytes come from rank 0 */
    ST_PLACE_PEER,     /* its bytes come from rank src (a holder of a valid copy) */
    ST_PLACE_CACHED    /* the child's own copy `id` is valid: nothing travels */
} st_mpi_place_kind;
#define ST_PLACE_KEEP 0x10u /* keep the task's copy under `id` after the task */
/* With PEER: rank 0 checks the holder's copy against the host bytes while it
 * moves (its first use in a run); the task waits for the VERDICT, and a stale
 * copy's bytes are then received again from rank 0 into the same buffer. */
#define ST_PLACE_VERIFY 0x20u

typedef struct st_mpi_place {
    uint8_t kind; /* st_mpi_place_kind | ST_PLACE_KEEP | ST_PLACE_VERIFY */
    uint8_t pad[3];
    int32_t src;
    uint64_t id;
} st_mpi_place;
_Static_assert(sizeof(st_mpi_place) == 16, "a placement is 16 bytes on the wire");

/* Explicit little-endian fields of frame bodies. */
void st_mpi_put32(uint8_t *p, uint32_t v);
void st_mpi_put64(uint8_t *p, uint64_t v);
uint32_t st_mpi_get32(const uint8_t *p);
uint64_t st_mpi_get64(const uint8_t *p);
void st_mpi_place_put(uint8_t *out, const st_mpi_place *pl);
void st_mpi_place_get(const uint8_t *in, st_mpi_place *pl);

/* Fill h's fixed fields for a frame of `type`. */
void st_mpi_hdr_init(st_mpi_hdr *h, st_mpi_type type, int worker_id);

/* Write h into out[ST_MPI_HDR_BYTES] field by field. */
void st_mpi_hdr_put(uint8_t *out, const st_mpi_hdr *h);

/* Read a header from a received message of len bytes: STRATA_OK, or
 * STRATA_EINVAL with why (cap bytes) saying what was wrong (short, magic,
 * version, type, body length not matching the message). */
int st_mpi_hdr_get(const uint8_t *msg, size_t len, st_mpi_hdr *h, char *why, size_t cap);

#endif
