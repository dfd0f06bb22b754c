/* tests/mpi/test_mpi_l4.c - an L4 Worker on rank 0 whose two children are L3
 * Workers on ranks 1 and 2 (run under mpirun -np 3; tests/CMakeLists.txt).
 *
 * Owns: the MPI child scenarios over one L4 (a rank serves one L4 and exits at
 * its close, so every scenario shares it, close last): a chip task and a sub
 * task per child, the child on rank 2 with process-hosted sub workers and a
 * process-hosted chip; the full error path of a failing remote task, with
 * later runs going on; RAW / WAW / WAR chains across the two ranks with the
 * bytes each rank received counted; IN / OUT / INOUT of strided views; remote
 * memory (malloc, copy_to, tasks on it in two runs, copy_from, refused on the
 * other child, free); a sub task of the L4 writing, within one run, a view
 * a rank keeps a copy of; a copy checked while it moves (valid, stale);
 * overlapping runs; random graphs over both children
 * against a sequential oracle; close with runs in flight.
 * With STRATA_TEST_LOCAL=1 the same program runs with process-hosted children
 * on one rank (the switch the guide describes), counters aside.
 */
#include <stdint.h>
#include <sys/resource.h>
#include <unistd.h>

#include "mpi/remote_child.h"
#include "mpi_test.h"
#include "strata/chip.h"
#include "strata/sim.h"

enum { N = 512 };

/* ---- The L3 side: registered by each child's setup, on the child's rank --------------- */

static struct {
    strata_callable vadd, fail_prog, inc, tile, slow;
    int chip;
} g_l3;

static int vadd_program(strata_program_ctx *ctx, const strata_task_view *a, void *user) {
    (void)user;
    uint64_t words[4] = {strata_program_arg_ptr(a, 0), strata_program_arg_ptr(a, 1),
                         strata_program_arg_ptr(a, 2), strata_args_scalar(a, 0)};
    return strata_program_launch(ctx, "vector_add", 4, words, 4);
}

static int fail_program(strata_program_ctx *ctx, const strata_task_view *a, void *user) {
    (void)user;
    (void)a;
    uint64_t words[2] = {1, 7};
    return strata_program_launch(ctx, "fail_block", 4, words, 2);
}

/* c += 1 (f32) */
static int inc_sub(const strata_task_view *a, void *user) {
    (void)user;
    float *c = strata_args_data(a, 0);
    int64_t n = strata_tensor_numel(&a->tensors[0]);
    for (int64_t i = 0; i < n; i++)
        c[i] += 1.0f;
    return 0;
}

/* The tile body: acc[j] = id + sum of the read tensors' element j (int32);
 * each written tensor k gets acc[j] * 3 + k. Every tensor has the same numel;
 * elements are read through the view's strides. */
static int32_t *elem(const strata_tensor *t, int64_t j) {
    return (int32_t *)strata_tensor_data(t) + j * t->strides[0];
}

static int tile_sub(const strata_task_view *a, void *user) {
    (void)user;
    int64_t n = strata_tensor_numel(&a->tensors[0]);
    int32_t id = (int32_t)strata_args_i64(a, 0);
    for (int64_t j = 0; j < n; j++) {
        int64_t acc = id;
        for (uint32_t k = 0; k < a->ntensors; k++)
            if (a->tags[k] == STRATA_IN || a->tags[k] == STRATA_INOUT)
                acc += *elem(&a->tensors[k], j);
        for (uint32_t k = 0; k < a->ntensors; k++)
            if (a->tags[k] != STRATA_IN)
                *elem(&a->tensors[k], j) = (int32_t)((acc * 3 + k) % 1000003);
    }
    if (id < 0) {
        strata_task_set_error("tile %d asked to fail", (int)id);
        return 1;
    }
    return 0;
}

static int slow_sub(const strata_task_view *a, void *user) {
    (void)user;
    usleep(200000);
    return tile_sub(a, NULL);
}

static int l3_setup(strata_worker *w, void *user) {
    strata_host_mode host = (strata_host_mode)(intptr_t)user;
    strata_chip_config cc;
    strata_chip_config_init(&cc);
    cc.kernel_module = STRATA_SIM_TEST_KERNELS_PATH;
    cc.host = host;
    STRATA_TRY(strata_worker_add_chip(w, &cc, &g_l3.chip));
    strata_chip_program_desc d = {.name = "vadd", .fn = vadd_program};
    STRATA_TRY(strata_worker_register_chip_program(w, &d, &g_l3.vadd));
    strata_chip_program_desc f = {.name = "fail", .fn = fail_program};
    STRATA_TRY(strata_worker_register_chip_program(w, &f, &g_l3.fail_prog));
    STRATA_TRY(strata_worker_register_sub(w, "inc", inc_sub, NULL, &g_l3.inc));
    STRATA_TRY(strata_worker_register_sub(w, "slow", slow_sub, NULL, &g_l3.slow));
    return strata_worker_register_sub(w, "tile", tile_sub, NULL, &g_l3.tile);
}

/* Orchestration callables the L4 registers (on every rank, same order). */

