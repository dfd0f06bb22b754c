/* tests/unit/test_process_endpoint.c - the process endpoint and the child
 * serve loop (exec/process_endpoint.c, exec/process_child.c, sub_child.c).
 *
 * Startup (ready, INIT_FAILED text, early exit, a hang against the startup
 * bound, every child reaped), a task round trip through shared memory,
 * REGISTER after init and a refused registration, a bad frame each way
 * (protocol version, truncated and oversized arguments, unknown digest, a
 * result frame of another identity) failing only its task, two new frames
 * taken in dispatch order whatever frames hold them, control calls
 * with their errors carried back, an idempotent close that reaps, and the
 * child's late ring of a parked parent-side thread when nobody took its
 * result (the parent's liveness probe would take it only after 2 ms).
 * Forks processes: not a concurrency (TSan) test.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "core/endpoint.h"
#include "core/engine.h"
#include "exec/process_endpoint.h"
#include "ipc/wire_args.h"
#include "test_support.h"
#include "util/clock.h"
#include "util/digest.h"

/* A page shared with every child, mapped before any fork: children write
 * what the parent checks (their pids, what they saw). */
typedef struct shared_page {
    _Atomic int pids[8];
    _Atomic int npids;
    _Atomic int seen;
    _Atomic uint64_t taken[4]; /* ordering kind: the dispatch ids, in the order handed to it */
    _Atomic int ntaken;
} shared_page;
static shared_page *page;

static void record_pid(void) {
    int i = atomic_fetch_add(&page->npids, 1);
    if (i < 8)
        atomic_store(&page->pids[i], (int)getpid());
}

static int gone(int pid) {
    return kill(pid, 0) == -1 && errno == ESRCH;
}

