/* util/alloc.c - the one allocator of the runtime, with a failure hook.
 *
 * Owns: the libc allocation calls and anonymous mappings (nothing else in
 * src/ calls them), the hook's state and the count of live mappings.
 * Must never: take a lock, or touch more than the `armed` word on a heap
 * allocation while the hook is off.
 *
 * The hook: `armed` is read relaxed on every allocation; only when it is set
 * does an allocation take the slow path, which reads the plan (written before
 * `armed` was released) and counts. A thread-scoped plan counts only the
 * thread that armed it: that thread copies the plan's epoch into a
 * thread-local, and other threads' copies never match (epochs start at 1).
 */
#include "util/alloc.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

static _Atomic int hook_armed;
static _Atomic uint64_t hook_fail_at; /* 0: count only */
static _Atomic int hook_mode;         /* st_alloc_fail_mode */
static _Atomic int hook_scope;        /* st_alloc_scope */
static _Atomic uint64_t hook_epoch;   /* bumped by every arm */
static _Atomic uint64_t hook_counted;
static _Atomic uint64_t hook_failed;
/* initial-exec: this file is also linked into the sim backend, which is
 * dlopened. The default model there reaches the word through __tls_get_addr,
 * and ThreadSanitizer's hook on that call (GCC 12's libtsan) sometimes takes
 * a dynamic TLS block for one of 2^49 bytes and dies resetting its shadow
 * ("failed to allocate 0x1ee3ffffff000 bytes"). Eight bytes fit the static
 * TLS surplus glibc keeps for dlopened objects. */
static _Thread_local __attribute__((tls_model("initial-exec"))) uint64_t tls_epoch;
static _Atomic int64_t live_maps; /* mappings are rare: always counted */

/* Whether this allocation is one the armed plan makes fail (counting it). */
static __attribute__((noinline, cold)) int hook_says_fail(void) {
    if (!atomic_load_explicit(&hook_armed, memory_order_acquire))
        return 0; /* turned off meanwhile */
    if (atomic_load_explicit(&hook_scope, memory_order_relaxed) == ST_ALLOC_THIS_THREAD &&
        tls_epoch != atomic_load_explicit(&hook_epoch, memory_order_relaxed))
        return 0;
    uint64_t i = atomic_fetch_add_explicit(&hook_counted, 1, memory_order_relaxed) + 1;
    uint64_t at = atomic_load_explicit(&hook_fail_at, memory_order_relaxed);
    int from = atomic_load_explicit(&hook_mode, memory_order_relaxed) == ST_ALLOC_FAIL_FROM;
    int fail = at != 0 && (i == at || (from && i > at));
    if (fail)
        atomic_fetch_add_explicit(&hook_failed, 1, memory_order_relaxed);
    return fail;
}

static inline int should_fail(void) {
    return __builtin_expect(atomic_load_explicit(&hook_armed, memory_order_relaxed), 0) &&
           hook_says_fail();
}

void *st_malloc(size_t n) {
    return should_fail() ? NULL : malloc(n);
}

void *st_calloc(size_t count, size_t size) {
    return should_fail() ? NULL : calloc(count, size);
}

void *st_realloc(void *p, size_t n) {
    return should_fail() ? NULL : realloc(p, n);
}

void *st_aligned_alloc(size_t align, size_t n) {
    if (should_fail())
        return NULL;
    size_t rounded = (n + align - 1) / align * align; /* C11 wants a multiple */
    return rounded < n ? NULL : aligned_alloc(align, rounded);
}

char *st_strdup(const char *s) {
    return should_fail() ? NULL : strdup(s);
}

void st_free(void *p) {
    free(p);
}

void *st_map_anon(size_t n, int flags) {
    if (should_fail())
        return NULL;
    void *p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_ANONYMOUS | flags, -1, 0);
    if (p == MAP_FAILED)
        return NULL;
    atomic_fetch_add_explicit(&live_maps, 1, memory_order_relaxed);
    return p;
}

void *st_map_fd(size_t n, int fd) {
    if (should_fail())
        return NULL;
    void *p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED)
        return NULL;
    atomic_fetch_add_explicit(&live_maps, 1, memory_order_relaxed);
    return p;
}

void st_unmap(void *p, size_t n) {
    if (!p)
        return;
    munmap(p, n);
    atomic_fetch_sub_explicit(&live_maps, 1, memory_order_relaxed);
}

/* ---- the hook ---------------------------------------------------------------- */

void st_alloc_fail_after(uint64_t n, st_alloc_fail_mode mode, st_alloc_scope scope) {
    atomic_store_explicit(&hook_armed, 0, memory_order_relaxed);
    atomic_store_explicit(&hook_fail_at, n, memory_order_relaxed);
    atomic_store_explicit(&hook_mode, (int)mode, memory_order_relaxed);
    atomic_store_explicit(&hook_scope, (int)scope, memory_order_relaxed);
    atomic_store_explicit(&hook_counted, 0, memory_order_relaxed);
    atomic_store_explicit(&hook_failed, 0, memory_order_relaxed);
    tls_epoch = atomic_fetch_add_explicit(&hook_epoch, 1, memory_order_relaxed) + 1;
    atomic_store_explicit(&hook_armed, 1, memory_order_release);
}

void st_alloc_hook_off(void) {
    atomic_store_explicit(&hook_armed, 0, memory_order_release);
}

uint64_t st_alloc_counted(void) {
    return atomic_load_explicit(&hook_counted, memory_order_relaxed);
}

uint64_t st_alloc_failed(void) {
    return atomic_load_explicit(&hook_failed, memory_order_relaxed);
}

int64_t st_alloc_live_maps(void) {
    return atomic_load_explicit(&live_maps, memory_order_relaxed);
}