/* a, b IN; c OUT_EXISTING; scalar mode: c = a + b on the chip, then c += 1 */
static int l3_vadd(strata_orch *o, void *arg) {
    (void)arg;
    const strata_task_view *ta = strata_orch_task_args(o);
    if (strata_args_scalar(ta, 0) == 1)
        return strata_orch_next_level(o, g_l3.fail_prog, NULL, g_l3.chip, STRATA_U64(1));
    strata_tensor a = ta->tensors[0], b = ta->tensors[1], c = ta->tensors[2];
    STRATA_TRY(strata_orch_next_level(o, g_l3.vadd, NULL, g_l3.chip, STRATA_IN(a), STRATA_IN(b),
                                      STRATA_OUT_EXISTING(c),
                                      STRATA_U64((uint64_t)strata_tensor_numel(&a))));
    return strata_orch_sub(o, g_l3.inc, STRATA_INOUT(c));
}

/* The task's tensors and tags as they are, one tile sub task (slow: scalar 1 is 1). */
static int l3_tile(strata_orch *o, void *arg) {
    (void)arg;
    const strata_task_view *ta = strata_orch_task_args(o);
    strata_task_args a;
    strata_args_init(&a);
    for (uint32_t k = 0; k < ta->ntensors; k++)
        STRATA_TRY(strata_args_add_tensor(&a, &ta->tensors[k], (strata_tag)ta->tags[k]));
    STRATA_TRY(strata_args_add_i64(&a, strata_args_i64(ta, 0)));
    return strata_orch_submit_sub(
        o, ta->nscalars > 1 && strata_args_u64(ta, 1) ? g_l3.slow : g_l3.tile, &a);
}

/* The same, registered on the L4 only after init (it reaches the ranks by
 * its object and offset); user is a number, the same on every rank. */
static int l3_tile_late(strata_orch *o, void *arg) {
    if ((uintptr_t)arg != 4711) {
        strata_task_set_error("late: user is %p", arg);
        return STRATA_ETASK;
    }
    return l3_tile(o, NULL);
}

/* ---- Rank 0: the L4 ----------------------------------------------------------------------- */

typedef struct l4 {
    strata_worker *w;
    int child[2];
    strata_callable vadd, tile;
    strata_callable l4_tile; /* the tile body as a sub task of the L4 itself */
    int local;
} l4;

static void open_l4(l4 *f, int local) {
    memset(f, 0, sizeof *f);
    f->local = local;
    strata_worker_config wc;
    strata_worker_config_init(&wc);
    wc.level = 4;
    wc.sub_workers = 1;
    MT_OK(strata_worker_create(&wc, &f->w));
    for (int k = 0; k < 2; k++) {
        strata_child_config cc;
        strata_child_config_init(&cc);
        cc.worker.level = 3;
        cc.worker.sub_workers = 2;
        /* child 1 (rank 2): process-hosted sub workers and chip. Not under TSan: a
         * rank forks after MPI started its threads, and TSan cannot follow a
         * child that starts threads after such a fork (docs/guide.md) */
#ifdef STRATA_TSAN
        strata_host_mode inner = STRATA_HOST_THREAD;
#else
        strata_host_mode inner = k == 1 ? STRATA_HOST_PROCESS : STRATA_HOST_THREAD;
#endif
        cc.worker.sub_mode = inner;
        cc.setup = l3_setup;
        cc.setup_user = (void *)(intptr_t)inner;
        cc.host = local ? STRATA_HOST_PROCESS : STRATA_HOST_MPI;
        cc.rank = k + 1;
        MT_OK(strata_worker_add_child(f->w, &cc, &f->child[k]));
    }
    MT_OK(strata_worker_register_orch(f->w, "l3_vadd", l3_vadd, NULL, &f->vadd));
    MT_OK(strata_worker_register_orch(f->w, "l3_tile", l3_tile, NULL, &f->tile));
    MT_OK(strata_worker_register_sub(f->w, "l4_tile", tile_sub, NULL, &f->l4_tile));
    MT_OK(strata_worker_init(f->w)); /* ranks 1 and 2 serve inside this call, then exit */
}

/* ---- Chip and sub tasks on both children; the error path ---------------------------------- */

typedef struct vadd_arg {
    l4 *f;
    strata_buffer *a, *b, *c;
    int fail_child;
} vadd_arg;

static int vadd_orch(strata_orch *o, void *arg) {
    vadd_arg *v = arg;
    for (int k = 0; k < 2; k++) {
        int64_t n = N / 2, s = 1;
        strata_tensor t[3];
        strata_buffer *bufs[3] = {v->a, v->b, v->c};
        for (int i = 0; i < 3; i++)
            STRATA_TRY(strata_tensor_view(bufs[i], (uint64_t)k * (N / 2) * sizeof(float),
                                          STRATA_F32, 1, &n, &s, &t[i]));
        STRATA_TRY(strata_orch_next_level(o, v->f->vadd, NULL, v->f->child[k], STRATA_IN(t[0]),
                                          STRATA_IN(t[1]), STRATA_OUT_EXISTING(t[2]),
                                          STRATA_U64(v->fail_child == k)));
    }
    return STRATA_OK;
}

