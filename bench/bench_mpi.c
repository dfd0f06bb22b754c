/* bench/bench_mpi.c - what a remote child (an L3 Worker on another MPI rank)
 * costs, next to bare MPI doing the same traffic in the same invocation.
 *
 * bench-needs: mpi
 *
 * Launch: mpirun -np 3 bench_mpi [--json FILE] [--quick] [--reps N]
 * (rank 0 measures and writes the file; ranks 1 and 2 serve).
 *
 * Owns: four rows, each beside its anchor on the same ranks:
 *   remote round trip  a chain of next-level tasks on the child of rank 1,
 *                      each reading and writing one tensor of memory on that
 *                      rank (so nothing moves and each waits for the one
 *                      before): µs per task, beside an MPI ping-pong 0 <-> 1
 *                      of the same frame size (anchor "mpi ping-pong");
 *   independent tasks  one L4 run of many empty next-level tasks over the two
 *                      children: µs per task, beside a master/worker loop that
 *                      keeps two requests in flight per worker rank, as the
 *                      endpoints do (anchor "master/worker");
 *   64 MiB move        a task on rank 2 reading a 64 MiB L4 buffer last
 *                      written by a task on rank 1, which moves it rank 1 ->
 *                      rank 2: ms per run, beside rank 1 MPI_Send-ing 64 MiB
 *                      to rank 2 on rank 0's word, rank 2 acknowledging to
 *                      rank 0 (anchor "MPI_Send").
 * Must never: measure an anchor while strata's ranks serve (anchors run first,
 * on MPI_COMM_WORLD, before the L4 is initialised), or quote a lone time.
 */
#include "bench_common.h"

#include <mpi.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <strata/chip.h>
#include <strata/mpi.h>
#include <strata/strata.h>

#ifndef STRATA_SIM_TEST_KERNELS_PATH
#define STRATA_SIM_TEST_KERNELS_PATH "libstrata_test_kernels.so"
#endif

/* Bytes of one anchor message: about what one next-level task frame with one
 * tensor takes on the wire (header, callable digest, encoded arguments). */
#define FRAME_BYTES 512
#define MOVE_BYTES ((size_t)64 << 20)

enum { TAG_PING = 11, TAG_TASK, TAG_DONE, TAG_GO, TAG_DATA, TAG_ACK, TAG_STOP };

static int fail(const char *what, int rc) {
    fprintf(stderr, "bench_mpi: %s failed: %s: %s\n", what, strata_status_name(rc),
            strata_error_message());
    return rc ? rc : 1;
}

/* ---- Anchors: bare MPI ---------------------------------------------------------------- */

/* Waits that back off like strata's (Open MPI's blocking calls spin a core, and
 * -np 3 on two cores oversubscribes): test, and yield the core between tests. */
static void wait_req(MPI_Request *req) {
    int done = 0;
    for (;;) {
        MPI_Test(req, &done, MPI_STATUS_IGNORE);
        if (done)
            return;
        sched_yield();
    }
}

static void recv_from(void *buf, int n, int src, int tag) {
    MPI_Request req;
    MPI_Irecv(buf, n, MPI_BYTE, src, tag, MPI_COMM_WORLD, &req);
    wait_req(&req);
}

static void send_to(const void *buf, int n, int dst, int tag) {
    MPI_Request req;
    MPI_Isend(buf, n, MPI_BYTE, dst, tag, MPI_COMM_WORLD, &req);
    wait_req(&req);
}

/* Rank 0's side of one ping-pong sample with rank 1: µs per round trip. */
static double pingpong_sample(int iters) {
    static char msg[FRAME_BYTES];
    uint64_t t0 = bench_now_ns();
    for (int i = 0; i < iters; i++) {
        send_to(msg, FRAME_BYTES, 1, TAG_PING);
        recv_from(msg, FRAME_BYTES, 1, TAG_PING);
    }
    return (double)(bench_now_ns() - t0) / 1e3 / iters;
}

/* Rank 0's side of a master/worker dispatch of n empty tasks over ranks 1 and
 * 2 (task i to rank 1 + i % 2, as the L4 alternates its children), two in
 * flight per rank: µs per task. Request k is rank 1 + k % 2's slot k / 2. */
