/* tests/mpi/test_mpi_copies.c - rank 0's record of the copies the child
 * ranks keep agrees with what they keep (run under mpirun -np 3: an L4 on
 * rank 0, L3 children on ranks 1 and 2; tests/CMakeLists.txt).
 *
 * Owns: drops that wait for a later frame (a test seam makes the per-frame
 * limit 1) never delete a copy held again since (read or written there); a remote task that fails
 * keeps the copies it only read (a later reader on the other rank gets them
 * from there, and a run beside it is not failed by it) and loses the ones it
 * wrote; the directory stays bounded over many runs with fresh buffers.
 */
#include <stdint.h>
#include <unistd.h>

#include "mpi/remote_child.h"
#include "mpi_test.h"

enum { T = 64, TILES = 4 };
static const uint64_t TILE = T * sizeof(int32_t);

/* ---- The L3 side ------------------------------------------------------------------------- */

static strata_callable g_tile, g_slow;

/* acc[j] = id + the IN / INOUT tensors' element j; each written tensor k gets
 * acc * 3 + k; a negative id fails after writing. */
static int tile_sub(const strata_task_view *a, void *user) {
    (void)user;
    int64_t n = strata_tensor_numel(&a->tensors[0]);
    int32_t id = (int32_t)strata_args_i64(a, 0);
    for (int64_t j = 0; j < n; j++) {
        int64_t acc = id;
        for (uint32_t k = 0; k < a->ntensors; k++)
            if (a->tags[k] != STRATA_OUT)
                acc += ((const int32_t *)strata_args_data(a, k))[j];
        for (uint32_t k = 0; k < a->ntensors; k++)
            if (a->tags[k] != STRATA_IN)
                ((int32_t *)strata_args_data(a, k))[j] = (int32_t)((acc * 3 + k) % 1000003);
    }
    if (id < 0) {
        strata_task_set_error("tile %d asked to fail", (int)id);
        return 1;
    }
    return 0;
}

/* The same after 300 ms: a task still in flight while another run is placed. */
static int slow_sub(const strata_task_view *a, void *user) {
    usleep(300000);
    return tile_sub(a, user);
}

static int l3_setup(strata_worker *w, void *user) {
    (void)user;
    STRATA_TRY(strata_worker_register_sub(w, "slow", slow_sub, NULL, &g_slow));
    return strata_worker_register_sub(w, "tile", tile_sub, NULL, &g_tile);
}

static int l3_tile(strata_orch *o, void *arg) {
    (void)arg;
    const strata_task_view *ta = strata_orch_task_args(o);
    strata_task_args a;
    strata_args_init(&a);
    for (uint32_t k = 0; k < ta->ntensors; k++)
        STRATA_TRY(strata_args_add_tensor(&a, &ta->tensors[k], (strata_tag)ta->tags[k]));
    STRATA_TRY(strata_args_add_i64(&a, strata_args_i64(ta, 0)));
    return strata_orch_submit_sub(o, strata_args_u64(ta, 1) ? g_slow : g_tile, &a);
}

/* ---- Rank 0 ------------------------------------------------------------------------------- */

static strata_worker *g_w;
static int g_child[2];
static strata_callable g_l3_tile;

static void open_l4(void) {
    strata_worker_config wc;
    strata_worker_config_init(&wc);
    wc.level = 4;
    MT_OK(strata_worker_create(&wc, &g_w));
    for (int k = 0; k < 2; k++) {
        strata_child_config cc;
        strata_child_config_init(&cc);
        cc.worker.level = 3;
        cc.worker.sub_workers = 1;
        cc.setup = l3_setup;
        cc.host = STRATA_HOST_MPI;
        cc.rank = k + 1;
        MT_OK(strata_worker_add_child(g_w, &cc, &g_child[k]));
    }
    MT_OK(strata_worker_register_orch(g_w, "l3_tile", l3_tile, NULL, &g_l3_tile));
    MT_OK(strata_worker_init(g_w)); /* ranks 1 and 2 serve inside this call, then exit */
}

/* One tile task: tensors tile[0..n-1] of the buffers with tags, on a child. */
typedef struct job {
    int child, n, slow;
    int64_t id;
    strata_buffer *buf[4];
    int tile[4];
    strata_tag tag[4];
    const struct job *next; /* another task of the same run */
} job;

