// label: concurrency
/* tests/unit/test_chip_endpoint.c - chips inside an L3 worker
 * (exec/chip_endpoint.c), through the public API.
 *
 * Owns: strata_worker_add_chip (ids in order after other children, errors of
 * the config surfacing, nothing added on failure, refused once initialised
 * or closed), strata_worker_register_chip_program (its checks, one namespace
 * with sub callables), the chip buffer calls (argument checks, views owned
 * by their chip, buffers belonging to one worker, the bytes copied, a freed
 * buffer refused, buffers left to the worker's close) and next-level tasks
 * reaching their chip (the args, the call config, the program running on the
 * chip's thread, a program's failure failing its task as STRATA_ETASK with
 * the path, the chip usable after it). GEMMs, device faults and poison are
 * tests/system/test_l3_chips.c's; sizes at the extremes test_size_extremes.c's.
 * Must never: assert on timing, or run cmocka assertions inside a chip
 * program or an orchestration function (they record; the test asserts).
 */
#include "test_support.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "strata/backend.h" /* the program context's layout */
#include "test_endpoint.h"
#include "util/error.h"

#define BYTES 256

/* ---- programs ---------------------------------------------------------------------------- */

#define MAX_SEEN 8

/* What one run of probe_program saw. */
typedef struct seen_run {
    uint64_t scalar0;
    uint32_t ntensors, nscalars, block_dim;
    char program[STRATA_PROGRAM_NAME_MAX];
    pthread_t thread;
} seen_run;

typedef struct probe_log {
    pthread_mutex_t mu;
    seen_run runs[MAX_SEEN];
    int n;
} probe_log;

static int probe_program(strata_program_ctx *ctx, const strata_task_view *a, void *user) {
    probe_log *log = user;
    pthread_mutex_lock(&log->mu);
    if (log->n < MAX_SEEN) {
        seen_run *s = &log->runs[log->n++];
        s->scalar0 = strata_args_scalar(a, 0);
        s->ntensors = a->ntensors;
        s->nscalars = a->nscalars;
        s->block_dim = ctx->block_dim;
        snprintf(s->program, sizeof s->program, "%s", ctx->program);
        s->thread = pthread_self();
    }
    pthread_mutex_unlock(&log->mu);
    return strata_program_launch(ctx, "empty_kernel", 1, NULL, 0);
}

static int refusing_program(strata_program_ctx *ctx, const strata_task_view *a, void *user) {
    (void)user;
    strata_program_fail(ctx, "bad input %llu", (unsigned long long)strata_args_scalar(a, 0));
    return -1;
}

/* ---- fixture ------------------------------------------------------------------------------- */

typedef struct fixture {
    ts_worker t;
    strata_callable probe, refuser;
    probe_log log;
    ts_probes pr;
    strata_tensor dev_view; /* a view of a chip buffer, for the orchestration function */
} fixture;

/* `endpoints` test endpoints first (ids 0..), then `chips` sim chips. */
static fixture *make(int endpoints, int chips) {
    fixture *f = calloc(1, sizeof *f);
    assert_non_null(f);
    pthread_mutex_init(&f->log.mu, NULL);
    ts_worker_opts o;
    ts_worker_opts_init(&o);
    o.cfg.sub_workers = 1;
    o.endpoints = endpoints;
    o.chips = chips;
    o.buffers[0] = BYTES;
    ts_worker_open(&f->t, &o);
    strata_chip_program_desc d = {.name = "probe", .fn = probe_program, .user = &f->log};
    assert_ok(strata_worker_register_chip_program(f->t.w, &d, &f->probe)); /* after init */
    d = (strata_chip_program_desc){.name = "refuser", .fn = refusing_program};
    assert_ok(strata_worker_register_chip_program(f->t.w, &d, &f->refuser));
    return f;
}

static void destroy(fixture *f) {
    ts_worker_close(&f->t);
    pthread_mutex_destroy(&f->log.mu);
    free(f);
}

static strata_worker *created_worker(void) {
    strata_worker_config cfg;
    strata_worker_config_init(&cfg);
    strata_worker *w;
    assert_ok(strata_worker_create(&cfg, &w));
    return w;
}

/* ---- adding chips ------------------------------------------------------------------------- */

