/* ipc/wire_args.c - a task's arguments encoded into, and decoded from, a
 * mailbox frame's payload (the layout is in ipc/wire_args.h).
 *
 * Owns: the encoder (the parent's view of a strata_task_args, written as the
 * used part only) and the decoder (the child's bounds-checked reading).
 * Must never: read or write outside [buf, buf + len/cap), assume buf is
 * aligned (every access is a memcpy), trust a decoded count, tag, dtype,
 * rank, shape, stride or mem kind, or allocate.
 */
#include "ipc/wire_args.h"

#include <string.h>

#include "util/error.h"

#define WIRE_HEADER 16u /* u32 ntensors, u32 nscalars, u32 payload bytes, u32 zero */

/* Tags and scalar types, one byte each, padded to 8. */
static size_t type_bytes(uint32_t ntensors, uint32_t nscalars) {
    return ((size_t)ntensors + nscalars + 7u) & ~(size_t)7u;
}

/* Bytes of an encoding with these counts (counts already within the limits). */
static size_t encoded_bytes(uint32_t ntensors, uint32_t nscalars, uint32_t payload) {
    return WIRE_HEADER + type_bytes(ntensors, nscalars) + (size_t)ntensors * sizeof(strata_tensor) +
           (size_t)nscalars * sizeof(uint64_t) + payload;
}

/* The largest encoding fits a frame: a valid task never fails to encode. */
_Static_assert(WIRE_HEADER + STRATA_MAX_TENSORS + STRATA_MAX_SCALARS + 8 +
                       STRATA_MAX_TENSORS * sizeof(strata_tensor) +
                       STRATA_MAX_SCALARS * sizeof(uint64_t) + STRATA_MAX_PAYLOAD <=
                   ST_WIRE_ARGS_MAX,
               "the largest task arguments fit ST_WIRE_ARGS_MAX");

static int counts_ok(uint32_t nt, uint32_t ns, uint32_t np) {
    return nt <= STRATA_MAX_TENSORS && ns <= STRATA_MAX_SCALARS && np <= STRATA_MAX_PAYLOAD;
}

size_t st_wire_args_size(const strata_task_args *a) {
    if (!a || a->invalid || !counts_ok(a->ntensors, a->nscalars, a->payload_bytes))
        return 0;
    return encoded_bytes(a->ntensors, a->nscalars, a->payload_bytes);
}

int st_wire_args_encode(const strata_task_args *a, uint8_t *buf, size_t cap, size_t *used) {
    if (!a)
        return st_fail(STRATA_EINVAL, "task arguments: NULL");
    if (a->invalid)
        return st_fail(STRATA_EINVAL, "task arguments: marked invalid (an add failed)");
    if (!counts_ok(a->ntensors, a->nscalars, a->payload_bytes))
        return st_fail(STRATA_EINVAL,
                       "task arguments: %u tensors, %u scalars and %u payload bytes, the limits "
                       "are %d, %d and %d",
                       a->ntensors, a->nscalars, a->payload_bytes, STRATA_MAX_TENSORS,
                       STRATA_MAX_SCALARS, STRATA_MAX_PAYLOAD);
    size_t need = encoded_bytes(a->ntensors, a->nscalars, a->payload_bytes);
    if (!buf || need > cap)
        return st_fail(STRATA_ECAPACITY,
                       "task arguments: %zu bytes encoded do not fit the %zu bytes of a frame",
                       need, buf ? cap : (size_t)0);
    uint8_t *p = buf;
    uint32_t zero = 0;
    memcpy(p, &a->ntensors, 4);
    memcpy(p + 4, &a->nscalars, 4);
    memcpy(p + 8, &a->payload_bytes, 4);
    memcpy(p + 12, &zero, 4);
    p += WIRE_HEADER;
    size_t tb = type_bytes(a->ntensors, a->nscalars);
    memset(p, 0, tb);
    memcpy(p, a->tags, a->ntensors);
    memcpy(p + a->ntensors, a->scalar_types, a->nscalars);
    p += tb;
    memcpy(p, a->tensors, (size_t)a->ntensors * sizeof(strata_tensor));
    p += (size_t)a->ntensors * sizeof(strata_tensor);
    memcpy(p, a->scalars, (size_t)a->nscalars * sizeof(uint64_t));
    p += (size_t)a->nscalars * sizeof(uint64_t);
    if (a->payload_bytes) /* stored args without a payload may end before it */
        memcpy(p, a->payload, a->payload_bytes);
    if (used)
        *used = need;
    return STRATA_OK;
}

