/* util/error.h - recording failures for strata_error_message().
 *
 * Owns: the thread-local last-error buffer and helpers that fill it.
 * Must never: allocate; the buffer is fixed-size and per thread.
 */
#ifndef STRATA_UTIL_ERROR_H
#define STRATA_UTIL_ERROR_H

#include <stdarg.h>
#include <stddef.h>

#include "strata/status.h"

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

#endif