static int job_orch(strata_orch *o, void *arg) {
    const job *j = arg;
    strata_task_args a;
    strata_args_init(&a);
    for (int k = 0; k < j->n; k++) {
        strata_tensor x;
        int64_t n = T, s = 1;
        STRATA_TRY(
            strata_tensor_view(j->buf[k], (uint64_t)j->tile[k] * TILE, STRATA_I32, 1, &n, &s, &x));
        STRATA_TRY(strata_args_add_tensor(&a, &x, j->tag[k]));
    }
    STRATA_TRY(strata_args_add_i64(&a, j->id));
    STRATA_TRY(strata_args_add_u64(&a, (uint64_t)j->slow));
    STRATA_TRY(strata_orch_submit_next_level(o, g_l3_tile, &a, NULL, g_child[j->child]));
    return j->next ? job_orch(o, (void *)j->next) : STRATA_OK;
}

static void job_add(job *j, strata_buffer *b, int tile, strata_tag tag) {
    j->buf[j->n] = b;
    j->tile[j->n] = tile;
    j->tag[j->n] = tag;
    j->n++;
}

static int32_t *tile_of(strata_buffer *b, int tile) {
    return (int32_t *)strata_buffer_data(b) + tile * T;
}

static void fill(strata_buffer *b, int32_t seed) {
    for (int j = 0; j < TILES * T; j++)
        ((int32_t *)strata_buffer_data(b))[j] = (seed * 7919 + j) % 1000;
}

/* What the tile body gives written tensor k of a task whose only read tiles are `in`. */
static int32_t expect(int64_t id, int32_t *const in[], int nin, int j, int k) {
    int64_t acc = id;
    for (int m = 0; m < nin; m++)
        acc += in[m][j];
    return (int32_t)((acc * 3 + k) % 1000003);
}

static void traffic(st_mpi_traffic tr[2]) {
    for (int k = 0; k < 2; k++)
        MT_OK(st_mpi_child_traffic(g_w, g_child[k], &tr[k]));
}

#define DELTA(field, k) (after[k].field - before[k].field)

/* Rank 0 sends at most one drop per frame. A run reads three tiles rank 2
 * keeps after the program rewrote them on the host: each stale copy's drop
 * is queued and the copy is held again (its new bytes sent and kept). The
 * drops that did not fit in that frame must not ride on a later one: the
 * next run reads all three from rank 2's copies. Before, the second run's
 * frame dropped one of the new copies and that run failed ("a kept copy
 * this rank does not hold"). */
static void late_drops_never_delete_a_copy_held_again(void) {
    MT_OK(st_mpi_test_set_drops_per_frame(g_w, g_child[1], 1));
    strata_buffer *src, *dst;
    MT_OK(strata_buffer_create(g_w, TILES * T * sizeof(int32_t), &src));
    MT_OK(strata_buffer_create(g_w, TILES * T * sizeof(int32_t), &dst));
    fill(src, 3);
    job j = {.child = 1, .id = 5};
    for (int t = 0; t < 3; t++)
        job_add(&j, src, t, STRATA_IN);
    job_add(&j, dst, 0, STRATA_OUT);
    int32_t *in[3] = {tile_of(src, 0), tile_of(src, 1), tile_of(src, 2)};
    st_mpi_traffic before[2], after[2];
    for (int run = 0; run < 3; run++) {
        if (run == 1) /* the program rewrites the three tiles between runs: the copies are stale */
            for (int t = 0; t < 3; t++)
                tile_of(src, t)[1] += 100;
        traffic(before);
        MT_OK(strata_worker_run(g_w, job_orch, &j));
        traffic(after);
        for (int x = 0; x < T; x++)
            MT_CHECK(tile_of(dst, 0)[x] == expect(j.id, in, 3, x, 3), "run %d: dst[%d] = %d", run,
                     x, tile_of(dst, 0)[x]);
        if (run == 2)
            MT_CHECK(DELTA(cache_hits, 1) == 3 && DELTA(from_root, 1) == 0,
                     "rank 2 read its three copies (hits %llu, %llu bytes from rank 0)",
                     (unsigned long long)DELTA(cache_hits, 1),
                     (unsigned long long)DELTA(from_root, 1));
    }
    MT_OK(st_mpi_test_set_drops_per_frame(g_w, g_child[1], 0));
    strata_buffer_destroy(src);
    strata_buffer_destroy(dst);
}

/* The same for a copy a task makes by writing it. With room for two tiles
 * and one drop per frame: rank 1 keeps tile 0 (so its entry stays when rank
 * 2's copy goes), rank 2 keeps tiles 0 and 1, then 2 and 3 (0 and 1 go; the
 * drop of 0 waits). One run then has a slow task write tile 0 on rank 2 (a
 * new copy under the same id) and a task read tile 3 there: the second
 * task's frame must not carry the waiting drop, and a later read of tile 0
 * uses rank 2's copy. Without the drop taken back at the writer's
 * placement, the new copy went and that read failed. */