static void chips_and_errors(l4 *f) {
    vadd_arg v = {.f = f, .fail_child = -1};
    MT_OK(strata_buffer_create(f->w, N * sizeof(float), &v.a));
    MT_OK(strata_buffer_create(f->w, N * sizeof(float), &v.b));
    MT_OK(strata_buffer_create(f->w, N * sizeof(float), &v.c));
    float *a = strata_buffer_data(v.a), *b = strata_buffer_data(v.b), *c = strata_buffer_data(v.c);
    for (int round = 0; round < 3; round++) {
        for (int i = 0; i < N; i++) {
            a[i] = (float)(i + round);
            b[i] = (float)(2 * i);
            c[i] = -1.0f;
        }
        MT_OK(strata_worker_run(f->w, vadd_orch, &v));
        for (int i = 0; i < N; i++)
            MT_CHECK(c[i] == (float)(3 * i + round + 1), "round %d: c[%d] = %f", round, i, c[i]);
    }
    /* the chip of child 1 (rank 2, a process chip) fails: the whole path comes back */
    v.fail_child = 1;
    strata_run *h;
    MT_OK(strata_worker_submit(f->w, vadd_orch, &v, &h));
    MT_CHECK(strata_run_wait(h, STRATA_WAIT_FOREVER) == STRATA_ETASK, "the run fails");
    const char *expect_local =
        "run 4: L4 worker 1 (L3 child 1): task 'l3_vadd' #2 failed: run 4: L3 worker 0 (chip "
        "sim:0): task 'fail' #1 failed: chip sim:0: finalize failed with code 7";
    const char *expect_mpi =
        "run 4: L4 worker 1 (L3 child 1, rank 2): task 'l3_vadd' #2 failed: run 4: L3 worker 0 "
        "(chip sim:0): task 'fail' #1 failed: chip sim:0: finalize failed with code 7";
    const char *expect = f->local ? expect_local : expect_mpi;
    MT_CHECK(strncmp(strata_run_error(h), expect, strlen(expect)) == 0,
             "error:\n  %s\nexpected:\n  %s...", strata_run_error(h), expect);
    strata_run_release(h);
    /* child 0 goes on (child 1's chip is poisoned by its device failure) */
    strata_buffer_destroy(v.a);
    strata_buffer_destroy(v.b);
    strata_buffer_destroy(v.c);
}

/* ---- Tile tasks: a small task description both the L4 and the oracle read ------------------- */

enum { NBUF = 3, TILES = 8, T = 64 };

typedef struct tview {
    int buf, tile, stride; /* stride 2: a strided view over two tiles from `tile` */
    int tag;
} tview;

typedef struct ttask {
    int child; /* -1: a sub task of the L4 (on rank 0) */
    int id;
    int n;
    tview v[4];
    int slow;
} ttask;

typedef struct tgraph {
    l4 *f;
    strata_buffer *buf[NBUF];
    int ntasks;
    ttask t[64];
} tgraph;

static int view_of(tgraph *g, const tview *v, strata_tensor *out) {
    int64_t n = T, s = v->stride;
    return strata_tensor_view(g->buf[v->buf], (uint64_t)v->tile * T * sizeof(int32_t), STRATA_I32,
                              1, &n, &s, out);
}

static int tgraph_orch(strata_orch *o, void *arg) {
    tgraph *g = arg;
    for (int i = 0; i < g->ntasks; i++) {
        ttask *t = &g->t[i];
        strata_task_args a;
        strata_args_init(&a);
        for (int k = 0; k < t->n; k++) {
            strata_tensor x;
            STRATA_TRY(view_of(g, &t->v[k], &x));
            STRATA_TRY(strata_args_add_tensor(&a, &x, (strata_tag)t->v[k].tag));
        }
        STRATA_TRY(strata_args_add_i64(&a, t->id));
        STRATA_TRY(strata_args_add_u64(&a, (uint64_t)t->slow));
        if (t->child < 0)
            STRATA_TRY(strata_orch_submit_sub(o, g->f->l4_tile, &a));
        else
            STRATA_TRY(
                strata_orch_submit_next_level(o, g->f->tile, &a, NULL, g->f->child[t->child]));
    }
    return STRATA_OK;
}

/* The oracle: the same bodies in submission order on plain arrays. */
static void oracle(tgraph *g, int32_t model[NBUF][TILES * T]) {
    for (int i = 0; i < g->ntasks; i++) {
        ttask *t = &g->t[i];
        for (int64_t j = 0; j < T; j++) {
            int64_t acc = t->id;
            for (int k = 0; k < t->n; k++)
                if (t->v[k].tag == STRATA_IN || t->v[k].tag == STRATA_INOUT)
                    acc += model[t->v[k].buf][t->v[k].tile * T + j * t->v[k].stride];
            for (int k = 0; k < t->n; k++)
                if (t->v[k].tag != STRATA_IN)
                    model[t->v[k].buf][t->v[k].tile * T + j * t->v[k].stride] =
                        (int32_t)((acc * 3 + k) % 1000003);
        }
    }
}

static void tgraph_fill(tgraph *g, int32_t model[NBUF][TILES * T], uint32_t seed) {
    for (int b = 0; b < NBUF; b++) {
        int32_t *d = strata_buffer_data(g->buf[b]);
        for (int j = 0; j < TILES * T; j++)
            model[b][j] = d[j] = (int32_t)((seed * 7919u + (uint32_t)(b * 131 + j)) % 1000);
    }
}

static void tgraph_check(tgraph *g, int32_t model[NBUF][TILES * T], const char *what) {
    for (int b = 0; b < NBUF; b++) {
        const int32_t *d = strata_buffer_data(g->buf[b]);
        for (int j = 0; j < TILES * T; j++)
            MT_CHECK(d[j] == model[b][j], "%s: buffer %d element %d = %d, expected %d", what, b, j,
                     d[j], model[b][j]);
    }
}

