/* strata/args.h - argument items: a task's arguments written in the call
 * that submits it (the one-call form, docs/api.md "Task arguments").
 *
 * Owns: strata_arg (one tagged tensor, typed scalar, payload or member break)
 * and the item macros STRATA_IN(t), STRATA_OUT(t), STRATA_INOUT(t),
 * STRATA_OUT_EXISTING(t), STRATA_NO_DEP(t), STRATA_U64(x), STRATA_I64(x),
 * STRATA_F64(x), STRATA_F32(x), STRATA_BYTES(p, n), STRATA_NEXT_MEMBER, and
 * strata_args_add_items (items into a builder, for the argument-list form).
 * The submit calls that take items are in worker.h.
 * Must never: be part of the backend ABI (bodies and programs read a
 * strata_task_view, types.h), or let an item macro accept an operand of the
 * wrong kind where C can see it: each one selects on its operand's type with
 * _Generic, so a tensor where a scalar goes (or a pointer, or a number, where
 * a tensor goes) does not compile.
 */
#ifndef STRATA_ARGS_H
#define STRATA_ARGS_H

#include <stddef.h>
#include <stdint.h>

#include "export.h"
#include "types.h"

#ifdef __cplusplus
extern "C" {
#endif

/* What an item is. 0 is none on purpose: a zeroed item is refused. */
typedef enum strata_arg_kind {
    STRATA_ARG_NONE = 0,
    STRATA_ARG_TENSOR,      /* v.tensor, with tag */
    STRATA_ARG_U64,         /* v.u64 */
    STRATA_ARG_I64,         /* v.i64 */
    STRATA_ARG_F64,         /* v.f64 */
    STRATA_ARG_F32,         /* v.f32 */
    STRATA_ARG_BYTES,       /* the payload: nbytes at v.bytes, copied at submit */
    STRATA_ARG_NEXT_MEMBER, /* groups: the items after it are the next member's */
    STRATA_ARG_KIND_COUNT
} strata_arg_kind;

/* One argument as a submit call reads it; made by the macros below (a
 * 16-byte value). A tensor item points at the caller's strata_tensor: it
 * must live until the submit returns, and an OUT tensor without memory gets
 * its runtime view written back there. */
typedef struct strata_arg {
    uint8_t kind; /* strata_arg_kind */
    uint8_t tag;  /* strata_tag, for a tensor */
    uint16_t pad_;
    uint32_t nbytes; /* payload bytes, for STRATA_ARG_BYTES */
    union {
        strata_tensor *tensor;
        uint64_t u64;
        int64_t i64;
        double f64;
        float f32;
        const void *bytes;
    } v;
} strata_arg;

/* Append items[0..n) to a builder (strata_args_init'ed), in order: tensors
 * to its tensors, scalars to its scalars, the payload as its payload. A
 * member break is refused (a builder is one member). Fails (STRATA_EINVAL /
 * STRATA_ECAPACITY, naming the item's 0-based position) and marks the
 * builder invalid as the strata_args_add_* calls do. */
STRATA_API int strata_args_add_items(strata_task_args *a, const strata_arg *items, size_t n);

/* Payload sizes past 32 bits stay too large (refused), not wrapped. */
static inline uint32_t strata_arg_nbytes_(size_t n) {
    return n > 0xffffffffu ? 0xffffffffu : (uint32_t)n;
}

#ifndef __cplusplus /* C11 only: compound literals and _Generic (C++ builds strata_arg itself) */

/* Each selects on the operand's type: another type does not compile (every
 * association is type-checked, so none may nest another selection). */
/* clang-format off */
#define STRATA_ARG_INT_(x)                                                     \
    _Generic((x), _Bool: (x), char: (x), signed char: (x), unsigned char: (x), \
             short: (x), unsigned short: (x), int: (x), unsigned int: (x),     \
             long: (x), unsigned long: (x), long long: (x),                    \
             unsigned long long: (x))
#define STRATA_ARG_REAL_(x)                                                    \
    _Generic((x), _Bool: (x), char: (x), signed char: (x), unsigned char: (x), \
             short: (x), unsigned short: (x), int: (x), unsigned int: (x),     \
             long: (x), unsigned long: (x), long long: (x),                    \
             unsigned long long: (x), float: (x), double: (x),                 \
             long double: (x))
/* A strata_tensor lvalue (const or not); a pointer or anything else does not compile. */
#define STRATA_ARG_TENSOR_(t, tg, ptr)                                         \
    ((strata_arg){.kind = STRATA_ARG_TENSOR, .tag = (tg),                      \
                  .v.tensor = _Generic((t), strata_tensor: ptr)})
/* clang-format on */

/* Tensors: t is a strata_tensor variable. A read tensor may be const; a
 * written one may not (its view can be written back). Where no '(' follows,
 * STRATA_IN ... STRATA_NO_DEP are still the strata_tag values (types.h). */
#define STRATA_IN(t) STRATA_ARG_TENSOR_(t, STRATA_IN, (strata_tensor *)&(t))
#define STRATA_NO_DEP(t) STRATA_ARG_TENSOR_(t, STRATA_NO_DEP, (strata_tensor *)&(t))
#define STRATA_OUT(t) STRATA_ARG_TENSOR_(t, STRATA_OUT, &(t))
#define STRATA_INOUT(t) STRATA_ARG_TENSOR_(t, STRATA_INOUT, &(t))
#define STRATA_OUT_EXISTING(t) STRATA_ARG_TENSOR_(t, STRATA_OUT_EXISTING, &(t))

/* Scalars: integers for U64 / I64, integers or floating point for F64 / F32
 * (converted as by assignment). Read back with strata_args_u64 / _i64 /
 * _f64 / _f32 (tensor.h), by position among the scalars. */
#define STRATA_U64(x) ((strata_arg){.kind = STRATA_ARG_U64, .v.u64 = (uint64_t)STRATA_ARG_INT_(x)})
#define STRATA_I64(x) ((strata_arg){.kind = STRATA_ARG_I64, .v.i64 = (int64_t)STRATA_ARG_INT_(x)})
#define STRATA_F64(x) ((strata_arg){.kind = STRATA_ARG_F64, .v.f64 = (double)STRATA_ARG_REAL_(x)})
#define STRATA_F32(x) ((strata_arg){.kind = STRATA_ARG_F32, .v.f32 = (float)STRATA_ARG_REAL_(x)})

/* The payload: n bytes (1..STRATA_MAX_PAYLOAD) at p, copied when the task is
 * submitted; one per task (or group member). strata_args_payload reads it. */
#define STRATA_BYTES(p, n)                                                                         \
    ((strata_arg){.kind = STRATA_ARG_BYTES, .nbytes = strata_arg_nbytes_(n), .v.bytes = (p)})

/* In a group submit: the items after it are the next member's. */
#define STRATA_NEXT_MEMBER ((strata_arg){.kind = STRATA_ARG_NEXT_MEMBER})

/* For the submit macros (worker.h): the items as an array and their count.
 * The list ends in a member break that is not counted, so an empty list is
 * valid C11; the items are evaluated once (sizeof does not evaluate). */
#define STRATA_ARGS_ITEMS_(...) ((const strata_arg[]){__VA_ARGS__})
#define STRATA_ARGS_COUNT_(...) (sizeof((const strata_arg[]){__VA_ARGS__}) / sizeof(strata_arg) - 1)

#endif /* !__cplusplus */

#ifdef __cplusplus
}
#endif
#endif /* STRATA_ARGS_H */
