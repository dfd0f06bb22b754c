/* tests/support/test_support.c - helpers shared by the cmocka tests: message
 * and probe assertions, random numbers, whether a process is gone, and the
 * worker fixture.
 *
 * Owns: the standard task bodies of the fixture ("noop", "count", "fail",
 * "gate") and the order a fixture worker is built and torn down in.
 * Must never: assert from a task body (they run on sub worker threads:
 * they count and report instead), or leave a worker behind.
 */
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <sys/mman.h>

#include "test_support.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

#include "core/endpoint.h"
#include "strata/sim.h"
#include "test_endpoint.h"
#include "util/clock.h"

uint64_t ts_rand(uint64_t *state) {
    uint64_t x = *state ? *state : 0x9e3779b97f4a7c15ull;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *state = x;
    return x * 0x2545f4914f6cdd1dull;
}

void ts_assert_mentions(const char *msg, const char *needle) {
    if (!msg || !msg[0])
        fail_msg("the message is empty; expected one about '%s'", needle);
    if (!strcasestr(msg, needle))
        fail_msg("message '%s' does not mention '%s'", msg, needle);
}

/* ---- probes ------------------------------------------------------------------ */

void ts_probe_record(ts_probes *ps, int rc) {
    if (ps->n >= TS_MAX_PROBES)
        return; /* asserted afterwards: a test reads only what it recorded */
    ts_probe *p = &ps->p[ps->n++];
    p->rc = rc;
    snprintf(p->msg, sizeof p->msg, "%s", rc != STRATA_OK ? strata_error_message() : "");
}

void ts_assert_probe(const ts_probes *ps, int i, int status, const char *needle, const char *what) {
    if (i < 0 || i >= ps->n)
        fail_msg("probe %s (%d) was not recorded (%d probes)", what, i, ps->n);
    const ts_probe *p = &ps->p[i];
    if (p->rc != status)
        fail_msg("probe %s (%d) returned %s (%d), expected %s: %s", what, i,
                 strata_status_name(p->rc), p->rc, strata_status_name(status), p->msg);
    if (status == STRATA_OK)
        return;
    if (!p->msg[0])
        fail_msg("probe %s (%d): empty message", what, i);
    if (!strcasestr(p->msg, needle))
        fail_msg("probe %s (%d): message '%s' does not mention '%s'", what, i, p->msg, needle);
}

/* ---- the standard task bodies ------------------------------------------------- */