static void tgraph_open(tgraph *g, l4 *f) {
    memset(g, 0, sizeof *g);
    g->f = f;
    for (int b = 0; b < NBUF; b++)
        MT_OK(strata_buffer_create(f->w, TILES * T * sizeof(int32_t), &g->buf[b]));
}

static void tgraph_close(tgraph *g) {
    for (int b = 0; b < NBUF; b++)
        strata_buffer_destroy(g->buf[b]);
}

static void add_task(tgraph *g, int child, int n, const tview *v) {
    ttask *t = &g->t[g->ntasks++];
    t->child = child;
    t->id = g->ntasks;
    t->n = n;
    for (int k = 0; k < n; k++)
        t->v[k] = v[k];
}

/* What the ranks of both children counted themselves. */
static void traffic(l4 *f, st_mpi_traffic tr[2]) {
    for (int k = 0; k < 2; k++)
        MT_OK(st_mpi_child_traffic(f->w, f->child[k], &tr[k]));
}

#define DELTA(field, k) (after[k].field - before[k].field)

/* A view child 0 wrote goes from rank 1 to rank 2 directly (rank 0 sends
 * none of it); rank 2 keeps its copy for a later run (read again: nothing
 * moves); a write on the host between runs, which no task made, is seen (the
 * bytes come again); a later write on child 0 invalidates rank 2's copy, and
 * the next read takes the new bytes from rank 1 again. */
static void rank_to_rank(l4 *f) {
    if (f->local)
        return; /* local children share the host's memory: nothing moves */
    tgraph g;
    tgraph_open(&g, f);
    int32_t model[NBUF][TILES * T];
    const uint64_t tile = T * sizeof(int32_t);
    tview w0[2] = {{2, 0, 1, STRATA_IN}, {0, 0, 1, STRATA_OUT}}; /* child 0: buf0[0] <- buf2[0] */
    tview r1[2] = {{0, 0, 1, STRATA_IN}, {1, 0, 1, STRATA_OUT}}; /* child 1: buf1[0] <- buf0[0] */
    st_mpi_traffic before[2], after[2];
    tgraph_fill(&g, model, 77);
    add_task(&g, 0, 2, w0);
    add_task(&g, 1, 2, r1);
    traffic(f, before);
    MT_OK(strata_worker_run(f->w, tgraph_orch, &g));
    traffic(f, after);
    oracle(&g, model);
    tgraph_check(&g, model, "rank to rank");
    MT_CHECK(DELTA(to_peers, 0) == tile, "rank 1 sent the tile to rank 2 (%llu bytes)",
             (unsigned long long)DELTA(to_peers, 0));
    MT_CHECK(DELTA(from_peers, 1) == tile, "rank 2 got it from rank 1 (%llu bytes)",
             (unsigned long long)DELTA(from_peers, 1));
    MT_CHECK(DELTA(from_root, 1) == 0, "rank 0 sent rank 2 nothing (%llu bytes)",
             (unsigned long long)DELTA(from_root, 1));
    MT_CHECK(DELTA(from_root, 0) == tile && DELTA(to_root, 0) == tile && DELTA(to_root, 1) == tile,
             "the host got both results, child 0 its input from rank 0");
    /* the same read in a later run: rank 2's copy is still valid */
    g.ntasks = 0;
    add_task(&g, 1, 2, r1);
    before[1] = after[1];
    MT_OK(strata_worker_run(f->w, tgraph_orch, &g));
    traffic(f, after);
    oracle(&g, model);
    tgraph_check(&g, model, "a kept copy");
    MT_CHECK(DELTA(cache_hits, 1) == 1 && DELTA(from_root, 1) == 0 && DELTA(from_peers, 1) == 0,
             "rank 2 read its own copy (hits %llu, from rank 0 %llu, from peers %llu)",
             (unsigned long long)DELTA(cache_hits, 1), (unsigned long long)DELTA(from_root, 1),
             (unsigned long long)DELTA(from_peers, 1));
    /* the program writes the host's bytes between runs: the copy is stale */
    ((int32_t *)strata_buffer_data(g.buf[0]))[5] = model[0][5] = 4242;
    before[1] = after[1];
    MT_OK(strata_worker_run(f->w, tgraph_orch, &g));
    traffic(f, after);
    oracle(&g, model);
    tgraph_check(&g, model, "a copy made stale on the host");
    MT_CHECK(DELTA(from_root, 1) == tile && DELTA(cache_hits, 1) == 0,
             "rank 2 took the new bytes from rank 0 (%llu)",
             (unsigned long long)DELTA(from_root, 1));
    /* child 0 writes the view again: rank 2's copy goes, the next read comes from rank 1 */
    g.ntasks = 0;
    add_task(&g, 0, 2, w0);
    add_task(&g, 1, 2, r1);
    traffic(f, before);
    MT_OK(strata_worker_run(f->w, tgraph_orch, &g));
    traffic(f, after);
    oracle(&g, model);
    tgraph_check(&g, model, "a copy invalidated by a later write");
    MT_CHECK(DELTA(from_peers, 1) == tile && DELTA(to_peers, 0) == tile &&
                 DELTA(cache_hits, 1) == 0,
             "the new bytes went from rank 1 to rank 2 (%llu)",
             (unsigned long long)DELTA(from_peers, 1));
    tgraph_close(&g);
}

/* With room for three tiles of kept copies on rank 2, a task that reads a
 * tile rank 2 keeps and a new tile makes room by dropping the least recently
 * used copy the task does not use: before, it dropped the oldest copy, which
 * was the one the same frame told rank 2 to read (that task then failed,
 * "does not hold"). */