static void chips_get_the_next_ids_after_other_children(void **state) {
    (void)state;
    fixture *f = make(1, 2);
    assert_int_equal(f->t.ep_id[0], 0);
    assert_int_equal(f->t.chip_id[0], 1);
    assert_int_equal(f->t.chip_id[1], 2);
    assert_int_equal(strata_worker_next_level_count(f->t.w), 3);
    destroy(f);
}

static void add_chip_checks_and_adds_nothing_on_failure(void **state) {
    (void)state;
    strata_worker *w = created_worker();
    strata_chip_config cc;
    strata_chip_config_init(&cc);
    int id = 77;
    assert_fails(STRATA_EINVAL, "must be set", strata_worker_add_chip(w, NULL, &id));
    assert_fails(STRATA_EINVAL, "must be set", strata_worker_add_chip(w, &cc, NULL));
    cc.sim_cores = 65; /* an error of the chip's own config */
    assert_fails(STRATA_EINVAL, "sim_cores", strata_worker_add_chip(w, &cc, &id));
    strata_chip_config_init(&cc);
    cc.kernel_module = "/no/such/kernels.so"; /* the device refuses to open */
    assert_fails(STRATA_EDEVICE, "kernel module", strata_worker_add_chip(w, &cc, &id));
    assert_int_equal(id, 77);
    assert_int_equal(strata_worker_next_level_count(w), 0); /* nothing was added */
    strata_chip_config_init(&cc);
    assert_ok(strata_worker_add_chip(w, &cc, &id));
    assert_int_equal(id, 0); /* the first child still gets id 0 */
    assert_ok(strata_worker_close(w));
    assert_fails(STRATA_ESTATE, "before strata_worker_init", strata_worker_add_chip(w, &cc, &id));
    strata_worker_destroy(w);
}

/* ---- registering chip programs ------------------------------------------------------------- */

static void register_chip_program_checks_its_desc(void **state) {
    (void)state;
    strata_worker *w = created_worker();
    strata_callable c = 55;
    strata_chip_program_desc d = {.name = "p", .fn = probe_program};
    assert_fails(STRATA_EINVAL, "NULL", strata_worker_register_chip_program(NULL, &d, &c));
    assert_fails(STRATA_EINVAL, "NULL", strata_worker_register_chip_program(w, NULL, &c));
    assert_fails(STRATA_EINVAL, "NULL", strata_worker_register_chip_program(w, &d, NULL));
    d.fn = NULL;
    assert_fails(STRATA_EINVAL, "'p': program function is NULL",
                 strata_worker_register_chip_program(w, &d, &c));
    d.fn = probe_program;
    d.name = NULL;
    assert_fails(STRATA_EINVAL, "1..63", strata_worker_register_chip_program(w, &d, &c));
    d.name = "";
    assert_fails(STRATA_EINVAL, "1..63", strata_worker_register_chip_program(w, &d, &c));
    char name[STRATA_PROGRAM_NAME_MAX + 1];
    memset(name, 'q', STRATA_PROGRAM_NAME_MAX);
    name[STRATA_PROGRAM_NAME_MAX] = '\0';
    d.name = name;
    assert_fails(STRATA_EINVAL, "1..63", strata_worker_register_chip_program(w, &d, &c));
    assert_int_equal(c, 55);
    name[STRATA_PROGRAM_NAME_MAX - 1] = '\0'; /* 63 bytes */
    assert_ok(strata_worker_register_chip_program(w, &d, &c));
    /* one namespace with sub callables, in both directions */
    strata_callable sub;
    assert_ok(strata_worker_register_sub(w, "shared", ts_noop_sub, NULL, &sub));
    d.name = "shared";
    assert_fails(STRATA_EINVAL, "already registered",
                 strata_worker_register_chip_program(w, &d, &c));
    d.name = "chip_first";
    assert_ok(strata_worker_register_chip_program(w, &d, &c));
    assert_int_equal(c, sub + 1); /* ids count up across kinds */
    assert_fails(STRATA_EINVAL, "already registered",
                 strata_worker_register_sub(w, "chip_first", ts_noop_sub, NULL, &sub));
    assert_ok(strata_worker_close(w));
    d.name = "late";
    assert_fails(STRATA_ECLOSED, "closed", strata_worker_register_chip_program(w, &d, &c));
    strata_worker_destroy(w);
}

