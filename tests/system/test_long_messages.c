// label: concurrency
/* tests/system/test_long_messages.c - messages longer than the library's
 * message size, end to end.
 *
 * Owns: a task that fails with a 2000-character strata_task_set_error
 * message, and a chip program that fails with a 2000-character
 * strata_program_fail message (handed to the backend, inside an L3 worker
 * and on an L2 chip): what
 * strata_error_message() and strata_run_error() read keeps the whole
 * context in front (run, level, worker, task; chip and phase), uses the
 * library's whole message size, and ends with the cut marker instead of
 * stopping silently in the middle of the inner message.
 */
#include <stdio.h>
#include <string.h>

#include "test_support.h"

#include "strata/backend.h"
#include "strata/chip.h"
#include "util/error.h"
#include "util/message.h"

enum { LONG = 2000 };

/* "BEGIN" and then 'x' up to LONG characters. */
static const char *long_text(void) {
    static char text[LONG + 1];
    memset(text, 'x', LONG);
    memcpy(text, "BEGIN", 5);
    text[LONG] = '\0';
    return text;
}

static int ends_with_marker(const char *s) {
    size_t n = strlen(s), k = strlen(ST_MSG_CUT);
    return n > k && s[n - k - 1] == 'x' && strcmp(s + n - k, ST_MSG_CUT) == 0;
}

/* msg starts with `prefix`, holds `inner` somewhere after it, is as long as
 * the message size allows (if `full`) and ends with the marker. */
static void assert_cut_message(const char *msg, const char *prefix, const char *inner, int full) {
    if (strncmp(msg, prefix, strlen(prefix)) != 0)
        fail_msg("message does not start with '%s': %s", prefix, msg);
    if (!strstr(msg + strlen(prefix), inner))
        fail_msg("'%s' missing after the prefix: %s", inner, msg);
    if (full && strlen(msg) != STRATA_ERRMSG_MAX - 1)
        fail_msg("message is %zu bytes, not the %d the message size allows: %s", strlen(msg),
                 STRATA_ERRMSG_MAX - 1, msg);
    if (!ends_with_marker(msg))
        fail_msg("message does not end with '%s' after the inner text: %s", ST_MSG_CUT, msg);
}

/* ---- A sub task ---------------------------------------------------------------------- */

static int long_failure(const strata_task_view *a, void *user) {
    strata_task_set_error("%s", long_text());
    return 1;
}

static int submit_one_sub(strata_orch *o, void *arg) {
    strata_task_args a;
    strata_args_init(&a);
    return strata_orch_submit_sub(o, *(strata_callable *)arg, &a);
}

static void a_long_task_message_keeps_its_context_and_ends_with_the_marker(void **state) {
    strata_worker_config wc;
    strata_worker_config_init(&wc);
    wc.sub_workers = 1; /* the worker is named "sub 0" */
    strata_worker *w;
    assert_ok(strata_worker_create(&wc, &w));
    strata_callable fn;
    assert_ok(strata_worker_register_sub(w, "long_failure", long_failure, NULL, &fn));
    assert_ok(strata_worker_init(w));

    strata_run *h;
    assert_ok(strata_worker_submit(w, submit_one_sub, &fn, &h));
    assert_int_equal(strata_run_wait(h, STRATA_WAIT_FOREVER), STRATA_ETASK);
    const char *prefix = "run 1: L3 worker sub 0: task 'long_failure' #1 failed: BEGINxxx";
    assert_cut_message(strata_error_message(), prefix, "", 1);
    assert_cut_message(strata_run_error(h), prefix, "", 1);
    assert_string_equal(strata_run_error(h), strata_error_message());
    strata_run_release(h);
    strata_worker_destroy(w);
}

/* ---- A chip program ------------------------------------------------------------------- */

static int long_program(strata_program_ctx *ctx, const strata_task_view *a, void *user) {
    strata_program_fail(ctx, "%s", long_text());
    return 1;
}

