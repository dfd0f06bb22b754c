// label: concurrency
/* tests/unit/test_sim_backend.c - the sim backend through its C ABI.
 *
 * Owns: the sim's completion word, device memory bookkeeping, programs and
 * kernels (block index/count, launch order), the checks every phase call
 * makes on caller-owned storage, acceptance at the real launch, depth-two
 * admission (a prepared successor, a launch that waits for the owner), the
 * injection knobs and a failing kernel. Loads the real libstrata_sim.so.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_support.h"

#include "backends/sim/sim_completion.h"
#include "chip/backend_loader.h"

/* ---- The completion word ----------------------------------------------------------------- */

static void completion_stays_pending_until_the_last_task(void **state) {
    sim_completion c = {0};
    assert_int_equal(sim_completion_state(&c), SIM_DONE_ERROR);
    sim_completion_reset(&c, 2);
    assert_int_equal(sim_completion_state(&c), SIM_DONE_NOT_READY);
    sim_completion_finish(&c, 0);
    assert_int_equal(sim_completion_state(&c), SIM_DONE_NOT_READY);
    sim_completion_finish(&c, 0);
    assert_int_equal(sim_completion_state(&c), SIM_DONE_COMPLETE);
    assert_int_equal(sim_completion_error(&c), 0);
    assert_int_equal(sim_completion_wait(&c, UINT64_MAX), SIM_DONE_COMPLETE);
}

static void completion_keeps_the_first_error(void **state) {
    sim_completion c = {0};
    sim_completion_reset(&c, 3);
    sim_completion_finish(&c, -7);
    sim_completion_finish(&c, -9);
    assert_int_equal(sim_completion_state(&c), SIM_DONE_NOT_READY);
    sim_completion_finish(&c, 0);
    assert_int_equal(sim_completion_state(&c), SIM_DONE_COMPLETE);
    assert_int_equal(sim_completion_error(&c), -7);
    sim_completion_reset(&c, 1); /* re-arms and clears the error */
    assert_int_equal(sim_completion_error(&c), 0);
    assert_int_equal(sim_completion_state(&c), SIM_DONE_NOT_READY);
}

static void abandon_is_sticky_against_a_late_finish(void **state) {
    sim_completion c = {0};
    sim_completion_reset(&c, 1);
    sim_completion_abandon(&c);
    sim_completion_finish(&c, 0);
    assert_int_equal(sim_completion_state(&c), SIM_DONE_ERROR);
    sim_completion_reset(&c, 1);
    sim_completion_finish(&c, 0);
    assert_int_equal(sim_completion_state(&c), SIM_DONE_COMPLETE);
}

static void *finish_later(void *p) {
    sim_completion *c = p;
    struct timespec ts = {0, 20 * 1000 * 1000};
    nanosleep(&ts, NULL);
    sim_completion_finish(c, 0);
    return NULL;
}

static void completion_wait_parks_until_finished(void **state) {
    sim_completion c = {0};
    sim_completion_reset(&c, 1);
    assert_int_equal(sim_completion_wait(&c, sim_now_ns()), SIM_DONE_NOT_READY);
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, finish_later, &c), 0);
    assert_int_equal(sim_completion_wait(&c, UINT64_MAX), SIM_DONE_COMPLETE);
    pthread_join(t, NULL);
}

/* ---- A sim device ---------------------------------------------------------------------- */

typedef struct sim {
    st_backend b;
    const strata_backend_ops *ops;
    void *dev;
    strata_backend_msg m;
} sim;

static void open_sim(sim *s) {
    memset(s, 0, sizeof *s);
    assert_ok(st_backend_load(STRATA_SIM_BACKEND_PATH, &s->b));
    s->ops = s->b.ops;
    strata_backend_open_params p = {.abi_version = STRATA_BACKEND_ABI_VERSION,
                                    .device_id = 0,
                                    .kernel_module = STRATA_SIM_TEST_KERNELS_PATH,
                                    .cores = 2};
    assert_int_equal(s->ops->open(&p, &s->dev, &s->m), 0);
}

static void close_sim(sim *s) {
    if (s->ops->close(s->dev, &s->m) != 0)
        fail_msg("close: %s", s->m.text);
    st_backend_unload(&s->b);
}