static double master_worker_sample(int n) {
    static char out[4][FRAME_BYTES], in[4][FRAME_BYTES];
    MPI_Request rx[4];
    int sent[2] = {0, 0}, quota[2] = {n / 2 + n % 2, n / 2}, done = 0;
    uint64_t t0 = bench_now_ns();
    for (int k = 0; k < 4; k++) {
        int r = k % 2;
        rx[k] = MPI_REQUEST_NULL;
        if (sent[r] == quota[r])
            continue;
        MPI_Irecv(in[k], FRAME_BYTES, MPI_BYTE, 1 + r, TAG_DONE, MPI_COMM_WORLD, &rx[k]);
        MPI_Send(out[k], FRAME_BYTES, MPI_BYTE, 1 + r, TAG_TASK, MPI_COMM_WORLD);
        sent[r]++;
    }
    while (done < n) {
        int k = -1, flag = 0;
        MPI_Testany(4, rx, &k, &flag, MPI_STATUS_IGNORE);
        if (!flag || k == MPI_UNDEFINED) {
            sched_yield();
            continue;
        }
        done++;
        int r = k % 2;
        if (sent[r] < quota[r]) {
            MPI_Irecv(in[k], FRAME_BYTES, MPI_BYTE, 1 + r, TAG_DONE, MPI_COMM_WORLD, &rx[k]);
            MPI_Send(out[k], FRAME_BYTES, MPI_BYTE, 1 + r, TAG_TASK, MPI_COMM_WORLD);
            sent[r]++;
        }
    }
    return (double)(bench_now_ns() - t0) / 1e3 / n;
}

/* Rank 0's side of one 64 MiB move 1 -> 2: ms from the word to the ack. */
static double move_sample(void) {
    char word = 1, ack = 0;
    uint64_t t0 = bench_now_ns();
    send_to(&word, 1, 1, TAG_GO);
    recv_from(&ack, 1, 2, TAG_ACK);
    return (double)(bench_now_ns() - t0) / 1e6;
}

typedef enum anchor_cmd { CMD_PINGPONG = 1, CMD_MASTER_WORKER, CMD_MOVE, CMD_DONE } anchor_cmd;

/* Ranks 1 and 2: serve the anchors rank 0 announces (one int per phase:
 * the command and its count), until CMD_DONE. */
static void anchor_serve(int rank) {
    static char msg[FRAME_BYTES];
    char *big = rank <= 2 ? malloc(MOVE_BYTES) : NULL;
    if (big)
        memset(big, rank, MOVE_BYTES);
    for (;;) {
        int cmd[2];
        MPI_Bcast(cmd, 2, MPI_INT, 0, MPI_COMM_WORLD);
        if (cmd[0] == CMD_DONE)
            break;
        if (cmd[0] == CMD_PINGPONG && rank == 1)
            for (int i = 0; i < cmd[1]; i++) {
                recv_from(msg, FRAME_BYTES, 0, TAG_PING);
                send_to(msg, FRAME_BYTES, 0, TAG_PING);
            }
        if (cmd[0] == CMD_MASTER_WORKER && rank <= 2) {
            int mine = cmd[1] / 2 + (rank == 1 ? cmd[1] % 2 : 0);
            for (int i = 0; i < mine; i++) {
                recv_from(msg, FRAME_BYTES, 0, TAG_TASK);
                send_to(msg, FRAME_BYTES, 0, TAG_DONE); /* the empty task ran */
            }
        }
        if (cmd[0] == CMD_MOVE && big)
            for (int i = 0; i < cmd[1]; i++) {
                char b = 0;
                if (rank == 1) {
                    recv_from(&b, 1, 0, TAG_GO);
                    send_to(big, (int)MOVE_BYTES, 2, TAG_DATA);
                } else {
                    recv_from(big, (int)MOVE_BYTES, 1, TAG_DATA);
                    send_to(&b, 1, 0, TAG_ACK);
                }
            }
        MPI_Barrier(MPI_COMM_WORLD);
    }
    free(big);
}

