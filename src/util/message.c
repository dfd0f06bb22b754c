/* util/message.c - composing a message into a fixed buffer, with a visible cut.
 *
 * Owns: the cut and its marker (util/message.h).
 * Must never: allocate, keep state, or define a public symbol (the sim
 * backend compiles this file too).
 */
#include "util/message.h"

#include <stdio.h>
#include <string.h>

/* Where a cut may start at or before `at`: not on a UTF-8 continuation
 * byte, so a multi-byte character is dropped whole. */
static size_t character_start(const char *s, size_t at) {
    while (at > 0 && ((unsigned char)s[at] & 0xC0) == 0x80)
        at--;
    return at;
}

int st_msg_formatv(char *buf, size_t cap, const char *fmt, va_list ap) {
    if (cap == 0)
        return 0;
    int n = vsnprintf(buf, cap, fmt, ap);
    if (n < 0) { /* an encoding error: nothing sensible to show */
        buf[0] = '\0';
        return 0;
    }
    if ((size_t)n < cap)
        return 0;
    const size_t marker = sizeof ST_MSG_CUT - 1;
    if (cap <= marker) /* no room for the marker: the cut text must do */
        return 1;
    size_t at = character_start(buf, cap - 1 - marker);
    memcpy(buf + at, ST_MSG_CUT, marker + 1);
    return 1;
}

int st_msg_format(char *buf, size_t cap, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int cut = st_msg_formatv(buf, cap, fmt, ap);
    va_end(ap);
    return cut;
}