static void expect_msg(const sim *s, const char *needle) {
    if (!strstr(s->m.text, needle))
        fail_msg("expected '%s' in: %s", needle, s->m.text);
}

static void knob(sim *s, const char *k, const char *v) {
    if (s->ops->configure(s->dev, k, v, &s->m) != 0)
        fail_msg("configure %s=%s: %s", k, v, s->m.text);
}

/* A program that enqueues a fixed list of launches. */
typedef struct plan {
    int n;
    struct {
        const char *kernel;
        uint32_t blocks;
        uint32_t nargs;
        uint64_t args[8];
    } l[4];
} plan;

static int plan_program(strata_program_ctx *ctx, const strata_task_view *a, void *user) {
    const plan *p = user;
    for (int i = 0; i < p->n; i++) {
        int rc = ctx->launch(ctx, p->l[i].kernel, p->l[i].blocks, p->l[i].args, p->l[i].nargs);
        if (rc != 0)
            return rc;
    }
    return 0;
}

static uint32_t add_program(sim *s, const char *name, plan *p) {
    strata_backend_program bp = {.name = name, .fn = plan_program, .user = p};
    uint32_t id = 99;
    if (s->ops->register_program(s->dev, &bp, &id, &s->m) != 0)
        fail_msg("register: %s", s->m.text);
    return id;
}

static const strata_task_view no_args; /* no tensors, no scalars */

static strata_native_run_desc desc_for(uint32_t slot, uint64_t epoch) {
    strata_native_run_desc d = {.slot = slot, .epoch = epoch};
    return d;
}

static int prepare(sim *s, strata_native_run *run, uint32_t prog, strata_native_run_desc d) {
    return s->ops->prepare(s->dev, run, prog, &no_args, NULL, &d, &s->m);
}

/* prepare + launch + wait + finalize; returns finalize's code. */
static int run_to_end(sim *s, strata_native_run *run, uint32_t prog, uint64_t epoch) {
    if (prepare(s, run, prog, desc_for(0, epoch)) != 0)
        fail_msg("prepare: %s", s->m.text);
    if (s->ops->launch(s->dev, run, epoch, &s->m) != 0)
        fail_msg("launch: %s", s->m.text);
    assert_int_equal(s->ops->wait(s->dev, run, epoch, UINT64_MAX, &s->m), STRATA_BACKEND_COMPLETE);
    return s->ops->finalize(s->dev, run, epoch, &s->m);
}

static void memory_is_bookkept_and_checked(void **state) {
    sim s;
    open_sim(&s);
    void *a = NULL, *b = NULL;
    assert_int_equal(s.ops->mem_alloc(s.dev, 100, &a, &s.m), 0);
    assert_int_equal(s.ops->committed_bytes(s.dev), 100);
    assert_int_equal(s.ops->mem_alloc(s.dev, 50, &b, &s.m), 0);
    assert_int_equal(s.ops->committed_bytes(s.dev), 150);
    char host[128] = "abcdefgh";
    char back[128] = {0};
    assert_int_equal(s.ops->copy_to(s.dev, (char *)a + 10, host, 8, &s.m), 0);
    assert_int_equal(s.ops->copy_from(s.dev, back, (char *)a + 10, 8, &s.m), 0);
    assert_memory_equal(back, host, 8);
    assert_int_not_equal(s.ops->copy_to(s.dev, (char *)a + 96, host, 8, &s.m), 0);
    expect_msg(&s, "runs past the end");
    assert_int_not_equal(s.ops->copy_from(s.dev, back, host, 8, &s.m), 0);
    expect_msg(&s, "no live device allocation");
    assert_int_not_equal(s.ops->mem_free(s.dev, (char *)a + 1, &s.m), 0);
    expect_msg(&s, "not the start");
    assert_int_equal(s.ops->mem_free(s.dev, a, &s.m), 0);
    assert_int_equal(s.ops->committed_bytes(s.dev), 50);
    assert_int_not_equal(s.ops->mem_free(s.dev, a, &s.m), 0); /* double free: an error */
    expect_msg(&s, "already freed");
    assert_int_not_equal(s.ops->copy_to(s.dev, a, host, 1, &s.m), 0); /* use after free */
    assert_int_not_equal(s.ops->mem_alloc(s.dev, 0, &a, &s.m), 0);
    assert_int_equal(s.ops->mem_free(s.dev, b, &s.m), 0);
    assert_int_equal(s.ops->committed_bytes(s.dev), 0);
    close_sim(&s);
}

