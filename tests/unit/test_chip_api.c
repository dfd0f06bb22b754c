// label: concurrency
/* tests/unit/test_chip_api.c - what the public L2 API (chip/chip_api.c)
 * decides itself, before a ChipWorker or a backend is involved.
 *
 * Owns: the config defaults and checks of strata_chip_open, the sim knobs
 * refused on another backend, the label, the program table (names, the
 * 64-program capacity, ids reused after unregistration, unregistration
 * rules), the checks strata_program_launch / strata_program_fail make on a
 * program context, the argument checks of device memory, of
 * strata_chip_tensor and of strata_chip_submit (hand-written args), the run
 * queries on NULL, run ids and strata_chip_run_sync's status. Lane behaviour
 * is test_run_lane.c's, the device's test_chip_worker.c / test_sim_backend.c
 * / test_chip_kernels.c's, close and release test_handle_lifetime.c's.
 * Must never: assert on timing.
 */
#include "test_support.h"

#include <stdio.h>
#include <string.h>

#include "chip_fake_backend.h"
#include "strata/backend.h"
#include "strata/sim.h"
#include "util/error.h"

#define N 64

static int empty_program(strata_program_ctx *ctx, const strata_task_view *a, void *user) {
    (void)a, (void)user;
    return strata_program_launch(ctx, "empty_kernel", 1, NULL, 0);
}

/* Records the name of the program it ran as (user: a STRATA_PROGRAM_NAME_MAX buffer). */
static int naming_program(strata_program_ctx *ctx, const strata_task_view *a, void *user) {
    (void)a;
    snprintf(user, STRATA_PROGRAM_NAME_MAX, "%s", ctx->program);
    return strata_program_launch(ctx, "empty_kernel", 1, NULL, 0);
}

static int refusing_program(strata_program_ctx *ctx, const strata_task_view *a, void *user) {
    (void)a, (void)user;
    strata_program_fail(ctx, "not today");
    return -1;
}

static strata_chip *open_sim(int device_id) {
    strata_chip_config cfg;
    strata_chip_config_init(&cfg);
    cfg.device_id = device_id;
    cfg.kernel_module = STRATA_SIM_TEST_KERNELS_PATH;
    strata_chip *chip = NULL;
    assert_ok(strata_chip_open(&cfg, &chip));
    return chip;
}

static strata_chip *open_fake(void) {
    fake_reset();
    strata_chip_config cfg;
    strata_chip_config_init(&cfg);
    cfg.backend = "fake";
    cfg.backend_entry = fake_entry_capable;
    strata_chip *chip = NULL;
    assert_ok(strata_chip_open(&cfg, &chip));
    return chip;
}

/* ---- opening a chip ------------------------------------------------------------------ */

static void config_init_fills_the_documented_defaults(void **state) {
    (void)state;
    strata_chip_config cfg;
    memset(&cfg, 0xab, sizeof cfg);
    strata_chip_config_init(&cfg);
    assert_string_equal(cfg.backend, "sim");
    assert_null(cfg.backend_entry);
    assert_int_equal(cfg.device_id, 0);
    assert_null(cfg.kernel_module);
    assert_int_equal(cfg.sim_cores, 2);
    assert_int_equal(cfg.pipeline_depth, 0);
    assert_int_equal(cfg.host, STRATA_HOST_THREAD);
    assert_null(cfg.sim);
    strata_chip_config_init(NULL); /* ignored */
}

/* strata_chip_open(cfg) fails with EINVAL mentioning `needle` and leaves *out NULL. */
static void assert_open_refused(const strata_chip_config *cfg, const char *needle) {
    strata_chip *chip = (strata_chip *)(void *)1;
    assert_fails(STRATA_EINVAL, needle, strata_chip_open(cfg, &chip));
    assert_null(chip);
}

