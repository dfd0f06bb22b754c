/* tests/support/test_support.h - small helpers shared by the cmocka tests:
 * status and message assertions, probes for calls made inside an
 * orchestration function, deterministic random numbers, and the worker
 * fixture most tests start from (ts_worker_open / ts_worker_close).
 *
 * Owns: nothing the library needs. Must never: hide a failure (every helper
 * asserts what it does), or run a cmocka assertion on an engine thread or
 * inside an orchestration function (a failed one would longjmp out of the
 * engine: probes record there and assert afterwards).
 */
#ifndef STRATA_TEST_SUPPORT_H
#define STRATA_TEST_SUPPORT_H

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdatomic.h>
#include <stdint.h>
#include <cmocka.h>

#include "strata/strata.h"
#include "util/error.h"

#define TS_SEC 1000000000ull

/* How the system tests host their sub workers: a test built a second time
 * with -DTS_SUB_MODE=STRATA_HOST_PROCESS (a *_process.c file that includes
 * it) runs the same scenarios on process-hosted sub workers. */
#ifndef TS_SUB_MODE
#define TS_SUB_MODE STRATA_HOST_THREAD
#endif

/* Zeroed memory shared with process children forked after this call (a
 * MAP_SHARED anonymous mapping): state a task body writes and the test reads,
 * or the test writes and a body reads, in either sub_mode. Asserts it got it. */
void *ts_shared_calloc(size_t n, size_t size);
void ts_shared_free(void *p, size_t n, size_t size);

/* 1 if process pid is gone: reaped, or a zombie (its memory and its share of
 * any IPC are released; only its exit status waits for a parent). */
int ts_process_gone(int pid);
/* The state letter of a /proc/<pid>[/task/<tid>]/stat file ('S' sleeping,
 * 'Z' zombie, ...): '\0' if the file is gone, '?' if it cannot be parsed. */
char ts_stat_state(const char *stat_path);
/* Threads of this process now (the entries of /proc/self/task; -1 if it
 * cannot be read). */
int ts_thread_count(void);

/* Assert a strata call returned `expected`, printing strata_error_message() otherwise. */
#define assert_status(expected, expr)                                                              \
    do {                                                                                           \
        int ts_rc_ = (expr);                                                                       \
        if (ts_rc_ != (expected))                                                                  \
            fail_msg("%s returned %s (%d), expected %s: %s", #expr, strata_status_name(ts_rc_),    \
                     ts_rc_, strata_status_name(expected), strata_error_message());                \
    } while (0)

#define assert_ok(expr) assert_status(STRATA_OK, expr)

/* Assert that this thread's last error is non-empty and mentions `needle` (any case). */
#define assert_message_mentions(needle) ts_assert_mentions(strata_error_message(), (needle))

/* `expr` fails with `status` and a fresh message mentioning `needle`. */
#define assert_fails(status, needle, expr)                                                         \
    do {                                                                                           \
        st_clear_error();                                                                          \
        assert_status((status), (expr));                                                           \
        assert_message_mentions(needle);                                                           \
    } while (0)

/* `msg` is non-empty and contains `needle`, ignoring case. */
void ts_assert_mentions(const char *msg, const char *needle);

/* Deterministic pseudo-random numbers (xorshift64*), seeded per test. */
uint64_t ts_rand(uint64_t *state);

/* ---- Probes: calls made inside an orchestration function ---------------------
 * The status and message of each call are recorded there and asserted once
 * the run is over. Recording past TS_MAX_PROBES is dropped; assert_probe
 * fails on a probe that was not recorded. */

#define TS_MAX_PROBES 96

typedef struct ts_probe {
    int rc;
    char msg[STRATA_ERRMSG_MAX];
} ts_probe;

typedef struct ts_probes {
    ts_probe p[TS_MAX_PROBES];
    int n;
} ts_probes;

/* Keep rc, and strata_error_message() if rc is a failure. */
void ts_probe_record(ts_probes *ps, int rc);

/* Run `expr` with a clear message and keep its status + message. */
#define TS_PROBE(ps, expr)                                                                         \
    do {                                                                                           \
        st_clear_error();                                                                          \
        ts_probe_record((ps), (expr));                                                             \
    } while (0)