static void programs_are_registered_by_unique_name(void **state) {
    sim s;
    open_sim(&s);
    plan p = {0};
    uint32_t id = add_program(&s, "p", &p);
    strata_backend_program dup = {.name = "p", .fn = plan_program, .user = &p};
    uint32_t id2;
    assert_int_not_equal(s.ops->register_program(s.dev, &dup, &id2, &s.m), 0);
    expect_msg(&s, "already registered");
    assert_int_not_equal(s.ops->unregister_program(s.dev, id + 7, &s.m), 0);
    assert_int_equal(s.ops->unregister_program(s.dev, id, &s.m), 0);
    assert_int_equal(s.ops->register_program(s.dev, &dup, &id2, &s.m), 0);
    close_sim(&s);
}

static void kernels_see_their_block_index_and_count(void **state) {
    sim s;
    open_sim(&s);
    void *out;
    assert_int_equal(s.ops->mem_alloc(s.dev, 7 * sizeof(uint32_t), &out, &s.m), 0);
    plan p = {.n = 1, .l = {{"record_blocks", 7, 1, {(uint64_t)(uintptr_t)out}}}};
    uint32_t prog = add_program(&s, "blocks", &p);
    strata_native_run run = {0};
    assert_int_equal(run_to_end(&s, &run, prog, 1), 0);
    uint32_t got[7];
    assert_int_equal(s.ops->copy_from(s.dev, got, out, sizeof got, &s.m), 0);
    for (uint32_t i = 0; i < 7; i++)
        assert_int_equal(got[i], 7000u + i + 1u);
    s.ops->mem_free(s.dev, out, &s.m);
    close_sim(&s);
}

static void launches_of_a_run_execute_in_order(void **state) {
    sim s;
    open_sim(&s);
    enum { N = 1000, PARTS = 8 };
    float host[N];
    double expect = 0;
    for (int i = 0; i < N; i++) {
        host[i] = (float)(i % 13) * 0.5f;
        expect += host[i];
    }
    void *in, *partial, *out;
    assert_int_equal(s.ops->mem_alloc(s.dev, sizeof host, &in, &s.m), 0);
    assert_int_equal(s.ops->mem_alloc(s.dev, PARTS * sizeof(float), &partial, &s.m), 0);
    assert_int_equal(s.ops->mem_alloc(s.dev, sizeof(float), &out, &s.m), 0);
    assert_int_equal(s.ops->copy_to(s.dev, in, host, sizeof host, &s.m), 0);
    uint64_t pi = (uint64_t)(uintptr_t)in, pp = (uint64_t)(uintptr_t)partial,
             po = (uint64_t)(uintptr_t)out;
    plan p = {
        .n = 2,
        .l = {{"reduce_partial", PARTS, 3, {pi, pp, N}}, {"reduce_final", 1, 3, {pp, po, PARTS}}}};
    uint32_t prog = add_program(&s, "sum", &p);
    strata_native_run run = {0};
    assert_int_equal(run_to_end(&s, &run, prog, 1), 0);
    float got = 0;
    assert_int_equal(s.ops->copy_from(s.dev, &got, out, sizeof got, &s.m), 0);
    assert_float_equal(got, (float)expect, 1e-3);
    close_sim(&s); /* frees the outstanding allocations */
}

static void an_empty_program_completes_at_launch(void **state) {
    sim s;
    open_sim(&s);
    plan p = {0};
    uint32_t prog = add_program(&s, "empty", &p);
    strata_native_run run = {0};
    assert_int_equal(prepare(&s, &run, prog, desc_for(0, 1)), 0);
    assert_int_equal(s.ops->launch(s.dev, &run, 1, &s.m), 0);
    assert_int_equal(s.ops->poll(s.dev, &run, 1, &s.m), STRATA_BACKEND_COMPLETE);
    assert_int_equal(s.ops->finalize(s.dev, &run, 1, &s.m), 0);
    close_sim(&s);
}