static void anchor_phase(anchor_cmd cmd, int count) {
    int c[2] = {(int)cmd, count};
    MPI_Bcast(c, 2, MPI_INT, 0, MPI_COMM_WORLD);
}

typedef struct anchors {
    bench_series pingpong, master_worker, move;
} anchors;

static void anchors_measure(const bench_options *opt, int pp_iters, int mw_tasks, int moves,
                            anchors *a) {
    memset(a, 0, sizeof *a);
    for (int r = 0; r < opt->reps; r++) {
        anchor_phase(CMD_PINGPONG, pp_iters);
        bench_series_add(&a->pingpong, pingpong_sample(pp_iters));
        MPI_Barrier(MPI_COMM_WORLD);
        anchor_phase(CMD_MASTER_WORKER, mw_tasks);
        bench_series_add(&a->master_worker, master_worker_sample(mw_tasks));
        MPI_Barrier(MPI_COMM_WORLD);
    }
    anchor_phase(CMD_MOVE, moves);
    for (int i = 0; i < moves; i++)
        bench_series_add(&a->move, move_sample());
    MPI_Barrier(MPI_COMM_WORLD);
    anchor_phase(CMD_DONE, 0);
}

/* ---- the tiled multiplication, on sim chips ------------------------------------------- */

#define MM_TILE 32  /* gemm_tile's tile edge */
#define MM_BLOCKS 8 /* row blocks: tasks per run */

/* This process's L3 with a chip: the chip's id and the gemm program (set by
 * mm_l3_setup, on ranks 1 and 2 for their child, on rank 0 for "one L3"). */
static struct {
    int chip;
    strata_callable gemm;
} g_mm;

/* Tensors A (rows x k), B (k x n), C (rows x n); scalars rows, n, k. One
 * kernel block per MM_TILE x MM_TILE tile of C. */
static int gemm_program(strata_program_ctx *ctx, const strata_task_view *a, void *user) {
    (void)user;
    uint64_t rows = strata_args_u64(a, 0), n = strata_args_u64(a, 1), k = strata_args_u64(a, 2);
    uint64_t words[7] = {strata_program_arg_ptr(a, 0),
                         strata_program_arg_ptr(a, 1),
                         strata_program_arg_ptr(a, 2),
                         rows,
                         n,
                         k,
                         MM_TILE};
    uint32_t blocks = (uint32_t)(((rows + MM_TILE - 1) / MM_TILE) * ((n + MM_TILE - 1) / MM_TILE));
    return strata_program_launch(ctx, "gemm_tile", blocks, words, 7);
}

/* One sim chip of one core: two L3s then have twice the compute of one. */
static int mm_l3_setup(strata_worker *w, void *user) {
    (void)user;
    strata_chip_config cc;
    strata_chip_config_init(&cc);
    cc.kernel_module = STRATA_SIM_TEST_KERNELS_PATH;
    cc.sim_cores = 1;
    STRATA_TRY(strata_worker_add_chip(w, &cc, &g_mm.chip));
    strata_chip_program_desc d = {.name = "gemm", .fn = gemm_program};
    return strata_worker_register_chip_program(w, &d, &g_mm.gemm);
}

/* The chip task of one row block: the task's three tensors and two scalars
 * (rows, n; the inner dimension is n too). */
static int mm_chip_task(strata_orch *o, strata_tensor a, strata_tensor b, strata_tensor c,
                        uint64_t rows, uint64_t n) {
    return strata_orch_next_level(o, g_mm.gemm, NULL, g_mm.chip, STRATA_IN(a), STRATA_IN(b),
                                  STRATA_OUT_EXISTING(c), STRATA_U64(rows), STRATA_U64(n),
                                  STRATA_U64(n));
}

/* A child's run for one row block (its L4 task's tensors and scalars). */
static int mm_rows_run(strata_orch *o, void *arg) {
    (void)arg;
    const strata_task_view *t = strata_orch_task_args(o);
    return mm_chip_task(o, t->tensors[0], t->tensors[1], t->tensors[2], strata_args_u64(t, 0),
                        strata_args_u64(t, 1));
}

/* n x n matrices A, B, C in buffers of one worker. */
typedef struct mm_data {
    strata_buffer *a, *b, *c;
    strata_tensor whole_b;
    int64_t n;
} mm_data;

