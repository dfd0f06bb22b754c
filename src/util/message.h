/* util/message.h - composing a message into a fixed buffer, with a visible cut.
 *
 * Owns: st_msg_format, the one way a message is written into a fixed-size
 * buffer: what does not fit is cut at the end and the cut is marked, so a
 * reader sees the message was cut and where, and the front of the message
 * (the outermost context: run, level, worker, task) always survives.
 * Must never: allocate (an out-of-memory failure is reported through it),
 * keep state, or define a public symbol: the sim backend compiles this file
 * into its own shared object too (as it does util/alloc.c), so a backend
 * message cut inside the sim is marked the same way.
 */
#ifndef STRATA_UTIL_MESSAGE_H
#define STRATA_UTIL_MESSAGE_H

#include <stdarg.h>
#include <stddef.h>

/* The last bytes of a message that did not fit its buffer. */
#define ST_MSG_CUT "..."

/* Format into buf (cap bytes, NUL-terminated). A message longer than cap - 1
 * bytes keeps its front and ends with ST_MSG_CUT, never inside a UTF-8
 * character; so put the context first and the nested message ("...: %s")
 * last. Returns 1 if the message was cut, 0 if it fit. */
int st_msg_format(char *buf, size_t cap, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
int st_msg_formatv(char *buf, size_t cap, const char *fmt, va_list ap);

#endif