static int all_zero(const strata_native_run *run) {
    for (size_t i = 0; i < sizeof run->bytes; i++)
        if (run->bytes[i])
            return 0;
    return 1;
}

static void every_phase_call_checks_the_storage(void **state) {
    sim s, other;
    open_sim(&s);
    open_sim(&other);
    plan p = {0};
    uint32_t prog = add_program(&s, "empty", &p);
    strata_native_run run = {0};
    run.bytes[100] = 1;
    assert_int_not_equal(prepare(&s, &run, prog, desc_for(0, 1)), 0);
    expect_msg(&s, "not zero-initialized");
    run.bytes[100] = 0;
    assert_int_equal(s.ops->launch(s.dev, &run, 1, &s.m), STRATA_BACKEND_ESTALE);
    expect_msg(&s, "no prepared run");
    assert_int_equal(prepare(&s, &run, prog, desc_for(0, 5)), 0);
    assert_int_not_equal(prepare(&s, &run, prog, desc_for(0, 6)), 0);
    expect_msg(&s, "already contains a prepared run");
    assert_int_equal(s.ops->launch(s.dev, &run, 4, &s.m), STRATA_BACKEND_ESTALE);
    expect_msg(&s, "stale");
    assert_int_equal(other.ops->launch(other.dev, &run, 5, &other.m), STRATA_BACKEND_ESTALE);
    expect_msg(&other, "different device");
    assert_int_not_equal(s.ops->poll(s.dev, &run, 5, &s.m), STRATA_BACKEND_COMPLETE);
    expect_msg(&s, "never launched");
    assert_int_equal(s.ops->finalize(s.dev, &run, 5, &s.m), 0); /* abandon: never launched */
    assert_true(all_zero(&run));
    assert_int_equal(s.ops->finalize(s.dev, &run, 5, &s.m), STRATA_BACKEND_ESTALE);
    strata_native_run_desc zero_epoch = desc_for(0, 0);
    assert_int_not_equal(prepare(&s, &run, prog, zero_epoch), 0);
    close_sim(&other);
    close_sim(&s);
}

static void acceptance_is_written_only_at_the_real_launch(void **state) {
    sim s;
    open_sim(&s);
    plan p = {0};
    uint32_t prog = add_program(&s, "empty", &p);
    strata_native_run run = {0};
    _Atomic uint32_t accepted = 0;
    strata_native_run_desc d = desc_for(0, 1);
    d.accepted = &accepted;
    d.accepted_value = 9;
    knob(&s, "fault", "launch"); /* a fault is chosen for each run when it is prepared */
    assert_int_equal(prepare(&s, &run, prog, d), 0);
    knob(&s, "fault", "none");
    assert_int_equal(atomic_load(&accepted), 0);
    assert_int_not_equal(s.ops->launch(s.dev, &run, 1, &s.m), 0);
    assert_int_equal(atomic_load(&accepted), 0); /* a failed launch accepts nothing */
    assert_int_equal(s.ops->finalize(s.dev, &run, 1, &s.m), 0);

    assert_int_equal(prepare(&s, &run, prog, d), 0);
    assert_int_equal(atomic_load(&accepted), 0);
    assert_int_equal(s.ops->launch(s.dev, &run, 1, &s.m), 0);
    assert_int_equal(atomic_load(&accepted), 9);
    assert_int_equal(s.ops->finalize(s.dev, &run, 1, &s.m), 0);
    close_sim(&s);
}

static void a_successor_is_prepared_while_a_run_executes(void **state) {
    sim s;
    open_sim(&s);
    plan p = {.n = 1, .l = {{"empty_kernel", 4, 0, {0}}}};
    uint32_t prog = add_program(&s, "k", &p);
    strata_native_run a = {0}, b = {0};
    assert_int_equal(prepare(&s, &a, prog, desc_for(0, 1)), 0);
    assert_int_equal(s.ops->launch(s.dev, &a, 1, &s.m), 0);
    assert_int_equal(prepare(&s, &b, prog, desc_for(1, 2)), 0);
    assert_int_equal(s.ops->launch(s.dev, &b, 2, &s.m), STRATA_BACKEND_EBUSY);
    expect_msg(&s, "still owns the device");
    assert_int_equal(s.ops->finalize(s.dev, &a, 1, &s.m), 0);
    assert_int_equal(s.ops->launch(s.dev, &b, 2, &s.m), 0); /* retried after the finalize */
    assert_int_equal(s.ops->wait(s.dev, &b, 2, UINT64_MAX, &s.m), STRATA_BACKEND_COMPLETE);
    assert_int_equal(s.ops->finalize(s.dev, &b, 2, &s.m), 0);
    close_sim(&s);
}

