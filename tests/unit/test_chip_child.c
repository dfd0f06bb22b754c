/* tests/unit/test_chip_child.c - a chip hosted in its own process
 * (exec/chip_child.c): the chip kind of process child and the parent's calls
 * on it.
 *
 * Owns: a round trip (a chip task on host memory shared with the chip's
 * process); chip buffers through control calls (malloc, chunked copies larger
 * than a frame, free; errors carried back from the chip's process); staging
 * across runs (a successor's task staged but not launched before activation,
 * its acceptance word 0 until the launch, a stale identity at activation
 * poisoning the chip, a stop with a staged successor releasing it once); a
 * kernel that crashes the chip's process.
 * No concurrency label: it forks (it runs under ASan+UBSan, not TSan).
 */
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "test_support.h"

#include "core/endpoint.h"
#include "exec/chip_child.h"
#include "exec/process_endpoint.h"
#include "ipc/mailbox.h"
#include "ipc/wire_args.h"
#include "util/digest.h"
#include "strata/chip.h"
#include "strata/sim.h"
#include "util/clock.h"

#define N 50000 /* floats: 200 KB, more than a frame carries */
#define WAIT_NS (60ull * TS_SEC)

/* Shared with the chip's process: the gate its hold kernel waits on and the
 * count of native prepares of the probe program (prepare runs it there). */
typedef struct shared {
    _Atomic uint32_t gate;
    _Atomic int prepared[8];
} shared;

typedef struct l3 {
    strata_worker *w;
    int chip;
    strata_callable vadd, crash, hold, probe;
    strata_buffer *a, *b, *c;
    shared *sh;
} l3;

/* tensors a, b, c; scalar n */
static int vadd_program(strata_program_ctx *ctx, const strata_task_view *a, void *user) {
    (void)user;
    uint64_t w[4] = {strata_program_arg_ptr(a, 0), strata_program_arg_ptr(a, 1),
                     strata_program_arg_ptr(a, 2), strata_args_scalar(a, 0)};
    return strata_program_launch(ctx, "vector_add", 4, w, 4);
}

/* scalar: crash or not */
static int crash_program(strata_program_ctx *ctx, const strata_task_view *a, void *user) {
    (void)user;
    uint64_t w = strata_args_scalar(a, 0);
    return strata_program_launch(ctx, "crash_if", 1, &w, 1);
}

static int hold_program(strata_program_ctx *ctx, const strata_task_view *a, void *user) {
    shared *sh = user;
    (void)a;
    uint64_t gate = (uint64_t)(uintptr_t)&sh->gate;
    return strata_program_launch(ctx, "hold_kernel", 1, &gate, 1);
}

/* scalar: the probe's index */
static int probe_program(strata_program_ctx *ctx, const strata_task_view *a, void *user) {
    shared *sh = user;
    uint64_t i = strata_args_scalar(a, 0);
    if (i < 8)
        atomic_fetch_add(&sh->prepared[i], 1);
    return strata_program_launch(ctx, "empty_kernel", 1, NULL, 0);
}

static void open_l3(l3 *f) {
    memset(f, 0, sizeof *f);
    f->sh = ts_shared_calloc(1, sizeof *f->sh); /* mapped before the fork */
    strata_worker_config wc;
    strata_worker_config_init(&wc);
    wc.sub_workers = 1;
    wc.pipeline_depth = 2;
    assert_ok(strata_worker_create(&wc, &f->w));
    strata_chip_config cc;
    strata_chip_config_init(&cc);
    cc.kernel_module = STRATA_SIM_TEST_KERNELS_PATH;
    cc.host = STRATA_HOST_PROCESS;
    assert_ok(strata_worker_add_chip(f->w, &cc, &f->chip));
    strata_chip_program_desc d = {.name = "vadd", .fn = vadd_program};
    assert_ok(strata_worker_register_chip_program(f->w, &d, &f->vadd));
    d = (strata_chip_program_desc){.name = "crash", .fn = crash_program};
    assert_ok(strata_worker_register_chip_program(f->w, &d, &f->crash));
    d = (strata_chip_program_desc){.name = "hold", .fn = hold_program, .user = f->sh};
    assert_ok(strata_worker_register_chip_program(f->w, &d, &f->hold));
    d = (strata_chip_program_desc){.name = "probe", .fn = probe_program, .user = f->sh};
    assert_ok(strata_worker_register_chip_program(f->w, &d, &f->probe));
    assert_ok(strata_worker_init(f->w));
    assert_ok(strata_buffer_create(f->w, N * sizeof(float), &f->a));
    assert_ok(strata_buffer_create(f->w, N * sizeof(float), &f->b));
    assert_ok(strata_buffer_create(f->w, N * sizeof(float), &f->c));
}

