// label: concurrency
/* tests/unit/test_handle_lifetime.c - the one lifetime convention every
 * public handle follows (docs/api.md, "Handle lifetimes").
 *
 * Owns: the checks that close is idempotent, returns the same status every
 * time and leaves a handle whose later work fails with STRATA_ECLOSED (worker
 * and chip alike); that destroy closes first and takes NULL; that releasing
 * a live run of either kind lets it finish unobserved; and that both kinds of
 * run have wait and wait_until.
 * Must never: assert on timing; a run is made "live" by a gate it waits on
 * (worker runs) or by nobody driving the lane (chip runs, whose progress is
 * pulled), never by a delay.
 */
#include "test_support.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "chip/run_lane.h"
#include "core/run.h"
#include "strata/sim.h"
#include "util/clock.h"

#define N 64

/* ---- worker runs ------------------------------------------------------------ */

typedef struct gated {
    strata_worker *w;
    strata_callable wait_gate;
    _Atomic int open;
    _Atomic int ran;
    _Atomic int gave_up; /* the gate stayed shut for 10 s: the test failed to open it */
} gated;

static int wait_gate(const strata_task_view *a, void *user) {
    (void)a;
    gated *g = user;
    uint64_t deadline = st_deadline_after(10 * TS_SEC);
    while (!atomic_load(&g->open)) {
        if (st_now_ns() >= deadline) {
            atomic_store(&g->gave_up, 1);
            break;
        }
        nanosleep(&(struct timespec){0, 100000}, NULL);
    }
    atomic_fetch_add(&g->ran, 1);
    return 0;
}

static int orch_gated(strata_orch *o, void *arg) {
    gated *g = arg;
    strata_task_args a;
    strata_args_init(&a);
    return strata_orch_submit_sub(o, g->wait_gate, &a);
}

static gated *make_gated(void) {
    gated *g = calloc(1, sizeof *g);
    assert_non_null(g);
    strata_worker_config cfg;
    strata_worker_config_init(&cfg);
    cfg.sub_workers = 1;
    assert_ok(strata_worker_create(&cfg, &g->w));
    assert_ok(strata_worker_register_sub(g->w, "wait_gate", wait_gate, g, &g->wait_gate));
    assert_ok(strata_worker_init(g->w));
    return g;
}

static void destroy_gated(gated *g) {
    strata_worker_destroy(g->w);
    assert_int_equal(atomic_load(&g->gave_up), 0);
    free(g);
}

static void releasing_a_live_run_lets_it_finish(void **state) {
    (void)state;
    gated *g = make_gated();
    strata_run *h;
    assert_ok(strata_worker_submit(g->w, orch_gated, g, &h));
    assert_false(strata_run_done(h)); /* the gate is shut */
    strata_run_release(h);
    /* The caller's reference is gone; the engine's keeps the record until the
     * run retires, which it cannot do while the gate is shut. */
    assert_int_equal(atomic_load(&h->refs), 1);
    atomic_store(&g->open, 1);
    assert_ok(strata_worker_close(g->w)); /* waits for the released run too */
    assert_int_equal(atomic_load(&g->ran), 1);
    destroy_gated(g);
}

static void run_wait_until_honours_an_absolute_deadline(void **state) {
    (void)state;
    gated *g = make_gated();
    strata_run *h;
    assert_ok(strata_worker_submit(g->w, orch_gated, g, &h));
    assert_status(STRATA_ETIMEDOUT, strata_run_wait_until(h, st_now_ns()));
    assert_non_null(strstr(strata_error_message(), "deadline"));
    assert_status(STRATA_ETIMEDOUT, strata_run_wait_until(h, 0)); /* long past */
    assert_false(strata_run_done(h)); /* expired waits leave the run alone */
    atomic_store(&g->open, 1);
    assert_ok(strata_run_wait_until(h, UINT64_MAX));
    assert_true(strata_run_done(h));
    assert_ok(strata_run_wait_until(h, 0)); /* a finished run needs no time */
    assert_status(STRATA_EINVAL, strata_run_wait_until(NULL, UINT64_MAX));
    strata_run_release(h);
    destroy_gated(g);
}

