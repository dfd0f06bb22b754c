/* core/arg_items.c - argument items (include/strata/args.h) into builders.
 *
 * Owns: what each item kind becomes in a strata_task_args, the refusal of an
 * item C could not check (unknown kind, a tensor item without a tensor, a
 * payload too large or given twice, a member break where there is one
 * member), each naming the item's 0-based position, and splitting a group's
 * items into members at STRATA_NEXT_MEMBER.
 * Must never: read an item past n, or accept an item partly: a refused one
 * marks the builder invalid and changes nothing else in it.
 */
#include <string.h>

#include "core/arg_items.h"
#include "core/orchestrator.h"
#include "strata/args.h"
#include "util/error.h"

static int add_scalar_item(strata_task_args *a, const strata_arg *it, size_t pos,
                           const char *what) {
    if (a->nscalars >= STRATA_MAX_SCALARS)
        return st_fail(STRATA_ECAPACITY,
                       "%s: argument %zu: more than %d scalar arguments in one task", what, pos,
                       STRATA_MAX_SCALARS);
    uint64_t bits = 0;
    strata_scalar_type type = STRATA_SCALAR_U64;
    switch (it->kind) {
    case STRATA_ARG_U64:
        bits = it->v.u64;
        break;
    case STRATA_ARG_I64:
        bits = (uint64_t)it->v.i64;
        type = STRATA_SCALAR_I64;
        break;
    case STRATA_ARG_F64:
        memcpy(&bits, &it->v.f64, sizeof(double));
        type = STRATA_SCALAR_F64;
        break;
    default: { /* STRATA_ARG_F32 */
        uint32_t b32;
        memcpy(&b32, &it->v.f32, sizeof b32);
        bits = b32;
        type = STRATA_SCALAR_F32;
    }
    }
    a->scalar_types[a->nscalars] = (uint8_t)type;
    a->scalars[a->nscalars++] = bits;
    return STRATA_OK;
}

/* A tensor item that is not the plain case st_add_item copies inline. */
static int add_tensor_item(strata_task_args *a, const strata_arg *it, size_t pos,
                           const char *what) {
    if (!it->v.tensor)
        return st_fail(STRATA_EINVAL, "%s: argument %zu: a tensor item without a tensor (NULL)",
                       what, pos);
    if (it->tag > STRATA_NO_DEP)
        return st_fail(STRATA_EINVAL, "%s: argument %zu: unknown tag %u", what, pos, it->tag);
    if (a->ntensors >= STRATA_MAX_TENSORS)
        return st_fail(STRATA_ECAPACITY,
                       "%s: argument %zu: more than %d tensor arguments in one task", what, pos,
                       STRATA_MAX_TENSORS);
    a->tensors[a->ntensors] = *it->v.tensor;
    a->tags[a->ntensors++] = it->tag;
    return STRATA_OK;
}

static int add_payload_item(strata_task_args *a, const strata_arg *it, size_t pos,
                            const char *what) {
    if (a->payload_bytes)
        return st_fail(STRATA_EINVAL,
                       "%s: argument %zu: a second payload (STRATA_BYTES); a task carries one",
                       what, pos);
    if (!it->v.bytes || it->nbytes == 0)
        return st_fail(STRATA_EINVAL, "%s: argument %zu: a payload of %u bytes at %p", what, pos,
                       it->nbytes, it->v.bytes);
    if (it->nbytes > STRATA_MAX_PAYLOAD)
        return st_fail(STRATA_ECAPACITY,
                       "%s: argument %zu: a payload of %u bytes, more than the %d a task carries",
                       what, pos, it->nbytes, STRATA_MAX_PAYLOAD);
    memcpy(a->payload, it->v.bytes, it->nbytes);
    a->payload_bytes = it->nbytes;
    return STRATA_OK;
}

int st_add_item_slow(strata_task_args *a, const strata_arg *it, size_t pos, const char *what) {
    switch (it->kind) {
    case STRATA_ARG_TENSOR:
        return add_tensor_item(a, it, pos, what);
    case STRATA_ARG_U64:
    case STRATA_ARG_I64:
    case STRATA_ARG_F64:
    case STRATA_ARG_F32:
        return add_scalar_item(a, it, pos, what);
    case STRATA_ARG_BYTES:
        return add_payload_item(a, it, pos, what);
    case STRATA_ARG_NEXT_MEMBER:
        return st_fail(STRATA_EINVAL,
                       "%s: argument %zu: a member break (STRATA_NEXT_MEMBER) in the arguments "
                       "of a single task (groups take them)",
                       what, pos);
    default:
        return st_fail(STRATA_EINVAL,
                       "%s: argument %zu: kind %u is not an argument (a strata_arg not made by "
                       "the STRATA_* item macros?)",
                       what, pos, it->kind);
    }
}

int strata_args_add_items(strata_task_args *a, const strata_arg *items, size_t n) {
    const char *what = "strata_args_add_items";
    if (!a || (n && !items))
        return st_fail(STRATA_EINVAL, "%s: args and items must not be NULL", what);
    for (size_t i = 0; i < n; i++) {
        int rc = st_add_item(a, &items[i], i, what);
        if (rc != STRATA_OK) {
            a->invalid = 1;
            return rc;
        }
    }
    return STRATA_OK;
}

int st_item_members(const strata_arg *items, size_t n, int group, const char *what) {
    if (n && !items)
        return st_fail(STRATA_EINVAL, "%s: items is NULL (%zu items)", what, n);
    if (!group)
        return 1; /* a break is refused where it stands, by its position */
    size_t members = 1;
    for (size_t i = 0; i < n; i++)
        members += items[i].kind == STRATA_ARG_NEXT_MEMBER;
    if (members > STRATA_MAX_GROUP)
        return st_fail(STRATA_EINVAL, "%s: %zu members (1..%d allowed)", what, members,
                       STRATA_MAX_GROUP);
    return (int)members;
}

int st_items_to_args(strata_task_args *args, int members, const strata_arg *items, size_t n,
                     int *write_back, const char *what) {
    int m = 0;
    *write_back = 0;
    for (int k = 0; k < members; k++)
        strata_args_init(&args[k]);
    for (size_t i = 0; i < n; i++) {
        if (members > 1 && items[i].kind == STRATA_ARG_NEXT_MEMBER) {
            m++;
            continue;
        }
        STRATA_TRY(st_add_item(&args[m], &items[i], i, what));
        *write_back |=
            items[i].kind == STRATA_ARG_TENSOR && st_needs_memory(items[i].v.tensor, items[i].tag);
    }
    return STRATA_OK;
}

void st_items_write_back(const strata_task_args *args, int members, const strata_arg *items,
                         size_t n) {
    int m = 0;
    uint32_t k = 0; /* tensor index within member m */
    for (size_t i = 0; i < n; i++) {
        const strata_arg *it = &items[i];
        if (it->kind == STRATA_ARG_NEXT_MEMBER && members > 1) {
            m++;
            k = 0;
            continue;
        }
        if (it->kind != STRATA_ARG_TENSOR)
            continue;
        const strata_tensor *got = &args[m].tensors[k++];
        if (st_needs_memory(it->v.tensor, it->tag) && got->base)
            *it->v.tensor = *got;
    }
}
