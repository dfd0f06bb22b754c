/* tests/unit/test_message.c - util/message.h: the cut marker.
 *
 * Owns: the rules every message in the library follows: a message that does
 * not fit its buffer keeps its front and ends with ST_MSG_CUT, never inside a
 * UTF-8 character; a message composed around a nested one keeps its context.
 * (The st_error record is tested with the rest of util/error.h in
 * test_error.c.)
 */
#include <string.h>

#include "test_support.h"

#include "util/error.h"
#include "util/message.h"

static int ends_with(const char *s, const char *tail) {
    size_t n = strlen(s), k = strlen(tail);
    return n >= k && memcmp(s + n - k, tail, k) == 0;
}

/* A string of n copies of c, in buf (n < cap). */
static const char *repeat(char *buf, size_t cap, char c, size_t n) {
    assert_true(n < cap);
    memset(buf, c, n);
    buf[n] = '\0';
    return buf;
}

/* ---- st_msg_format ------------------------------------------------------------------ */

static void a_message_that_fits_is_written_whole(void **state) {
    char buf[16];
    assert_int_equal(st_msg_format(buf, sizeof buf, "%s %d", "seven", 7), 0);
    assert_string_equal(buf, "seven 7");
    assert_int_equal(st_msg_format(buf, sizeof buf, "%s", "exactly fifteen"), 0); /* 15 + NUL */
    assert_string_equal(buf, "exactly fifteen");
}

static void a_message_that_does_not_fit_keeps_its_front_and_ends_with_the_marker(void **state) {
    char buf[16];
    assert_int_equal(st_msg_format(buf, sizeof buf, "%s", "exactly sixteen!"), 1);
    assert_string_equal(buf, "exactly sixt" ST_MSG_CUT);
    char inner[2000];
    repeat(inner, sizeof inner, 'x', 1999);
    char msg[STRATA_ERRMSG_MAX];
    assert_int_equal(st_msg_format(msg, sizeof msg, "run 3: task 'a' #1 failed: %s", inner), 1);
    assert_int_equal(strlen(msg), sizeof msg - 1); /* the whole buffer is used */
    assert_true(strncmp(msg, "run 3: task 'a' #1 failed: xxx", 30) == 0);
    assert_true(ends_with(msg, "x" ST_MSG_CUT));
}

static void a_cut_never_splits_a_utf8_character(void **state) {
    char buf[10]; /* room for 6 bytes and the marker */
    /* "abcde" then U+00E9 (2 bytes) straddling the cut: it is dropped whole. */
    assert_int_equal(st_msg_format(buf, sizeof buf, "abcde\xc3\xa9xyz"), 1);
    assert_string_equal(buf, "abcde" ST_MSG_CUT);
    /* U+20AC (3 bytes) starting at byte 4, cut after its second byte. */
    assert_int_equal(st_msg_format(buf, sizeof buf,
                                   "abcd\xe2\x82\xac"
                                   "xyz"),
                     1);
    assert_string_equal(buf, "abcd" ST_MSG_CUT);
    /* A character that ends right at the cut stays. */
    assert_int_equal(st_msg_format(buf, sizeof buf, "abcd\xc3\xa9xyzw"), 1);
    assert_string_equal(buf, "abcd\xc3\xa9" ST_MSG_CUT);
}

static void a_buffer_too_small_for_the_marker_holds_the_cut_text(void **state) {
    char buf[3];
    assert_int_equal(st_msg_format(buf, sizeof buf, "%s", "abcdef"), 1);
    assert_string_equal(buf, "ab");
}

static void a_message_cut_twice_still_ends_with_one_marker(void **state) {
    char inner[32], outer[24];
    char big[64];
    st_msg_format(inner, sizeof inner, "%s", repeat(big, sizeof big, 'y', 40));
    assert_true(ends_with(inner, "y" ST_MSG_CUT));
    st_msg_format(outer, sizeof outer, "ctx: %s", inner);
    assert_true(strncmp(outer, "ctx: yyy", 8) == 0);
    assert_true(ends_with(outer, "y" ST_MSG_CUT));
    assert_int_equal(strlen(outer), sizeof outer - 1);
}

/* ---- the thread's last error -------------------------------------------------------- */

static void a_long_nested_message_keeps_the_prefix_of_the_thread_error(void **state) {
    char inner[1000];
    repeat(inner, sizeof inner, 'z', 999);
    assert_int_equal(st_fail(STRATA_EINVAL, "outer: %s", inner), STRATA_EINVAL);
    const char *m = strata_error_message();
    assert_int_equal(strlen(m), STRATA_ERRMSG_MAX - 1);
    assert_true(strncmp(m, "outer: zzz", 10) == 0);
    assert_true(ends_with(m, ST_MSG_CUT));
    /* A caller names itself in front of the full message: its name survives. */
    st_fail_prefix(STRATA_EDEVICE, "caller");
    m = strata_error_message();
    assert_int_equal(strlen(m), STRATA_ERRMSG_MAX - 1);
    assert_true(strncmp(m, "caller: outer: zzz", 18) == 0);
    assert_true(ends_with(m, ST_MSG_CUT));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(a_message_that_fits_is_written_whole),
        cmocka_unit_test(a_message_that_does_not_fit_keeps_its_front_and_ends_with_the_marker),
        cmocka_unit_test(a_cut_never_splits_a_utf8_character),
        cmocka_unit_test(a_buffer_too_small_for_the_marker_holds_the_cut_text),
        cmocka_unit_test(a_message_cut_twice_still_ends_with_one_marker),
        cmocka_unit_test(a_long_nested_message_keeps_the_prefix_of_the_thread_error),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