static void worker_close_is_idempotent_and_keeps_the_handle(void **state) {
    (void)state;
    gated *g = make_gated();
    assert_ok(strata_worker_close(g->w));
    assert_ok(strata_worker_close(g->w));
    strata_run *h = NULL;
    assert_status(STRATA_ECLOSED, strata_worker_submit(g->w, orch_gated, g, &h));
    assert_null(h);
    strata_callable c;
    assert_status(STRATA_ECLOSED, strata_worker_register_sub(g->w, "late", wait_gate, g, &c));
    assert_int_equal(strata_worker_next_level_count(g->w), 0);
    assert_status(STRATA_EINVAL, strata_worker_close(NULL));
    strata_worker_destroy(NULL); /* like free(NULL) */
    strata_run_release(NULL);
    destroy_gated(g);
}

/* ---- chips and chip runs ------------------------------------------------------ */

static int vadd_program(strata_program_ctx *ctx, const strata_task_view *a, void *user) {
    (void)user;
    uint64_t words[4] = {strata_program_arg_ptr(a, 0), strata_program_arg_ptr(a, 1),
                         strata_program_arg_ptr(a, 2), strata_args_scalar(a, 0)};
    return strata_program_launch(ctx, "vector_add", 2, words, 4);
}

typedef struct chip_case {
    strata_chip *chip;
    strata_chip_program vadd;
    void *dev[4]; /* a, b, c, d */
    float a[N], b[N];
    strata_task_args args;   /* c = a + b */
    strata_task_args args_d; /* d = a + b */
} chip_case;

static strata_tensor device_vector(void *dev) {
    int64_t shape[1] = {N};
    strata_tensor t;
    assert_ok(strata_chip_tensor(dev, N * sizeof(float), STRATA_F32, 1, shape, &t));
    return t;
}

static void vadd_args(chip_case *k, strata_task_args *args, void *out) {
    strata_tensor a = device_vector(k->dev[0]), b = device_vector(k->dev[1]);
    strata_tensor c = device_vector(out);
    strata_args_init(args);
    assert_ok(strata_args_add_tensor(args, &a, STRATA_IN));
    assert_ok(strata_args_add_tensor(args, &b, STRATA_IN));
    assert_ok(strata_args_add_tensor(args, &c, STRATA_OUT));
    assert_ok(strata_args_add_scalar(args, N));
}

static void open_chip_case(chip_case *k, const strata_sim_injection *inj) {
    memset(k, 0, sizeof *k);
    strata_chip_config cfg;
    strata_chip_config_init(&cfg);
    cfg.kernel_module = STRATA_SIM_TEST_KERNELS_PATH;
    cfg.sim = inj;
    assert_ok(strata_chip_open(&cfg, &k->chip));
    strata_chip_program_desc d = {.name = "vadd", .fn = vadd_program};
    assert_ok(strata_chip_register_program(k->chip, &d, &k->vadd));
    for (int i = 0; i < N; i++) {
        k->a[i] = (float)i;
        k->b[i] = 100.0f;
    }
    for (int t = 0; t < 4; t++)
        assert_ok(strata_chip_malloc(k->chip, sizeof k->a, &k->dev[t]));
    assert_ok(strata_chip_copy_to(k->chip, k->dev[0], k->a, sizeof k->a));
    assert_ok(strata_chip_copy_to(k->chip, k->dev[1], k->b, sizeof k->b));
    vadd_args(k, &k->args, k->dev[2]);
    vadd_args(k, &k->args_d, k->dev[3]);
}

/* Output `out` (2: c, 3: d) holds a + b. */
static void assert_sum_in(chip_case *k, int out) {
    float c[N];
    assert_ok(strata_chip_copy_from(k->chip, c, k->dev[out], sizeof c));
    for (int i = 0; i < N; i++)
        if (c[i] != k->a[i] + k->b[i])
            fail_msg("output %d [%d] = %f, expected %f", out, i, c[i], k->a[i] + k->b[i]);
}

static void releasing_a_live_chip_run_lets_it_finish(void **state) {
    (void)state;
    chip_case k;
    open_chip_case(&k, NULL);
    strata_chip_run *first, *second;
    assert_ok(strata_chip_submit(k.chip, k.vadd, &k.args, NULL, &first));
    assert_ok(strata_chip_submit(k.chip, k.vadd, &k.args_d, NULL, &second));
    /* Nobody drives the lane after a submit (progress is pulled), so neither
     * run has finished, and the second cannot launch before the first is
     * finalized: both handles are released while their runs are live. */
    assert_int_not_equal(st_lane_run_phase((st_lane_run *)(void *)first), ST_LANE_TERMINAL);
    assert_int_equal(strata_chip_run_launched(second), 0);
    strata_chip_run_release(second);
    strata_chip_run_release(first);
    strata_chip_run_release(NULL);
    assert_ok(strata_chip_drain(k.chip)); /* the released runs still execute */
    assert_sum_in(&k, 2);
    assert_sum_in(&k, 3);
    assert_ok(strata_chip_close(k.chip));
    strata_chip_destroy(k.chip);
}

