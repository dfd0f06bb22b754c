/* core/args_read.c - reading a task's arguments in its body (the reading
 * half of include/strata/tensor.h's task argument calls).
 *
 * Owns: the tensor, raw scalar, typed scalar and payload reads of a
 * strata_task_view, and the thread's record of a typed read that failed
 * (st_args_misuse_*, declared in core/endpoint.h for the body's runner).
 * Must never: return a value of another type than the one asked for, or
 * read past the view's counts: a failed read returns 0 / NULL and says why.
 */
#include <stdarg.h>
#include <string.h>

#include "core/endpoint.h"
#include "strata/tensor.h"
#include "util/error.h"

/* The first failed typed read since the body started (its message wins: a
 * later one is usually a consequence of it). Per thread: each body runs on
 * one thread from start to finish. */
static _Thread_local int tls_misuse;
static _Thread_local char tls_misuse_msg[STRATA_ERRMSG_MAX];

void st_args_misuse_reset(void) {
    tls_misuse = 0;
}

int st_args_misuse_take(char *msg, size_t cap) {
    if (!tls_misuse)
        return 0;
    st_msg_format(msg, cap, "%s", tls_misuse_msg);
    tls_misuse = 0;
    return 1;
}

static void misuse(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void misuse(const char *fmt, ...) {
    char msg[STRATA_ERRMSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    st_msg_formatv(msg, sizeof msg, fmt, ap);
    va_end(ap);
    st_fail_msg(STRATA_EINVAL, msg);
    if (!tls_misuse) {
        memcpy(tls_misuse_msg, msg, sizeof msg);
        tls_misuse = 1;
    }
}

static const char *type_name(unsigned t) {
    static const char *const names[STRATA_SCALAR_TYPE_COUNT] = {"u64", "i64", "f64", "f32"};
    return t < STRATA_SCALAR_TYPE_COUNT ? names[t] : "of an unknown type";
}

/* Scalar i's bits if it exists and has type `want`; else 0 and a failed read. */
static uint64_t typed_bits(const strata_task_view *a, uint32_t i, strata_scalar_type want,
                           const char *what) {
    if (!a) {
        misuse("%s: args is NULL", what);
        return 0;
    }
    if (i >= a->nscalars) {
        misuse("%s: scalar %u does not exist: the task has %u scalar arguments", what, i,
               a->nscalars);
        return 0;
    }
    unsigned have = a->scalar_types ? a->scalar_types[i] : STRATA_SCALAR_U64;
    if (have != (unsigned)want) {
        misuse("%s: scalar %u is %s, not %s (read it with strata_args_%s)", what, i,
               type_name(have), type_name(want), type_name(have));
        return 0;
    }
    return a->scalars[i];
}

void *strata_args_data(const strata_task_view *a, uint32_t i) {
    return a && i < a->ntensors ? strata_tensor_data(&a->tensors[i]) : NULL;
}

const strata_tensor *strata_args_tensor(const strata_task_view *a, uint32_t i) {
    return a && i < a->ntensors ? &a->tensors[i] : NULL;
}

uint64_t strata_args_scalar(const strata_task_view *a, uint32_t i) {
    return a && i < a->nscalars ? a->scalars[i] : 0;
}

uint64_t strata_args_u64(const strata_task_view *a, uint32_t i) {
    return typed_bits(a, i, STRATA_SCALAR_U64, "strata_args_u64");
}

int64_t strata_args_i64(const strata_task_view *a, uint32_t i) {
    return (int64_t)typed_bits(a, i, STRATA_SCALAR_I64, "strata_args_i64");
}

double strata_args_f64(const strata_task_view *a, uint32_t i) {
    uint64_t bits = typed_bits(a, i, STRATA_SCALAR_F64, "strata_args_f64");
    double v;
    memcpy(&v, &bits, sizeof v);
    return v;
}

float strata_args_f32(const strata_task_view *a, uint32_t i) {
    uint32_t bits = (uint32_t)typed_bits(a, i, STRATA_SCALAR_F32, "strata_args_f32");
    float v;
    memcpy(&v, &bits, sizeof v);
    return v;
}

const void *strata_args_payload(const strata_task_view *a, size_t *nbytes) {
    size_t n = a && a->payload ? a->payload_bytes : 0;
    if (nbytes)
        *nbytes = n;
    return n ? a->payload : NULL;
}
