/* core/task_args.c - building a task's arguments (strata_task_args, the
 * argument-list form of include/strata/tensor.h).
 *
 * Owns: the builder calls (init, copy, add a tensor / typed scalar, set the
 * payload) and the rule that a failed add marks the args invalid.
 * Must never: touch more of a builder than its header and the entries it
 * adds (a builder is 8.5 KiB; a small task uses a few hundred bytes of it),
 * or know about runs and slots.
 */
#include <stddef.h>
#include <string.h>

#include "strata/tensor.h"
#include "util/error.h"

void strata_args_init(strata_task_args *a) {
    if (!a)
        return;
    a->ntensors = 0;
    a->nscalars = 0;
    a->invalid = 0;
    a->payload_bytes = 0;
}

void strata_args_copy(strata_task_args *dst, const strata_task_args *src) {
    if (!dst || !src)
        return;
    uint32_t nt = src->ntensors <= STRATA_MAX_TENSORS ? src->ntensors : STRATA_MAX_TENSORS;
    uint32_t ns = src->nscalars <= STRATA_MAX_SCALARS ? src->nscalars : STRATA_MAX_SCALARS;
    uint32_t np =
        src->payload_bytes <= STRATA_MAX_PAYLOAD ? src->payload_bytes : STRATA_MAX_PAYLOAD;
    /* Header, tags and scalar types in one fixed-size copy (96 bytes, inlined:
     * two variable ones cost a submit two calls); every stored form of args
     * holds them whole, the inline slot included. */
    memcpy(dst, src, offsetof(strata_task_args, scalars));
    dst->ntensors = nt;
    dst->nscalars = ns;
    dst->payload_bytes = np;
    memcpy(dst->scalars, src->scalars, sizeof dst->scalars[0] * ns);
    memcpy(dst->tensors, src->tensors, sizeof dst->tensors[0] * nt);
    if (np) /* dst holds the whole struct only when there is a payload */
        memcpy(dst->payload, src->payload, np);
}

int strata_args_add_tensor(strata_task_args *a, const strata_tensor *t, strata_tag tag) {
    if (!a || !t)
        return st_fail(STRATA_EINVAL, "strata_args_add_tensor: args and tensor must not be NULL");
    if ((unsigned)tag > STRATA_NO_DEP) {
        a->invalid = 1;
        return st_fail(STRATA_EINVAL, "strata_args_add_tensor: unknown tag %d", (int)tag);
    }
    if (a->ntensors >= STRATA_MAX_TENSORS) {
        a->invalid = 1;
        return st_fail(STRATA_ECAPACITY,
                       "strata_args_add_tensor: more than %d tensor arguments in one task",
                       STRATA_MAX_TENSORS);
    }
    a->tensors[a->ntensors] = *t;
    a->tags[a->ntensors] = (uint8_t)tag;
    a->ntensors++;
    return STRATA_OK;
}

static int add_typed(strata_task_args *a, uint64_t bits, strata_scalar_type type,
                     const char *what) {
    if (!a)
        return st_fail(STRATA_EINVAL, "%s: args must not be NULL", what);
    if (a->nscalars >= STRATA_MAX_SCALARS) {
        a->invalid = 1;
        return st_fail(STRATA_ECAPACITY, "%s: more than %d scalar arguments in one task", what,
                       STRATA_MAX_SCALARS);
    }
    a->scalar_types[a->nscalars] = (uint8_t)type;
    a->scalars[a->nscalars++] = bits;
    return STRATA_OK;
}

int strata_args_add_scalar(strata_task_args *a, uint64_t value) {
    return add_typed(a, value, STRATA_SCALAR_U64, "strata_args_add_scalar");
}

int strata_args_add_u64(strata_task_args *a, uint64_t value) {
    return add_typed(a, value, STRATA_SCALAR_U64, "strata_args_add_u64");
}

int strata_args_add_i64(strata_task_args *a, int64_t value) {
    return add_typed(a, (uint64_t)value, STRATA_SCALAR_I64, "strata_args_add_i64");
}

int strata_args_add_f64(strata_task_args *a, double value) {
    uint64_t bits;
    memcpy(&bits, &value, sizeof bits);
    return add_typed(a, bits, STRATA_SCALAR_F64, "strata_args_add_f64");
}

int strata_args_add_f32(strata_task_args *a, float value) {
    uint32_t bits;
    memcpy(&bits, &value, sizeof bits);
    return add_typed(a, bits, STRATA_SCALAR_F32, "strata_args_add_f32");
}

int strata_args_set_payload(strata_task_args *a, const void *bytes, size_t nbytes) {
    const char *what = "strata_args_set_payload";
    if (!a)
        return st_fail(STRATA_EINVAL, "%s: args must not be NULL", what);
    int rc = STRATA_OK;
    if (a->payload_bytes)
        rc = st_fail(STRATA_EINVAL, "%s: the task already has a payload of %u bytes (one per task)",
                     what, a->payload_bytes);
    else if (nbytes == 0 || !bytes)
        rc = st_fail(STRATA_EINVAL, "%s: %zu bytes at %p (1..%d bytes, not NULL)", what, nbytes,
                     bytes, STRATA_MAX_PAYLOAD);
    else if (nbytes > STRATA_MAX_PAYLOAD)
        rc = st_fail(STRATA_ECAPACITY, "%s: %zu bytes, more than the %d a task carries", what,
                     nbytes, STRATA_MAX_PAYLOAD);
    if (rc != STRATA_OK) {
        a->invalid = 1;
        return rc;
    }
    memcpy(a->payload, bytes, nbytes);
    a->payload_bytes = (uint32_t)nbytes;
    return STRATA_OK;
}
