/* util/error.c - per-thread last-error message, st_error records and status
 * names.
 *
 * Owns: one thread-local buffer. Must never: touch global state or allocate.
 */
#include "util/error.h"

#include <stdio.h>
#include <string.h>

static _Thread_local char last_error[STRATA_ERRMSG_MAX];

const char *strata_error_message(void) {
    return last_error;
}

int st_failv(int status, const char *fmt, va_list ap) {
    st_msg_formatv(last_error, sizeof last_error, fmt, ap);
    return status;
}

int st_fail(int status, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    st_failv(status, fmt, ap);
    va_end(ap);
    return status;
}

int st_fail_msg(int status, const char *msg) {
    st_msg_format(last_error, sizeof last_error, "%s", msg ? msg : "");
    return status;
}

int st_fail_nomem(const char *what, size_t bytes) {
    return st_fail(STRATA_ENOMEM, "%s: cannot allocate %zu bytes (out of memory)", what, bytes);
}

int st_fail_prefix(int status, const char *prefix) {
    char msg[STRATA_ERRMSG_MAX];
    memcpy(msg, last_error, sizeof msg);
    return st_fail(status, "%s: %s", prefix, msg); /* a cut keeps the prefix */
}

void st_clear_error(void) {
    last_error[0] = '\0';
}

int st_error_setv(st_error *e, int status, const char *fmt, va_list ap) {
    if (e->status != STRATA_OK)
        return e->status; /* first error wins */
    st_msg_formatv(e->msg, sizeof e->msg, fmt, ap);
    if (e->msg[0] == '\0')
        memcpy(e->msg, "(no message)", sizeof "(no message)");
    e->status = status != STRATA_OK ? status : STRATA_ESTATE;
    return e->status;
}

int st_error_set(st_error *e, int status, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int first = st_error_setv(e, status, fmt, ap);
    va_end(ap);
    return first;
}

int st_error_raise(const st_error *e) {
    return e->status != STRATA_OK ? st_fail_msg(e->status, e->msg) : STRATA_OK;
}

const char *strata_status_name(int status) {
    switch (status) {
    case STRATA_OK:
        return "STRATA_OK";
    case STRATA_EINVAL:
        return "STRATA_EINVAL";
    case STRATA_ESTATE:
        return "STRATA_ESTATE";
    case STRATA_ETIMEDOUT:
        return "STRATA_ETIMEDOUT";
    case STRATA_ETASK:
        return "STRATA_ETASK";
    case STRATA_EENDPOINT:
        return "STRATA_EENDPOINT";
    case STRATA_ECLOSED:
        return "STRATA_ECLOSED";
    case STRATA_ESTALE:
        return "STRATA_ESTALE";
    case STRATA_EPOISONED:
        return "STRATA_EPOISONED";
    case STRATA_ECAPACITY:
        return "STRATA_ECAPACITY";
    case STRATA_EABI:
        return "STRATA_EABI";
    case STRATA_EDEVICE:
        return "STRATA_EDEVICE";
    case STRATA_ENOMEM:
        return "STRATA_ENOMEM";
    case STRATA_ECANCELED:
        return "STRATA_ECANCELED";
    default:
        return "STRATA_E?";
    }
}
