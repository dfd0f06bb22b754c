// label: concurrency
/* tests/system/test_soak.c - a long stream of overlapping runs with scopes,
 * intermediates and sub groups: results stay right and memory stays flat.
 *
 * Owns: the soak scenario and its sequential reference (the same arithmetic
 * run on private copies, run after run) and the memory check: VmRSS after a
 * warm-up versus at the end, with a generous bound. That is a memory
 * assertion, never a timing one. Under a sanitizer, resident memory measures
 * the sanitizer (ASan's quarantine alone grows by hundreds of MiB), so there
 * the same bound applies to the live heap as the sanitizer's allocator counts it.
 * Must never: keep per-run state of its own that grows (it would hide or fake
 * the engine's growth), or wait without a bound.
 *
 * Every run has 10 sections of 5 tasks (50 tasks). Section g works on slice
 * q = g % 4 (16 int32) of `acc`, inside one or two nested scopes:
 *   alloc tmp (4x4)
 *   GEN    IN src[q]           OUT tmp            tmp[k] = src[k] + run + g
 *   MUL    INOUT tmp                              tmp[k] = tmp[k] * 3 + 1
 *   MIX    IN tmp              INOUT acc[q]       acc[k] = acc[k] * 5 + tmp[k]
 *   COPY   IN acc[q]           OUT_EXISTING out[q] out[k] = acc[k] ^ g
 *   SPREAD group of 2: IN tmp, INOUT acc[q + 4k] (strided, crossing every slice)
 *                                                 acc[.] = acc[.] * 7 + tmp[base + k]
 * Runs overlap (depth 2: run N+1 is built while run N executes). Scale the
 * number of runs with STRATA_TEST_SCALE (default 1).
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_support.h"

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define SOAK_HEAP_FROM_SANITIZER 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define SOAK_HEAP_FROM_SANITIZER 1
#endif
#endif
#ifdef SOAK_HEAP_FROM_SANITIZER
/* From the sanitizer runtime (sanitizer/allocator_interface.h, not shipped by every compiler). */
size_t __sanitizer_get_current_allocated_bytes(void);
#endif

#define ELEMS 64
#define SLICE 16
#define SECTIONS 10
#define CHECK_EVERY 100
#define WAIT_NS (120ull * 1000 * 1000 * 1000)
#define RSS_BOUND_KIB (8 * 1024)

typedef enum soak_op { OP_GEN, OP_MUL, OP_MIX, OP_COPY, OP_SPREAD } soak_op;

/* A rank-1 strided view, or a contiguous rank-2 view seen as rank 1. */
typedef struct vec {
    int32_t *p;
    int64_t n;
    int64_t stride;
} vec;

/* The arithmetic of every task; `c` is the op's constant (GEN, COPY) or the
 * tmp base index (SPREAD). Shared by the task body and the model. */
static void apply_op(soak_op op, vec a, vec b, uint32_t c) {
    for (int64_t k = 0; k < a.n || k < b.n; k++) {
        switch (op) {
        case OP_GEN:
            b.p[k * b.stride] = (int32_t)((uint32_t)a.p[k * a.stride] + c);
            break;
        case OP_MUL:
            a.p[k * a.stride] = (int32_t)((uint32_t)a.p[k * a.stride] * 3u + 1u);
            break;
        case OP_MIX:
            b.p[k * b.stride] =
                (int32_t)((uint32_t)b.p[k * b.stride] * 5u + (uint32_t)a.p[k * a.stride]);
            break;
        case OP_COPY:
            b.p[k * b.stride] = (int32_t)((uint32_t)a.p[k * a.stride] ^ c);
            break;
        case OP_SPREAD:
            if (k < b.n)
                b.p[k * b.stride] =
                    (int32_t)((uint32_t)b.p[k * b.stride] * 7u + (uint32_t)a.p[(c + k) * a.stride]);
            break;
        }
    }
}

static vec vec_of(const strata_task_view *a, uint32_t i) {
    const strata_tensor *t = strata_args_tensor(a, i);
    vec v = {NULL, 0, 1};
    if (!t)
        return v;
    v.p = strata_args_data(a, i);
    v.n = strata_tensor_numel(t);
    v.stride = t->rank == 1 ? t->strides[0] : 1; /* rank 2 views here are contiguous */
    return v;
}

static int soak_body(const strata_task_view *a, void *user) {
    (void)user;
    soak_op op = (soak_op)strata_args_scalar(a, 0);
    uint32_t c = (uint32_t)strata_args_scalar(a, 1);
    apply_op(op, vec_of(a, 0), vec_of(a, 1), c);
    return 0;
}