static int mm_data_make(strata_worker *w, int64_t n, mm_data *d) {
    memset(d, 0, sizeof *d);
    d->n = n;
    size_t bytes = (size_t)(n * n) * sizeof(float);
    STRATA_TRY(strata_buffer_create(w, bytes, &d->a));
    STRATA_TRY(strata_buffer_create(w, bytes, &d->b));
    STRATA_TRY(strata_buffer_create(w, bytes, &d->c));
    float *a = strata_buffer_data(d->a), *b = strata_buffer_data(d->b);
    for (int64_t i = 0; i < n * n; i++) { /* small integers: every sum is exact */
        a[i] = (float)((i * 7) % 13 - 6);
        b[i] = (float)((i * 5) % 11 - 5);
    }
    int64_t shape[2] = {n, n};
    return strata_tensor_contiguous(d->b, STRATA_F32, 2, shape, &d->whole_b);
}

static void mm_data_free(mm_data *d) {
    strata_buffer_destroy(d->a);
    strata_buffer_destroy(d->b);
    strata_buffer_destroy(d->c);
    memset(d, 0, sizeof *d);
}

/* Row block i of A and of C. */
static int mm_rows(const mm_data *d, int i, strata_tensor *a, strata_tensor *c) {
    int64_t rows = d->n / MM_BLOCKS, shape[2] = {rows, d->n};
    uint64_t at = (uint64_t)(i * rows * d->n) * sizeof(float);
    STRATA_TRY(strata_tensor_view(d->a, at, STRATA_F32, 2, shape, NULL, a));
    return strata_tensor_view(d->c, at, STRATA_F32, 2, shape, NULL, c);
}

/* 0 if C == A x B exactly (else says where it is not). */
static int mm_check(const mm_data *d, const char *who) {
    const float *a = strata_buffer_data(d->a), *b = strata_buffer_data(d->b);
    const float *c = strata_buffer_data(d->c);
    int64_t n = d->n;
    for (int64_t i = 0; i < n; i++)
        for (int64_t j = 0; j < n; j++) {
            float s = 0.0f;
            for (int64_t p = 0; p < n; p++)
                s += a[i * n + p] * b[p * n + j];
            if (s != c[i * n + j]) {
                fprintf(stderr, "bench_mpi: %s: C[%lld][%lld] is %g, A x B gives %g\n", who,
                        (long long)i, (long long)j, (double)c[i * n + j], (double)s);
                return 1;
            }
        }
    return 0;
}

typedef struct mm_l4_job {
    const mm_data *d;
    strata_callable rows_run;
    const int *child;
} mm_l4_job;

/* Row block i on child i % 2: A's block and B go there (and stay, as kept
 * copies, for the next run), C's block comes back. */
static int mm_l4_orch(strata_orch *o, void *arg) {
    const mm_l4_job *j = arg;
    uint64_t rows = (uint64_t)(j->d->n / MM_BLOCKS);
    for (int i = 0; i < MM_BLOCKS; i++) {
        strata_tensor a, c;
        STRATA_TRY(mm_rows(j->d, i, &a, &c));
        STRATA_TRY(strata_orch_next_level(o, j->rows_run, NULL, j->child[i % 2], STRATA_IN(a),
                                          STRATA_IN(j->d->whole_b), STRATA_OUT_EXISTING(c),
                                          STRATA_U64(rows), STRATA_U64((uint64_t)j->d->n)));
    }
    return STRATA_OK;
}

/* One L3 alone: every row block on its own chip. */
static int mm_l3_orch(strata_orch *o, void *arg) {
    const mm_data *d = arg;
    uint64_t rows = (uint64_t)(d->n / MM_BLOCKS);
    for (int i = 0; i < MM_BLOCKS; i++) {
        strata_tensor a, c;
        STRATA_TRY(mm_rows(d, i, &a, &c));
        STRATA_TRY(mm_chip_task(o, a, d->whole_b, c, rows, (uint64_t)d->n));
    }
    return STRATA_OK;
}

/* Milliseconds of each of `reps` runs of fn on w, after one untimed run
 * (which puts the blocks in place), then the check of C. */