static void eviction_keeps_the_tasks_own_copies(l4 *f) {
    if (f->local)
        return; /* local children keep no copies */
    tgraph g;
    tgraph_open(&g, f);
    int32_t model[NBUF][TILES * T];
    const uint64_t tile = T * sizeof(int32_t);
    MT_OK(st_mpi_test_set_cache_budget(f->w, f->child[1], 3 * tile));
    tview three[4] = {
        {2, 4, 1, STRATA_IN}, {2, 5, 1, STRATA_IN}, {2, 6, 1, STRATA_IN}, {1, 4, 1, STRATA_OUT}};
    tview again[3] = {{2, 4, 1, STRATA_IN}, {2, 7, 1, STRATA_IN}, {1, 5, 1, STRATA_OUT}};
    st_mpi_traffic before[2], after[2];
    tgraph_fill(&g, model, 91);
    add_task(&g, 1, 4, three); /* rank 2 keeps tiles 4, 5, 6 of buffer 2: full */
    MT_OK(strata_worker_run(f->w, tgraph_orch, &g));
    oracle(&g, model);
    tgraph_check(&g, model, "three kept tiles");
    g.ntasks = 0;
    add_task(&g, 1, 3, again); /* tile 4 kept (the oldest), tile 7 new: 5 goes */
    traffic(f, before);
    MT_OK(strata_worker_run(f->w, tgraph_orch, &g));
    traffic(f, after);
    oracle(&g, model);
    tgraph_check(&g, model, "a kept tile read beside a new one");
    MT_CHECK(DELTA(cache_hits, 1) == 1 && DELTA(from_root, 1) == tile,
             "rank 2 read tile 4 from its copy and got tile 7 from rank 0 (hits %llu, %llu bytes)",
             (unsigned long long)DELTA(cache_hits, 1), (unsigned long long)DELTA(from_root, 1));
    MT_OK(st_mpi_test_set_cache_budget(f->w, f->child[1], 0));
    tgraph_close(&g);
}

/* A sub task of the L4 writes, between two reads on rank 2 in one run, the
 * view rank 2 keeps a copy of: the second read takes the new bytes from rank
 * 0 (the copy was checked against the host bytes at the first read of the
 * run; the write of a task that goes to no MPI child drops it). */
static void l4_sub_write_in_a_run(l4 *f) {
    tgraph g;
    tgraph_open(&g, f);
    int32_t model[NBUF][TILES * T];
    const uint64_t tile = T * sizeof(int32_t);
    tview w0[2] = {{2, 0, 1, STRATA_IN}, {0, 0, 1, STRATA_OUT}};   /* child 0: buf0[0] <- buf2[0] */
    tview r1[2] = {{0, 0, 1, STRATA_IN}, {1, 0, 1, STRATA_OUT}};   /* child 1: buf1[0] <- buf0[0] */
    tview s0[2] = {{2, 1, 1, STRATA_IN}, {0, 0, 1, STRATA_INOUT}}; /* the L4: buf0[0] rewritten */
    tview r2[2] = {{0, 0, 1, STRATA_IN}, {1, 1, 1, STRATA_OUT}};   /* child 1: buf1[1] <- buf0[0] */
    st_mpi_traffic before[2], after[2];
    tgraph_fill(&g, model, 91);
    add_task(&g, 0, 2, w0);
    add_task(&g, 1, 2, r1);
    add_task(&g, -1, 2, s0);
    add_task(&g, 1, 2, r2);
    if (!f->local)
        traffic(f, before);
    MT_OK(strata_worker_run(f->w, tgraph_orch, &g));
    oracle(&g, model);
    tgraph_check(&g, model, "an L4 sub task's write between two reads on rank 2");
    if (f->local) {
        tgraph_close(&g);
        return;
    }
    traffic(f, after);
    MT_CHECK(DELTA(from_peers, 1) == tile && DELTA(from_root, 1) == tile &&
                 DELTA(cache_hits, 1) == 0,
             "rank 2 got the first bytes from rank 1, the rewritten ones from rank 0 (peers "
             "%llu, rank 0 %llu, hits %llu)",
             (unsigned long long)DELTA(from_peers, 1), (unsigned long long)DELTA(from_root, 1),
             (unsigned long long)DELTA(cache_hits, 1));
    tgraph_close(&g);
}

/* A copy's first use in a run, from another rank, is checked while it moves:
 * unchanged on the host, rank 2 runs on the bytes rank 1 sent; written on
 * the host between runs, rank 2 takes the bytes from rank 0 again (after rank
 * 1's stale ones arrived) and its task sees the new ones. */