static void open_checks_its_config(void **state) {
    (void)state;
    strata_chip_config cfg;
    strata_chip_config_init(&cfg);
    assert_fails(STRATA_EINVAL, "NULL", strata_chip_open(&cfg, NULL));
    cfg.backend = "";
    assert_open_refused(&cfg, "backend is empty");
    cfg.backend = NULL;
    assert_open_refused(&cfg, "backend is empty");
    strata_chip_config_init(&cfg);
    cfg.host = (strata_host_mode)7;
    assert_open_refused(&cfg, "host mode 7");
    strata_chip_config_init(&cfg);
    cfg.sim_cores = 65;
    assert_open_refused(&cfg, "sim_cores 65");
    strata_sim_injection inj = {0};
    memset(inj.fault_kernel, 'k', sizeof inj.fault_kernel); /* no terminator */
    strata_chip_config_init(&cfg);
    cfg.sim = &inj;
    assert_open_refused(&cfg, "NUL-terminated");
    /* the limits themselves are accepted */
    strata_chip_config_init(&cfg);
    cfg.sim_cores = 64;
    cfg.pipeline_depth = 2;
    cfg.host = STRATA_HOST_PROCESS; /* named here; only an L3 worker refuses it */
    strata_chip *chip;
    assert_ok(strata_chip_open(&cfg, &chip));
    strata_chip_destroy(chip);
}

static void sim_knobs_are_refused_on_another_backend(void **state) {
    (void)state;
    strata_sim_injection none = {0}, delay = {.prepare_delay_ns = 1};
    fake_reset();
    strata_chip_config cfg;
    strata_chip_config_init(&cfg);
    cfg.backend = "fake";
    cfg.backend_entry = fake_entry_capable;
    cfg.sim = &delay;
    assert_open_refused(&cfg, "sim injection knobs are set but the backend is 'fake'");
    cfg.sim = &none; /* all zero: no knob set */
    strata_chip *fake_chip;
    assert_ok(strata_chip_open(&cfg, &fake_chip));
    assert_fails(STRATA_EINVAL, "only on the sim backend",
                 strata_chip_set_sim_injection(fake_chip, &none));
    strata_chip_destroy(fake_chip);

    strata_chip *sim = open_sim(0);
    assert_fails(STRATA_EINVAL, "NULL", strata_chip_set_sim_injection(sim, NULL));
    assert_fails(STRATA_EINVAL, "NULL", strata_chip_set_sim_injection(NULL, &none));
    strata_sim_injection bad = {.fault = (strata_sim_fault)42};
    assert_fails(STRATA_EINVAL, "fault 42", strata_chip_set_sim_injection(sim, &bad));
    assert_ok(strata_chip_set_sim_injection(sim, &delay));
    strata_chip_destroy(sim);
}

static void the_label_names_backend_and_device_and_starts_every_message(void **state) {
    (void)state;
    strata_chip *chip = open_sim(3);
    assert_string_equal(strata_chip_label(chip), "chip sim:3");
    assert_string_equal(strata_chip_label(NULL), "(no chip)");
    strata_chip_program_desc d = {.name = "p", .fn = empty_program};
    strata_chip_program prog;
    assert_ok(strata_chip_register_program(chip, &d, &prog));
    st_clear_error();
    assert_status(STRATA_EINVAL, strata_chip_register_program(chip, &d, &prog));
    assert_memory_equal(strata_error_message(), "chip sim:3: ", strlen("chip sim:3: "));
    ts_assert_mentions(strata_error_message(), "program 'p' is already registered");
    strata_chip_destroy(chip);
    strata_chip *fake_chip = open_fake();
    assert_string_equal(strata_chip_label(fake_chip), "chip fake:0");
    strata_chip_destroy(fake_chip);
}

/* ---- programs --------------------------------------------------------------------------- */