static void close_l3(l3 *f) {
    atomic_store(&f->sh->gate, 1);
    strata_buffer_destroy(f->a);
    strata_buffer_destroy(f->b);
    strata_buffer_destroy(f->c);
    assert_ok(strata_worker_close(f->w));
    strata_worker_destroy(f->w);
    ts_shared_free(f->sh, 1, sizeof *f->sh);
    assert_int_equal(waitpid(-1, NULL, WNOHANG), -1); /* the chip's process is reaped */
}

static st_endpoint *chip_endpoint_of(l3 *f) {
    st_endpoint *ep = st_worker_next_endpoint(f->w, f->chip);
    assert_non_null(st_chip_child_of(ep));
    return ep;
}

/* ---- orchestration ------------------------------------------------------------------ */

typedef struct job {
    l3 *f;
    strata_tensor t[3];
    int crash;
} job;

static int vadd_orch(strata_orch *o, void *arg) {
    job *j = arg;
    strata_task_args a;
    strata_args_init(&a);
    for (int i = 0; i < 3; i++)
        STRATA_TRY(strata_args_add_tensor(&a, &j->t[i], i == 2 ? STRATA_OUT_EXISTING : STRATA_IN));
    STRATA_TRY(strata_args_add_scalar(&a, (uint64_t)strata_tensor_numel(&j->t[0])));
    return strata_orch_submit_next_level(o, j->f->vadd, &a, NULL, j->f->chip);
}

static int crash_orch(strata_orch *o, void *arg) {
    job *j = arg;
    strata_task_args a;
    strata_args_init(&a);
    STRATA_TRY(strata_args_add_scalar(&a, (uint64_t)j->crash));
    return strata_orch_submit_next_level(o, j->f->crash, &a, NULL, j->f->chip);
}

static void host_job(l3 *f, job *j, int64_t n) {
    memset(j, 0, sizeof *j);
    j->f = f;
    strata_buffer *bufs[3] = {f->a, f->b, f->c};
    for (int i = 0; i < 3; i++)
        assert_ok(strata_tensor_contiguous(bufs[i], STRATA_F32, 1, &n, &j->t[i]));
}

/* ---- tests -------------------------------------------------------------------------- */

static void a_chip_task_round_trips_through_the_chip_process(void **state) {
    (void)state;
    l3 f;
    open_l3(&f);
    float *a = strata_buffer_data(f.a), *b = strata_buffer_data(f.b), *c = strata_buffer_data(f.c);
    for (int i = 0; i < N; i++) {
        a[i] = (float)i;
        b[i] = 0.5f;
        c[i] = -1.0f;
    }
    job j;
    host_job(&f, &j, N);
    for (int round = 0; round < 3; round++) {
        assert_ok(strata_worker_run(f.w, vadd_orch, &j));
        for (int i = 0; i < N; i++)
            if (c[i] != (float)i + 0.5f)
                fail_msg("round %d: c[%d] = %f", round, i, c[i]);
        b[0] += 1.0f;
        a[0] -= 1.0f;
    }
    close_l3(&f);
}

