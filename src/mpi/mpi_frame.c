/* mpi/mpi_frame.c - frame headers: explicit encoding and the checked decode
 * (mpi/mpi_frame.h has the layout and the frame types).
 *
 * Owns: the byte offset of every header field.
 * Must never: read past the message it is handed.
 */
#include <string.h>

#include "mpi/mpi_frame.h"
#include "strata/status.h"
#include "util/message.h"

/* Field offsets: a change is a new protocol version. */
enum {
    OFF_MAGIC = 0,
    OFF_VERSION = 4,
    OFF_TYPE = 6,
    OFF_WORKER = 8,
    OFF_STATUS = 12,
    OFF_SEQ = 16,
    OFF_SLOT = 24,
    OFF_BODY = 28,
    OFF_ARG0 = 32,
    OFF_ARG1 = 40,
    OFF_END = 48
};
_Static_assert(OFF_END == ST_MPI_HDR_BYTES, "the header is ST_MPI_HDR_BYTES long");
_Static_assert(sizeof(st_mpi_hdr) == ST_MPI_HDR_BYTES, "the struct has no padding");

static void put(uint8_t *p, uint64_t v, int n) {
    for (int i = 0; i < n; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static uint64_t get(const uint8_t *p, int n) {
    uint64_t v = 0;
    for (int i = 0; i < n; i++)
        v |= (uint64_t)p[i] << (8 * i);
    return v;
}

void st_mpi_put32(uint8_t *p, uint32_t v) {
    put(p, v, 4);
}
void st_mpi_put64(uint8_t *p, uint64_t v) {
    put(p, v, 8);
}
uint32_t st_mpi_get32(const uint8_t *p) {
    return (uint32_t)get(p, 4);
}
uint64_t st_mpi_get64(const uint8_t *p) {
    return get(p, 8);
}

void st_mpi_place_put(uint8_t *out, const st_mpi_place *pl) {
    out[0] = pl->kind;
    out[1] = out[2] = out[3] = 0;
    put(out + 4, (uint32_t)pl->src, 4);
    put(out + 8, pl->id, 8);
}

void st_mpi_place_get(const uint8_t *in, st_mpi_place *pl) {
    memset(pl, 0, sizeof *pl);
    pl->kind = in[0];
    pl->src = (int32_t)(uint32_t)get(in + 4, 4);
    pl->id = get(in + 8, 8);
}

void st_mpi_hdr_init(st_mpi_hdr *h, st_mpi_type type, int worker_id) {
    memset(h, 0, sizeof *h);
    h->magic = ST_MPI_MAGIC;
    h->version = ST_MPI_VERSION;
    h->type = (uint16_t)type;
    h->worker_id = worker_id;
}

void st_mpi_hdr_put(uint8_t *out, const st_mpi_hdr *h) {
    put(out + OFF_MAGIC, h->magic, 4);
    put(out + OFF_VERSION, h->version, 2);
    put(out + OFF_TYPE, h->type, 2);
    put(out + OFF_WORKER, (uint32_t)h->worker_id, 4);
    put(out + OFF_STATUS, (uint32_t)h->status, 4);
    put(out + OFF_SEQ, h->seq, 8);
    put(out + OFF_SLOT, h->slot, 4);
    put(out + OFF_BODY, h->body_bytes, 4);
    put(out + OFF_ARG0, h->arg0, 8);
    put(out + OFF_ARG1, h->arg1, 8);
}

int st_mpi_hdr_get(const uint8_t *msg, size_t len, st_mpi_hdr *h, char *why, size_t cap) {
    if (len < ST_MPI_HDR_BYTES) {
        st_msg_format(why, cap, "a frame of %zu bytes is shorter than its %u-byte header", len,
                      ST_MPI_HDR_BYTES);
        return STRATA_EINVAL;
    }
    h->magic = (uint32_t)get(msg + OFF_MAGIC, 4);
    h->version = (uint16_t)get(msg + OFF_VERSION, 2);
    h->type = (uint16_t)get(msg + OFF_TYPE, 2);
    h->worker_id = (int32_t)(uint32_t)get(msg + OFF_WORKER, 4);
    h->status = (int32_t)(uint32_t)get(msg + OFF_STATUS, 4);
    h->seq = get(msg + OFF_SEQ, 8);
    h->slot = (uint32_t)get(msg + OFF_SLOT, 4);
    h->body_bytes = (uint32_t)get(msg + OFF_BODY, 4);
    h->arg0 = get(msg + OFF_ARG0, 8);
    h->arg1 = get(msg + OFF_ARG1, 8);
    if (h->magic != ST_MPI_MAGIC) {
        st_msg_format(why, cap, "bad frame magic 0x%08x", h->magic);
        return STRATA_EINVAL;
    }
    if (h->version != ST_MPI_VERSION) {
        st_msg_format(why, cap, "frame protocol version %u (this library speaks %u)", h->version,
                      ST_MPI_VERSION);
        return STRATA_EINVAL;
    }
    if (h->type == 0 || h->type >= ST_MPI_TYPE_END) {
        st_msg_format(why, cap, "unknown frame type %u", h->type);
        return STRATA_EINVAL;
    }
    if (h->body_bytes > ST_MPI_BODY_MAX || h->body_bytes != len - ST_MPI_HDR_BYTES) {
        st_msg_format(why, cap, "frame body of %u bytes in a %zu-byte message", h->body_bytes, len);
        return STRATA_EINVAL;
    }
    return STRATA_OK;
}