static int mm_time(strata_worker *w, strata_orch_fn fn, void *arg, const mm_data *d, int reps,
                   const char *who, bench_series *out) {
    int rc = strata_worker_run(w, fn, arg);
    if (rc)
        return fail(who, rc);
    for (int r = 0; r < reps; r++) {
        bench_settle();
        memset(strata_buffer_data(d->c), 0, (size_t)(d->n * d->n) * sizeof(float));
        uint64_t t0 = bench_now_ns();
        if ((rc = strata_worker_run(w, fn, arg)) != 0)
            return fail(who, rc);
        bench_series_add(out, (double)(bench_now_ns() - t0) / 1e6);
    }
    return mm_check(d, who);
}

/* The anchor: one L3 on rank 0 with the same chip, alone on the machine. */
static int mm_one_l3(int64_t n, int reps, bench_series *out) {
    strata_worker_config wc;
    strata_worker_config_init(&wc);
    wc.sub_workers = 1;
    strata_worker *w = NULL;
    mm_data d;
    memset(&d, 0, sizeof d);
    int rc = strata_worker_create(&wc, &w);
    if (!rc)
        rc = mm_l3_setup(w, NULL);
    if (!rc)
        rc = strata_worker_init(w);
    if (!rc)
        rc = mm_data_make(w, n, &d);
    int bad = rc ? fail("one L3 for the tiled matmul", rc)
                 : mm_time(w, mm_l3_orch, &d, &d, reps, "tiled matmul, one L3", out);
    mm_data_free(&d);
    strata_worker_destroy(w);
    return bad;
}

/* ---- strata: an L4 whose children are the L3s of ranks 1 and 2 ------------------------ */

typedef struct l4_bench {
    strata_worker *w;
    int child[2];
    strata_callable empty;    /* orchestration: a run with no task */
    strata_callable rows_run; /* orchestration: a child's row block of the matmul */
    int ntasks;
    strata_tensor chain; /* memory on child[0]'s rank: the round-trip chain */
    strata_tensor big;   /* a 64 MiB L4 host buffer */
} l4_bench;

static int empty_run(strata_orch *o, void *user) {
    (void)o;
    (void)user;
    return STRATA_OK;
}

static int chain_orch(strata_orch *o, void *arg) {
    l4_bench *b = arg;
    for (int i = 0; i < b->ntasks; i++)
        STRATA_TRY(strata_orch_next_level(o, b->empty, NULL, b->child[0], STRATA_INOUT(b->chain)));
    return STRATA_OK;
}

static int independent_orch(strata_orch *o, void *arg) {
    l4_bench *b = arg;
    for (int i = 0; i < b->ntasks; i++)
        STRATA_TRY(strata_orch_next_level(o, b->empty, NULL, b->child[i % 2], STRATA_U64(i)));
    return STRATA_OK;
}

static int write_big_orch(strata_orch *o, void *arg) {
    l4_bench *b = arg;
    return strata_orch_next_level(o, b->empty, NULL, b->child[0], STRATA_OUT(b->big));
}

static int read_big_orch(strata_orch *o, void *arg) {
    l4_bench *b = arg;
    return strata_orch_next_level(o, b->empty, NULL, b->child[1], STRATA_IN(b->big));
}

/* Every rank: the same L4 (ranks 1 and 2 serve their child in init and exit
 * there; rank 0 returns from it). */