static void chip_buffers_go_through_control_calls(void **state) {
    (void)state;
    l3 f;
    open_l3(&f);
    float *host = malloc(N * sizeof(float)), *back = malloc(N * sizeof(float));
    assert_non_null(host);
    assert_non_null(back);
    strata_buffer *d[3];
    for (int k = 0; k < 3; k++)
        assert_ok(strata_worker_chip_malloc(f.w, f.chip, N * sizeof(float), &d[k]));
    for (int i = 0; i < N; i++)
        host[i] = (float)(i % 1000);
    assert_ok(strata_worker_chip_copy_to(f.w, d[0], 0, host, N * sizeof(float))); /* chunked */
    assert_ok(strata_worker_chip_copy_to(f.w, d[1], 0, host, N * sizeof(float)));
    job j;
    memset(&j, 0, sizeof j);
    j.f = &f;
    int64_t n = N;
    for (int k = 0; k < 3; k++)
        assert_ok(strata_worker_chip_tensor(f.w, d[k], 0, STRATA_F32, 1, &n, NULL, &j.t[k]));
    assert_ok(strata_worker_run(f.w, vadd_orch, &j)); /* on device memory of the chip process */
    assert_ok(strata_worker_chip_copy_from(f.w, d[2], 0, back, N * sizeof(float)));
    for (int i = 0; i < N; i++)
        if (back[i] != 2.0f * (float)(i % 1000))
            fail_msg("back[%d] = %f", i, back[i]);
    /* a copy at an offset, across a chunk boundary */
    assert_ok(strata_worker_chip_copy_from(f.w, d[0], 65000, back, 1000));
    assert_memory_equal(back, (char *)host + 65000, 1000);

    /* errors come back from the chip's process, naming the chip and the call */
    strata_buffer *huge = NULL;
    assert_fails(STRATA_EDEVICE, "0 (chip sim:0): MALLOC",
                 strata_worker_chip_malloc(f.w, f.chip, SIZE_MAX - 8, &huge));
    assert_null(huge);
    st_endpoint *ep = chip_endpoint_of(&f);
    int rc = st_chip_child_free(ep, (void *)(uintptr_t)0x1000);
    assert_int_not_equal(rc, STRATA_OK);
    assert_message_mentions("0 (chip sim:0): FREE");
    rc = st_chip_child_copy_to(ep, (void *)(uintptr_t)0x1000, host, 64);
    assert_int_not_equal(rc, STRATA_OK);
    assert_message_mentions("0 (chip sim:0): COPY_TO");
    /* the parent's own checks */
    assert_fails(STRATA_EINVAL, "run past",
                 strata_worker_chip_copy_to(f.w, d[0], N * sizeof(float) - 4, host, 8));
    assert_ok(strata_worker_chip_free(f.w, d[1]));
    assert_fails(STRATA_EINVAL, "not chip memory", strata_worker_chip_free(f.w, d[1]));
    assert_ok(strata_worker_chip_free(f.w, d[0]));
    /* d[2] is left to the worker: its handle goes with the chip */
    free(host);
    free(back);
    close_l3(&f);
}

static void a_kernel_that_crashes_the_chip_process_fails_its_task_only(void **state) {
    (void)state;
    l3 f;
    open_l3(&f);
    job j;
    host_job(&f, &j, 16);
    j.crash = 0;
    assert_ok(strata_worker_run(f.w, crash_orch, &j)); /* the kernel itself runs */
    j.crash = 1;
    strata_run *h;
    assert_ok(strata_worker_submit(f.w, crash_orch, &j, &h));
    assert_int_equal(strata_run_wait(h, WAIT_NS), STRATA_EENDPOINT);
    ts_assert_mentions(strata_run_error(h), "chip sim:0");
    ts_assert_mentions(strata_run_error(h), "signal 11");
    strata_run_release(h);
    /* later tasks to it fail fast, naming it */
    assert_int_equal(strata_worker_run(f.w, vadd_orch, &j), STRATA_EENDPOINT);
    assert_message_mentions("chip sim:0");
    strata_buffer *b = NULL;
    assert_status(STRATA_EENDPOINT, strata_worker_chip_malloc(f.w, f.chip, 64, &b));
    close_l3(&f);
}