static void a_successor_needs_a_launched_predecessor(void **state) {
    sim s;
    open_sim(&s);
    plan p = {0};
    uint32_t prog = add_program(&s, "empty", &p);
    strata_native_run a = {0}, b = {0}, c = {0};
    assert_int_equal(prepare(&s, &a, prog, desc_for(0, 1)), 0);
    assert_int_not_equal(prepare(&s, &b, prog, desc_for(1, 2)), 0);
    expect_msg(&s, "successor requires an active predecessor");
    assert_true(all_zero(&b));
    assert_int_equal(s.ops->launch(s.dev, &a, 1, &s.m), 0);
    assert_int_equal(prepare(&s, &b, prog, desc_for(1, 2)), 0);
    assert_int_not_equal(prepare(&s, &c, prog, desc_for(0, 3)), 0);
    expect_msg(&s, "already holds 2");
    assert_int_equal(s.ops->finalize(s.dev, &a, 1, &s.m), 0);
    assert_int_equal(s.ops->finalize(s.dev, &b, 2, &s.m), 0);
    close_sim(&s);
}

static void an_overlapping_prepare_can_be_refused_as_incompatible(void **state) {
    sim s;
    open_sim(&s);
    plan p = {0};
    uint32_t prog = add_program(&s, "empty", &p);
    strata_native_run a = {0}, b = {0};
    assert_int_equal(prepare(&s, &a, prog, desc_for(0, 1)), 0);
    assert_int_equal(s.ops->launch(s.dev, &a, 1, &s.m), 0);
    knob(&s, "refuse_overlap", "1");
    assert_int_equal(prepare(&s, &b, prog, desc_for(1, 2)), STRATA_BACKEND_EINCOMPATIBLE);
    knob(&s, "refuse_overlap", "0");
    strata_native_run_desc diag = desc_for(1, 3);
    diag.flags = STRATA_NATIVE_DIAGNOSTICS;
    assert_int_equal(prepare(&s, &b, prog, diag), STRATA_BACKEND_EINCOMPATIBLE);
    expect_msg(&s, "diagnostics");
    assert_true(all_zero(&b));
    assert_int_equal(s.ops->finalize(s.dev, &a, 1, &s.m), 0);
    assert_int_equal(prepare(&s, &b, prog, diag), 0); /* alone it is fine */
    assert_int_equal(s.ops->finalize(s.dev, &b, 3, &s.m), 0);
    close_sim(&s);
}

static void a_timed_wait_expires_and_leaves_the_run_live(void **state) {
    sim s;
    open_sim(&s);
    knob(&s, "kernel_delay_ns", "300000000"); /* the launch takes at least 300 ms */
    plan p = {.n = 1, .l = {{"empty_kernel", 1, 0, {0}}}};
    uint32_t prog = add_program(&s, "slow", &p);
    strata_native_run run = {0};
    assert_int_equal(prepare(&s, &run, prog, desc_for(0, 1)), 0);
    assert_int_equal(s.ops->launch(s.dev, &run, 1, &s.m), 0);
    assert_int_equal(s.ops->wait(s.dev, &run, 1, sim_now_ns() + 1000000, &s.m),
                     STRATA_BACKEND_NOT_READY);
    assert_int_equal(s.ops->poll(s.dev, &run, 1, &s.m), STRATA_BACKEND_NOT_READY);
    assert_int_not_equal(s.ops->close(s.dev, &s.m), 0); /* a live run keeps the device open */
    expect_msg(&s, "close refused");
    assert_int_equal(s.ops->wait(s.dev, &run, 1, UINT64_MAX, &s.m), STRATA_BACKEND_COMPLETE);
    assert_int_equal(s.ops->finalize(s.dev, &run, 1, &s.m), 0);
    close_sim(&s);
}

