/* examples/multihost.c - a tiled matrix multiplication over two L3 Workers on
 * other hosts: one program, launched on every rank.
 *
 *     mpirun -np 3 build/examples/multihost          (children on ranks 1 and 2)
 *     build/examples/multihost --local               (the same L4, children forked here)
 *
 * Rank 0 runs the L4 and its orchestration: C = A x B in tiles, tile (i, j)
 * on child (i + j) % 2, each a run of that child's L3, whose sub workers
 * compute it. A's row block and B's column block travel to the child with the
 * task (B's is a strided view: packed once), C's tile comes back; a block a
 * child read before stays there for its next tile (nothing moves again).
 * Ranks 1 and 2 never return from strata_worker_init: they serve and exit.
 * The result is checked against a direct multiplication on rank 0.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "strata/mpi.h"
#include "strata/strata.h"

#define CHECK(expr)                                                                                \
    do {                                                                                           \
        int rc_ = (expr);                                                                          \
        if (rc_ != STRATA_OK) {                                                                    \
            fprintf(stderr, "multihost: %s failed: %s: %s\n", #expr, strata_status_name(rc_),      \
                    strata_error_message());                                                       \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

enum { N = 256, TS = 64, NT = N / TS };

/* ---- On each child: the tile's multiplication, one sub task ------------------------------ */

static strata_callable g_gemm; /* the child's own sub callable (set by its setup) */

/* a: [TS, N] rows of A; b: [N, TS] columns of B; c: [TS, TS] = a x b (views: strides) */
static int gemm_sub(const strata_task_view *v, void *user) {
    (void)user;
    const strata_tensor *a = &v->tensors[0], *b = &v->tensors[1], *c = &v->tensors[2];
    const double *pa = strata_tensor_data(a), *pb = strata_tensor_data(b);
    double *pc = strata_tensor_data(c);
    for (int64_t i = 0; i < c->shape[0]; i++)
        for (int64_t j = 0; j < c->shape[1]; j++) {
            double s = 0;
            for (int64_t k = 0; k < a->shape[1]; k++)
                s += pa[i * a->strides[0] + k * a->strides[1]] *
                     pb[k * b->strides[0] + j * b->strides[1]];
            pc[i * c->strides[0] + j * c->strides[1]] = s;
        }
    return 0;
}

static int child_setup(strata_worker *w, void *user) {
    (void)user;
    return strata_worker_register_sub(w, "gemm", gemm_sub, NULL, &g_gemm);
}

/* The child's run for one tile: its task's tensors, handed to one sub task. */
static int tile_run(strata_orch *o, void *arg) {
    (void)arg;
    const strata_task_view *t = strata_orch_task_args(o);
    strata_tensor a = t->tensors[0], b = t->tensors[1], c = t->tensors[2];
    return strata_orch_sub(o, g_gemm, STRATA_IN(a), STRATA_IN(b), STRATA_OUT_EXISTING(c));
}

/* ---- On rank 0: the L4 ------------------------------------------------------------------ */

typedef struct job {
    strata_buffer *a, *b, *c;
    strata_callable tile;
    int child[2];
} job;

static int l4_orch(strata_orch *o, void *arg) {
    job *j = arg;
    for (int i = 0; i < NT; i++)
        for (int jj = 0; jj < NT; jj++) {
            strata_tensor a, b, c;
            int64_t sa[2] = {TS, N}, sb[2] = {N, TS}, sc[2] = {TS, TS}, st[2] = {N, 1};
            STRATA_TRY(strata_tensor_view(j->a, (uint64_t)i * TS * N * sizeof(double), STRATA_F64,
                                          2, sa, st, &a));
            STRATA_TRY(strata_tensor_view(j->b, (uint64_t)jj * TS * sizeof(double), STRATA_F64, 2,
                                          sb, st, &b));
            STRATA_TRY(strata_tensor_view(
                j->c, ((uint64_t)i * TS * N + (uint64_t)jj * TS) * sizeof(double), STRATA_F64, 2,
                sc, st, &c));
            STRATA_TRY(strata_orch_next_level(o, j->tile, NULL, j->child[(i + jj) % 2],
                                              STRATA_IN(a), STRATA_IN(b), STRATA_OUT_EXISTING(c)));
        }
    return STRATA_OK;
}

static double seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int main(int argc, char **argv) {
    int local = argc > 1 && strcmp(argv[1], "--local") == 0;
    if (argc > 1 && !local) {
        fprintf(stderr, "usage: mpirun -np 3 multihost | multihost --local\n");
        return 2;
    }
    if (!local && !strata_mpi_available()) {
        printf("skipped: built without MPI (install libopenmpi-dev openmpi-bin); "
               "multihost --local runs without it\n");
        return 77;
    }
    if (!local) {
        CHECK(strata_mpi_init(&argc, &argv));
        if (strata_mpi_size() != 3) {
            fprintf(stderr, "multihost: run it as mpirun -np 3 (got %d ranks)\n",
                    strata_mpi_size());
            return 2;
        }
    }
    /* Every rank builds the same L4 and registers the same callables. */
    strata_worker_config wc;
    strata_worker_config_init(&wc);
    wc.level = 4;
    wc.sub_workers = 1;
    strata_worker *w;
    CHECK(strata_worker_create(&wc, &w));
    job j;
    for (int k = 0; k < 2; k++) {
        strata_child_config cc;
        strata_child_config_init(&cc);
        cc.worker.sub_workers = 2;
        cc.setup = child_setup;
        cc.host = local ? STRATA_HOST_PROCESS : STRATA_HOST_MPI; /* the one switch */
        cc.rank = k + 1;
        CHECK(strata_worker_add_child(w, &cc, &j.child[k]));
    }
    CHECK(strata_worker_register_orch(w, "tile", tile_run, NULL, &j.tile));
    CHECK(strata_worker_init(w)); /* ranks 1 and 2 serve in here, then exit */

    CHECK(strata_buffer_create(w, N * N * sizeof(double), &j.a));
    CHECK(strata_buffer_create(w, N * N * sizeof(double), &j.b));
    CHECK(strata_buffer_create(w, N * N * sizeof(double), &j.c));
    double *a = strata_buffer_data(j.a), *b = strata_buffer_data(j.b), *c = strata_buffer_data(j.c);
    for (int i = 0; i < N * N; i++) {
        a[i] = (double)((i * 7) % 13) - 6.0;
        b[i] = (double)((i * 5) % 11) - 5.0;
    }
    double t0 = seconds();
    CHECK(strata_worker_run(w, l4_orch, &j));
    double t1 = seconds();
    double worst = 0;
    for (int i = 0; i < N; i++)
        for (int jj = 0; jj < N; jj++) {
            double s = 0;
            for (int k = 0; k < N; k++)
                s += a[i * N + k] * b[k * N + jj];
            double e = fabs(s - c[i * N + jj]);
            worst = e > worst ? e : worst;
        }
    printf("multihost: %dx%d in %dx%d tiles over 2 %s children: %.1f ms, max error %g\n", N, N, TS,
           TS, local ? "local (process)" : "MPI", 1e3 * (t1 - t0), worst);
    strata_buffer_destroy(j.a);
    strata_buffer_destroy(j.b);
    strata_buffer_destroy(j.c);
    CHECK(strata_worker_close(w)); /* ranks 1 and 2 tear down and exit */
    strata_worker_destroy(w);
    if (!local)
        CHECK(strata_mpi_finalize());
    return worst == 0 ? 0 : 1;
}