/* ---- Staging through the engine ------------------------------------------------------ */

static int hold_orch(strata_orch *o, void *arg) {
    l3 *f = arg;
    strata_task_args a;
    strata_args_init(&a);
    return strata_orch_submit_next_level(o, f->hold, &a, NULL, f->chip);
}

static int probe_orch(strata_orch *o, void *arg) {
    l3 *f = arg;
    strata_task_args a;
    strata_args_init(&a);
    STRATA_TRY(strata_args_add_scalar(&a, 1));
    return strata_orch_submit_next_level(o, f->probe, &a, NULL, f->chip);
}

/* The engine stages the successor run's task on the process chip while the
 * head's holds it: the task frame reaches FRAME_STAGED, unlaunched, and runs
 * once its run is the head. */
static void the_engine_stages_a_successor_on_a_process_chip(void **state) {
    (void)state;
    l3 f;
    open_l3(&f);
    strata_run *a, *b;
    assert_ok(strata_worker_submit(f.w, hold_orch, &f, &a));
    assert_ok(strata_worker_submit(f.w, probe_orch, &f, &b));
    st_mbox *m = st_proc_ep_mbox(st_proc_ep_of(chip_endpoint_of(&f)));
    st_mbox_frame *staged = NULL;
    uint64_t deadline = st_deadline_after(WAIT_NS);
    while (!staged) {
        for (uint32_t i = 0; i < ST_MBOX_TASK_FRAMES; i++) {
            st_mbox_frame *fr = st_mbox_task(m, i);
            if (st_mbox_state_of(fr) == ST_MBOX_FRAME_STAGED &&
                fr->trailer.run_id == strata_run_id(b))
                staged = fr;
        }
        assert_true(st_now_ns() < deadline);
        struct timespec ts = {0, 200000};
        nanosleep(&ts, NULL);
    }
    assert_int_equal(atomic_load(&staged->accepted), 0);
    assert_false(strata_run_done(a));
    atomic_store(&f.sh->gate, 1);
    assert_ok(strata_run_wait(a, WAIT_NS));
    assert_ok(strata_run_wait(b, WAIT_NS));
    assert_int_equal(atomic_load(&f.sh->prepared[1]), 1);
    strata_run_release(a);
    strata_run_release(b);
    close_l3(&f);
}

/* ---- The mailbox driven by the test, as the parent's endpoint would ---------------------
 * A worker that is never initialised owns the callables and the chip's process
 * endpoint; the test forks the chip's process and writes its task frames
 * itself, so it sees every state a frame goes through. */

typedef struct manual {
    strata_worker *w;
    int chip;
    strata_callable hold, probe;
    shared *sh;
    st_proc_ep *p;
    st_mbox *m;
} manual;

static void nap(void) {
    struct timespec ts = {0, 200000};
    nanosleep(&ts, NULL);
}

static void await_state(st_mbox_frame *f, uint32_t state) {
    uint64_t deadline = st_deadline_after(WAIT_NS);
    while (st_mbox_state_of(f) != state) {
        if (st_now_ns() >= deadline)
            fail_msg("frame state %u, expected %u", st_mbox_state_of(f), state);
        nap();
    }
}

static void open_manual(manual *t) {
    memset(t, 0, sizeof *t);
    t->sh = ts_shared_calloc(1, sizeof *t->sh);
    strata_worker_config wc;
    strata_worker_config_init(&wc);
    assert_ok(strata_worker_create(&wc, &t->w));
    strata_chip_config cc;
    strata_chip_config_init(&cc);
    cc.kernel_module = STRATA_SIM_TEST_KERNELS_PATH;
    cc.host = STRATA_HOST_PROCESS;
    assert_ok(strata_worker_add_chip(t->w, &cc, &t->chip));
    strata_chip_program_desc d = {.name = "hold", .fn = hold_program, .user = t->sh};
    assert_ok(strata_worker_register_chip_program(t->w, &d, &t->hold));
    d = (strata_chip_program_desc){.name = "probe", .fn = probe_program, .user = t->sh};
    assert_ok(strata_worker_register_chip_program(t->w, &d, &t->probe));
    t->p = st_proc_ep_of(st_worker_next_endpoint(t->w, t->chip));
    assert_non_null(t->p);
    t->m = st_proc_ep_mbox(t->p);
    assert_ok(st_proc_ep_spawn(t->p)); /* the chip opens in its process */
    st_mbox_frame *ctl = st_mbox_control(t->m);
    await_state(ctl, ST_MBOX_INIT_READY);
    st_mbox_publish(ctl, ST_MBOX_IDLE);
}