static void program_names_are_1_to_63_bytes(void **state) {
    (void)state;
    strata_chip *chip = open_sim(0);
    strata_chip_program prog = 99;
    strata_chip_program_desc d = {.name = NULL, .fn = empty_program};
    assert_fails(STRATA_EINVAL, "1..63 bytes", strata_chip_register_program(chip, &d, &prog));
    d.name = "";
    assert_fails(STRATA_EINVAL, "1..63 bytes", strata_chip_register_program(chip, &d, &prog));
    char name[STRATA_PROGRAM_NAME_MAX + 1];
    memset(name, 'n', STRATA_PROGRAM_NAME_MAX);
    name[STRATA_PROGRAM_NAME_MAX] = '\0'; /* 64 bytes */
    d.name = name;
    assert_fails(STRATA_EINVAL, "1..63 bytes", strata_chip_register_program(chip, &d, &prog));
    name[STRATA_PROGRAM_NAME_MAX - 1] = '\0'; /* 63: the longest */
    assert_int_equal(prog, 99);               /* nothing written on failure */
    assert_ok(strata_chip_register_program(chip, &d, &prog));
    assert_fails(STRATA_EINVAL, "NULL", strata_chip_register_program(NULL, &d, &prog));
    assert_fails(STRATA_EINVAL, "NULL", strata_chip_register_program(chip, NULL, &prog));
    assert_fails(STRATA_EINVAL, "NULL", strata_chip_register_program(chip, &d, NULL));
    strata_chip_destroy(chip);
}

static void the_program_table_holds_64_and_reuses_freed_ids(void **state) {
    (void)state;
    strata_chip *chip = open_sim(0);
    char names[65][8];
    strata_chip_program ids[64];
    for (int i = 0; i < 64; i++) {
        snprintf(names[i], sizeof names[i], "p%d", i);
        strata_chip_program_desc d = {.name = names[i], .fn = empty_program};
        assert_ok(strata_chip_register_program(chip, &d, &ids[i]));
        assert_int_equal(ids[i], i);
    }
    snprintf(names[64], sizeof names[64], "p64");
    char ran_as[STRATA_PROGRAM_NAME_MAX] = "";
    strata_chip_program_desc more = {.name = names[64], .fn = naming_program, .user = ran_as};
    strata_chip_program extra = -1;
    assert_fails(STRATA_ECAPACITY, "64 programs",
                 strata_chip_register_program(chip, &more, &extra));
    assert_int_equal(extra, -1);
    assert_ok(strata_chip_unregister_program(chip, ids[10]));
    assert_ok(strata_chip_register_program(chip, &more, &extra));
    assert_int_equal(extra, 10); /* the freed id */
    strata_chip_program_desc again = {.name = "p10", .fn = empty_program};
    assert_fails(STRATA_ECAPACITY, "64 programs",
                 strata_chip_register_program(chip, &again, &extra));
    assert_ok(strata_chip_unregister_program(chip, ids[20]));
    assert_ok(strata_chip_register_program(chip, &again, &extra)); /* the name is free again */
    assert_int_equal(extra, 20);
    strata_task_args args;
    strata_args_init(&args);
    assert_ok(strata_chip_run_sync(chip, 10, &args, NULL));
    assert_string_equal(ran_as, "p64"); /* the reused id runs the new program, not "p10" */
    strata_chip_destroy(chip);
}

static void unregistering_needs_a_registered_id(void **state) {
    (void)state;
    strata_chip *chip = open_sim(0);
    strata_chip_program_desc d = {.name = "p", .fn = empty_program};
    strata_chip_program prog;
    assert_ok(strata_chip_register_program(chip, &d, &prog));
    const strata_chip_program unknown[] = {-1, 64, 5};
    for (size_t i = 0; i < sizeof unknown / sizeof unknown[0]; i++)
        assert_fails(STRATA_EINVAL, "not registered",
                     strata_chip_unregister_program(chip, unknown[i]));
    assert_fails(STRATA_EINVAL, "NULL", strata_chip_unregister_program(NULL, prog));
    assert_ok(strata_chip_unregister_program(chip, prog));
    assert_fails(STRATA_EINVAL, "not registered", strata_chip_unregister_program(chip, prog));
    strata_task_args args;
    strata_args_init(&args);
    strata_chip_run *run = (strata_chip_run *)(void *)1;
    assert_fails(STRATA_EINVAL, "not registered",
                 strata_chip_submit(chip, prog, &args, NULL, &run));
    assert_null(run);
    strata_chip_destroy(chip);
}

/* ---- the program side ------------------------------------------------------------------- */

typedef struct seen_launch {
    strata_program_ctx ctx;
    int rc; /* what the backend's launch returns */
    char kernel[STRATA_PROGRAM_NAME_MAX];
    uint32_t blocks, nargs;
    char failed[STRATA_BACKEND_MSG_MAX + 16];
    int fails;
} seen_launch;