/* ---- chip buffers --------------------------------------------------------------------------- */

static void chip_malloc_checks_its_target_and_gives_views_owned_by_the_chip(void **state) {
    (void)state;
    fixture *f = make(1, 2); /* worker 0 is a test endpoint, not a chip */
    strata_buffer *b = (strata_buffer *)(void *)1;
    assert_fails(STRATA_EINVAL, "out is NULL",
                 strata_worker_chip_malloc(f->t.w, f->t.chip_id[0], BYTES, NULL));
    assert_fails(STRATA_EINVAL, "worker is NULL",
                 strata_worker_chip_malloc(NULL, f->t.chip_id[0], BYTES, &b));
    assert_null(b);
    b = (strata_buffer *)(void *)1;
    assert_fails(STRATA_EINVAL, "next-level worker 0 is not a chip",
                 strata_worker_chip_malloc(f->t.w, f->t.ep_id[0], BYTES, &b));
    assert_null(b);
    assert_ok(strata_worker_chip_malloc(f->t.w, f->t.chip_id[1], BYTES, &b));
    assert_int_equal(strata_buffer_size(b), BYTES);
    assert_non_null(strata_buffer_data(b));
    strata_tensor t;
    int64_t n = BYTES / 4;
    assert_ok(strata_worker_chip_tensor(f->t.w, b, 0, STRATA_I32, 1, &n, NULL, &t));
    assert_int_equal(t.mem, STRATA_MEM_DEVICE);
    assert_int_equal(t.ident.owner, f->t.chip_id[1]);
    assert_true(t.ident.id != 0);
    assert_ptr_equal(strata_tensor_data(&t), strata_buffer_data(b));
    /* a plain view of it is just as much the chip's */
    assert_ok(strata_tensor_view(b, 4, STRATA_U8, 1, &n, NULL, &t));
    assert_int_equal(t.mem, STRATA_MEM_DEVICE);
    assert_int_equal(t.ident.owner, f->t.chip_id[1]);
    assert_ok(strata_worker_chip_free(f->t.w, b));
    destroy(f);
}

static void copies_move_the_bytes_at_their_offset(void **state) {
    (void)state;
    fixture *f = make(0, 1);
    strata_buffer *b;
    assert_ok(strata_worker_chip_malloc(f->t.w, f->t.chip_id[0], BYTES, &b));
    unsigned char in[BYTES], out[BYTES];
    for (int i = 0; i < BYTES; i++)
        in[i] = (unsigned char)(i * 7 + 1);
    assert_ok(strata_worker_chip_copy_to(f->t.w, b, 0, in, BYTES));
    assert_ok(strata_worker_chip_copy_to(f->t.w, b, 100, "patch", 5));
    memset(out, 0, sizeof out);
    assert_ok(strata_worker_chip_copy_from(f->t.w, b, 0, out, BYTES));
    memcpy(in + 100, "patch", 5);
    assert_memory_equal(out, in, BYTES);
    char tail[4] = {0};
    assert_ok(strata_worker_chip_copy_from(f->t.w, b, BYTES - 4, tail, 4)); /* up to the end */
    assert_memory_equal(tail, in + BYTES - 4, 4);
    assert_fails(STRATA_EINVAL, "NULL", strata_worker_chip_copy_to(f->t.w, b, 0, NULL, 4));
    assert_fails(STRATA_EINVAL, "NULL", strata_worker_chip_copy_from(f->t.w, b, 0, NULL, 4));
    assert_fails(STRATA_EINVAL, "NULL", strata_worker_chip_copy_to(f->t.w, NULL, 0, in, 4));
    assert_fails(STRATA_EINVAL, "NULL", strata_worker_chip_copy_from(NULL, b, 0, out, 4));
    assert_ok(strata_worker_chip_free(f->t.w, b));
    destroy(f);
}

