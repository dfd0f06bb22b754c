// label: concurrency
/* tests/unit/test_error.c - the per-thread last-error message (util/error.h)
 * and the status names (strata/status.h).
 *
 * Owns: st_fail / st_failv / st_fail_msg / st_fail_prefix formatting and
 * their returned status, truncation at STRATA_ERRMSG_MAX (a prefix of the
 * message ending with the cut marker, always terminated), per-thread isolation, the empty message
 * of a new thread, a successful call leaving the message alone, and strata_status_name of every
 * status and of values that are none; and the st_error record (first error wins, one store to
 * initialise, copied into strata_error_message()). Must never: assert from a thread other than the
 * test's (threads report what they saw; the test asserts after joining them).
 */
#include "test_support.h"

#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "util/error.h"
#include "util/message.h"

/* A message longer than the buffer: "0123456789" repeated. */
static void long_text(char *buf, size_t n) {
    for (size_t i = 0; i + 1 < n; i++)
        buf[i] = (char)('0' + i % 10);
    buf[n - 1] = '\0';
}

/* ---- formatting ------------------------------------------------------------------ */

static void st_fail_formats_the_message_and_returns_the_status(void **state) {
    (void)state;
    assert_int_equal(st_fail(STRATA_ECAPACITY, "ring %d of %s: %llu bytes", 2, "heap", 64ull),
                     STRATA_ECAPACITY);
    assert_string_equal(strata_error_message(), "ring 2 of heap: 64 bytes");
    assert_int_equal(st_fail(STRATA_OK, "%s", "not a failure, still recorded"), STRATA_OK);
    assert_string_equal(strata_error_message(), "not a failure, still recorded");
}

static int fail_through_va_list(int status, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int rc = st_failv(status, fmt, ap);
    va_end(ap);
    return rc;
}

static void st_failv_formats_like_st_fail(void **state) {
    (void)state;
    assert_int_equal(fail_through_va_list(STRATA_EDEVICE, "device %d: code %d", 3, -5),
                     STRATA_EDEVICE);
    assert_string_equal(strata_error_message(), "device 3: code -5");
}

static void st_fail_msg_copies_the_text_without_formatting_it(void **state) {
    (void)state;
    assert_int_equal(st_fail_msg(STRATA_ETASK, "100% done: %s %d %n"), STRATA_ETASK);
    assert_string_equal(strata_error_message(), "100% done: %s %d %n");
    assert_int_equal(st_fail_msg(STRATA_EINVAL, NULL), STRATA_EINVAL);
    assert_string_equal(strata_error_message(), "");
}

static void st_fail_prefix_puts_the_caller_in_front(void **state) {
    (void)state;
    st_fail(STRATA_ENOMEM, "the slot table: cannot allocate 64 bytes");
    assert_int_equal(st_fail_prefix(STRATA_ENOMEM, "strata_worker_create"), STRATA_ENOMEM);
    assert_string_equal(strata_error_message(),
                        "strata_worker_create: the slot table: cannot allocate 64 bytes");
    /* the status returned is the caller's, whatever the callee's was */
    assert_int_equal(st_fail_prefix(STRATA_ETASK, "outer"), STRATA_ETASK);
    assert_string_equal(strata_error_message(),
                        "outer: strata_worker_create: the slot table: cannot allocate 64 bytes");
    st_clear_error();
    st_fail_prefix(STRATA_EINVAL, "alone");
    assert_string_equal(strata_error_message(), "alone: ");
}

static void st_clear_error_empties_the_message(void **state) {
    (void)state;
    st_fail(STRATA_EINVAL, "something");
    st_clear_error();
    assert_string_equal(strata_error_message(), "");
}

/* ---- truncation -------------------------------------------------------------------- */

/* A cut keeps the front, ends with ST_MSG_CUT and fills the buffer. */
static void assert_cut_of(const char *msg, const char *front, size_t front_len) {
    size_t cut = strlen(ST_MSG_CUT);
    assert_int_equal(strlen(msg), STRATA_ERRMSG_MAX - 1);
    assert_memory_equal(msg, front,
                        STRATA_ERRMSG_MAX - 1 - cut < front_len ? STRATA_ERRMSG_MAX - 1 - cut
                                                                : front_len);
    assert_string_equal(msg + STRATA_ERRMSG_MAX - 1 - cut, ST_MSG_CUT);
}

static void a_long_message_keeps_its_first_bytes_and_its_terminator(void **state) {
    (void)state;
    char text[3 * STRATA_ERRMSG_MAX];
    long_text(text, sizeof text);
    st_fail(STRATA_EINVAL, "%s", text);
    assert_cut_of(strata_error_message(), text, sizeof text);
    st_fail_msg(STRATA_EINVAL, text);
    assert_cut_of(strata_error_message(), text, sizeof text);
    /* one byte less than the buffer fits whole */
    text[STRATA_ERRMSG_MAX - 1] = '\0';
    st_fail(STRATA_EINVAL, "%s", text);
    assert_string_equal(strata_error_message(), text);
}

