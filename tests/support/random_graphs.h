/* tests/support/random_graphs.h - seeded random task graphs against a
 * sequential oracle, on an L3 or inside the L3 children of an L4.
 *
 * Owns: the interface of random_graphs.c (the generator, the reference model
 * and the checks live there); built into the tests only.
 * Must never: be used by the library.
 */
#ifndef STRATA_TEST_RANDOM_GRAPHS_H
#define STRATA_TEST_RANDOM_GRAPHS_H

#include <stdint.h>

typedef struct rg_shape {
    uint32_t sub_workers;     /* of the worker running the graphs */
    uint32_t depth;           /* its pipeline depth (the L4's too) */
    uint32_t task_window;     /* 0: the default */
    uint64_t heap_ring_bytes; /* 0: 1 MiB */
    int l4_children;          /* 0: an L3 runs the graphs; n: n thread-hosted L3 children of
                                 an L4, each graph one next-level task of the L4 */
} rg_shape;

/* Runs `nruns` random graphs in batches of 1-4 overlapping runs; after each
 * batch, every run is checked and the buffers are compared with the model
 * (cmocka assertions). */
void rg_run_random_graphs(const rg_shape *ws, int nruns, uint64_t seed);

/* Runs per shape: 1500 x STRATA_TEST_SCALE (a quarter under TSan), at least 8. */
int rg_runs_per_shape(void);

#endif