static int l4_start(l4_bench *b, strata_buffer **chain_buf, strata_buffer **big_buf) {
    memset(b, 0, sizeof *b);
    strata_worker_config cfg;
    strata_worker_config_init(&cfg);
    cfg.level = 4;
    cfg.sub_workers = 1;
    int rc = strata_worker_create(&cfg, &b->w);
    if (rc)
        return fail("strata_worker_create (L4)", rc);
    if ((rc = strata_worker_register_orch(b->w, "empty", empty_run, NULL, &b->empty)) != 0 ||
        (rc = strata_worker_register_orch(b->w, "mm_rows", mm_rows_run, NULL, &b->rows_run)) != 0)
        return fail("strata_worker_register_orch", rc);
    for (int k = 0; k < 2; k++) {
        strata_child_config cc;
        strata_child_config_init(&cc);
        cc.worker.sub_workers = 1;
        cc.host = STRATA_HOST_MPI;
        cc.rank = 1 + k;
        cc.setup = mm_l3_setup;
        if ((rc = strata_worker_add_child(b->w, &cc, &b->child[k])) != 0)
            return fail("strata_worker_add_child", rc);
    }
    if ((rc = strata_worker_init(b->w)) != 0) /* ranks 1 and 2 do not return */
        return fail("strata_worker_init (L4)", rc);
    if ((rc = strata_worker_remote_malloc(b->w, b->child[0], 64, chain_buf)) != 0)
        return fail("strata_worker_remote_malloc", rc);
    int64_t n8 = 8;
    if ((rc = strata_worker_remote_tensor(b->w, *chain_buf, 0, STRATA_F64, 1, &n8, NULL,
                                          &b->chain)) != 0)
        return fail("strata_worker_remote_tensor", rc);
    if ((rc = strata_buffer_create(b->w, MOVE_BYTES, big_buf)) != 0)
        return fail("strata_buffer_create (64 MiB)", rc);
    int64_t nbig = (int64_t)(MOVE_BYTES / 8);
    if ((rc = strata_tensor_contiguous(*big_buf, STRATA_F64, 1, &nbig, &b->big)) != 0)
        return fail("strata_tensor_contiguous", rc);
    return 0;
}

static int time_runs(l4_bench *b, strata_orch_fn fn, int runs, int per, double scale, double *out) {
    uint64_t t0 = bench_now_ns();
    for (int r = 0; r < runs; r++) {
        int rc = strata_worker_run(b->w, fn, b);
        if (rc)
            return fail("strata_worker_run (L4)", rc);
    }
    *out = (double)(bench_now_ns() - t0) / scale / ((double)runs * per);
    return 0;
}

typedef struct strata_figs {
    bench_series round_trip, independent, move, matmul, matmul_one;
} strata_figs;

static int strata_measure(const bench_options *opt, l4_bench *b, int chain, int indep, int moves,
                          int64_t mm_n, strata_figs *f) {
    memset(f, 0, sizeof *f);
    double v;
    b->ntasks = 8; /* warm-up: every path once */
    if (time_runs(b, chain_orch, 1, 1, 1e3, &v) || time_runs(b, independent_orch, 1, 1, 1e3, &v))
        return 1;
    for (int r = 0; r < opt->reps; r++) {
        bench_settle();
        b->ntasks = chain;
        if (time_runs(b, chain_orch, 1, chain, 1e3, &v))
            return 1;
        bench_series_add(&f->round_trip, v);
        bench_settle();
        b->ntasks = indep;
        if (time_runs(b, independent_orch, 1, indep, 1e3, &v))
            return 1;
        bench_series_add(&f->independent, v);
    }
    for (int i = 0; i < moves; i++) {
        /* the write makes rank 1 the holder and drops rank 2's read copy */
        if (time_runs(b, write_big_orch, 1, 1, 1e6, &v) ||
            time_runs(b, read_big_orch, 1, 1, 1e6, &v))
            return 1;
        bench_series_add(&f->move, v);
    }
    mm_data d;
    int bad = mm_data_make(b->w, mm_n, &d);
    if (bad)
        bad = fail("the tiled matmul's buffers", bad);
    else {
        mm_l4_job j = {.d = &d, .rows_run = b->rows_run, .child = b->child};
        bad = mm_time(b->w, mm_l4_orch, &j, &d, opt->reps, "tiled matmul, two L3s", &f->matmul);
    }
    mm_data_free(&d);
    return bad;
}

/* ---- main ---------------------------------------------------------------------------- */