static int record_launch(strata_program_ctx *ctx, const char *kernel, uint32_t blocks,
                         const uint64_t *args, uint32_t nargs) {
    (void)args;
    seen_launch *s = (seen_launch *)(void *)ctx; /* ctx is the first member */
    snprintf(s->kernel, sizeof s->kernel, "%s", kernel);
    s->blocks = blocks;
    s->nargs = nargs;
    return s->rc;
}

static void record_fail(strata_program_ctx *ctx, const char *msg) {
    seen_launch *s = (seen_launch *)(void *)ctx;
    snprintf(s->failed, sizeof s->failed, "%s", msg);
    s->fails++;
}

static void hand_made_context(seen_launch *s) {
    memset(s, 0, sizeof *s);
    s->ctx.abi_version = STRATA_BACKEND_ABI_VERSION;
    s->ctx.program = "prog";
    s->ctx.launch = record_launch;
    s->ctx.fail = record_fail;
}

static void program_launch_checks_its_context_and_names_a_refusal(void **state) {
    (void)state;
    seen_launch s;
    hand_made_context(&s);
    uint64_t words[3] = {1, 2, 3};
    assert_ok(strata_program_launch(&s.ctx, "k", 4, words, 3));
    assert_string_equal(s.kernel, "k");
    assert_int_equal(s.blocks, 4);
    assert_int_equal(s.nargs, 3);
    s.rc = -3;
    assert_fails(STRATA_EINVAL, "program 'prog': launch of kernel 'k' refused (-3)",
                 strata_program_launch(&s.ctx, "k", 1, words, 1));
    s.ctx.abi_version = STRATA_BACKEND_ABI_VERSION + 1;
    s.rc = 0;
    assert_fails(STRATA_EABI, "ABI version", strata_program_launch(&s.ctx, "k", 1, words, 1));
    s.ctx.abi_version = STRATA_BACKEND_ABI_VERSION;
    s.ctx.launch = NULL;
    assert_fails(STRATA_EINVAL, "NULL", strata_program_launch(&s.ctx, "k", 1, words, 1));
    assert_fails(STRATA_EINVAL, "NULL", strata_program_launch(NULL, "k", 1, words, 1));
}

static void program_fail_formats_into_the_context(void **state) {
    (void)state;
    seen_launch s;
    hand_made_context(&s);
    strata_program_fail(&s.ctx, "expected %d tensors, got %s", 3, "none");
    assert_string_equal(s.failed, "expected 3 tensors, got none");
    char text[2 * STRATA_BACKEND_MSG_MAX];
    memset(text, 'z', sizeof text - 1);
    text[sizeof text - 1] = '\0';
    strata_program_fail(&s.ctx, "%s", text);
    assert_int_equal(strlen(s.failed), STRATA_BACKEND_MSG_MAX - 1); /* cut to the ABI's size */
    int fails = s.fails;
    strata_program_fail(NULL, "ignored");
    strata_program_fail(&s.ctx, NULL);
    s.ctx.fail = NULL;
    strata_program_fail(&s.ctx, "ignored");
    assert_int_equal(s.fails, fails);
}

/* ---- device memory and tensors ----------------------------------------------------------- */

