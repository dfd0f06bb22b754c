/* util/alloc.h - the one allocator of the runtime, with a failure hook.
 *
 * Owns: every heap allocation and anonymous mapping strata makes (the calls
 * below wrap malloc, calloc, realloc, aligned_alloc, strdup, free, mmap and
 * munmap), and the hook that lets a test make the n-th of them fail.
 * Must never: format an error message (the caller knows what it was
 * allocating: it reports with st_fail_nomem from util/error.h), allocate for
 * itself, or cost more than one relaxed load and a predictable branch per
 * call while the hook is off. Arming the hook is for tests only.
 *
 * The sim backend compiles this same file into libstrata_sim.so (hidden
 * symbols): it is a separate shared object behind the backend ABI, so it has
 * its own instance of the hook, armed through a sim configure knob.
 */
#ifndef STRATA_UTIL_ALLOC_H
#define STRATA_UTIL_ALLOC_H

#include <stddef.h>
#include <stdint.h>

/* Like their libc namesakes, NULL on failure. st_realloc leaves p untouched
 * on failure; st_aligned_alloc rounds n up to a multiple of align. */
void *st_malloc(size_t n);
void *st_calloc(size_t count, size_t size);
void *st_realloc(void *p, size_t n);
void *st_aligned_alloc(size_t align, size_t n);
char *st_strdup(const char *s);
void st_free(void *p);

/* An anonymous read-write mapping of n bytes (MAP_ANONYMOUS | flags, where
 * flags holds MAP_SHARED or MAP_PRIVATE and any extra MAP_* bits); NULL on
 * failure, never MAP_FAILED. */
void *st_map_anon(size_t n, int flags);
void st_unmap(void *p, size_t n);
/* A MAP_SHARED read-write mapping of n bytes of the file fd (a shared-memory
 * object: ipc/shm_region.c); counted and hooked like st_map_anon, released
 * with st_unmap. NULL on failure (errno from mmap), never MAP_FAILED. */
void *st_map_fd(size_t n, int fd);

/* ---- the failure hook (tests) ---------------------------------------------
 * While armed, every allocation in scope is counted (1, 2, ...). Frees and
 * unmaps are never counted and never fail. */

typedef enum st_alloc_fail_mode {
    ST_ALLOC_FAIL_ONCE = 0, /* only the n-th allocation fails */
    ST_ALLOC_FAIL_FROM,     /* the n-th and every later one fail */
} st_alloc_fail_mode;

typedef enum st_alloc_scope {
    ST_ALLOC_THIS_THREAD = 0, /* only the arming thread's allocations count */
    ST_ALLOC_ALL_THREADS,     /* every thread's count: their order is a race */
} st_alloc_scope;

/* Arm: the n-th allocation in scope from now fails (n >= 1), and with
 * ST_ALLOC_FAIL_FROM every later one too. n == 0 counts without failing. */
void st_alloc_fail_after(uint64_t n, st_alloc_fail_mode mode, st_alloc_scope scope);
/* Turn the hook off; the counters keep their values until the next arm. */
void st_alloc_hook_off(void);
/* Allocations counted since the hook was last armed, and how many failed. */
uint64_t st_alloc_counted(void);
uint64_t st_alloc_failed(void);

/* Mappings made by st_map_anon / st_map_fd and not yet unmapped, hook or not: a leaked
 * mapping is invisible to LeakSanitizer, so tests compare this instead. */
int64_t st_alloc_live_maps(void);

#endif