static void a_chip_buffer_belongs_to_the_worker_that_allocated_it(void **state) {
    (void)state;
    fixture *a = make(0, 1), *other = make(0, 1);
    strata_buffer *b;
    assert_ok(strata_worker_chip_malloc(a->t.w, a->t.chip_id[0], BYTES, &b));
    char host[8] = "abcdefg";
    strata_tensor t;
    int64_t n = 2;
    assert_fails(STRATA_EINVAL, "not chip memory of this worker",
                 strata_worker_chip_copy_to(other->t.w, b, 0, host, sizeof host));
    assert_fails(STRATA_EINVAL, "not chip memory of this worker",
                 strata_worker_chip_copy_from(other->t.w, b, 0, host, sizeof host));
    assert_fails(STRATA_EINVAL, "not chip memory of this worker",
                 strata_worker_chip_tensor(other->t.w, b, 0, STRATA_I32, 1, &n, NULL, &t));
    assert_fails(STRATA_EINVAL, "not chip memory of this worker",
                 strata_worker_chip_free(other->t.w, b));
    /* nothing happened to it on its own worker */
    assert_ok(strata_worker_chip_copy_to(a->t.w, b, 0, host, sizeof host));
    char back[8] = {0};
    assert_ok(strata_worker_chip_copy_from(a->t.w, b, 0, back, sizeof back));
    assert_string_equal(back, host);
    assert_ok(strata_worker_chip_free(a->t.w, b));
    destroy(other);
    destroy(a);
}

static void a_freed_chip_buffer_is_refused(void **state) {
    (void)state;
    fixture *f = make(0, 1);
    strata_buffer *b, *keep;
    assert_ok(strata_worker_chip_malloc(f->t.w, f->t.chip_id[0], BYTES, &b));
    assert_ok(strata_worker_chip_malloc(f->t.w, f->t.chip_id[0], BYTES, &keep));
    assert_ok(strata_worker_chip_free(f->t.w, b));
    /* b is a dangling handle now: only compared, never read */
    char host[4] = {0};
    assert_fails(STRATA_EINVAL, "may have been freed",
                 strata_worker_chip_copy_to(f->t.w, b, 0, host, sizeof host));
    assert_fails(STRATA_EINVAL, "may have been freed",
                 strata_worker_chip_copy_from(f->t.w, b, 0, host, sizeof host));
    assert_ok(strata_worker_chip_copy_to(f->t.w, keep, 0, host, sizeof host)); /* the other stays */
    destroy(f); /* keep is left to the worker: freed with its chip (LeakSanitizer checks) */
}

static void after_close_the_chip_calls_find_no_chip(void **state) {
    (void)state;
    fixture *f = make(0, 1);
    strata_buffer *left;
    assert_ok(strata_worker_chip_malloc(f->t.w, f->t.chip_id[0], BYTES, &left));
    assert_ok(strata_worker_close(f->t.w)); /* frees `left` with the chip */
    strata_buffer *b = (strata_buffer *)(void *)1;
    assert_fails(STRATA_EINVAL, "not a chip",
                 strata_worker_chip_malloc(f->t.w, f->t.chip_id[0], BYTES, &b));
    assert_null(b);
    destroy(f);
}

/* ---- tasks reaching their chip -----------------------------------------------------------------
 */

typedef struct to_chips {
    fixture *f;
    int chips;
} to_chips;

static int orch_one_task_per_chip(strata_orch *o, void *arg) {
    to_chips *tc = arg;
    fixture *f = tc->f;
    for (int c = 0; c < tc->chips; c++) {
        strata_task_args a;
        strata_args_init(&a);
        strata_args_add_scalar(&a, 100 + (uint64_t)c);
        strata_args_add_scalar(&a, 7);
        strata_call_config cfg = {.block_dim = 3 + (uint32_t)c};
        STRATA_TRY(strata_orch_submit_next_level(o, f->probe, &a, &cfg, f->t.chip_id[c]));
    }
    return STRATA_OK;
}

static void next_level_tasks_reach_their_chip_with_args_and_config(void **state) {
    (void)state;
    fixture *f = make(1, 2);
    to_chips tc = {f, 2};
    assert_ok(strata_worker_run(f->t.w, orch_one_task_per_chip, &tc));
    assert_int_equal(f->log.n, 2);
    pthread_t chip_thread[2] = {0};
    int found[2] = {0, 0};
    for (int i = 0; i < f->log.n; i++) {
        const seen_run *s = &f->log.runs[i];
        int c = (int)(s->scalar0 - 100);
        assert_true(c == 0 || c == 1);
        found[c]++;
        assert_int_equal(s->nscalars, 2);
        assert_int_equal(s->ntensors, 0);
        assert_int_equal(s->block_dim, 3 + (uint32_t)c); /* its own call config */
        assert_string_equal(s->program, "probe");
        assert_false(pthread_equal(s->thread, pthread_self())); /* on the chip's thread */
        chip_thread[c] = s->thread;
    }
    assert_int_equal(found[0], 1);
    assert_int_equal(found[1], 1);
    assert_false(pthread_equal(chip_thread[0], chip_thread[1])); /* one thread per chip */
    assert_int_equal(st_test_ep_count(f->t.ep[0]), 0);           /* nothing went elsewhere */
    destroy(f);
}