static void chip_run_wait_and_done_take_the_same_handle_shapes(void **state) {
    (void)state;
    chip_case k;
    open_chip_case(&k, NULL);
    strata_chip_run *run;
    assert_ok(strata_chip_submit(k.chip, k.vadd, &k.args, NULL, &run));
    const strata_chip_run *view = run; /* queries, done included, take a const handle */
    assert_ok(strata_chip_run_wait_until(run, UINT64_MAX));
    assert_int_equal(strata_chip_run_done(view), 1);
    assert_ok(strata_chip_run_wait(run, 0));
    assert_ok(strata_chip_run_status(view));
    strata_chip_run_release(run);
    assert_sum_in(&k, 2);
    strata_chip_destroy(k.chip); /* closes first */
}

static void chip_close_is_idempotent_and_keeps_the_handle(void **state) {
    (void)state;
    chip_case k;
    open_chip_case(&k, NULL);
    strata_chip_run *run;
    assert_ok(strata_chip_submit(k.chip, k.vadd, &k.args, NULL, &run)); /* still live */
    assert_ok(strata_chip_close(k.chip));                               /* finishes it */
    assert_ok(strata_chip_close(k.chip));
    assert_int_equal(strata_chip_run_done(run), 1); /* run handles outlive close */
    assert_ok(strata_chip_run_wait(run, 0));
    strata_chip_run_release(run);
    assert_string_equal(strata_chip_label(k.chip), "chip sim:0");
    assert_int_equal(strata_chip_poisoned(k.chip), 0);
    assert_ok(strata_chip_drain(k.chip));
    strata_chip_run *late = NULL;
    assert_status(STRATA_ECLOSED, strata_chip_submit(k.chip, k.vadd, &k.args, NULL, &late));
    assert_null(late);
    void *dev = NULL;
    assert_status(STRATA_ECLOSED, strata_chip_malloc(k.chip, 64, &dev));
    assert_status(STRATA_ECLOSED, strata_chip_free(k.chip, k.dev[0]));
    float host[N];
    assert_status(STRATA_ECLOSED, strata_chip_copy_from(k.chip, host, k.dev[2], sizeof host));
    strata_chip_program_desc d = {.name = "late", .fn = vadd_program};
    strata_chip_program p;
    assert_status(STRATA_ECLOSED, strata_chip_register_program(k.chip, &d, &p));
    assert_status(STRATA_ECLOSED, strata_chip_unregister_program(k.chip, k.vadd));
    strata_sim_injection none = {0};
    assert_status(STRATA_ECLOSED, strata_chip_set_sim_injection(k.chip, &none));
    assert_status(STRATA_EINVAL, strata_chip_close(NULL));
    strata_chip_destroy(k.chip);
    strata_chip_destroy(NULL); /* like free(NULL) */
}

static void a_poisoned_chip_reports_its_poison_on_every_close(void **state) {
    (void)state;
    strata_sim_injection inj = {.fault = STRATA_SIM_FAULT_FINALIZE};
    chip_case k;
    open_chip_case(&k, &inj);
    strata_chip_run *run;
    assert_ok(strata_chip_submit(k.chip, k.vadd, &k.args, NULL, &run));
    assert_status(STRATA_EDEVICE, strata_chip_run_wait(run, STRATA_WAIT_FOREVER));
    strata_chip_run_release(run);
    assert_status(STRATA_EPOISONED, strata_chip_close(k.chip));
    char first[512];
    snprintf(first, sizeof first, "%s", strata_error_message());
    assert_non_null(strstr(first, "finalize"));
    assert_status(STRATA_EPOISONED, strata_chip_close(k.chip));
    assert_string_equal(strata_error_message(), first);
    strata_chip_destroy(k.chip);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(releasing_a_live_run_lets_it_finish),
        cmocka_unit_test(run_wait_until_honours_an_absolute_deadline),
        cmocka_unit_test(worker_close_is_idempotent_and_keeps_the_handle),
        cmocka_unit_test(releasing_a_live_chip_run_lets_it_finish),
        cmocka_unit_test(chip_run_wait_and_done_take_the_same_handle_shapes),
        cmocka_unit_test(chip_close_is_idempotent_and_keeps_the_handle),
        cmocka_unit_test(a_poisoned_chip_reports_its_poison_on_every_close),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
