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

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "util/error.h"

#define WIRE_HEADER 16u /* u32 ntensors, u32 nscalars, u32 payload bytes, u32 zero */

/* Tags and scalar types, one byte each, padded to 8. */
static size_t type_bytes(uint32_t ntensors, uint32_t nscalars) {
    return ((size_t)ntensors + nscalars + 7u) & ~(size_t)7u;
}

/* A tensor travels as the fields before its shape (base, buffer_bytes,
 * offset, ident, dtype, rank, mem, padding) and then only the `rank` entries
 * of shape and of strides it uses: a rank-1 view takes 64 bytes instead of
 * sizeof(strata_tensor), so a small task's arguments fill two cache lines of
 * a frame instead of three (each line is a transfer between the two cores). */
#define TENSOR_HEAD ((size_t)offsetof(strata_tensor, shape))
_Static_assert(offsetof(strata_tensor, shape) == 48 &&
                   offsetof(strata_tensor, strides) == 48 + 8 * STRATA_MAX_RANK,
               "a tensor's head is 48 bytes, then shape and strides");

static size_t tensor_bytes(uint32_t rank) {
    return TENSOR_HEAD + 2u * sizeof(int64_t) * rank;
}

/* Bytes of an encoding whose tensors take `tensor_total` bytes (counts
 * already within the limits). */
static size_t encoded_bytes(uint32_t ntensors, uint32_t nscalars, uint32_t payload,
                            size_t tensor_total) {
    return WIRE_HEADER + type_bytes(ntensors, nscalars) + tensor_total +
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

/* Bytes a's tensors take encoded, or 0 with the index of the first tensor
 * whose rank is not 1..STRATA_MAX_RANK in *bad (0 tensors take 0 bytes too:
 * *bad stays UINT32_MAX then). */
static size_t tensors_bytes(const strata_task_args *a, uint32_t *bad) {
    size_t total = 0;
    *bad = UINT32_MAX;
    for (uint32_t i = 0; i < a->ntensors; i++) {
        uint32_t r = a->tensors[i].rank;
        if (r < 1 || r > STRATA_MAX_RANK) {
            *bad = i;
            return 0;
        }
        total += tensor_bytes(r);
    }
    return total;
}

size_t st_wire_args_size(const strata_task_args *a) {
    if (!a || a->invalid || !counts_ok(a->ntensors, a->nscalars, a->payload_bytes))
        return 0;
    uint32_t bad;
    size_t tb = tensors_bytes(a, &bad);
    if (bad != UINT32_MAX)
        return 0;
    return encoded_bytes(a->ntensors, a->nscalars, a->payload_bytes, tb);
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
    uint32_t bad;
    size_t tensor_total = tensors_bytes(a, &bad);
    if (bad != UINT32_MAX)
        return st_fail(STRATA_EINVAL, "task arguments: tensor %u has rank %u, expected 1..%d", bad,
                       (unsigned)a->tensors[bad].rank, STRATA_MAX_RANK);
    size_t need = encoded_bytes(a->ntensors, a->nscalars, a->payload_bytes, tensor_total);
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
    for (uint32_t i = 0; i < a->ntensors; i++) {
        const strata_tensor *t = &a->tensors[i];
        size_t dims = sizeof(int64_t) * t->rank;
        memcpy(p, t, TENSOR_HEAD);
        memcpy(p + TENSOR_HEAD, t->shape, dims);
        memcpy(p + TENSOR_HEAD + dims, t->strides, dims);
        p += tensor_bytes(t->rank);
    }
    memcpy(p, a->scalars, (size_t)a->nscalars * sizeof(uint64_t));
    p += (size_t)a->nscalars * sizeof(uint64_t);
    if (a->payload_bytes) /* stored args without a payload may end before it */
        memcpy(p, a->payload, a->payload_bytes);
    if (used)
        *used = need;
    return STRATA_OK;
}

/* The length ends inside the tensors (what they need depends on ranks not
 * yet read, so the total is not known). */
static int truncated(const char *w, size_t len, uint32_t nt, uint32_t ns, uint32_t np) {
    return st_fail(STRATA_EINVAL,
                   "%s: truncated arguments: %zu bytes end inside %u tensors (with %u scalars "
                   "and %u payload bytes after them)",
                   w, len, nt, ns, np);
}

static int check_tensor(const strata_tensor *t, uint32_t i, const char *w) {
    if (t->dtype >= STRATA_DTYPE_COUNT)
        return st_fail(STRATA_EINVAL, "%s: bad arguments: tensor %u has dtype %u", w, i,
                       (unsigned)t->dtype);
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
    /* buf may be shared memory a writer still changes: every check below reads
     * the private copy in out (the counts are already the locals above, each
     * rank is read once into a local), so what was checked is what the task
     * gets. */
    if (len - WIRE_HEADER < type_bytes(nt, ns))
        return truncated(w, len, nt, ns, np);
    const uint8_t *end = buf + len;
    const uint8_t *tags = buf + WIRE_HEADER;
    const uint8_t *p = tags + type_bytes(nt, ns);
    for (uint32_t i = 0; i < nt; i++) {
        strata_tensor *t = &out->tensors[i];
        if ((size_t)(end - p) < TENSOR_HEAD)
            return truncated(w, len, nt, ns, np);
        memcpy(t, p, TENSOR_HEAD);
        uint32_t r = t->rank;
        if (r < 1 || r > STRATA_MAX_RANK)
            return st_fail(STRATA_EINVAL,
                           "%s: bad arguments: tensor %u has rank %u, expected 1..%d", w, i, r,
                           STRATA_MAX_RANK);
        if ((size_t)(end - p) < tensor_bytes(r))
            return truncated(w, len, nt, ns, np);
        size_t dims = sizeof(int64_t) * r;
        memcpy(t->shape, p + TENSOR_HEAD, dims);
        memcpy(t->strides, p + TENSOR_HEAD + dims, dims);
        for (uint32_t d = r; d < STRATA_MAX_RANK; d++)
            t->shape[d] = t->strides[d] = 0;
        p += tensor_bytes(r);
    }
    size_t rest = (size_t)ns * sizeof(uint64_t) + np;
    if ((size_t)(end - p) != rest)
        return st_fail(STRATA_EINVAL,
                       "%s: %s arguments: %zu bytes, %u tensors, %u scalars and %u payload bytes "
                       "need %zu",
                       w, (size_t)(end - p) < rest ? "truncated" : "oversized", len, nt, ns, np,
                       (size_t)(p - buf) + rest);
    out->ntensors = nt;
    out->nscalars = ns;
    out->invalid = 0;
    out->payload_bytes = np;
    memcpy(out->tags, tags, nt);
    memcpy(out->scalar_types, tags + nt, ns);
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
    memcpy(out->scalars, p, (size_t)ns * sizeof(uint64_t));
    memcpy(out->payload, p + (size_t)ns * sizeof(uint64_t), np);
    return STRATA_OK;
}