void *ts_shared_calloc(size_t n, size_t size) {
    void *p = mmap(NULL, n * size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    assert_true(p != MAP_FAILED);
    return p;
}

void ts_shared_free(void *p, size_t n, size_t size) {
    if (p)
        munmap(p, n * size);
}

int ts_noop_sub(const strata_task_view *a, void *user) {
    (void)a, (void)user;
    return 0;
}

static int count_fn(const strata_task_view *a, void *user) {
    (void)a;
    atomic_fetch_add(&((ts_worker *)user)->counter, 1);
    return 0;
}

static int fail_fn(const strata_task_view *a, void *user) {
    (void)user;
    strata_task_set_error("boom %llu", (unsigned long long)strata_args_scalar(a, 0));
    return 7;
}

/* Bounded, so a test that forgets to open the gate fails instead of hanging. */
static int gate_fn(const strata_task_view *a, void *user) {
    (void)a;
    ts_worker *t = user;
    uint64_t deadline = st_deadline_after(10 * TS_SEC);
    while (!atomic_load(&t->gate_open)) {
        if (st_now_ns() >= deadline) {
            atomic_fetch_add(&t->gate_timeouts, 1);
            strata_task_set_error("the test never opened the gate");
            return 1;
        }
        nanosleep(&(struct timespec){0, 100000}, NULL);
    }
    return 0;
}

/* ---- the worker fixture ---------------------------------------------------------- */

void ts_worker_opts_init(ts_worker_opts *o) {
    memset(o, 0, sizeof *o);
    strata_worker_config_init(&o->cfg);
    o->cfg.sub_workers = 2; /* the library's default follows the machine's CPUs; fixtures don't */
}

static void register_standard_callables(ts_worker *t) {
    assert_ok(st_register_next_level(t->w, "nl", NULL, NULL, NULL, &t->nl));
    assert_ok(strata_worker_register_sub(t->w, "noop", ts_noop_sub, t, &t->noop));
    assert_ok(strata_worker_register_sub(t->w, "count", count_fn, t, &t->count));
    assert_ok(strata_worker_register_sub(t->w, "fail", fail_fn, t, &t->fail));
    assert_ok(strata_worker_register_sub(t->w, "gate", gate_fn, t, &t->gate));
}

static void add_sim_chip(ts_worker *t, int i, const strata_sim_injection *inj) {
    strata_chip_config cc;
    strata_chip_config_init(&cc);
    cc.device_id = i;
    cc.kernel_module = STRATA_SIM_TEST_KERNELS_PATH;
    cc.sim = inj; /* copied when the chip opens */
    assert_ok(strata_worker_add_chip(t->w, &cc, &t->chip_id[i]));
}

int ts_thread_count(void) {
    DIR *d = opendir("/proc/self/task");
    if (!d)
        return -1;
    int n = 0;
    for (struct dirent *e; (e = readdir(d)) != NULL;)
        if (e->d_name[0] != '.')
            n++;
    closedir(d);
    return n;
}

/* Fixture workers open now: the threads of one still come and go (a chip
 * driver starts its second thread itself, a sim device its cores at the
 * first launch), so a thread count says something only while none is. */
static int open_fixture_workers;

void ts_worker_open(ts_worker *t, const ts_worker_opts *o) {
    assert_true(o->endpoints >= 0 && o->endpoints <= TS_MAX_ENDPOINTS);
    assert_true(o->chips >= 0 && o->chips <= TS_MAX_CHIPS);
    int threads_before = ts_thread_count();
    memset(t, 0, sizeof *t);
    assert_ok(strata_worker_create(&o->cfg, &t->w));
    for (int i = 0; i < o->endpoints; i++) {
        st_test_ep_config ec = {.manual = o->manual_endpoints};
        assert_ok(st_test_ep_add(t->w, &ec, &t->ep_id[i], &t->ep[i]));
        assert_int_equal(t->ep_id[i], i);
    }
    for (int i = 0; i < o->chips; i++)
        add_sim_chip(t, i, o->chip_sim[i]);
    register_standard_callables(t);
    for (int i = 0; i < TS_MAX_SUBS && o->subs[i].name; i++)
        assert_ok(strata_worker_register_sub(t->w, o->subs[i].name, o->subs[i].fn, o->subs[i].user,
                                             o->subs[i].out));
    if (o->before_init)
        o->before_init(t->w, o->before_init_ctx);
    /* Nothing added before init starts a thread: init forks process
     * children, and a thread running at a fork (in its start-up, inside a
     * sanitizer's or the allocator's lock) can leave the child a lock that
     * no thread of it releases. */
    if (open_fixture_workers == 0)
        assert_int_equal(ts_thread_count(), threads_before);
    assert_ok(strata_worker_init(t->w));
    open_fixture_workers++;
    for (int i = 0; i < TS_MAX_BUFFERS && o->buffers[i]; i++)
        assert_ok(strata_buffer_create(t->w, o->buffers[i], &t->buf[i]));
}

void ts_gate_open(ts_worker *t) {
    atomic_store(&t->gate_open, 1);
}

void ts_worker_forget(ts_worker *t) {
    t->w = NULL;
    open_fixture_workers--;
}

void ts_worker_close(ts_worker *t) {
    ts_gate_open(t); /* never leave a held task behind */
    assert_ok(strata_worker_close(t->w));
    strata_worker_destroy(t->w);
    ts_worker_forget(t);
    for (int i = 0; i < TS_MAX_BUFFERS; i++) {
        strata_buffer_destroy(t->buf[i]);
        t->buf[i] = NULL;
    }
    assert_int_equal(atomic_load(&t->gate_timeouts), 0);
}

strata_tensor ts_i32(const strata_buffer *b, int64_t first, int64_t n, int64_t stride) {
    strata_tensor t;
    assert_ok(strata_tensor_view(b, (uint64_t)first * 4, STRATA_I32, 1, &n, &stride, &t));
    return t;
}

char ts_stat_state(const char *stat_path) {
    char buf[256];
    FILE *f = fopen(stat_path, "r");
    if (!f)
        return '\0';
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    const char *close_paren = strrchr(buf, ')'); /* the name may hold spaces and parens */
    return close_paren && close_paren[1] == ' ' ? close_paren[2] : '?';
}

int ts_process_gone(int pid) {
    if (kill(pid, 0) == -1 && errno == ESRCH)
        return 1;
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/stat", pid);
    char state = ts_stat_state(path);
    return state == '\0' || state == 'Z';
}