static void late_drops_never_delete_a_copy_written_since(void) {
    MT_OK(st_mpi_test_set_drops_per_frame(g_w, g_child[1], 1));
    MT_OK(st_mpi_test_set_cache_budget(g_w, g_child[1], 2 * TILE));
    strata_buffer *src, *dst;
    MT_OK(strata_buffer_create(g_w, TILES * T * sizeof(int32_t), &src));
    MT_OK(strata_buffer_create(g_w, TILES * T * sizeof(int32_t), &dst));
    fill(src, 17);
    job on_rank1 = {.child = 0, .id = 1};
    job_add(&on_rank1, src, 0, STRATA_IN);
    job_add(&on_rank1, dst, 2, STRATA_OUT);
    MT_OK(strata_worker_run(g_w, job_orch, &on_rank1));
    job keep01 = {.child = 1, .id = 1};
    job_add(&keep01, src, 0, STRATA_IN);
    job_add(&keep01, src, 1, STRATA_IN);
    MT_OK(strata_worker_run(g_w, job_orch, &keep01)); /* rank 2 keeps tiles 0, 1: full */
    job keep23 = {.child = 1, .id = 2};
    job_add(&keep23, src, 2, STRATA_IN);
    job_add(&keep23, src, 3, STRATA_IN);
    MT_OK(strata_worker_run(g_w, job_orch, &keep23)); /* 0 and 1 go; 0's drop waits */
    job read3 = {.child = 1, .id = 4};
    job_add(&read3, src, 3, STRATA_IN);
    job write0 = {.child = 1, .id = 3, .slow = 1, .next = &read3};
    job_add(&write0, src, 0, STRATA_OUT);
    MT_OK(strata_worker_run(g_w, job_orch, &write0));
    for (int x = 0; x < T; x++)
        MT_CHECK(tile_of(src, 0)[x] == (write0.id * 3) % 1000003, "src[0][%d] = %d", x,
                 tile_of(src, 0)[x]);
    job read0 = {.child = 1, .id = 5};
    job_add(&read0, src, 0, STRATA_IN);
    job_add(&read0, dst, 1, STRATA_OUT);
    st_mpi_traffic before[2], after[2];
    traffic(before);
    MT_OK(strata_worker_run(g_w, job_orch, &read0));
    traffic(after);
    int32_t *in[1] = {tile_of(src, 0)};
    for (int x = 0; x < T; x++)
        MT_CHECK(tile_of(dst, 1)[x] == expect(read0.id, in, 1, x, 1), "dst[1][%d] = %d", x,
                 tile_of(dst, 1)[x]);
    MT_CHECK(DELTA(cache_hits, 1) == 1 && DELTA(from_root, 1) == 0,
             "rank 2 read the tile it wrote from its copy (hits %llu, %llu bytes from rank 0)",
             (unsigned long long)DELTA(cache_hits, 1), (unsigned long long)DELTA(from_root, 1));
    MT_OK(st_mpi_test_set_cache_budget(g_w, g_child[1], 0));
    MT_OK(st_mpi_test_set_drops_per_frame(g_w, g_child[1], 0));
    strata_buffer_destroy(src);
    strata_buffer_destroy(dst);
}

/* A task on rank 1 reads tile 0 (rank 1 keeps it) and fails. Rank 1's copy
 * is valid: a later run on rank 2 reading tile 0 gets it from rank 1, not
 * from rank 0, and succeeds (before, the failure dropped the copy on both
 * sides). A task on rank 1 that writes tile 2 (a copy rank 1 keeps) and fails leaves a
 * half-written copy: it goes, and a later reader on rank 2 gets tile 2 from
 * rank 0 with the host's bytes. */