typedef struct soak_ctx {
    strata_worker *w;
    strata_callable body;
    strata_buffer *src, *acc, *out;
    uint32_t run_index; /* of the run being built */
    int32_t m_src[ELEMS], m_acc[ELEMS], m_out[ELEMS], m_tmp[SLICE];
} soak_ctx;

static int view1(const strata_buffer *b, int64_t off, int64_t n, int64_t stride, strata_tensor *t) {
    int64_t shape[1] = {n}, strides[1] = {stride};
    return strata_tensor_view(b, (uint64_t)off * sizeof(int32_t), STRATA_I32, 1, shape, strides, t);
}

static int submit2(strata_orch *o, soak_ctx *c, soak_op op, uint32_t k, const strata_tensor *t0,
                   strata_tag g0, const strata_tensor *t1, strata_tag g1) {
    strata_task_args a;
    strata_args_init(&a);
    STRATA_TRY(strata_args_add_tensor(&a, t0, g0));
    if (t1)
        STRATA_TRY(strata_args_add_tensor(&a, t1, g1));
    STRATA_TRY(strata_args_add_scalar(&a, op));
    STRATA_TRY(strata_args_add_scalar(&a, k));
    return strata_orch_submit_sub(o, c->body, &a);
}

static int section(strata_orch *o, soak_ctx *c, int g) {
    int q = g % 4;
    uint32_t r = c->run_index;
    strata_tensor src, acc, out, tmp;
    int64_t shape[2] = {4, 4};
    STRATA_TRY(strata_orch_alloc(o, 2, shape, STRATA_I32, &tmp));
    STRATA_TRY(view1(c->src, q * SLICE, SLICE, 1, &src));
    STRATA_TRY(view1(c->acc, q * SLICE, SLICE, 1, &acc));
    STRATA_TRY(view1(c->out, q * SLICE, SLICE, 1, &out));
    STRATA_TRY(submit2(o, c, OP_GEN, r + (uint32_t)g, &src, STRATA_IN, &tmp, STRATA_OUT));
    STRATA_TRY(submit2(o, c, OP_MUL, 0, &tmp, STRATA_INOUT, NULL, 0));
    STRATA_TRY(submit2(o, c, OP_MIX, 0, &tmp, STRATA_IN, &acc, STRATA_INOUT));
    STRATA_TRY(submit2(o, c, OP_COPY, (uint32_t)g, &acc, STRATA_IN, &out, STRATA_OUT_EXISTING));
    strata_task_args members[2];
    for (int m = 0; m < 2; m++) {
        strata_tensor spread;
        STRATA_TRY(view1(c->acc, q + 32 * m, 8, 4, &spread));
        strata_args_init(&members[m]);
        STRATA_TRY(strata_args_add_tensor(&members[m], &tmp, STRATA_IN));
        STRATA_TRY(strata_args_add_tensor(&members[m], &spread, STRATA_INOUT));
        STRATA_TRY(strata_args_add_scalar(&members[m], OP_SPREAD));
        STRATA_TRY(strata_args_add_scalar(&members[m], 8u * (uint32_t)m));
    }
    return strata_orch_submit_sub_group(o, c->body, members, 2);
}

static int soak_orch(strata_orch *o, void *arg) {
    soak_ctx *c = arg;
    for (int g = 0; g < SECTIONS; g++) {
        bool nested = g % 2 == 1;
        STRATA_TRY(strata_orch_scope_begin(o));
        if (nested)
            STRATA_TRY(strata_orch_scope_begin(o));
        STRATA_TRY(section(o, c, g));
        if (nested)
            STRATA_TRY(strata_orch_scope_end(o));
        STRATA_TRY(strata_orch_scope_end(o));
    }
    return STRATA_OK;
}

/* The same run, sequentially, on the model arrays. */
static void model_run(soak_ctx *c, uint32_t r) {
    for (int g = 0; g < SECTIONS; g++) {
        int q = g % 4;
        vec src = {c->m_src + q * SLICE, SLICE, 1}, acc = {c->m_acc + q * SLICE, SLICE, 1};
        vec out = {c->m_out + q * SLICE, SLICE, 1}, tmp = {c->m_tmp, SLICE, 1};
        vec none = {NULL, 0, 1};
        apply_op(OP_GEN, src, tmp, r + (uint32_t)g);
        apply_op(OP_MUL, tmp, none, 0);
        apply_op(OP_MIX, tmp, acc, 0);
        apply_op(OP_COPY, acc, out, (uint32_t)g);
        for (int m = 0; m < 2; m++) {
            vec spread = {c->m_acc + q + 32 * m, 8, 4};
            apply_op(OP_SPREAD, tmp, spread, 8u * (uint32_t)m);
        }
    }
}