static int setup(void **state) {
    (void)state;
    page = mmap(NULL, sizeof *page, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    assert_true(page != MAP_FAILED);
    return 0;
}

static int teardown(void **state) {
    (void)state;
    munmap(page, sizeof *page);
    return 0;
}

static void reset_page(void) {
    memset(page, 0, sizeof *page);
}

/* ---- kinds of the tests' own (next-level process children) -------------- */

static int ok_init(void *arg, void **self) {
    (void)arg;
    record_pid();
    *self = NULL;
    return STRATA_OK;
}
static int failing_init(void *arg, void **self) {
    (void)arg;
    (void)self;
    record_pid();
    return st_fail(STRATA_EDEVICE, "no device here");
}
static int exiting_init(void *arg, void **self) {
    (void)arg;
    (void)self;
    record_pid();
    _exit(5);
    return STRATA_OK;
}
static int hanging_init(void *arg, void **self) {
    (void)arg;
    (void)self;
    record_pid();
    for (;;)
        pause();
    return STRATA_OK;
}
/* Finishes every task OK, except that scalar 0 == 1 corrupts the identity
 * it answers with and 2 its protocol version (the parent must refuse both). */
static void echo_task(void *self, st_mbox *m, uint32_t frame, const strata_task_args *args,
                      const st_callable_info *ci) {
    (void)self;
    (void)ci;
    if (args->nscalars > 0 && args->scalars[0] == 1)
        st_mbox_task(m, frame)->trailer.dispatch_id += 100;
    if (args->nscalars > 0 && args->scalars[0] == 2)
        st_mbox_task(m, frame)->trailer.protocol = 99;
    st_proc_task_finish(m, frame, STRATA_OK, NULL);
}
static int refusing_registered(void *self, const st_callable_info *ci) {
    (void)self;
    return st_fail(STRATA_EINVAL, "this child refuses '%s'", ci->name);
}
static int failing_control(void *self, st_mbox_frame *ctl) {
    (void)self;
    if (ctl->command == ST_MBOX_CMD_FREE) { /* held until the test opens the gate (10 s at most) */
        for (int i = 0; i < 100000 && !atomic_load(&page->seen); i++)
            usleep(100);
        return STRATA_OK;
    }
    return st_fail(STRATA_EDEVICE, "command %llu failed on purpose",
                   (unsigned long long)ctl->command);
}
static void quiet_shutdown(void *self, st_mbox *m) {
    (void)self;
    (void)m;
}

#define KIND(nm, initfn)                                                                           \
    {                                                                                              \
        .name = nm, .frames = 1, .init = initfn, .task = echo_task,                                \
        .registered = refusing_registered, .control = failing_control, .shutdown = quiet_shutdown  \
    }
static const st_proc_kind ok_kind = KIND("ok", ok_init);
static const st_proc_kind failing_kind = KIND("failing", failing_init);
static const st_proc_kind exiting_kind = KIND("exiting", exiting_init);
static const st_proc_kind hanging_kind = KIND("hanging", hanging_init);

/* Two frames, as a chip child that stages; records each dispatch id in the
 * order the loop hands them over, and finishes each at once. */
static void order_task(void *self, st_mbox *m, uint32_t frame, const strata_task_args *args,
                       const st_callable_info *ci) {
    (void)self;
    (void)args;
    (void)ci;
    int i = atomic_fetch_add(&page->ntaken, 1);
    if (i < 4)
        atomic_store(&page->taken[i], st_mbox_task(m, frame)->trailer.dispatch_id);
    st_proc_task_finish(m, frame, STRATA_OK, NULL);
}
static const st_proc_kind ordering_kind = {.name = "ordering",
                                           .frames = 2,
                                           .init = ok_init,
                                           .task = order_task,
                                           .shutdown = quiet_shutdown};

static st_proc_ep *add_child(strata_worker *w, const st_proc_kind *kind, const char *label) {
    st_proc_ep_config cfg = {
        .kind = kind, .worker_id = -1, .spin_ns = 1000, .startup_timeout_ns = 30 * TS_SEC};
    snprintf(cfg.label, sizeof cfg.label, "%s", label);
    st_proc_ep *p;
    assert_ok(st_proc_ep_create(w, &cfg, &p));
    int id;
    assert_ok(st_worker_add_endpoint(w, st_proc_ep_endpoint(p), &id));
    return p;
}

static strata_worker *new_worker(strata_host_mode mode, uint32_t subs, uint64_t startup_ns) {
    strata_worker_config cfg;
    strata_worker_config_init(&cfg);
    cfg.sub_mode = mode;
    cfg.sub_workers = subs;
    cfg.spin_ns = 1000;
    if (startup_ns)
        cfg.startup_timeout_ns = startup_ns;
    strata_worker *w;
    assert_ok(strata_worker_create(&cfg, &w));
    return w;
}

static void assert_all_gone(void) {
    int n = atomic_load(&page->npids);
    assert_true(n > 0);
    for (int i = 0; i < n && i < 8; i++)
        assert_true(gone(atomic_load(&page->pids[i])));
}

/* ---- startup ------------------------------------------------------------ */

static void every_child_becomes_ready_and_is_reaped_at_close(void **state) {
    (void)state;
    reset_page();
    strata_worker *w = new_worker(STRATA_HOST_PROCESS, 2, 0);
    add_child(w, &ok_kind, "L3 child a");
    add_child(w, &ok_kind, "L3 child b");
    assert_ok(strata_worker_init(w));
    assert_int_equal(atomic_load(&page->npids), 2);
    int subpid[2];
    for (int i = 0; i < 2; i++) {
        st_proc_ep *p = st_proc_ep_of(w->subs[i].ep);
        assert_non_null(p);
        subpid[i] = (int)st_proc_ep_child(p)->pid;
        assert_true(subpid[i] > 0 && !gone(subpid[i]));
    }
    assert_ok(strata_worker_close(w));
    assert_ok(strata_worker_close(w)); /* idempotent */
    assert_all_gone();
    for (int i = 0; i < 2; i++)
        assert_true(gone(subpid[i]));
    strata_worker_destroy(w);
}

static void a_failed_init_names_the_child_and_its_text_and_reaps_all(void **state) {
    (void)state;
    reset_page();
    strata_worker *w = new_worker(STRATA_HOST_PROCESS, 2, 0);
    add_child(w, &ok_kind, "L3 child a");
    add_child(w, &failing_kind, "chip fake:1");
    assert_fails(STRATA_EENDPOINT, "chip fake:1", strata_worker_init(w));
    assert_message_mentions("init failed: no device here");
    assert_int_equal(atomic_load(&page->npids), 2);
    assert_all_gone();
    assert_int_equal(w->nsubs, 0); /* the sub children went with their endpoints */
    strata_worker_destroy(w);
}

static void an_early_exit_is_reported_with_its_status(void **state) {
    (void)state;
    reset_page();
    strata_worker *w = new_worker(STRATA_HOST_THREAD, 1, 0);
    add_child(w, &exiting_kind, "L3 child 7");
    assert_fails(STRATA_EENDPOINT, "L3 child 7", strata_worker_init(w));
    assert_message_mentions("exited with status 5 during startup");
    assert_all_gone();
    strata_worker_destroy(w);
}

static void a_hung_child_times_out_by_name_and_is_killed(void **state) {
    (void)state;
    reset_page();
    strata_worker *w = new_worker(STRATA_HOST_PROCESS, 1, TS_SEC / 5);
    add_child(w, &hanging_kind, "L3 child 3");
    assert_fails(STRATA_ETIMEDOUT, "L3 child 3", strata_worker_init(w));
    assert_message_mentions("startup_timeout_ns");
    assert_all_gone();
    strata_worker_destroy(w);
}

/* ---- tasks -------------------------------------------------------------- */

/* out[i] = in[i] * scalar 0, and the child's pid into out's last element. */
static int scale_pid(const strata_task_view *a, void *user) {
    (void)user;
    int32_t *in = strata_args_data(a, 0), *out = strata_args_data(a, 1);
    int32_t k = (int32_t)strata_args_scalar(a, 0);
    for (int i = 0; i < 15; i++)
        out[i] = in[i] * k;
    out[15] = (int32_t)getpid();
    if (k < 0) {
        strata_task_set_error("negative factor %d", k);
        return 3;
    }
    return 0;
}

typedef struct job {
    strata_callable fn;
    strata_buffer *in, *out;
    int64_t k;
} job;

static int orch_job(strata_orch *o, void *arg) {
    job *j = arg;
    int64_t shape[1] = {16};
    strata_tensor ti, to;
    STRATA_TRY(strata_tensor_contiguous(j->in, STRATA_I32, 1, shape, &ti));
    STRATA_TRY(strata_tensor_contiguous(j->out, STRATA_I32, 1, shape, &to));
    strata_task_args a;
    strata_args_init(&a);
    STRATA_TRY(strata_args_add_tensor(&a, &ti, STRATA_IN));
    STRATA_TRY(strata_args_add_tensor(&a, &to, STRATA_OUT));
    STRATA_TRY(strata_args_add_scalar(&a, (uint64_t)j->k));
    return strata_orch_submit_sub(o, j->fn, &a);
}

static void open_job(strata_worker *w, job *j, const char *name) {
    assert_ok(strata_worker_register_sub(w, name, scale_pid, NULL, &j->fn));
    assert_ok(strata_buffer_create(w, 64, &j->in));
    assert_ok(strata_buffer_create(w, 64, &j->out));
    int32_t *in = strata_buffer_data(j->in);
    for (int i = 0; i < 16; i++)
        in[i] = i + 1;
    j->k = 3;
}

static void close_job(job *j) {
    strata_buffer_destroy(j->in);
    strata_buffer_destroy(j->out);
}

static void a_task_round_trip_runs_in_the_child_on_shared_memory(void **state) {
    (void)state;
    strata_worker *w = new_worker(STRATA_HOST_PROCESS, 1, 0);
    job j;
    assert_ok(strata_worker_init(w));
    open_job(w, &j, "scale"); /* after init: REGISTER control, arena buffers */
    assert_ok(strata_worker_run(w, orch_job, &j));
    int32_t *out = strata_buffer_data(j.out);
    for (int i = 0; i < 15; i++)
        assert_int_equal(out[i], 3 * (i + 1));
    assert_int_equal(out[15], (int)st_proc_ep_child(st_proc_ep_of(w->subs[0].ep))->pid);
    assert_int_not_equal(out[15], (int)getpid());
    j.k = -2; /* a failing body: its own message, through the child */
    assert_int_equal(strata_worker_run(w, orch_job, &j), STRATA_ETASK);
    assert_message_mentions("sub 0");
    assert_message_mentions("negative factor -2");
    j.k = 4;
    assert_ok(strata_worker_run(w, orch_job, &j));
    assert_int_equal(out[0], 4);
    close_job(&j);
    strata_worker_destroy(w);
}

/* Runs in the child: holds its task until the test opens the gate (10 s at most). */
static int gated_task(const strata_task_view *a, void *user) {
    (void)a;
    (void)user;
    for (int i = 0; i < 100000 && !atomic_load(&page->seen); i++)
        usleep(100);
    return 0;
}
static int orch_gated(strata_orch *o, void *arg) {
    strata_task_args a;
    strata_args_init(&a);
    return strata_orch_submit_sub(o, *(strata_callable *)arg, &a);
}

static void a_parked_parent_is_rung_when_nobody_took_the_result(void **state) {
    (void)state;
    strata_worker_config cfg;
    strata_worker_config_init(&cfg);
    cfg.sub_mode = STRATA_HOST_PROCESS;
    cfg.sub_workers = 1;
    cfg.spin_ns = 0; /* the parent-side thread parks at once */
    strata_worker *w;
    assert_ok(strata_worker_create(&cfg, &w));
    strata_callable fn;
    assert_ok(strata_worker_register_sub(w, "gated", gated_task, NULL, &fn));
    assert_ok(strata_worker_init(w));
    st_proc_ep *p = st_proc_ep_of(w->subs[0].ep);
    st_event *bell = &st_mbox_control(st_proc_ep_mbox(p))->parent_bell;
    /* No probe within the test: only the child's ring can wake the parked
     * thread, so every result must come back rung (a lost ring would leave
     * the run unfinished and the bounded wait below would time out). */
    st_proc_ep_set_probe_ns(p, 60 * TS_SEC);
    for (int attempt = 0; attempt < 3; attempt++) {
        atomic_store(&page->seen, 0);
        strata_run *h;
        assert_ok(strata_worker_submit(w, orch_gated, &fn, &h));
        /* the thread parks with the task in flight (a bounded wait: the caller
         * below does not collect, it waits with a timeout and never helps) */
        for (int i = 0; i < 100000 && atomic_load(&bell->sleepers) == 0; i++)
            usleep(100);
        usleep(1000); /* past the wake of the dispatch's ring, if it got one */
        for (int i = 0; i < 100000 && atomic_load(&bell->sleepers) == 0; i++)
            usleep(100);
        assert_int_not_equal(atomic_load(&bell->sleepers), 0);
        atomic_store(&page->seen, 1);
        assert_ok(strata_run_wait(h, 10 * TS_SEC)); /* done: only a ring could wake it */
        strata_run_release(h);
    }
    strata_worker_destroy(w);
}

static void a_registration_before_init_is_in_the_childs_snapshot(void **state) {
    (void)state;
    strata_worker *w = new_worker(STRATA_HOST_PROCESS, 2, 0);
    job j;
    open_job(w, &j, "early"); /* before init: buffers of their own mapping, forked with */
    assert_ok(strata_worker_init(w));
    assert_ok(strata_worker_run(w, orch_job, &j));
    assert_int_equal(((int32_t *)strata_buffer_data(j.out))[14], 45);
    close_job(&j);
    strata_worker_destroy(w);
}

static void a_refused_registration_names_the_child(void **state) {
    (void)state;
    reset_page();
    strata_worker *w = new_worker(STRATA_HOST_PROCESS, 1, 0);
    add_child(w, &ok_kind, "L3 child 9");
    assert_ok(strata_worker_init(w));
    strata_callable c;
    assert_fails(STRATA_EENDPOINT, "L3 child 9",
                 strata_worker_register_sub(w, "late", ts_noop_sub, NULL, &c));
    assert_message_mentions("this child refuses 'late'");
    assert_message_mentions("1 of 2 children refused it"); /* sub 0 took it */
    assert_message_mentions("REGISTER");
    strata_worker_destroy(w);
}

/* ---- bad frames --------------------------------------------------------- */

typedef enum corruption { C_NONE, C_PROTOCOL, C_TRUNCATED, C_OVERSIZED, C_DIGEST } corruption;
static corruption corrupt_next;

static void corrupt_hook(st_proc_ep *p, st_mbox_frame *f, void *ctx) {
    (void)p;
    (void)ctx;
    switch (corrupt_next) {
    case C_PROTOCOL:
        f->protocol = 99;
        f->trailer.protocol = 99;
        break;
    case C_TRUNCATED:
        f->payload_bytes -= 8;
        break;
    case C_OVERSIZED:
        f->payload_bytes = ST_MBOX_ARGS_CAP + 1;
        break;
    case C_DIGEST:
        f->digest[0] ^= 0xff;
        break;
    case C_NONE:
        break;
    }
    corrupt_next = C_NONE; /* one frame only */
}

static void a_bad_frame_fails_only_its_task(void **state) {
    (void)state;
    strata_worker *w = new_worker(STRATA_HOST_PROCESS, 1, 0);
    job j;
    open_job(w, &j, "scale");
    assert_ok(strata_worker_init(w));
    st_proc_ep_set_frame_hook(st_proc_ep_of(w->subs[0].ep), corrupt_hook, NULL);
    static const struct {
        corruption c;
        const char *needle;
    } cases[] = {{C_PROTOCOL, "protocol"},
                 {C_TRUNCATED, "truncated arguments"},
                 {C_OVERSIZED, "oversized arguments"},
                 {C_DIGEST, "unknown callable digest"}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        corrupt_next = cases[i].c;
        st_clear_error();
        assert_int_equal(strata_worker_run(w, orch_job, &j), STRATA_EENDPOINT);
        assert_message_mentions(cases[i].needle);
        assert_message_mentions("sub 0");
        memset(strata_buffer_data(j.out), 0, 64);
        assert_ok(strata_worker_run(w, orch_job, &j)); /* the worker goes on */
        assert_int_equal(((int32_t *)strata_buffer_data(j.out))[1], 6);
    }
    close_job(&j);
    strata_worker_destroy(w);
}

typedef struct nl_job {
    strata_callable fn;
    int worker_id;
    uint64_t scalar;
} nl_job;

static int orch_nl(strata_orch *o, void *arg) {
    nl_job *j = arg;
    strata_task_args a;
    strata_args_init(&a);
    STRATA_TRY(strata_args_add_scalar(&a, j->scalar));
    return strata_orch_submit_next_level(o, j->fn, &a, NULL, j->worker_id);
}

static void a_result_of_another_identity_is_refused(void **state) {
    (void)state;
    reset_page();
    strata_worker *w = new_worker(STRATA_HOST_THREAD, 1, 0);
    st_proc_ep *p = add_child(w, &ok_kind, "L3 child 2");
    nl_job j = {.worker_id = st_proc_ep_endpoint(p)->worker_id};
    assert_ok(st_register_next_level(w, "echo", NULL, NULL, NULL, &j.fn));
    assert_ok(strata_worker_init(w));
    assert_ok(strata_worker_run(w, orch_nl, &j));
    j.scalar = 1; /* the child answers with a wrong dispatch id */
    assert_int_equal(strata_worker_run(w, orch_nl, &j), STRATA_EENDPOINT);
    assert_message_mentions("L3 child 2");
    assert_message_mentions("dispatch");
    j.scalar = 0;
    assert_ok(strata_worker_run(w, orch_nl, &j));
    j.scalar = 2; /* a result of another protocol version */
    assert_int_equal(strata_worker_run(w, orch_nl, &j), STRATA_EENDPOINT);
    assert_message_mentions("protocol");
    j.scalar = 0;
    assert_ok(strata_worker_run(w, orch_nl, &j));
    strata_worker_destroy(w);
}

/* ---- control calls ------------------------------------------------------ */

/* Publish dispatch `id` of callable `digest` (no arguments) in task frame i. */
static void publish_task(st_mbox *m, uint32_t i, uint64_t id, const st_digest *digest) {
    st_mbox_frame *f = st_mbox_task(m, i);
    st_mbox_trailer t = {.protocol = ST_MBOX_PROTOCOL,
                         .run_id = 1,
                         .lease_slot = 0,
                         .generation = 1,
                         .dispatch_id = id};
    st_lease lease = {.slot = 0, .generation = 1};
    strata_call_config cfg = {0, 0};
    st_mbox_task_prepare(f, &t, &lease, &cfg, 0, digest->bytes);
    strata_task_args none;
    memset(&none, 0, sizeof none);
    size_t used = 0;
    assert_ok(st_wire_args_encode(&none, f->payload, ST_MBOX_ARGS_CAP, &used));
    f->payload_bytes = (uint32_t)used;
    st_mbox_publish(f, ST_MBOX_TASK_READY);
}

/* The parent fills whichever frame is free, so frame 1 can hold dispatch n
 * while frame 0 holds n + 1. A child that finds both at once must hand n on
 * first: a chip's lane refuses n once n + 1 launched. The child is stopped
 * while both are published, so its next pass sees them together. */
static void a_child_takes_two_new_frames_in_dispatch_order(void **state) {
    (void)state;
    reset_page();
    strata_worker *w = new_worker(STRATA_HOST_THREAD, 1, 0);
    strata_callable noop;
    assert_ok(strata_worker_register_sub(w, "noop", ts_noop_sub, NULL, &noop));
    st_proc_ep *p = add_child(w, &ordering_kind, "ordering child");
    assert_ok(strata_worker_init(w));
    st_mbox *m = st_proc_ep_mbox(p);
    st_digest d = st_digest_callable(ST_CALLABLE_SUB, "noop");
    pid_t pid = (pid_t)st_proc_ep_child(p)->pid;
    assert_int_equal(kill(pid, SIGSTOP), 0);
    publish_task(m, 1, 1000001, &d); /* the earlier dispatch, in the later frame */
    publish_task(m, 0, 1000002, &d);
    assert_int_equal(kill(pid, SIGCONT), 0);
    st_mbox_ring(&st_mbox_control(m)->child_bell);
    uint64_t until = st_deadline_after(10 * TS_SEC);
    while ((st_mbox_state_of(st_mbox_task(m, 0)) != ST_MBOX_TASK_DONE ||
            st_mbox_state_of(st_mbox_task(m, 1)) != ST_MBOX_TASK_DONE) &&
           st_now_ns() < until)
        usleep(100);
    assert_int_equal(atomic_load(&page->ntaken), 2);
    assert_int_equal(atomic_load(&page->taken[0]), 1000001);
    assert_int_equal(atomic_load(&page->taken[1]), 1000002);
    for (uint32_t i = 0; i < 2; i++) /* returned to the parent's endpoint as it found them */
        st_mbox_publish(st_mbox_task(m, i), ST_MBOX_IDLE);
    assert_ok(strata_worker_close(w));
    strata_worker_destroy(w);
}

static void control_calls_carry_their_errors_back(void **state) {
    (void)state;
    reset_page();
    strata_worker *w = new_worker(STRATA_HOST_PROCESS, 1, 0);
    st_proc_ep *c = add_child(w, &ok_kind, "chip fake:4");
    assert_ok(strata_worker_init(w));
    st_proc_ep *sub = st_proc_ep_of(w->subs[0].ep);
    uint64_t dl = st_deadline_after(10 * TS_SEC);
    assert_ok(st_proc_ep_control(sub, ST_MBOX_CMD_PING, 0, 0, NULL, 0, NULL, 0, NULL, dl));
    assert_fails(STRATA_EINVAL, "not served by a sub child",
                 st_proc_ep_control(sub, ST_MBOX_CMD_MALLOC, 64, 0, NULL, 0, NULL, 0, NULL, dl));
    assert_message_mentions("sub 0: MALLOC");
    assert_fails(STRATA_EDEVICE, "chip fake:4: COPY_TO: command 3 failed on purpose",
                 st_proc_ep_control(c, ST_MBOX_CMD_COPY_TO, 0, 4, "abcd", 4, NULL, 0, NULL, dl));
    assert_ok(st_proc_ep_control(c, ST_MBOX_CMD_PING, 0, 0, NULL, 0, NULL, 0, NULL, dl));
    assert_fails(STRATA_EINVAL, "UNREGISTER",
                 st_proc_ep_control(sub, ST_MBOX_CMD_UNREGISTER, 0, 0, NULL, 0, NULL, 0, NULL, dl));
    strata_worker_destroy(w);
}

static void a_control_call_past_its_deadline_blocks_others_until_answered(void **state) {
    (void)state;
    reset_page();
    strata_worker *w = new_worker(STRATA_HOST_THREAD, 1, 0);
    st_proc_ep *c = add_child(w, &ok_kind, "chip fake:5");
    assert_ok(strata_worker_init(w));
    uint64_t dl = st_deadline_after(10 * TS_SEC);
    /* the child holds FREE until the gate opens: the deadline passes first */
    assert_fails(STRATA_ETIMEDOUT, "chip fake:5: control call FREE not answered in time",
                 st_proc_ep_control(c, ST_MBOX_CMD_FREE, 0, 0, NULL, 0, NULL, 0, NULL,
                                    st_now_ns() + TS_SEC / 100));
    assert_fails(STRATA_EENDPOINT, "still unanswered",
                 st_proc_ep_control(c, ST_MBOX_CMD_PING, 0, 0, NULL, 0, NULL, 0, NULL, dl));
    atomic_store(&page->seen, 1);
    int rc;
    do { /* once the late answer is in, the frame is usable again */
        st_clear_error();
        rc = st_proc_ep_control(c, ST_MBOX_CMD_PING, 0, 0, NULL, 0, NULL, 0, NULL, dl);
    } while (rc == STRATA_EENDPOINT && st_now_ns() < dl);
    assert_ok(rc);
    strata_worker_destroy(w);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(every_child_becomes_ready_and_is_reaped_at_close),
        cmocka_unit_test(a_failed_init_names_the_child_and_its_text_and_reaps_all),
        cmocka_unit_test(an_early_exit_is_reported_with_its_status),
        cmocka_unit_test(a_hung_child_times_out_by_name_and_is_killed),
        cmocka_unit_test(a_task_round_trip_runs_in_the_child_on_shared_memory),
        cmocka_unit_test(a_registration_before_init_is_in_the_childs_snapshot),
        cmocka_unit_test(a_refused_registration_names_the_child),
        cmocka_unit_test(a_bad_frame_fails_only_its_task),
        cmocka_unit_test(a_result_of_another_identity_is_refused),
        cmocka_unit_test(a_child_takes_two_new_frames_in_dispatch_order),
        cmocka_unit_test(control_calls_carry_their_errors_back),
        cmocka_unit_test(a_parked_parent_is_rung_when_nobody_took_the_result),
        cmocka_unit_test(a_control_call_past_its_deadline_blocks_others_until_answered),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