static void verified_moves(l4 *f) {
    if (f->local)
        return; /* nothing moves */
    tgraph g;
    tgraph_open(&g, f);
    int32_t model[NBUF][TILES * T];
    const uint64_t tile = T * sizeof(int32_t);
    tview w0[2] = {{2, 0, 1, STRATA_IN}, {0, 0, 1, STRATA_OUT}}; /* child 0: buf0[0] <- buf2[0] */
    /* child 1: buf1[0] <- buf0[0] read twice (the second reads the copy the first
     * fills: one check holds for both) */
    tview r1[3] = {{0, 0, 1, STRATA_IN}, {0, 0, 1, STRATA_IN}, {1, 0, 1, STRATA_OUT}};
    st_mpi_traffic before[2], after[2];
    tgraph_fill(&g, model, 13);
    for (int stale = 0; stale < 2; stale++) {
        g.ntasks = 0;
        add_task(&g, 0, 2, w0); /* rank 1 holds the view; rank 2's copy (if any) goes */
        MT_OK(strata_worker_run(f->w, tgraph_orch, &g));
        oracle(&g, model);
        if (stale) /* the program writes the host's bytes between runs */
            ((int32_t *)strata_buffer_data(g.buf[0]))[7] = model[0][7] = 5151;
        g.ntasks = 0;
        add_task(&g, 1, 3, r1);
        traffic(f, before);
        MT_OK(strata_worker_run(f->w, tgraph_orch, &g));
        traffic(f, after);
        oracle(&g, model);
        tgraph_check(&g, model,
                     stale ? "a stale copy checked while it moved"
                           : "a valid copy checked while it moved");
        MT_CHECK(DELTA(from_peers, 1) == tile && DELTA(from_root, 1) == (stale ? tile : 0),
                 "%s: rank 2 got %llu bytes from rank 1 and %llu from rank 0",
                 stale ? "stale" : "valid", (unsigned long long)DELTA(from_peers, 1),
                 (unsigned long long)DELTA(from_root, 1));
    }
    tgraph_close(&g);
}

/* RAW, WAW, WAR across the two ranks: each chain's bytes and order checked. */
static void cross_rank_dependencies(l4 *f) {
    tgraph g;
    tgraph_open(&g, f);
    int32_t model[NBUF][TILES * T];
    /* RAW: child 0 writes tile 0 of buffer 0, child 1 reads it into buffer 1 */
    tview raw0[2] = {{2, 0, 1, STRATA_IN}, {0, 0, 1, STRATA_OUT}};
    tview raw1[2] = {{0, 0, 1, STRATA_IN}, {1, 0, 1, STRATA_OUT}};
    add_task(&g, 0, 2, raw0);
    add_task(&g, 1, 2, raw1);
    /* WAW: both write tile 1 of buffer 0 (the later write wins) */
    tview waw[1] = {{0, 1, 1, STRATA_OUT}};
    add_task(&g, 1, 1, waw);
    add_task(&g, 0, 1, waw);
    /* WAR: child 1 reads tile 2, then child 0 overwrites it (the read sees the old bytes) */
    tview war0[2] = {{0, 2, 1, STRATA_IN}, {1, 2, 1, STRATA_OUT}};
    tview war1[1] = {{0, 2, 1, STRATA_INOUT}};
    add_task(&g, 1, 2, war0);
    add_task(&g, 0, 1, war1);
    /* INOUT of a strided view (elements 0, 2, 4, ... of tiles 4..5), then read back elsewhere */
    tview str0[1] = {{0, 4, 2, STRATA_INOUT}};
    tview str1[2] = {{0, 4, 2, STRATA_IN}, {2, 6, 1, STRATA_OUT}};
    add_task(&g, 1, 1, str0);
    add_task(&g, 0, 2, str1);
    for (int round = 0; round < 2; round++) {
        tgraph_fill(&g, model, (uint32_t)round + 11);
        MT_OK(strata_worker_run(f->w, tgraph_orch, &g));
        oracle(&g, model);
        tgraph_check(&g, model, "cross-rank chains");
    }
    tgraph_close(&g);
}

/* ---- Random graphs over both children ------------------------------------------------------ */

static uint32_t rnd(uint64_t *s, uint32_t n) {
    *s = *s * 6364136223846793005ull + 1442695040888963407ull;
    return (uint32_t)(*s >> 33) % n;
}

static int overlaps(const tview *a, const tview *b) {
    if (a->buf != b->buf)
        return 0;
    int a0 = a->tile, a1 = a->tile + (a->stride == 2 ? 2 : 1);
    int b0 = b->tile, b1 = b->tile + (b->stride == 2 ? 2 : 1);
    return a0 < b1 && b0 < a1;
}

static void random_graph(tgraph *g, uint64_t seed) {
    g->ntasks = 0;
    uint64_t s = seed;
    int n = 8 + (int)rnd(&s, 24);
    for (int i = 0; i < n; i++) {
        ttask *t = &g->t[g->ntasks];
        memset(t, 0, sizeof *t);
        t->child = (int)rnd(&s, 2);
        t->id = g->ntasks + 1;
        int want = 1 + (int)rnd(&s, 3);
        for (int k = 0; k < want; k++) {
            tview v = {(int)rnd(&s, NBUF), 0, rnd(&s, 4) == 0 ? 2 : 1, 0};
            v.tile = (int)rnd(&s, v.stride == 2 ? TILES - 1 : TILES);
            static const int tags[4] = {STRATA_IN, STRATA_OUT, STRATA_INOUT, STRATA_IN};
            v.tag = tags[rnd(&s, 4)];
            int clash = 0; /* written arguments of one task never overlap another argument */
            for (int m = 0; m < t->n; m++)
                if (overlaps(&t->v[m], &v) && (v.tag != STRATA_IN || t->v[m].tag != STRATA_IN))
                    clash = 1;
            if (!clash)
                t->v[t->n++] = v;
        }
        g->ntasks++;
    }
}

