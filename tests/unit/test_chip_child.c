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
                 strata_worker_chip_malloc(f.w, f.chip, (size_t)1 << 46, &huge));
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

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(a_chip_task_round_trips_through_the_chip_process),
        cmocka_unit_test(chip_buffers_go_through_control_calls),
        cmocka_unit_test(a_kernel_that_crashes_the_chip_process_fails_its_task_only),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