/* Probe i returned `status`, and a failure left a message mentioning `needle`. */
#define assert_probe(ps, i, status, needle) ts_assert_probe((ps), (i), (status), (needle), #i)
void ts_assert_probe(const ts_probes *ps, int i, int status, const char *needle, const char *what);

/* ---- The worker fixture -------------------------------------------------------
 * A worker made from a config, with scriptable next-level endpoints
 * (test_endpoint.h) and sim chips if asked, the standard callables below and
 * the test's own sub callables registered, initialised, and host buffers
 * created after init. Every step is asserted. */

#define TS_MAX_ENDPOINTS 4
#define TS_MAX_CHIPS 4
#define TS_MAX_BUFFERS 4
#define TS_MAX_SUBS 8

typedef struct st_test_ep st_test_ep;

/* One sub callable of the test, registered as strata_worker_register_sub would. */
typedef struct ts_sub {
    const char *name; /* NULL ends the list */
    strata_sub_fn fn;
    void *user;
    strata_callable *out;
} ts_sub;

typedef struct ts_worker_opts {
    strata_worker_config cfg; /* strata_worker_config_init's defaults */
    int endpoints;            /* scriptable next-level endpoints, worker ids 0..endpoints-1 */
    int manual_endpoints;     /* 1: they hold each task until st_test_ep_finish */
    int chips; /* sim chips (device 0.., the test kernel module), added after the endpoints */
    const struct strata_sim_injection *chip_sim[TS_MAX_CHIPS]; /* their knobs (NULL: none) */
    size_t buffers[TS_MAX_BUFFERS]; /* bytes of each host buffer (0 ends the list) */
    ts_sub subs[TS_MAX_SUBS];       /* registered after the standard callables */
    /* Called between create and init, e.g. for a hook the sub workers read
     * when they start. NULL: none. */
    void (*before_init)(strata_worker *w, void *ctx);
    void *before_init_ctx;
} ts_worker_opts;

typedef struct ts_worker {
    strata_worker *w;
    st_test_ep *ep[TS_MAX_ENDPOINTS];
    int ep_id[TS_MAX_ENDPOINTS];
    int chip_id[TS_MAX_CHIPS]; /* next-level worker ids of the chips */
    strata_buffer *buf[TS_MAX_BUFFERS];
    /* The standard callables, registered on every fixture worker: */
    strata_callable nl;    /* "nl": next-level, no function (a test endpoint just completes it) */
    strata_callable noop;  /* "noop": returns 0 */
    strata_callable count; /* "count": adds 1 to `counter`, returns 0 */
    strata_callable fail;  /* "fail": strata_task_set_error("boom <scalar 0>"), returns 7 */
    strata_callable gate;  /* "gate": waits until ts_gate_open (10 s at most: then it fails,
                              counted in gate_timeouts, which ts_worker_close asserts is 0) */
    _Atomic int counter;
    _Atomic int gate_open;
    _Atomic int gate_timeouts;
} ts_worker;

/* The "noop" body: returns 0 (for registrations of the test's own). */
int ts_noop_sub(const strata_task_view *a, void *user);

/* The defaults: strata_worker_config_init with 2 sub workers (whatever the
 * machine's CPU count), no endpoint, no chip, no buffer, no sub of the test's. */
void ts_worker_opts_init(ts_worker_opts *o);

/* Open the worker described by o into t. t must stay where it is until
 * ts_worker_close: the standard task bodies are handed its address. */
void ts_worker_open(ts_worker *t, const ts_worker_opts *o);

/* Open the gate, close the worker (asserting STRATA_OK), destroy it and the
 * buffers, and assert that no gated task timed out. */
void ts_worker_close(ts_worker *t);

/* The test destroyed t->w itself (strata_worker_destroy): t forgets it. */
void ts_worker_forget(ts_worker *t);

/* Let every "gate" task (running or later) finish. */
void ts_gate_open(ts_worker *t);

/* An I32 view of b: n elements from element `first`, element stride `stride`. */
strata_tensor ts_i32(const strata_buffer *b, int64_t first, int64_t n, int64_t stride);

#endif