static void failed_task_keeps_its_valid_copies(void) {
    strata_buffer *src, *dst;
    MT_OK(strata_buffer_create(g_w, TILES * T * sizeof(int32_t), &src));
    MT_OK(strata_buffer_create(g_w, TILES * T * sizeof(int32_t), &dst));
    fill(src, 11);
    st_mpi_traffic before[2], after[2];

    job fail = {.child = 0, .id = -3};
    job_add(&fail, src, 0, STRATA_IN);
    job_add(&fail, dst, 0, STRATA_OUT);
    MT_CHECK(strata_worker_run(g_w, job_orch, &fail) == STRATA_ETASK, "the failing run fails");
    job read = {.child = 1, .id = 4};
    job_add(&read, src, 0, STRATA_IN);
    job_add(&read, dst, 1, STRATA_OUT);
    traffic(before);
    MT_OK(strata_worker_run(g_w, job_orch, &read));
    traffic(after);
    int32_t *in0[1] = {tile_of(src, 0)};
    for (int x = 0; x < T; x++)
        MT_CHECK(tile_of(dst, 1)[x] == expect(read.id, in0, 1, x, 1), "dst[1][%d] = %d", x,
                 tile_of(dst, 1)[x]);
    MT_CHECK(DELTA(from_peers, 1) == TILE && DELTA(to_peers, 0) == TILE && DELTA(from_root, 1) == 0,
             "rank 2 got tile 0 from the failed task's rank (from rank 1 %llu, from rank 0 %llu)",
             (unsigned long long)DELTA(from_peers, 1), (unsigned long long)DELTA(from_root, 1));

    job write = {.child = 0, .id = 2};
    job_add(&write, src, 2, STRATA_INOUT);
    MT_OK(strata_worker_run(g_w, job_orch, &write)); /* rank 1 keeps the written tile 2 */
    write.id = -2;
    MT_CHECK(strata_worker_run(g_w, job_orch, &write) == STRATA_ETASK, "the writer fails");
    int32_t host2[T];
    memcpy(host2, tile_of(src, 2),
           sizeof host2); /* the first write's bytes: the failed one's never came */
    job read2 = {.child = 1, .id = 9};
    job_add(&read2, src, 2, STRATA_IN);
    job_add(&read2, dst, 0, STRATA_OUT);
    traffic(before);
    MT_OK(strata_worker_run(g_w, job_orch, &read2));
    traffic(after);
    int32_t *in2[1] = {host2};
    for (int x = 0; x < T; x++)
        MT_CHECK(tile_of(dst, 0)[x] == expect(read2.id, in2, 1, x, 1), "dst[0][%d] = %d", x,
                 tile_of(dst, 0)[x]);
    MT_CHECK(DELTA(from_root, 1) == TILE && DELTA(from_peers, 1) == 0,
             "the half-written copy went: rank 2 got tile 2 from rank 0 (%llu, from peers %llu)",
             (unsigned long long)DELTA(from_root, 1), (unsigned long long)DELTA(from_peers, 1));
    strata_buffer_destroy(src);
    strata_buffer_destroy(dst);
}

/* A program that makes new host buffers for every run: with room for four
 * tiles of copies per child, the directory holds the entries of those
 * copies, not one per view ever seen (before: two more per run). */
static void directory_stays_bounded(void) {
    enum { RUNS = 150, ROOM = 4 };
    MT_OK(st_mpi_test_set_cache_budget(g_w, g_child[0], ROOM * TILE));
    uint32_t at_start = 0, at_end = 0;
    MT_OK(st_mpi_test_dir_entries(g_w, g_child[0], &at_start));
    for (int run = 0; run < RUNS; run++) {
        strata_buffer *src, *dst;
        MT_OK(strata_buffer_create(g_w, TILE, &src));
        MT_OK(strata_buffer_create(g_w, TILE, &dst));
        fill(src, run);
        job j = {.child = run % 2, .id = run};
        job_add(&j, src, 0, STRATA_IN);
        job_add(&j, dst, 0, STRATA_OUT);
        MT_OK(strata_worker_run(g_w, job_orch, &j));
        int32_t *in[1] = {tile_of(src, 0)};
        for (int x = 0; x < T; x++)
            MT_CHECK(tile_of(dst, 0)[x] == expect(j.id, in, 1, x, 1), "run %d: dst[%d] = %d", run,
                     x, tile_of(dst, 0)[x]);
        strata_buffer_destroy(src);
        strata_buffer_destroy(dst);
    }
    MT_OK(st_mpi_test_dir_entries(g_w, g_child[0], &at_end));
    MT_CHECK(at_end <= at_start + 2 * ROOM,
             "the directory holds %u entries after %d runs (%u before; room for %d copies per "
             "child)",
             at_end, RUNS, at_start, ROOM);
    MT_OK(st_mpi_test_set_cache_budget(g_w, g_child[0], 0));
}

int main(int argc, char **argv) {
    mt_skip_without_mpi();
    MT_OK(strata_mpi_init(&argc, &argv));
    MT_CHECK(strata_mpi_size() == 3, "run under mpirun -np 3 (size %d)", strata_mpi_size());
    open_l4();
    late_drops_never_delete_a_copy_held_again();
    late_drops_never_delete_a_copy_written_since();
    failed_task_keeps_its_valid_copies();
    directory_stays_bounded();
    MT_OK(strata_worker_close(g_w));
    strata_worker_destroy(g_w);
    MT_OK(strata_mpi_finalize());
    printf("test_mpi_copies: all checks passed\n");
    return 0;
}