static void unregister_is_refused_while_a_run_is_live(void **state) {
    sim s;
    open_sim(&s);
    plan p = {0};
    uint32_t prog = add_program(&s, "empty", &p);
    strata_native_run run = {0};
    assert_int_equal(prepare(&s, &run, prog, desc_for(0, 1)), 0);
    assert_int_not_equal(s.ops->unregister_program(s.dev, prog, &s.m), 0);
    expect_msg(&s, "refused");
    assert_int_equal(s.ops->finalize(s.dev, &run, 1, &s.m), 0);
    assert_int_equal(s.ops->unregister_program(s.dev, prog, &s.m), 0);
    close_sim(&s);
}

/* One run of vector_add over 4 blocks with `fault` injected: the return code
 * of the phase that fails, and its message. */
static int run_with_fault(const char *fault, char *msg, size_t cap) {
    sim s;
    open_sim(&s);
    float a[64], b[64];
    for (int i = 0; i < 64; i++)
        a[i] = b[i] = (float)i;
    void *da, *db, *dc;
    assert_int_equal(s.ops->mem_alloc(s.dev, sizeof a, &da, &s.m), 0);
    assert_int_equal(s.ops->mem_alloc(s.dev, sizeof b, &db, &s.m), 0);
    assert_int_equal(s.ops->mem_alloc(s.dev, sizeof a, &dc, &s.m), 0);
    plan p = {
        .n = 1,
        .l = {{"vector_add",
               4,
               4,
               {(uint64_t)(uintptr_t)da, (uint64_t)(uintptr_t)db, (uint64_t)(uintptr_t)dc, 64}}}};
    uint32_t prog = add_program(&s, "vadd", &p);
    knob(&s, "fault", fault);
    knob(&s, "fault_code", "-5");
    knob(&s, "fault_kernel", "vector_add");
    knob(&s, "fault_block", "3");
    strata_native_run run = {0};
    int rc = prepare(&s, &run, prog, desc_for(0, 1));
    int live = rc == 0;
    if (rc == 0)
        rc = s.ops->launch(s.dev, &run, 1, &s.m);
    if (rc == 0 && s.ops->poll(s.dev, &run, 1, &s.m) < 0)
        rc = -100; /* marker: poll failed */
    if (rc == 0) {
        int w = s.ops->wait(s.dev, &run, 1, UINT64_MAX, &s.m);
        rc = w < 0 ? -200 : 0;
    }
    char kept[STRATA_BACKEND_MSG_MAX];
    snprintf(kept, sizeof kept, "%s", s.m.text);
    int frc = live ? s.ops->finalize(s.dev, &run, 1, &s.m) : 0;
    if (rc == 0 && frc != 0) {
        rc = frc;
        snprintf(kept, sizeof kept, "%s", s.m.text);
    }
    snprintf(msg, cap, "%s", kept);
    close_sim(&s);
    return rc;
}