static const char *const program_inner =
    "program 'long_program' failed while enqueuing its launches (code 1): BEGINxxx";

typedef struct chip_case {
    strata_callable fn;
    int chip;
} chip_case;

static int submit_one_chip_task(strata_orch *o, void *arg) {
    chip_case *c = arg;
    strata_task_args a;
    strata_args_init(&a);
    return strata_orch_submit_next_level(o, c->fn, &a, NULL, c->chip);
}

/* The backend's fail callback: keeps what strata_program_fail handed over. */
static void capture_fail(strata_program_ctx *ctx, const char *msg) {
    snprintf(ctx->impl, STRATA_BACKEND_MSG_MAX * 2, "%s", msg);
}

static void a_program_failure_reaches_the_backend_cut_at_its_limit_and_marked(void **state) {
    char got[STRATA_BACKEND_MSG_MAX * 2] = ""; /* stays empty if fail is never called */
    strata_program_ctx ctx = {
        .abi_version = STRATA_BACKEND_ABI_VERSION, .impl = got, .fail = capture_fail};
    strata_program_fail(&ctx, "%s", long_text());
    assert_int_equal(strlen(got), STRATA_BACKEND_MSG_MAX - 1);
    assert_true(strncmp(got, "BEGINxxx", 8) == 0);
    assert_true(ends_with_marker(got));
}

static void a_long_chip_program_failure_in_a_worker_keeps_its_context(void **state) {
    strata_worker_config wc;
    strata_worker_config_init(&wc);
    strata_worker *w;
    assert_ok(strata_worker_create(&wc, &w));
    strata_chip_config cc;
    strata_chip_config_init(&cc);
    chip_case c;
    assert_ok(strata_worker_add_chip(w, &cc, &c.chip));
    strata_chip_program_desc d = {.name = "long_program", .fn = long_program};
    assert_ok(strata_worker_register_chip_program(w, &d, &c.fn));
    assert_ok(strata_worker_init(w));

    strata_run *h;
    assert_ok(strata_worker_submit(w, submit_one_chip_task, &c, &h));
    assert_int_equal(strata_run_wait(h, STRATA_WAIT_FOREVER), STRATA_ETASK);
    const char *prefix = "run 1: L3 worker 0 (chip sim:0): task 'long_program' #1 failed: chip "
                         "sim:0: prepare failed";
    /* Cut at the backend's limit (marked there), then wrapped in the chip's and
     * the run's context, which fit. */
    assert_cut_message(strata_error_message(), prefix, program_inner, 0);
    assert_cut_message(strata_run_error(h), prefix, program_inner, 0);
    strata_run_release(h);
    strata_worker_destroy(w);
}

static void a_long_chip_program_failure_on_a_chip_keeps_its_context(void **state) {
    strata_chip_config cc;
    strata_chip_config_init(&cc);
    strata_chip *chip;
    assert_ok(strata_chip_open(&cc, &chip));
    strata_chip_program prog;
    strata_chip_program_desc d = {.name = "long_program", .fn = long_program};
    assert_ok(strata_chip_register_program(chip, &d, &prog));
    strata_task_args a;
    strata_args_init(&a);
    assert_int_equal(strata_chip_run_sync(chip, prog, &a, NULL), STRATA_EDEVICE);
    /* The backend's own message limit is smaller than the library's: the cut
     * there is marked, and the chip's context stays in front. */
    assert_cut_message(strata_error_message(), "chip sim:0: prepare failed", program_inner, 0);
    assert_ok(strata_chip_close(chip)); /* a program failure does not poison the chip */
    strata_chip_destroy(chip);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(a_long_task_message_keeps_its_context_and_ends_with_the_marker),
        cmocka_unit_test(a_program_failure_reaches_the_backend_cut_at_its_limit_and_marked),
        cmocka_unit_test(a_long_chip_program_failure_in_a_worker_keeps_its_context),
        cmocka_unit_test(a_long_chip_program_failure_on_a_chip_keeps_its_context),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