/* Publish task `frame`: program `name` with scalar `sc`, identity {run, lease
 * slot, generation 1, dispatch}, as the head's (TASK_READY) or staged
 * (PREPARE_READY). */
static void send_task(manual *t, uint32_t frame, const char *name, uint64_t sc, uint64_t run,
                      uint32_t slot, uint32_t dispatch, int staged) {
    st_mbox_frame *f = st_mbox_task(t->m, frame);
    strata_task_args a;
    strata_args_init(&a);
    assert_ok(strata_args_add_scalar(&a, sc));
    size_t used = 0;
    assert_ok(st_wire_args_encode(&a, f->payload, ST_MBOX_ARGS_CAP, &used));
    st_mbox_trailer tr = {.protocol = ST_MBOX_PROTOCOL,
                          .run_id = run,
                          .lease_slot = slot,
                          .generation = 1,
                          .dispatch_id = dispatch};
    st_lease lease = {.slot = slot, .generation = 1};
    st_digest dg = st_digest_callable(ST_CALLABLE_NEXT, name);
    st_mbox_task_prepare(f, &tr, &lease, NULL, 0, dg.bytes);
    f->payload_bytes = (uint32_t)used;
    st_mbox_publish(f, staged ? ST_MBOX_PREPARE_READY : ST_MBOX_TASK_READY);
    st_mbox_ring(&st_mbox_control(t->m)->child_bell);
}

static void activate(manual *t, uint32_t frame) {
    assert_true(st_mbox_cas(st_mbox_task(t->m, frame), ST_MBOX_FRAME_STAGED, ST_MBOX_ACTIVATE));
    st_mbox_ring(&st_mbox_control(t->m)->child_bell);
}

static void frame_error(manual *t, uint32_t frame, char *out, size_t cap) {
    st_mbox_get_error(st_mbox_task(t->m, frame), out, cap);
}

static void close_manual(manual *t) {
    atomic_store(&t->sh->gate, 1);
    st_proc_ep_abandon(t->p); /* SHUTDOWN, then reaped */
    strata_worker_destroy(t->w);
    ts_shared_free(t->sh, 1, sizeof *t->sh);
    assert_int_equal(waitpid(-1, NULL, WNOHANG), -1);
}

/* The successor's task is staged (validated, maybe prepared) while the head's
 * task holds the chip; it launches only after activation, and only then is
 * its acceptance word set. */
static void a_staged_successor_launches_only_after_activation(void **state) {
    (void)state;
    manual t;
    open_manual(&t);
    send_task(&t, 0, "hold", 0, 1, 0, 1, 0);
    send_task(&t, 1, "probe", 1, 2, 1, 2, 1);
    st_mbox_frame *f1 = st_mbox_task(t.m, 1);
    await_state(f1, ST_MBOX_FRAME_STAGED);
    uint32_t disp = atomic_load(&f1->disposition);
    assert_true(disp == ST_MBOX_DISP_VALIDATED_ONLY || disp == ST_MBOX_DISP_NATIVE_PREPARED);
    assert_int_equal(atomic_load(&f1->accepted), 0);
    assert_true(atomic_load(&t.sh->prepared[1]) <= 1);
    atomic_store(&t.sh->gate, 1); /* the head finishes; the successor is still not activated */
    await_state(st_mbox_task(t.m, 0), ST_MBOX_TASK_DONE);
    assert_int_equal(atomic_load(&st_mbox_task(t.m, 0)->accepted), 1);
    assert_int_equal(st_mbox_state_of(f1), ST_MBOX_FRAME_STAGED);
    assert_int_equal(atomic_load(&f1->accepted), 0); /* never launched before activation */
    activate(&t, 1);
    await_state(f1, ST_MBOX_TASK_DONE);
    assert_int_equal(atomic_load(&f1->accepted), 1);
    assert_int_equal(atomic_load(&t.sh->prepared[1]), 1); /* prepared once */
    close_manual(&t);
}