static int orch_refused_then_probe(strata_orch *o, void *arg) {
    fixture *f = arg;
    strata_task_args a;
    strata_args_init(&a);
    strata_args_add_scalar(&a, 13);
    return strata_orch_submit_next_level(o, f->refuser, &a, NULL, f->t.chip_id[0]);
}

static void a_failing_program_fails_its_task_as_etask_and_the_chip_goes_on(void **state) {
    (void)state;
    fixture *f = make(0, 1);
    strata_run *h;
    assert_ok(strata_worker_submit(f->t.w, orch_refused_then_probe, f, &h));
    assert_status(STRATA_ETASK, strata_run_wait(h, STRATA_WAIT_FOREVER));
    const char *err = strata_run_error(h);
    ts_assert_mentions(err, "L3 worker 0 (chip sim:0): task 'refuser' #1 failed");
    ts_assert_mentions(err, "program 'refuser'");
    ts_assert_mentions(err, "bad input 13");
    strata_run_release(h);
    to_chips tc = {f, 1};
    assert_ok(strata_worker_run(f->t.w, orch_one_task_per_chip, &tc)); /* not poisoned */
    assert_int_equal(f->log.n, 1);
    destroy(f);
}

static int orch_chip_view_to_a_sub_task(strata_orch *o, void *arg) {
    fixture *f = arg;
    strata_task_args a;
    strata_args_init(&a);
    strata_args_add_tensor(&a, &f->dev_view, STRATA_IN);
    TS_PROBE(&f->pr, strata_orch_submit_sub(o, f->t.count, &a));
    TS_PROBE(&f->pr, strata_orch_submit_next_level(o, f->probe, &a, NULL, f->t.chip_id[0]));
    return STRATA_OK;
}

static void a_chip_buffer_is_refused_for_sub_tasks(void **state) {
    (void)state;
    fixture *f = make(0, 1);
    strata_buffer *b;
    assert_ok(strata_worker_chip_malloc(f->t.w, f->t.chip_id[0], BYTES, &b));
    int64_t n = 4;
    assert_ok(strata_worker_chip_tensor(f->t.w, b, 0, STRATA_I32, 1, &n, NULL, &f->dev_view));
    assert_ok(strata_worker_run(f->t.w, orch_chip_view_to_a_sub_task, f));
    assert_probe(&f->pr, 0, STRATA_EINVAL, "host memory only");
    assert_probe(&f->pr, 1, STRATA_OK, "");
    assert_int_equal(atomic_load(&f->t.counter), 0);
    assert_int_equal(f->log.n, 1);
    assert_int_equal(f->log.runs[0].ntensors, 1);
    assert_ok(strata_worker_chip_free(f->t.w, b));
    destroy(f);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(chips_get_the_next_ids_after_other_children),
        cmocka_unit_test(add_chip_checks_and_adds_nothing_on_failure),
        cmocka_unit_test(register_chip_program_checks_its_desc),
        cmocka_unit_test(chip_malloc_checks_its_target_and_gives_views_owned_by_the_chip),
        cmocka_unit_test(copies_move_the_bytes_at_their_offset),
        cmocka_unit_test(a_chip_buffer_belongs_to_the_worker_that_allocated_it),
        cmocka_unit_test(a_freed_chip_buffer_is_refused),
        cmocka_unit_test(after_close_the_chip_calls_find_no_chip),
        cmocka_unit_test(next_level_tasks_reach_their_chip_with_args_and_config),
        cmocka_unit_test(a_failing_program_fails_its_task_as_etask_and_the_chip_goes_on),
        cmocka_unit_test(a_chip_buffer_is_refused_for_sub_tasks),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