static void memory_calls_refuse_null_arguments(void **state) {
    (void)state;
    strata_chip *chip = open_sim(0);
    void *dev = NULL;
    char host[8];
    assert_fails(STRATA_EINVAL, "NULL", strata_chip_malloc(NULL, 8, &dev));
    assert_fails(STRATA_EINVAL, "NULL", strata_chip_malloc(chip, 8, NULL));
    assert_ok(strata_chip_malloc(chip, 8, &dev));
    assert_fails(STRATA_EINVAL, "NULL", strata_chip_free(NULL, dev));
    assert_fails(STRATA_EINVAL, "NULL", strata_chip_free(chip, NULL));
    assert_fails(STRATA_EINVAL, "NULL", strata_chip_copy_to(NULL, dev, host, 8));
    assert_fails(STRATA_EINVAL, "NULL", strata_chip_copy_to(chip, NULL, host, 8));
    assert_fails(STRATA_EINVAL, "NULL", strata_chip_copy_to(chip, dev, NULL, 8));
    assert_fails(STRATA_EINVAL, "NULL", strata_chip_copy_from(NULL, host, dev, 8));
    assert_fails(STRATA_EINVAL, "NULL", strata_chip_copy_from(chip, NULL, dev, 8));
    assert_fails(STRATA_EINVAL, "NULL", strata_chip_copy_from(chip, host, NULL, 8));
    assert_int_equal(strata_chip_committed_bytes(NULL), 0);
    assert_true(strata_chip_committed_bytes(chip) >= 8);
    assert_ok(strata_chip_free(chip, dev));
    assert_int_equal(strata_chip_committed_bytes(chip), 0);
    strata_chip_destroy(chip);
}

static void chip_tensor_is_row_major_device_memory_without_identity(void **state) {
    (void)state;
    float dev[N]; /* any address: strata_chip_tensor only describes it */
    int64_t shape[2] = {4, 8};
    strata_tensor t;
    assert_ok(strata_chip_tensor(dev, sizeof dev, STRATA_F32, 2, shape, &t));
    assert_ptr_equal(strata_tensor_data(&t), dev);
    assert_int_equal(t.mem, STRATA_MEM_DEVICE);
    assert_int_equal(t.ident.id, 0);
    assert_int_equal(t.ident.owner, -1);
    assert_int_equal(t.buffer_bytes, sizeof dev);
    assert_int_equal(t.strides[0], 8);
    assert_int_equal(t.strides[1], 1);
    assert_fails(STRATA_EINVAL, "NULL",
                 strata_chip_tensor(NULL, sizeof dev, STRATA_F32, 2, shape, &t));
    assert_fails(STRATA_EINVAL, "NULL",
                 strata_chip_tensor(dev, sizeof dev, STRATA_F32, 2, NULL, &t));
    assert_fails(STRATA_EINVAL, "NULL",
                 strata_chip_tensor(dev, sizeof dev, STRATA_F32, 2, shape, NULL));
    assert_fails(STRATA_EINVAL, "dtype",
                 strata_chip_tensor(dev, sizeof dev, STRATA_DTYPE_COUNT, 2, shape, &t));
}

/* ---- runs -------------------------------------------------------------------------------- */

static void submit_refuses_hand_written_args(void **state) {
    (void)state;
    strata_chip *chip = open_sim(0);
    strata_chip_program_desc d = {.name = "p", .fn = empty_program};
    strata_chip_program prog;
    assert_ok(strata_chip_register_program(chip, &d, &prog));
    float dev[N];
    int64_t n = N;
    strata_tensor t;
    assert_ok(strata_chip_tensor(dev, sizeof dev, STRATA_F32, 1, &n, &t));
    strata_task_args a;
    strata_chip_run *run = (strata_chip_run *)(void *)1;
    strata_args_init(&a);
    a.ntensors = STRATA_MAX_TENSORS + 1;
    assert_fails(STRATA_EINVAL, "at most 64", strata_chip_submit(chip, prog, &a, NULL, &run));
    assert_null(run);
    strata_args_init(&a);
    a.nscalars = STRATA_MAX_SCALARS + 1;
    assert_fails(STRATA_EINVAL, "at most 64", strata_chip_submit(chip, prog, &a, NULL, &run));
    strata_args_init(&a);
    strata_args_add_tensor(&a, &t, STRATA_IN);
    a.tensors[0].rank = STRATA_MAX_RANK + 1;
    assert_fails(STRATA_EINVAL, "tensor argument 0 has rank 6",
                 strata_chip_submit(chip, prog, &a, NULL, &run));
    strata_args_init(&a);
    strata_args_add_tensor(&a, &t, STRATA_IN);
    a.tags[0] = STRATA_NO_DEP + 1;
    assert_fails(STRATA_EINVAL, "tag 5", strata_chip_submit(chip, prog, &a, NULL, &run));
    strata_args_init(&a);
    assert_fails(STRATA_EINVAL, "NULL", strata_chip_submit(NULL, prog, &a, NULL, &run));
    assert_fails(STRATA_EINVAL, "NULL", strata_chip_submit(chip, prog, NULL, NULL, &run));
    assert_fails(STRATA_EINVAL, "NULL", strata_chip_submit(chip, prog, &a, NULL, NULL));
    assert_ok(strata_chip_run_sync(chip, prog, &a, NULL)); /* the chip is unharmed */
    strata_chip_destroy(chip);
}