/* One table per row: a table's header names its first row's anchor. */
static int report(const bench_options *opt, const anchors *a, const strata_figs *f, int chain,
                  int indep, int64_t mm_n) {
    bench_report rep;
    bench_report_init(&rep, opt);
    bench_table *t = bench_report_table(
        &rep,
        "L4 on rank 0, an L3 child on rank 1: a chain of %d next-level tasks on memory of "
        "rank 1 (us per task), beside an MPI ping-pong 0 <-> 1 of %d bytes (us per round trip)",
        chain, FRAME_BYTES);
    bench_row *row = bench_table_row(t, "remote round trip", "us", &f->round_trip, 0);
    bench_row_compare(row, "mpi ping-pong", bench_measured(&a->pingpong), 2.0);
    bench_table_print(t);
    t = bench_report_table(&rep,
                           "%d independent empty next-level tasks over the L3s of ranks 1 and 2 "
                           "(us per task), beside a master/worker loop, 2 in flight per rank",
                           indep);
    row = bench_table_row(t, "independent tasks", "us", &f->independent, 0);
    /* throughput >= 0.8 x the loop's: time per task <= 1 / 0.8 of it */
    bench_row_compare(row, "master/worker", bench_measured(&a->master_worker), 1.25);
    bench_table_print(t);
    t = bench_report_table(&rep, "A 64 MiB L4 buffer written on rank 1, then read on rank 2: the "
                                 "reading run (ms), beside MPI_Send of 64 MiB 1 -> 2 and an ack");
    row = bench_table_row(t, "64 MiB move", "ms", &f->move, 0);
    /* bandwidth >= 0.9 x MPI_Send's: time <= 1 / 0.9 of it */
    bench_row_compare(row, "MPI_Send", bench_measured(&a->move), 1.0 / 0.9);
    bench_table_print(t);
    t = bench_report_table(&rep,
                           "C = A x B, %lldx%lld floats, %d row blocks over the L3s of ranks 1 and "
                           "2, one sim chip of one core each (ms per run), beside one L3 alone",
                           (long long)mm_n, (long long)mm_n, MM_BLOCKS);
    row = bench_table_row(t, "tiled matmul", "ms", &f->matmul, 0);
    bench_row_compare(row, "one L3", bench_measured(&f->matmul_one), 0); /* no target */
    bench_table_print(t);
    if (bench_report_write_json(&rep))
        return 1;
    bench_report_print_verdict(&rep);
    return 0;
}

int main(int argc, char **argv) {
    int rc = strata_mpi_init(&argc, &argv);
    if (rc)
        return fail("strata_mpi_init", rc);
    int rank = strata_mpi_rank(), size = strata_mpi_size();
    bench_options opt;
    int prc = bench_parse_args(argc, argv,
                               "a remote child's round trip, dispatch rate and data "
                               "movement, beside bare MPI (mpirun -np 3)",
                               &opt);
    if (prc) {
        strata_mpi_finalize();
        return prc > 0 ? 0 : 2;
    }
    if (size < 3) {
        if (rank == 0)
            fprintf(stderr, "bench_mpi: needs 3 ranks: mpirun -np 3 %s (this run has %d)\n",
                    argv[0], size);
        strata_mpi_finalize();
        return 2;
    }
    int pp_iters = opt.quick ? 200 : 5000;
    int chain = opt.quick ? 50 : 2000;
    int indep = opt.quick ? 100 : 4000;
    int moves = opt.quick ? 2 : opt.reps;
    int64_t mm_n = opt.quick ? 128 : 512;

    anchors a;
    if (rank == 0)
        anchors_measure(&opt, pp_iters, indep, moves, &a);
    else
        anchor_serve(rank);

    l4_bench b;
    strata_buffer *chain_buf = NULL, *big_buf = NULL;
    if (l4_start(&b, &chain_buf, &big_buf)) { /* on rank 0 only from here on */
        strata_worker_destroy(b.w);
        strata_mpi_finalize();
        return 1;
    }
    strata_figs f;
    int bad = strata_measure(&opt, &b, chain, indep, moves, mm_n, &f);
    strata_worker_remote_free(b.w, chain_buf);
    strata_buffer_destroy(big_buf);
    strata_worker_destroy(b.w); /* shuts the serving ranks down */
    if (!bad)                   /* rank 0 alone on the machine now */
        bad = mm_one_l3(mm_n, opt.reps, &f.matmul_one);
    if (!bad)
        bad = report(&opt, &a, &f, chain, indep, mm_n);
    strata_mpi_finalize();
    return bad ? 1 : 0;
}
