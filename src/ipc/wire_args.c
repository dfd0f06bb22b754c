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

#define WIRE_HEADER 8u /* u32 ntensors, u32 nscalars */

static size_t tags_bytes(uint32_t ntensors) {
    return ((size_t)ntensors + 7u) & ~(size_t)7u;
}

/* Bytes of an encoding with these counts (counts already within the limits). */
static size_t encoded_bytes(uint32_t ntensors, uint32_t nscalars) {
    return WIRE_HEADER + tags_bytes(ntensors) + (size_t)ntensors * sizeof(strata_tensor) +
           (size_t)nscalars * sizeof(uint64_t);
}

size_t st_wire_args_size(const strata_task_args *a) {
    if (!a || a->invalid || a->ntensors > STRATA_MAX_TENSORS || a->nscalars > STRATA_MAX_SCALARS)
        return 0;
    return encoded_bytes(a->ntensors, a->nscalars);
}

int st_wire_args_encode(const strata_task_args *a, uint8_t *buf, size_t cap, size_t *used) {
    if (!a)
        return st_fail(STRATA_EINVAL, "task arguments: NULL");
    if (a->invalid)
        return st_fail(STRATA_EINVAL, "task arguments: marked invalid (an add failed)");
    if (a->ntensors > STRATA_MAX_TENSORS || a->nscalars > STRATA_MAX_SCALARS)
        return st_fail(STRATA_EINVAL,
                       "task arguments: %u tensors and %u scalars, the limits are %d and %d",
                       a->ntensors, a->nscalars, STRATA_MAX_TENSORS, STRATA_MAX_SCALARS);
    size_t need = encoded_bytes(a->ntensors, a->nscalars);
    if (!buf || need > cap)
        return st_fail(STRATA_ECAPACITY,
                       "task arguments: %zu bytes encoded do not fit the %zu bytes of a frame",
                       need, buf ? cap : (size_t)0);
    uint8_t *p = buf;
    memcpy(p, &a->ntensors, 4);
    memcpy(p + 4, &a->nscalars, 4);
    p += WIRE_HEADER;
    size_t tb = tags_bytes(a->ntensors);
    memset(p, 0, tb);
    memcpy(p, a->tags, a->ntensors);
    p += tb;
    memcpy(p, a->tensors, (size_t)a->ntensors * sizeof(strata_tensor));
    p += (size_t)a->ntensors * sizeof(strata_tensor);
    memcpy(p, a->scalars, (size_t)a->nscalars * sizeof(uint64_t));
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
    uint32_t nt, ns;
    memcpy(&nt, buf, 4);
    memcpy(&ns, buf + 4, 4);
    if (nt > STRATA_MAX_TENSORS || ns > STRATA_MAX_SCALARS)
        return st_fail(STRATA_EINVAL,
                       "%s: bad arguments: %u tensors and %u scalars, the limits are %d and %d", w,
                       nt, ns, STRATA_MAX_TENSORS, STRATA_MAX_SCALARS);
    size_t need = encoded_bytes(nt, ns);
    if (len < need)
        return st_fail(STRATA_EINVAL,
                       "%s: truncated arguments: %zu bytes, %u tensors and %u scalars need %zu", w,
                       len, nt, ns, need);
    if (len > need)
        return st_fail(STRATA_EINVAL,
                       "%s: oversized arguments: %zu bytes, %u tensors and %u scalars need %zu", w,
                       len, nt, ns, need);
    const uint8_t *tags = buf + WIRE_HEADER;
    for (uint32_t i = 0; i < nt; i++)
        if (tags[i] > STRATA_NO_DEP)
            return st_fail(STRATA_EINVAL, "%s: bad arguments: tensor %u has tag %u", w, i,
                           (unsigned)tags[i]);
    const uint8_t *tp = tags + tags_bytes(nt);
    out->ntensors = nt;
    out->nscalars = ns;
    out->invalid = 0;
    out->pad_ = 0;
    memcpy(out->tags, tags, nt);
    memcpy(out->tensors, tp, (size_t)nt * sizeof(strata_tensor));
    for (uint32_t i = 0; i < nt; i++) {
        int rc = check_tensor(&out->tensors[i], i, w);
        if (rc != STRATA_OK)
            return rc;
    }
    memcpy(out->scalars, tp + (size_t)nt * sizeof(strata_tensor), (size_t)ns * sizeof(uint64_t));
    return STRATA_OK;
}