static void random_graphs(l4 *f) {
    tgraph g;
    tgraph_open(&g, f);
    int32_t model[NBUF][TILES * T];
    const char *e = getenv("STRATA_TEST_SEEDS"); /* more for a soak by hand */
    uint64_t seeds = e && atoi(e) > 0 ? (uint64_t)atoi(e) : 12;
    for (uint64_t seed = 1; seed <= seeds; seed++) {
        random_graph(&g, seed);
        tgraph_fill(&g, model, (uint32_t)seed);
        MT_OK(strata_worker_run(f->w, tgraph_orch, &g));
        oracle(&g, model);
        char what[64];
        snprintf(what, sizeof what, "random graph seed %llu", (unsigned long long)seed);
        tgraph_check(&g, model, what);
    }
    tgraph_close(&g);
}

/* Two runs admitted at once (pipeline_depth 2), each over both children, on
 * separate buffers; then a run that fails on child 0 beside one that goes on. */
static void overlapping_runs(l4 *f) {
    tgraph g[2];
    int32_t model[2][NBUF][TILES * T];
    for (int r = 0; r < 2; r++) {
        tgraph_open(&g[r], f);
        random_graph(&g[r], 100 + (uint64_t)r);
        tgraph_fill(&g[r], model[r], 40 + (uint32_t)r);
    }
    strata_run *h[2];
    MT_OK(strata_worker_submit(f->w, tgraph_orch, &g[0], &h[0]));
    MT_OK(strata_worker_submit(f->w, tgraph_orch, &g[1], &h[1]));
    for (int r = 0; r < 2; r++) {
        MT_OK(strata_run_wait(h[r], STRATA_WAIT_FOREVER));
        strata_run_release(h[r]);
        oracle(&g[r], model[r]);
        tgraph_check(&g[r], model[r], "overlapping runs");
    }
    /* a failing tile task (negative id) on child 0 fails its run only */
    random_graph(&g[0], 7);
    g[0].t[0].id = -5;
    g[0].t[0].child = 0;
    random_graph(&g[1], 8);
    tgraph_fill(&g[1], model[1], 3);
    MT_OK(strata_worker_submit(f->w, tgraph_orch, &g[0], &h[0]));
    MT_OK(strata_worker_submit(f->w, tgraph_orch, &g[1], &h[1]));
    MT_CHECK(strata_run_wait(h[0], STRATA_WAIT_FOREVER) == STRATA_ETASK, "the failing run fails");
    MT_CHECK(strstr(strata_run_error(h[0]), "L3 sub") ||
                 strstr(strata_run_error(h[0]), "tile -5 asked to fail"),
             "error names the failing tile: %s", strata_run_error(h[0]));
    const char *path = f->local ? "L4 worker 0 (L3 child 0): task 'l3_tile'"
                                : "L4 worker 0 (L3 child 0, rank 1): task 'l3_tile'";
    MT_CHECK(strstr(strata_run_error(h[0]), path), "error names the child: %s",
             strata_run_error(h[0]));
    MT_OK(strata_run_wait(h[1], STRATA_WAIT_FOREVER));
    oracle(&g[1], model[1]);
    tgraph_check(&g[1], model[1], "the run beside a failing one");
    strata_run_release(h[0]);
    strata_run_release(h[1]);
    for (int r = 0; r < 2; r++)
        tgraph_close(&g[r]);
}

/* An orchestration callable registered after init runs on both children. */
static void registered_after_init(l4 *f) {
    strata_callable late;
    MT_OK(strata_worker_register_orch(f->w, "l3_tile_late", l3_tile_late, (void *)(uintptr_t)4711,
                                      &late));
    tgraph g;
    tgraph_open(&g, f);
    int32_t model[NBUF][TILES * T];
    random_graph(&g, 31);
    tgraph_fill(&g, model, 31);
    strata_callable keep = f->tile;
    f->tile = late;
    MT_OK(strata_worker_run(f->w, tgraph_orch, &g));
    f->tile = keep;
    oracle(&g, model);
    tgraph_check(&g, model, "a callable registered after init");
    tgraph_close(&g);
}

/* ---- Remote memory ------------------------------------------------------------------------ */

typedef struct rm_arg {
    l4 *f;
    strata_tensor w;     /* remote tensor on child 1 (INOUT) */
    strata_buffer *host; /* host buffer: OUT */
    int on_child;
} rm_arg;

static int rm_orch(strata_orch *o, void *arg) {
    rm_arg *r = arg;
    strata_tensor out;
    int64_t n = T, s = 1;
    STRATA_TRY(strata_tensor_view(r->host, 0, STRATA_I32, 1, &n, &s, &out));
    return strata_orch_next_level(o, r->f->tile, NULL, r->f->child[r->on_child], STRATA_INOUT(r->w),
                                  STRATA_OUT(out), STRATA_I64(9), STRATA_U64(0));
}

