/* util/error.h - recording failures for strata_error_message(), and the
 * library's one "first error wins" record.
 *
 * Owns: the thread-local last-error buffer and helpers that fill it; the
 * library's one message size (STRATA_ERRMSG_MAX); st_error, the status and
 * message of the first failure of something that fails once (a run, a chip
 * run, a poisoned lane, a closed chip).
 * Must never: allocate; every buffer is fixed-size (recording an
 * out-of-memory failure must not need memory). Messages are composed with
 * st_msg_format (util/message.h), so a cut one ends with ST_MSG_CUT.
 */
#ifndef STRATA_UTIL_ERROR_H
#define STRATA_UTIL_ERROR_H

#include <stdarg.h>
#include <stddef.h>

#include "strata/status.h"
#include "util/message.h"

/* Bytes of every message buffer in the library (the NUL included), from the
 * thread's last error to the message a completion carries. The backend ABI
 * has its own, smaller limit (STRATA_BACKEND_MSG_MAX in strata/backend.h). */
#define STRATA_ERRMSG_MAX 512

/* Record `fmt` as this thread's last error and return `status` so that call
 * sites read `return st_fail(STRATA_EINVAL, "...")`. */
int st_fail(int status, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int st_failv(int status, const char *fmt, va_list ap);

/* Set the last error to an already formatted message. */
int st_fail_msg(int status, const char *msg);

/* Record that `what` could not be allocated: STRATA_ENOMEM, with a message
 * naming it and its size ("strata_buffer_create: the buffer's memory: cannot
 * allocate 4096 bytes (out of memory)"). */
int st_fail_nomem(const char *what, size_t bytes);

/* Put `prefix: ` before this thread's last message and return `status`
 * (a caller names itself in front of a failure a callee described). */
int st_fail_prefix(int status, const char *prefix);

/* Clear the last error (successful public calls do not clear it). */
void st_clear_error(void);

/* ---- st_error: a status and its message, the first one recorded wins ---------------- */

typedef struct st_error {
    int status;                  /* STRATA_OK: nothing recorded yet */
    char msg[STRATA_ERRMSG_MAX]; /* valid once status is set */
} st_error;

/* Nothing recorded. Sets the status only: the message is written before it is
 * read, and a record made per run must not clear 512 bytes each time (that
 * made an empty run measurably dearer). */
static inline void st_error_init(st_error *e) {
    e->status = STRATA_OK;
}

/* Record `status` and the formatted message unless e holds an error already
 * (first error wins). A STRATA_OK status is recorded as STRATA_ESTATE (an
 * error needs a code) and an empty message as "(no message)". Returns e's
 * status afterwards: the first one. Not thread-safe: e's owner serialises. */
int st_error_set(st_error *e, int status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
int st_error_setv(st_error *e, int status, const char *fmt, va_list ap);

static inline int st_error_status(const st_error *e) {
    return e->status;
}

/* The message, or "" when nothing is recorded. */
static inline const char *st_error_msg(const st_error *e) {
    return e->status != STRATA_OK ? e->msg : "";
}

/* Make e this thread's last error and return its status; STRATA_OK, with the
 * last error left alone, when e holds none. */
int st_error_raise(const st_error *e);

#endif