static void run_queries_on_null_answer_without_a_run(void **state) {
    (void)state;
    assert_int_equal(strata_chip_run_done(NULL), 0);
    assert_fails(STRATA_EINVAL, "NULL", strata_chip_run_status(NULL));
    assert_string_equal(strata_chip_run_error(NULL), "");
    assert_int_equal(strata_chip_run_launched(NULL), 0);
    assert_int_equal(strata_chip_run_disposition(NULL), STRATA_CHIP_VALIDATED_ONLY);
    assert_int_equal(strata_chip_run_id(NULL), 0);
    assert_fails(STRATA_EINVAL, "NULL", strata_chip_run_wait_until(NULL, UINT64_MAX));
    strata_chip_run_release(NULL);
    assert_fails(STRATA_EINVAL, "NULL", strata_chip_drain(NULL));
    assert_int_equal(strata_chip_poisoned(NULL), 0);
}

static void run_ids_count_from_one_and_sync_returns_the_runs_status(void **state) {
    (void)state;
    strata_chip *chip = open_sim(0);
    strata_chip_program_desc d = {.name = "empty", .fn = empty_program};
    strata_chip_program empty, picky;
    assert_ok(strata_chip_register_program(chip, &d, &empty));
    d = (strata_chip_program_desc){.name = "picky", .fn = refusing_program};
    assert_ok(strata_chip_register_program(chip, &d, &picky));
    strata_task_args a;
    strata_args_init(&a);
    for (uint64_t i = 1; i <= 3; i++) {
        strata_chip_run *run;
        assert_ok(strata_chip_submit(chip, empty, &a, NULL, &run));
        assert_int_equal(strata_chip_run_id(run), i);
        assert_ok(strata_chip_run_wait(run, STRATA_WAIT_FOREVER));
        strata_chip_run_release(run);
    }
    /* sync: submit + wait + release, the wait's status and message */
    strata_chip_run *run;
    assert_ok(strata_chip_submit(chip, picky, &a, NULL, &run));
    int waited = strata_chip_run_wait(run, STRATA_WAIT_FOREVER);
    assert_int_not_equal(waited, STRATA_OK);
    char msg[STRATA_ERRMSG_MAX];
    snprintf(msg, sizeof msg, "%s", strata_error_message());
    strata_chip_run_release(run);
    assert_status(waited, strata_chip_run_sync(chip, picky, &a, NULL));
    ts_assert_mentions(strata_error_message(), "not today");
    ts_assert_mentions(msg, "not today");
    assert_ok(strata_chip_run_sync(chip, empty, &a, NULL));
    strata_chip_destroy(chip);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(config_init_fills_the_documented_defaults),
        cmocka_unit_test(open_checks_its_config),
        cmocka_unit_test(sim_knobs_are_refused_on_another_backend),
        cmocka_unit_test(the_label_names_backend_and_device_and_starts_every_message),
        cmocka_unit_test(program_names_are_1_to_63_bytes),
        cmocka_unit_test(the_program_table_holds_64_and_reuses_freed_ids),
        cmocka_unit_test(unregistering_needs_a_registered_id),
        cmocka_unit_test(program_launch_checks_its_context_and_names_a_refusal),
        cmocka_unit_test(program_fail_formats_into_the_context),
        cmocka_unit_test(memory_calls_refuse_null_arguments),
        cmocka_unit_test(chip_tensor_is_row_major_device_memory_without_identity),
        cmocka_unit_test(submit_refuses_hand_written_args),
        cmocka_unit_test(run_queries_on_null_answer_without_a_run),
        cmocka_unit_test(run_ids_count_from_one_and_sync_returns_the_runs_status),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