static int check_tensor(const strata_tensor *t, uint32_t i, const char *w) {
    if (t->dtype >= STRATA_DTYPE_COUNT)
        return st_fail(STRATA_EINVAL, "%s: bad arguments: tensor %u has dtype %u", w, i,
                       (unsigned)t->dtype);
    if (t->rank < 1 || t->rank > STRATA_MAX_RANK)
        return st_fail(STRATA_EINVAL, "%s: bad arguments: tensor %u has rank %u, expected 1..%d", w,
                       i, (unsigned)t->rank, STRATA_MAX_RANK);
    if (t->mem != STRATA_MEM_HOST && t->mem != STRATA_MEM_DEVICE)
        return st_fail(STRATA_EINVAL, "%s: bad arguments: tensor %u has mem kind %u", w, i,
                       (unsigned)t->mem);
    for (uint32_t d = 0; d < t->rank; d++) {
        if (t->shape[d] <= 0)
            return st_fail(STRATA_EINVAL, "%s: bad arguments: tensor %u has shape[%u] = %lld", w, i,
                           d, (long long)t->shape[d]);
        if (t->strides[d] <= 0)
            return st_fail(STRATA_EINVAL, "%s: bad arguments: tensor %u has strides[%u] = %lld", w,
                           i, d, (long long)t->strides[d]);
    }
    return STRATA_OK;
}

int st_wire_args_decode(const uint8_t *buf, size_t len, strata_task_args *out, const char *who) {
    const char *w = who ? who : "task arguments";
    if (!buf && len != 0)
        return st_fail(STRATA_EINVAL, "%s: no argument bytes", w);
    if (len < WIRE_HEADER)
        return st_fail(STRATA_EINVAL, "%s: truncated arguments: %zu bytes, the header alone is %u",
                       w, len, WIRE_HEADER);
    uint32_t nt, ns, np, zero;
    memcpy(&nt, buf, 4);
    memcpy(&ns, buf + 4, 4);
    memcpy(&np, buf + 8, 4);
    memcpy(&zero, buf + 12, 4);
    if (!counts_ok(nt, ns, np) || zero != 0)
        return st_fail(STRATA_EINVAL,
                       "%s: bad arguments: %u tensors, %u scalars and %u payload bytes (word %u), "
                       "the limits are %d, %d and %d",
                       w, nt, ns, np, zero, STRATA_MAX_TENSORS, STRATA_MAX_SCALARS,
                       STRATA_MAX_PAYLOAD);
    size_t need = encoded_bytes(nt, ns, np);
    if (len != need)
        return st_fail(STRATA_EINVAL,
                       "%s: %s arguments: %zu bytes, %u tensors, %u scalars and %u payload bytes "
                       "need %zu",
                       w, len < need ? "truncated" : "oversized", len, nt, ns, np, need);
    /* buf may be shared memory a writer still changes: every check below reads
     * the private copy in out (the counts are already the locals above), so
     * what was checked is what the task gets. */
    const uint8_t *tags = buf + WIRE_HEADER;
    const uint8_t *tp = tags + type_bytes(nt, ns);
    out->ntensors = nt;
    out->nscalars = ns;
    out->invalid = 0;
    out->payload_bytes = np;
    memcpy(out->tags, tags, nt);
    memcpy(out->scalar_types, tags + nt, ns);
    memcpy(out->tensors, tp, (size_t)nt * sizeof(strata_tensor));
    for (uint32_t i = 0; i < nt; i++)
        if (out->tags[i] > STRATA_NO_DEP)
            return st_fail(STRATA_EINVAL, "%s: bad arguments: tensor %u has tag %u", w, i,
                           (unsigned)out->tags[i]);
    for (uint32_t i = 0; i < ns; i++)
        if (out->scalar_types[i] >= STRATA_SCALAR_TYPE_COUNT)
            return st_fail(STRATA_EINVAL, "%s: bad arguments: scalar %u has type %u", w, i,
                           (unsigned)out->scalar_types[i]);
    for (uint32_t i = 0; i < nt; i++) {
        int rc = check_tensor(&out->tensors[i], i, w);
        if (rc != STRATA_OK)
            return rc;
    }
    const uint8_t *sp = tp + (size_t)nt * sizeof(strata_tensor);
    memcpy(out->scalars, sp, (size_t)ns * sizeof(uint64_t));
    memcpy(out->payload, sp + (size_t)ns * sizeof(uint64_t), np);
    return STRATA_OK;
}
