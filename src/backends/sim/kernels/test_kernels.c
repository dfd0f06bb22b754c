/* backends/sim/kernels/test_kernels.c - the kernel module the tests, examples
 * and benchmarks run on the sim backend.
 *
 * Owns: a few host-executed kernels with checkable results (vector add, a
 * GEMM tile, a two-stage reduction), an empty kernel, a kernel that records
 * what each block saw, one that fails a chosen block, one that holds the
 * device until a word it was given is set (a test's gate on device time), and
 * one that crashes its process (SIGSEGV) when asked (process-hosted chips).
 * Must never: keep state between calls or touch memory outside the argument
 * words it was given; each kernel works on its own block's share only.
 */
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>

#include "strata/backend.h"

#define EXPORT __attribute__((visibility("default")))

static float *fptr(uint64_t word) {
    return (float *)(uintptr_t)word;
}

/* [begin, end) of n items that block b of count gets. */
static void block_share(uint64_t n, uint32_t b, uint32_t count, uint64_t *begin, uint64_t *end) {
    *begin = n * b / count;
    *end = n * (b + 1) / count;
}

/* c[i] = a[i] + b[i]; args: a, b, c, n. */
EXPORT int vector_add(const strata_kernel_ctx *k) {
    if (k->nargs < 4)
        return snprintf(k->msg, k->msg_cap, "vector_add needs a, b, c, n"), -22;
    const float *a = fptr(k->args[0]), *b = fptr(k->args[1]);
    float *c = fptr(k->args[2]);
    uint64_t lo, hi;
    block_share(k->args[3], k->block_idx, k->block_count, &lo, &hi);
    for (uint64_t i = lo; i < hi; i++)
        c[i] = a[i] + b[i];
    return 0;
}

/* One T x T tile of C (M x N) = A (M x K) * B (K x N), row-major floats.
 * Block i computes tile (i / tiles_n, i % tiles_n). args: A, B, C, M, N, K, T. */
EXPORT int gemm_tile(const strata_kernel_ctx *k) {
    if (k->nargs < 7 || k->args[6] == 0)
        return snprintf(k->msg, k->msg_cap, "gemm_tile needs A, B, C, M, N, K, T > 0"), -22;
    const float *A = fptr(k->args[0]), *B = fptr(k->args[1]);
    float *C = fptr(k->args[2]);
    uint64_t M = k->args[3], N = k->args[4], K = k->args[5], T = k->args[6];
    uint64_t tiles_n = (N + T - 1) / T;
    uint64_t ti = k->block_idx / tiles_n, tj = k->block_idx % tiles_n;
    if (ti * T >= M)
        return snprintf(k->msg, k->msg_cap, "tile %u lies outside C", k->block_idx), -22;
    for (uint64_t i = ti * T; i < ti * T + T && i < M; i++)
        for (uint64_t j = tj * T; j < tj * T + T && j < N; j++) {
            float acc = 0.0f;
            for (uint64_t p = 0; p < K; p++)
                acc += A[i * K + p] * B[p * N + j];
            C[i * N + j] = acc;
        }
    return 0;
}

/* Stage 1 of a sum: partial[block] = sum of this block's share of in.
 * args: in, partial, n. */
EXPORT int reduce_partial(const strata_kernel_ctx *k) {
    if (k->nargs < 3)
        return snprintf(k->msg, k->msg_cap, "reduce_partial needs in, partial, n"), -22;
    const float *in = fptr(k->args[0]);
    double acc = 0.0;
    uint64_t lo, hi;
    block_share(k->args[2], k->block_idx, k->block_count, &lo, &hi);
    for (uint64_t i = lo; i < hi; i++)
        acc += in[i];
    fptr(k->args[1])[k->block_idx] = (float)acc;
    return 0;
}

/* Stage 2: out[0] = sum of nparts partials (one block; runs after stage 1
 * because launches of a run execute in order). args: partial, out, nparts. */
EXPORT int reduce_final(const strata_kernel_ctx *k) {
    if (k->nargs < 3)
        return snprintf(k->msg, k->msg_cap, "reduce_final needs partial, out, nparts"), -22;
    if (k->block_idx != 0)
        return 0;
    const float *partial = fptr(k->args[0]);
    double acc = 0.0;
    for (uint64_t i = 0; i < k->args[2]; i++)
        acc += partial[i];
    fptr(k->args[1])[0] = (float)acc;
    return 0;
}

/* Does nothing: measures launch overhead. */
EXPORT int empty_kernel(const strata_kernel_ctx *k) {
    (void)k;
    return 0;
}

/* out[block] = block_count * 1000 + block + 1 (u32), so a test can see that
 * every block ran once with the right index and count. args: out. */
EXPORT int record_blocks(const strata_kernel_ctx *k) {
    if (k->nargs < 1)
        return snprintf(k->msg, k->msg_cap, "record_blocks needs out"), -22;
    uint32_t *out = (uint32_t *)(uintptr_t)k->args[0];
    out[k->block_idx] = k->block_count * 1000u + k->block_idx + 1u;
    return 0;
}

/* Fails block args[0] with code args[1] (a real kernel failure, not an
 * injected one); every other block succeeds. */
EXPORT int fail_block(const strata_kernel_ctx *k) {
    if (k->nargs < 2)
        return snprintf(k->msg, k->msg_cap, "fail_block needs block, code"), -22;
    if (k->block_idx != (uint32_t)k->args[0])
        return 0;
    snprintf(k->msg, k->msg_cap, "block %u was asked to fail", k->block_idx);
    return (int)(int64_t)k->args[1];
}

/* Holds its block until the u32 word at args[0] is non-zero (a test opens
 * it), for 10 s at most: then it fails (-110), so a broken test ends. */
EXPORT int hold_kernel(const strata_kernel_ctx *k) {
    if (k->nargs < 1)
        return snprintf(k->msg, k->msg_cap, "hold_kernel needs the gate word"), -22;
    _Atomic uint32_t *gate = (_Atomic uint32_t *)(uintptr_t)k->args[0];
    struct timespec nap = {0, 100000}; /* 100 us */
    for (int i = 0; i < 100000; i++) {
        if (atomic_load_explicit(gate, memory_order_acquire))
            return 0;
        nanosleep(&nap, NULL);
    }
    snprintf(k->msg, k->msg_cap, "hold_kernel: the gate stayed closed for 10 s");
    return -110;
}

/* Raises SIGSEGV in block 0 when args[0] is non-zero (the process hosting
 * the chip dies, as with a real wild access); otherwise does nothing.
 * args: crash. */
EXPORT int crash_if(const strata_kernel_ctx *k) {
    if (k->nargs < 1)
        return snprintf(k->msg, k->msg_cap, "crash_if needs crash"), -22;
    if (k->args[0] != 0 && k->block_idx == 0) {
        signal(SIGSEGV, SIG_DFL); /* the death a wild access brings, even under a sanitizer */
        raise(SIGSEGV);
    }
    return 0;
}