static void remote_memory(l4 *f) {
    strata_buffer *rb;
    MT_OK(strata_worker_remote_malloc(f->w, f->child[1], T * sizeof(int32_t), &rb));
    int32_t init[T], back[T];
    for (int j = 0; j < T; j++)
        init[j] = j * 5;
    MT_OK(strata_worker_remote_copy_to(f->w, rb, 0, init, sizeof init));
    memset(back, 0, sizeof back);
    MT_OK(strata_worker_remote_copy_from(f->w, rb, 0, back, sizeof back));
    MT_CHECK(memcmp(init, back, sizeof init) == 0, "copy_to then copy_from give the bytes back");
    rm_arg r = {.f = f, .on_child = 1};
    int64_t n = T, s = 1;
    MT_OK(strata_worker_remote_tensor(f->w, rb, 0, STRATA_I32, 1, &n, &s, &r.w));
    MT_OK(strata_buffer_create(f->w, T * sizeof(int32_t), &r.host));
    int32_t model[T];
    memcpy(model, init, sizeof model);
    for (int run = 0; run < 2; run++) { /* the memory persists across runs */
        MT_OK(strata_worker_run(f->w, rm_orch, &r));
        const int32_t *h = strata_buffer_data(r.host);
        for (int j = 0; j < T; j++) {
            int64_t acc = 9 + model[j];
            model[j] = (int32_t)((acc * 3 + 0) % 1000003);
            MT_CHECK(h[j] == (int32_t)((acc * 3 + 1) % 1000003), "run %d: host[%d] = %d", run, j,
                     h[j]);
        }
    }
    MT_OK(strata_worker_remote_copy_from(f->w, rb, 0, back, sizeof back));
    MT_CHECK(memcmp(model, back, sizeof model) == 0, "the remote buffer holds both runs' writes");
    if (!f->local) { /* remote memory of child 1 is refused on child 0 */
        r.on_child = 0;
        MT_CHECK(strata_worker_run(f->w, rm_orch, &r) != STRATA_OK, "refused on another child");
    }
    strata_buffer_destroy(r.host);
    MT_OK(strata_worker_remote_free(f->w, rb));
    MT_CHECK(strata_worker_remote_free(f->w, rb) == STRATA_EINVAL, "a second free is refused");
}

/* ---- Idle ranks ---------------------------------------------------------------------------- */

static uint64_t self_cpu_ns(void) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ((uint64_t)ru.ru_utime.tv_sec + (uint64_t)ru.ru_stime.tv_sec) * 1000000000ull +
           ((uint64_t)ru.ru_utime.tv_usec + (uint64_t)ru.ru_stime.tv_usec) * 1000ull;
}

/* Reported, not asserted (no timing assertions): the CPU each rank used
 * over two idle seconds, heartbeat included. */
static void report_idle_cpu(l4 *f) {
    if (f->local)
        return;
    st_mpi_traffic a[2], b[2];
    traffic(f, a);
    uint64_t c0 = self_cpu_ns();
    sleep(2);
    uint64_t c1 = self_cpu_ns();
    traffic(f, b);
    printf("idle CPU over 2 s: rank 0 %.2f %%, rank 1 %.2f %%, rank 2 %.2f %% of a core\n",
           (double)(c1 - c0) / 2e7, (double)(b[0].cpu_ns - a[0].cpu_ns) / 2e7,
           (double)(b[1].cpu_ns - a[1].cpu_ns) / 2e7);
}

/* ---- Close with runs in flight -------------------------------------------------------------- */

static void close_in_flight(l4 *f) {
    tgraph g;
    tgraph_open(&g, f);
    int32_t model[NBUF][TILES * T];
    random_graph(&g, 55);
    for (int i = 0; i < g.ntasks; i++)
        g.t[i].slow = i < 4;
    tgraph_fill(&g, model, 5);
    strata_run *h;
    strata_buffer *rb = NULL; /* remote memory still held at close */
    if (!f->local)
        MT_OK(strata_worker_remote_malloc(f->w, f->child[1], 64, &rb));
    MT_OK(strata_worker_submit(f->w, tgraph_orch, &g, &h));
    MT_OK(strata_worker_close(f->w)); /* waits for the run */
    MT_CHECK(strata_run_done(h), "close waited for the run");
    if (rb) { /* after close the memory went with its rank: copies refused, the handle freed */
        char bytes[64] = {0};
        MT_CHECK(strata_worker_remote_copy_to(f->w, rb, 0, bytes, sizeof bytes) == STRATA_ESTATE,
                 "copy_to after close is refused");
        MT_CHECK(strata_worker_remote_copy_from(f->w, rb, 0, bytes, sizeof bytes) == STRATA_ESTATE,
                 "copy_from after close is refused");
        MT_OK(strata_worker_remote_free(f->w, rb));
    }
    MT_OK(strata_run_status(h));
    strata_run_release(h);
    oracle(&g, model);
    tgraph_check(&g, model, "the run close waited for");
    tgraph_close(&g);
}

int main(int argc, char **argv) {
    const char *e = getenv("STRATA_TEST_LOCAL");
    int local = e && e[0] == '1'; /* local children need no MPI */
    if (!local)
        mt_skip_without_mpi();
    if (!local) {
        MT_OK(strata_mpi_init(&argc, &argv));
        MT_CHECK(strata_mpi_size() == 3, "run under mpirun -np 3 (size %d)", strata_mpi_size());
    }
    l4 f;
    open_l4(&f, local);
    chips_and_errors(&f);
    cross_rank_dependencies(&f);
    rank_to_rank(&f);
    eviction_keeps_the_tasks_own_copies(&f);
    l4_sub_write_in_a_run(&f);
    verified_moves(&f);
    remote_memory(&f);
    overlapping_runs(&f);
    registered_after_init(&f);
    random_graphs(&f);
    report_idle_cpu(&f);
    close_in_flight(&f);
    strata_worker_destroy(f.w);
    if (!local)
        MT_OK(strata_mpi_finalize());
    printf("test_mpi_l4: all checks passed (%s children)\n", local ? "process" : "MPI");
    return 0;
}
