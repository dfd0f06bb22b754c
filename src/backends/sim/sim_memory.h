/* backends/sim/sim_memory.h - device memory of one simulated device.
 *
 * Owns: the bookkeeping of live allocations (host memory standing in for
 * device memory) and the committed byte count.
 * Must never: touch memory outside a live allocation: a copy or free that
 * does not fall inside one is an error with a message, never a crash.
 */
#ifndef STRATA_SIM_MEMORY_H
#define STRATA_SIM_MEMORY_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "strata/backend.h"

typedef struct sim_alloc {
    uintptr_t base;
    uint64_t size;
} sim_alloc;

typedef struct sim_memory {
    pthread_mutex_t mu; /* protects allocs/count/cap/committed; a leaf lock */
    sim_alloc *allocs;  /* sorted by base */
    size_t count;
    uint32_t cap; /* util/growable.h */
    uint64_t committed;
} sim_memory;

int sim_memory_init(sim_memory *mem);
/* Frees every outstanding allocation. */
void sim_memory_destroy(sim_memory *mem);

int sim_memory_alloc(sim_memory *mem, uint64_t nbytes, void **addr, strata_backend_msg *m);
int sim_memory_free(sim_memory *mem, void *addr, strata_backend_msg *m);
/* 0 if [addr, addr+n) lies inside one live allocation, else an error naming `what`. */
int sim_memory_check_range(sim_memory *mem, const void *addr, uint64_t n, const char *what,
                           strata_backend_msg *m);
uint64_t sim_memory_committed(sim_memory *mem);

#endif