static void each_injected_fault_names_its_phase_and_program(void **state) {
    static const struct {
        const char *fault;
        int rc;
        const char *needle;
    } cases[] = {
        {"prepare", -5, "injected prepare fault in program 'vadd'"},
        {"launch", -5, "injected launch fault: program 'vadd', kernel 'vector_add'"},
        {"poll", -100, "injected poll fault: program 'vadd'"},
        {"wait", -200, "injected wait fault: program 'vadd'"},
        {"finalize", -5, "injected finalize fault: program 'vadd'"},
        {"kernel", -5, "program 'vadd': kernel 'vector_add' (launch 1 of 1) block 3 of 4"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char msg[STRATA_BACKEND_MSG_MAX];
        int rc = run_with_fault(cases[i].fault, msg, sizeof msg);
        if (rc != cases[i].rc || !strstr(msg, cases[i].needle))
            fail_msg("fault %s: rc %d (expected %d), message: %s", cases[i].fault, rc, cases[i].rc,
                     msg);
    }
}

static void fault_run_targets_one_run(void **state) {
    sim s;
    open_sim(&s);
    plan p = {0};
    uint32_t prog = add_program(&s, "empty", &p);
    knob(&s, "fault", "prepare");
    knob(&s, "fault_run", "2");
    strata_native_run run = {0};
    assert_int_equal(prepare(&s, &run, prog, desc_for(0, 1)), 0);
    assert_int_equal(s.ops->finalize(s.dev, &run, 1, &s.m), 0);
    assert_int_not_equal(prepare(&s, &run, prog, desc_for(0, 2)), 0);
    assert_true(all_zero(&run)); /* a failed prepare leaves nothing behind */
    assert_int_equal(prepare(&s, &run, prog, desc_for(0, 3)), 0);
    assert_int_equal(s.ops->finalize(s.dev, &run, 3, &s.m), 0);
    close_sim(&s);
}

static void a_failing_kernel_fails_the_run_naming_its_block(void **state) {
    sim s;
    open_sim(&s);
    plan p = {.n = 2, .l = {{"fail_block", 4, 2, {2, 17}}, {"empty_kernel", 1, 0, {0}}}};
    uint32_t prog = add_program(&s, "failing", &p);
    strata_native_run run = {0};
    assert_int_equal(run_to_end(&s, &run, prog, 1), 17);
    expect_msg(&s, "program 'failing': kernel 'fail_block' (launch 1 of 2) block 2 of 4");
    expect_msg(&s, "asked to fail");
    close_sim(&s);
}

static void an_unknown_kernel_fails_prepare(void **state) {
    sim s;
    open_sim(&s);
    plan p = {.n = 1, .l = {{"no_such_kernel", 1, 0, {0}}}};
    uint32_t prog = add_program(&s, "bad", &p);
    strata_native_run run = {0};
    assert_int_not_equal(prepare(&s, &run, prog, desc_for(0, 1)), 0);
    expect_msg(&s, "kernel 'no_such_kernel' not found in kernel module");
    expect_msg(&s, "program 'bad'");
    assert_true(all_zero(&run));
    plan zero_blocks = {.n = 1, .l = {{"empty_kernel", 0, 0, {0}}}};
    uint32_t prog2 = add_program(&s, "zero", &zero_blocks);
    assert_int_not_equal(prepare(&s, &run, prog2, desc_for(0, 2)), 0);
    expect_msg(&s, "0 blocks");
    close_sim(&s);
}

static void configure_rejects_unknown_knobs_and_values(void **state) {
    sim s;
    open_sim(&s);
    assert_int_not_equal(s.ops->configure(s.dev, "warp_speed", "1", &s.m), 0);
    expect_msg(&s, "unknown");
    assert_int_not_equal(s.ops->configure(s.dev, "fault", "explode", &s.m), 0);
    assert_int_not_equal(s.ops->configure(s.dev, "prepare_delay_ns", "-3", &s.m), 0);
    assert_int_not_equal(s.ops->configure(s.dev, "fault_code", "0", &s.m), 0);
    close_sim(&s);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(completion_stays_pending_until_the_last_task),
        cmocka_unit_test(completion_keeps_the_first_error),
        cmocka_unit_test(abandon_is_sticky_against_a_late_finish),
        cmocka_unit_test(completion_wait_parks_until_finished),
        cmocka_unit_test(memory_is_bookkept_and_checked),
        cmocka_unit_test(programs_are_registered_by_unique_name),
        cmocka_unit_test(kernels_see_their_block_index_and_count),
        cmocka_unit_test(launches_of_a_run_execute_in_order),
        cmocka_unit_test(an_empty_program_completes_at_launch),
        cmocka_unit_test(every_phase_call_checks_the_storage),
        cmocka_unit_test(acceptance_is_written_only_at_the_real_launch),
        cmocka_unit_test(a_successor_is_prepared_while_a_run_executes),
        cmocka_unit_test(a_successor_needs_a_launched_predecessor),
        cmocka_unit_test(an_overlapping_prepare_can_be_refused_as_incompatible),
        cmocka_unit_test(a_timed_wait_expires_and_leaves_the_run_live),
        cmocka_unit_test(unregister_is_refused_while_a_run_is_live),
        cmocka_unit_test(each_injected_fault_names_its_phase_and_program),
        cmocka_unit_test(fault_run_targets_one_run),
        cmocka_unit_test(a_failing_kernel_fails_the_run_naming_its_block),
        cmocka_unit_test(an_unknown_kernel_fails_prepare),
        cmocka_unit_test(configure_rejects_unknown_knobs_and_values),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