/* A staged frame whose identity changed before its activation poisons the
 * chip: that task and every later one fail with the poison. */
static void a_stale_identity_at_activation_poisons_the_process_chip(void **state) {
    (void)state;
    manual t;
    open_manual(&t);
    send_task(&t, 0, "hold", 0, 1, 0, 1, 0);
    send_task(&t, 1, "probe", 1, 2, 1, 2, 1);
    st_mbox_frame *f1 = st_mbox_task(t.m, 1);
    await_state(f1, ST_MBOX_FRAME_STAGED);
    atomic_store(&t.sh->gate, 1); /* the head's task completes; then its successor is the head */
    await_state(st_mbox_task(t.m, 0), ST_MBOX_TASK_DONE);
    f1->trailer.generation += 100; /* a stale holder: consistent, but not what was dispatched */
    f1->lease.generation += 100;
    activate(&t, 1);
    await_state(f1, ST_MBOX_TASK_FAILED);
    char err[ST_MBOX_ERR_BYTES];
    frame_error(&t, 1, err, sizeof err);
    ts_assert_mentions(err, "poisoned: stale identity at activation");
    assert_int_equal(atomic_load(&f1->accepted), 0);
    st_mbox_publish(f1, ST_MBOX_IDLE);
    send_task(&t, 1, "probe", 3, 3, 0, 3, 0); /* later tasks are refused */
    await_state(f1, ST_MBOX_TASK_FAILED);
    frame_error(&t, 1, err, sizeof err);
    ts_assert_mentions(err, "poisoned");
    assert_int_equal(atomic_load(&t.sh->prepared[3]), 0);
    close_manual(&t);
}

/* Shut down with a staged successor: it is released unlaunched, its frame
 * finished exactly once, and the chip's process exits cleanly. */
static void a_shutdown_with_a_staged_successor_releases_it_once(void **state) {
    (void)state;
    manual t;
    open_manual(&t);
    send_task(&t, 0, "hold", 0, 1, 0, 1, 0);
    send_task(&t, 1, "probe", 1, 2, 1, 2, 1);
    st_mbox_frame *f1 = st_mbox_task(t.m, 1);
    await_state(f1, ST_MBOX_FRAME_STAGED);
    atomic_store(&t.sh->gate, 1);
    await_state(st_mbox_task(t.m, 0), ST_MBOX_TASK_DONE);
    st_proc_ep_abandon(t.p); /* SHUTDOWN while the successor is staged */
    assert_int_equal(st_mbox_state_of(f1), ST_MBOX_TASK_FAILED);
    char err[ST_MBOX_ERR_BYTES];
    frame_error(&t, 1, err, sizeof err);
    ts_assert_mentions(err, "released unlaunched");
    assert_int_equal(atomic_load(&f1->accepted), 0);
    assert_true(atomic_load(&t.sh->prepared[1]) <= 1);
    ts_assert_mentions(st_proc_ep_child(t.p)->why, "exited with status 0");
    close_manual(&t);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(a_chip_task_round_trips_through_the_chip_process),
        cmocka_unit_test(chip_buffers_go_through_control_calls),
        cmocka_unit_test(a_kernel_that_crashes_the_chip_process_fails_its_task_only),
        cmocka_unit_test(the_engine_stages_a_successor_on_a_process_chip),
        cmocka_unit_test(a_staged_successor_launches_only_after_activation),
        cmocka_unit_test(a_stale_identity_at_activation_poisons_the_process_chip),
        cmocka_unit_test(a_shutdown_with_a_staged_successor_releases_it_once),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