static void a_prefix_on_a_full_message_cuts_the_tail_not_the_prefix(void **state) {
    (void)state;
    char text[STRATA_ERRMSG_MAX];
    long_text(text, sizeof text); /* exactly fills the buffer */
    st_fail(STRATA_EDEVICE, "%s", text);
    assert_int_equal(st_fail_prefix(STRATA_EDEVICE, "chip sim:0"), STRATA_EDEVICE);
    const char *msg = strata_error_message();
    size_t plen = strlen("chip sim:0: ");
    assert_memory_equal(msg, "chip sim:0: ", plen);
    assert_int_equal(strlen(msg), STRATA_ERRMSG_MAX - 1); /* full, and marked as cut */
    assert_string_equal(msg + STRATA_ERRMSG_MAX - 1 - strlen(ST_MSG_CUT), ST_MSG_CUT);
    assert_memory_equal(msg + plen, text, STRATA_ERRMSG_MAX - 1 - plen - strlen(ST_MSG_CUT));
}

/* ---- per-thread messages ---------------------------------------------------------------- */

typedef struct seen {
    char at_start[STRATA_ERRMSG_MAX];
    char after_peer[STRATA_ERRMSG_MAX];
    const char *name;
    pthread_barrier_t *both_failed;
} seen;

static void *fail_then_read_after_peer(void *arg) {
    seen *s = arg;
    snprintf(s->at_start, sizeof s->at_start, "%s", strata_error_message());
    st_fail(STRATA_EINVAL, "failure of thread %s", s->name);
    pthread_barrier_wait(s->both_failed); /* the peer has written its own message by now */
    snprintf(s->after_peer, sizeof s->after_peer, "%s", strata_error_message());
    return NULL;
}

static void each_thread_has_its_own_message(void **state) {
    (void)state;
    st_fail(STRATA_ETASK, "the main thread's failure");
    pthread_barrier_t b;
    pthread_barrier_init(&b, NULL, 2);
    seen s[2] = {{.name = "A", .both_failed = &b}, {.name = "B", .both_failed = &b}};
    pthread_t t[2];
    for (int i = 0; i < 2; i++)
        assert_int_equal(pthread_create(&t[i], NULL, fail_then_read_after_peer, &s[i]), 0);
    for (int i = 0; i < 2; i++)
        pthread_join(t[i], NULL);
    pthread_barrier_destroy(&b);
    for (int i = 0; i < 2; i++) {
        assert_string_equal(s[i].at_start, ""); /* a new thread starts with no message */
        char own[64];
        snprintf(own, sizeof own, "failure of thread %s", s[i].name);
        assert_string_equal(s[i].after_peer, own);
    }
    assert_string_equal(strata_error_message(), "the main thread's failure");
}

/* ---- the public side ---------------------------------------------------------------------- */

static void a_successful_call_leaves_the_last_message(void **state) {
    (void)state;
    strata_worker *w;
    assert_status(STRATA_EINVAL, strata_worker_create(NULL, &w));
    char failed[STRATA_ERRMSG_MAX];
    snprintf(failed, sizeof failed, "%s", strata_error_message());
    assert_true(failed[0] != '\0');
    strata_task_args a;
    strata_args_init(&a);
    assert_ok(strata_args_add_scalar(&a, 1));
    strata_worker_config cfg;
    strata_worker_config_init(&cfg);
    assert_ok(strata_worker_create(&cfg, &w));
    strata_worker_destroy(w);
    assert_string_equal(strata_error_message(), failed);
}

static void every_status_has_its_own_name(void **state) {
    (void)state;
    static const struct {
        int status;
        const char *name;
    } names[] = {
        {STRATA_OK, "STRATA_OK"},
        {STRATA_EINVAL, "STRATA_EINVAL"},
        {STRATA_ESTATE, "STRATA_ESTATE"},
        {STRATA_ETIMEDOUT, "STRATA_ETIMEDOUT"},
        {STRATA_ETASK, "STRATA_ETASK"},
        {STRATA_EENDPOINT, "STRATA_EENDPOINT"},
        {STRATA_ECLOSED, "STRATA_ECLOSED"},
        {STRATA_ESTALE, "STRATA_ESTALE"},
        {STRATA_EPOISONED, "STRATA_EPOISONED"},
        {STRATA_ECAPACITY, "STRATA_ECAPACITY"},
        {STRATA_EABI, "STRATA_EABI"},
        {STRATA_EDEVICE, "STRATA_EDEVICE"},
        {STRATA_ENOMEM, "STRATA_ENOMEM"},
        {STRATA_ECANCELED, "STRATA_ECANCELED"},
    };
    /* every value from OK down to the last status is listed, once */
    assert_int_equal(sizeof names / sizeof names[0], 1 - STRATA_ECANCELED);
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        assert_int_equal(names[i].status, -(int)i);
        assert_string_equal(strata_status_name(names[i].status), names[i].name);
    }
}