#ifdef SOAK_HEAP_FROM_SANITIZER
#define MEMORY_WHAT "live heap"
static long memory_kib(void) {
    return (long)(__sanitizer_get_current_allocated_bytes() / 1024);
}
#else
#define MEMORY_WHAT "VmRSS"
static long memory_kib(void) {
    FILE *f = fopen("/proc/self/status", "r");
    assert_non_null(f);
    char line[256];
    long kib = -1;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "VmRSS: %ld kB", &kib) == 1)
            break;
    fclose(f);
    assert_true(kib > 0);
    return kib;
}
#endif

static void compare(const soak_ctx *c, uint32_t after_run) {
    const int32_t *acc = strata_buffer_data(c->acc), *out = strata_buffer_data(c->out);
    for (int e = 0; e < ELEMS; e++) {
        if (acc[e] != c->m_acc[e])
            fail_msg("after run %u: acc[%d] = %d, sequential replay gives %d", after_run, e, acc[e],
                     c->m_acc[e]);
        if (out[e] != c->m_out[e])
            fail_msg("after run %u: out[%d] = %d, sequential replay gives %d", after_run, e, out[e],
                     c->m_out[e]);
    }
}

static void finish(strata_run **h, uint32_t index) {
    if (!*h)
        return;
    int rc = strata_run_wait(*h, WAIT_NS);
    if (rc != STRATA_OK)
        fail_msg("soak run %u ended with %s: %s", index, strata_status_name(rc),
                 strata_run_error(*h));
    assert_string_equal(strata_run_error(*h), "");
    strata_run_release(*h);
    *h = NULL;
}

static uint32_t soak_runs(void) {
    const char *s = getenv("STRATA_TEST_SCALE");
    double scale = s && atof(s) > 0 ? atof(s) : 1.0;
    double n = 10000 * scale;
#if defined(STRATA_TSAN)
    n /= 4; /* ThreadSanitizer is an order of magnitude slower; same checks, fewer runs */
#endif
    return n < 4 * CHECK_EVERY ? 4 * CHECK_EVERY : (uint32_t)n;
}

static void test_soak_overlapping_runs(void **state) {
    (void)state;
    soak_ctx *c = calloc(1, sizeof *c);
    assert_non_null(c);
    strata_worker_config cfg;
    strata_worker_config_init(&cfg);
    cfg.sub_workers = 2;
    cfg.pipeline_depth = 2;
    cfg.heap_ring_bytes = 256 * 1024; /* small, so the warm-up wraps every ring in use */
    assert_ok(strata_worker_create(&cfg, &c->w));
    assert_ok(strata_worker_register_sub(c->w, "soak", soak_body, NULL, &c->body));
    assert_ok(strata_buffer_create(c->w, ELEMS * sizeof(int32_t), &c->src));
    assert_ok(strata_buffer_create(c->w, ELEMS * sizeof(int32_t), &c->acc));
    assert_ok(strata_buffer_create(c->w, ELEMS * sizeof(int32_t), &c->out));
    int32_t *src = strata_buffer_data(c->src);
    for (int e = 0; e < ELEMS; e++)
        src[e] = c->m_src[e] = e * 3 + 1;
    assert_ok(strata_worker_init(c->w));

    uint32_t nruns = soak_runs(), warmup = nruns / 5;
    long rss_warm = 0;
    strata_run *prev = NULL;
    for (uint32_t r = 0; r < nruns; r++) {
        strata_run *h = NULL;
        c->run_index = r;
        int rc = strata_worker_submit(c->w, soak_orch, c, &h);
        if (rc != STRATA_OK)
            fail_msg("submit of soak run %u: %s: %s", r, strata_status_name(rc),
                     strata_error_message());
        finish(&prev, r - 1); /* run r was built while r-1 executed */
        prev = h;
        model_run(c, r);
        if ((r + 1) % CHECK_EVERY == 0) {
            finish(&prev, r);
            compare(c, r);
        }
        if (r + 1 == warmup)
            rss_warm = memory_kib();
    }
    finish(&prev, nruns - 1);
    compare(c, nruns - 1);
    long rss_end = memory_kib();
    if (rss_end - rss_warm >= RSS_BOUND_KIB)
        fail_msg("%s grew from %ld KiB after %u warm-up runs to %ld KiB after %u runs "
                 "(bound %d KiB)",
                 MEMORY_WHAT, rss_warm, warmup, rss_end, nruns, RSS_BOUND_KIB);
    print_message("soak: %u runs x %d tasks, %s %ld KiB after warm-up, %ld KiB at the end\n", nruns,
                  SECTIONS * 5, MEMORY_WHAT, rss_warm, rss_end);

    assert_ok(strata_worker_close(c->w));
    strata_buffer_destroy(c->src);
    strata_buffer_destroy(c->acc);
    strata_buffer_destroy(c->out);
    strata_worker_destroy(c->w);
    free(c);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_soak_overlapping_runs),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
