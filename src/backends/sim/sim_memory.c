/* backends/sim/sim_memory.c - device memory of one simulated device.
 *
 * Owns: host allocations standing in for device memory, kept in an array
 * sorted by address so a range check is a binary search.
 * Must never: free or copy memory it did not hand out.
 */
#include "sim_memory.h"

#include <stdlib.h>
#include <string.h>

#include "sim_device.h"
#include "util/alloc.h"
#include "util/growable.h"

#define SIM_ALLOC_ALIGN 64

int sim_memory_init(sim_memory *mem) {
    memset(mem, 0, sizeof *mem);
    return pthread_mutex_init(&mem->mu, NULL) == 0 ? 0 : -1;
}

void sim_memory_destroy(sim_memory *mem) {
    for (size_t i = 0; i < mem->count; i++)
        st_free((void *)mem->allocs[i].base);
    st_free(mem->allocs);
    pthread_mutex_destroy(&mem->mu);
    memset(mem, 0, sizeof *mem);
}

/* Index of the last allocation whose base is <= addr, or -1. Lock held. */
static long find_floor(const sim_memory *mem, uintptr_t addr) {
    long lo = 0, hi = (long)mem->count - 1, found = -1;
    while (lo <= hi) {
        long mid = lo + (hi - lo) / 2;
        if (mem->allocs[mid].base <= addr) {
            found = mid;
            lo = mid + 1;
        } else {
            hi = mid - 1;
        }
    }
    return found;
}

static int grow(sim_memory *mem) {
    if (mem->count < mem->cap)
        return 0;
    size_t bytes;
    sim_alloc *n = st_grow_raw(mem->allocs, &mem->cap, mem->count + 1, sizeof *n, 16, NULL, &bytes);
    if (!n)
        return -1;
    mem->allocs = n;
    return 0;
}

int sim_memory_alloc(sim_memory *mem, uint64_t nbytes, void **addr, strata_backend_msg *m) {
    if (nbytes == 0)
        return sim_fail(m, STRATA_BACKEND_ERROR, "cannot allocate 0 bytes of device memory");
    if (nbytes > (uint64_t)SIZE_MAX - SIM_ALLOC_ALIGN)
        return sim_fail(m, STRATA_BACKEND_ERROR, "device allocation of %llu bytes is too large",
                        (unsigned long long)nbytes);
    size_t rounded = (size_t)((nbytes + SIM_ALLOC_ALIGN - 1) / SIM_ALLOC_ALIGN * SIM_ALLOC_ALIGN);
    void *p = st_aligned_alloc(SIM_ALLOC_ALIGN, rounded);
    if (!p)
        return sim_fail(m, STRATA_BACKEND_ERROR,
                        "device out of memory allocating %llu bytes (committed %llu)",
                        (unsigned long long)nbytes, (unsigned long long)mem->committed);
    memset(p, 0, rounded);
    pthread_mutex_lock(&mem->mu);
    if (grow(mem) != 0) {
        pthread_mutex_unlock(&mem->mu);
        st_free(p);
        return sim_fail(m, STRATA_BACKEND_ERROR,
                        "out of host memory growing the device's allocation table (%zu bytes)",
                        (mem->cap ? mem->cap * 2 : 16) * sizeof(sim_alloc));
    }
    long at = find_floor(mem, (uintptr_t)p) + 1;
    memmove(&mem->allocs[at + 1], &mem->allocs[at], (mem->count - (size_t)at) * sizeof(sim_alloc));
    mem->allocs[at] = (sim_alloc){.base = (uintptr_t)p, .size = nbytes};
    mem->count++;
    mem->committed += nbytes;
    pthread_mutex_unlock(&mem->mu);
    *addr = p;
    return 0;
}

int sim_memory_free(sim_memory *mem, void *addr, strata_backend_msg *m) {
    pthread_mutex_lock(&mem->mu);
    long at = find_floor(mem, (uintptr_t)addr);
    if (at < 0 || mem->allocs[at].base != (uintptr_t)addr) {
        int inside = at >= 0 && (uintptr_t)addr < mem->allocs[at].base + mem->allocs[at].size;
        pthread_mutex_unlock(&mem->mu);
        return sim_fail(m, STRATA_BACKEND_ERROR,
                        inside ? "free of %p: not the start of a device allocation (pass the "
                                 "address strata_chip_malloc returned)"
                               : "free of %p: no live device allocation there (already freed, "
                                 "or never allocated on this chip)",
                        addr);
    }
    mem->committed -= mem->allocs[at].size;
    memmove(&mem->allocs[at], &mem->allocs[at + 1],
            (mem->count - (size_t)at - 1) * sizeof(sim_alloc));
    mem->count--;
    pthread_mutex_unlock(&mem->mu);
    st_free(addr);
    return 0;
}

int sim_memory_check_range(sim_memory *mem, const void *addr, uint64_t n, const char *what,
                           strata_backend_msg *m) {
    if (addr == NULL)
        return sim_fail(m, STRATA_BACKEND_ERROR, "%s: device address is NULL", what);
    pthread_mutex_lock(&mem->mu);
    long at = find_floor(mem, (uintptr_t)addr);
    int ok = at >= 0 && (uintptr_t)addr - mem->allocs[at].base <= mem->allocs[at].size &&
             n <= mem->allocs[at].size - ((uintptr_t)addr - mem->allocs[at].base);
    uint64_t size = at >= 0 ? mem->allocs[at].size : 0;
    uintptr_t base = at >= 0 ? mem->allocs[at].base : 0;
    pthread_mutex_unlock(&mem->mu);
    if (ok)
        return 0;
    if (at >= 0 && (uintptr_t)addr < base + size)
        return sim_fail(m, STRATA_BACKEND_ERROR,
                        "%s of %llu bytes at %p runs past the end of its device allocation "
                        "(%p, %llu bytes)",
                        what, (unsigned long long)n, addr, (void *)base, (unsigned long long)size);
    return sim_fail(m, STRATA_BACKEND_ERROR,
                    "%s of %llu bytes at %p: no live device allocation there", what,
                    (unsigned long long)n, addr);
}

uint64_t sim_memory_committed(sim_memory *mem) {
    pthread_mutex_lock(&mem->mu);
    uint64_t c = mem->committed;
    pthread_mutex_unlock(&mem->mu);
    return c;
}