static void a_value_that_is_no_status_is_named_unknown(void **state) {
    (void)state;
    const int others[] = {1, 7, STRATA_ECANCELED - 1, -100, 12345, INT_MAX, INT_MIN};
    for (size_t i = 0; i < sizeof others / sizeof others[0]; i++)
        assert_string_equal(strata_status_name(others[i]), "STRATA_E?");
}

/* ---- the st_error record ------------------------------------------------------------ */

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

/* ---- st_error ----------------------------------------------------------------------- */

static void an_empty_record_has_no_status_and_an_empty_message(void **state) {
    st_error e;
    st_error_init(&e);
    assert_int_equal(st_error_status(&e), STRATA_OK);
    assert_string_equal(st_error_msg(&e), "");
}

static void init_sets_the_status_only(void **state) {
    /* A record is made per run: clearing its message each time measurably
     * slowed the empty run, so init must not touch it. */
    st_error e;
    memset(&e, 0xAB, sizeof e);
    st_error_init(&e);
    assert_int_equal(st_error_status(&e), STRATA_OK);
    for (size_t i = 0; i < sizeof e.msg; i++)
        if ((unsigned char)e.msg[i] != 0xAB)
            fail_msg("st_error_init wrote byte %zu of the message", i);
}

static void the_first_error_wins(void **state) {
    st_error e;
    st_error_init(&e);
    assert_int_equal(st_error_set(&e, STRATA_ETASK, "task %d broke", 3), STRATA_ETASK);
    assert_int_equal(st_error_set(&e, STRATA_EDEVICE, "later %s", "failure"), STRATA_ETASK);
    assert_int_equal(st_error_status(&e), STRATA_ETASK);
    assert_string_equal(st_error_msg(&e), "task 3 broke");
}

static void an_error_without_a_code_or_a_message_still_reads_as_one(void **state) {
    st_error e;
    st_error_init(&e);
    assert_int_equal(st_error_set(&e, STRATA_OK, "%s", ""), STRATA_ESTATE);
    assert_string_equal(st_error_msg(&e), "(no message)");
}

static void a_long_error_is_cut_with_the_marker(void **state) {
    st_error e;
    st_error_init(&e);
    char inner[2000];
    repeat(inner, sizeof inner, 'q', 1999);
    st_error_set(&e, STRATA_ETASK, "run 9: L3 worker sub 1: task 't' #4 failed: %s", inner);
    const char *m = st_error_msg(&e);
    assert_int_equal(strlen(m), STRATA_ERRMSG_MAX - 1);
    assert_true(strncmp(m, "run 9: L3 worker sub 1: task 't' #4 failed: qqq", 47) == 0);
    assert_true(ends_with(m, "q" ST_MSG_CUT));
}

static void raise_copies_the_record_into_the_thread_error(void **state) {
    st_error e;
    st_error_init(&e);
    st_fail(STRATA_EINVAL, "an older failure");
    assert_int_equal(st_error_raise(&e), STRATA_OK); /* nothing recorded: left alone */
    assert_string_equal(strata_error_message(), "an older failure");
    st_error_set(&e, STRATA_EPOISONED, "chip sim:0 is poisoned");
    assert_int_equal(st_error_raise(&e), STRATA_EPOISONED);
    assert_string_equal(strata_error_message(), "chip sim:0 is poisoned");
    st_clear_error();
    assert_int_equal(st_error_raise(&e), STRATA_EPOISONED); /* the same on every call */
    assert_string_equal(strata_error_message(), "chip sim:0 is poisoned");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(st_fail_formats_the_message_and_returns_the_status),
        cmocka_unit_test(st_failv_formats_like_st_fail),
        cmocka_unit_test(st_fail_msg_copies_the_text_without_formatting_it),
        cmocka_unit_test(st_fail_prefix_puts_the_caller_in_front),
        cmocka_unit_test(st_clear_error_empties_the_message),
        cmocka_unit_test(a_long_message_keeps_its_first_bytes_and_its_terminator),
        cmocka_unit_test(a_prefix_on_a_full_message_cuts_the_tail_not_the_prefix),
        cmocka_unit_test(each_thread_has_its_own_message),
        cmocka_unit_test(a_successful_call_leaves_the_last_message),
        cmocka_unit_test(every_status_has_its_own_name),
        cmocka_unit_test(a_value_that_is_no_status_is_named_unknown),
        cmocka_unit_test(an_empty_record_has_no_status_and_an_empty_message),
        cmocka_unit_test(init_sets_the_status_only),
        cmocka_unit_test(the_first_error_wins),
        cmocka_unit_test(an_error_without_a_code_or_a_message_still_reads_as_one),
        cmocka_unit_test(a_long_error_is_cut_with_the_marker),
        cmocka_unit_test(raise_copies_the_record_into_the_thread_error),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
