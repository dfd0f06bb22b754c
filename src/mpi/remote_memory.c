/* mpi/remote_memory.c - strata_worker_remote_*: memory where a child Worker lives.
 *
 * Owns: the public remote memory calls, the record of every remote buffer
 * (its worker, its child, whether that child is an MPI one), the argument
 * and range checks, and the local form: for a thread- or process-hosted
 * child Worker the memory is a strata_buffer of the parent, which every
 * process of the tree sees; for an MPI child the calls go to
 * mpi/remote_child.h (memory on the child's rank).
 * Must never: call MPI, treat a buffer of an MPI child as local memory (its
 * data pointer is an address on another rank), or free a buffer it has no
 * record of (a second free is refused, not a double free).
 *
 * Lock: g_mu protects the record; it is a leaf (never held across a call
 * into a child, which may wait for another rank).
 */
#include <pthread.h>
#include <string.h>

#include "core/endpoint.h"
#include "mpi/remote_child.h"
#include "strata/mpi.h"
#include "util/error.h"
#include "util/growable.h"

typedef struct remote_entry {
    strata_worker *w;
    const strata_buffer *b;
    int worker_id;
    int mpi;
} remote_entry;

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static remote_entry *g_v;
static uint32_t g_n, g_cap;

static int record(strata_worker *w, const strata_buffer *b, int worker_id, int mpi) {
    pthread_mutex_lock(&g_mu);
    int rc = STRATA_OK;
    if (g_n == g_cap) {
        remote_entry *nv = st_grow(g_v, &g_cap, g_n + 1, sizeof *nv, 16, NULL,
                                   "strata_worker_remote_malloc: the remote buffer record");
        if (nv)
            g_v = nv;
        else
            rc = STRATA_ENOMEM;
    }
    if (rc == STRATA_OK)
        g_v[g_n++] = (remote_entry){.w = w, .b = b, .worker_id = worker_id, .mpi = mpi};
    pthread_mutex_unlock(&g_mu);
    return rc;
}

/* The record of b on w (copied into *out), removed when `take`; 0 if none. */
static int lookup(strata_worker *w, const strata_buffer *b, int take, remote_entry *out) {
    int found = 0;
    pthread_mutex_lock(&g_mu);
    for (uint32_t i = 0; i < g_n && !found; i++)
        if (g_v[i].w == w && g_v[i].b == b) {
            *out = g_v[i];
            found = 1;
            if (take)
                g_v[i] = g_v[--g_n];
        }
    pthread_mutex_unlock(&g_mu);
    return found;
}

static int find(strata_worker *w, const strata_buffer *b, int take, remote_entry *out,
                const char *what) {
    if (!w || !b)
        return st_fail(STRATA_EINVAL, "%s: worker and buffer must not be NULL", what);
    if (!lookup(w, b, take, out))
        return st_fail(STRATA_EINVAL,
                       "%s: the buffer is not remote memory of this worker (allocate it with "
                       "strata_worker_remote_malloc; it may have been freed)",
                       what);
    return STRATA_OK;
}

int strata_worker_remote_malloc(strata_worker *w, int worker_id, size_t nbytes,
                                strata_buffer **out) {
    const char *what = "strata_worker_remote_malloc";
    if (!out)
        return st_fail(STRATA_EINVAL, "%s: out is NULL", what);
    *out = NULL;
    if (!w)
        return st_fail(STRATA_EINVAL, "%s: worker is NULL", what);
    if (!st_worker_next_endpoint(w, worker_id))
        return st_fail(STRATA_EINVAL, "%s: worker %d is not a next-level child of this worker",
                       what, worker_id);
    if (nbytes == 0)
        return st_fail(STRATA_EINVAL, "%s: nbytes is 0", what);
    int mpi = st_mpi_is_child(w, worker_id);
    int rc = mpi ? st_mpi_remote_malloc(w, worker_id, nbytes, out)
                 : strata_buffer_create(w, nbytes, out); /* seen by every process of the tree */
    if (rc != STRATA_OK)
        return mpi ? rc : st_fail_prefix(rc, what);
    rc = record(w, *out, worker_id, mpi);
    if (rc != STRATA_OK) {
        if (mpi)
            (void)st_mpi_remote_free(w, worker_id, *out);
        else
            strata_buffer_destroy(*out);
        *out = NULL;
        return st_fail(rc, "%s: no memory for its record", what);
    }
    return STRATA_OK;
}

int strata_worker_remote_tensor(strata_worker *w, const strata_buffer *b, uint64_t offset,
                                strata_dtype dtype, int rank, const int64_t *shape,
                                const int64_t *strides, strata_tensor *out) {
    remote_entry e;
    STRATA_TRY(find(w, b, 0, &e, "strata_worker_remote_tensor"));
    /* An MPI child's buffer is marked as its memory (core/buffer.h), so the
     * view carries mem = DEVICE and owner = the child: refused elsewhere. */
    return strata_tensor_view(b, offset, dtype, rank, shape, strides, out);
}

static int check_range(const strata_buffer *b, uint64_t offset, size_t n, const char *what) {
    size_t size = strata_buffer_size(b);
    if (offset > size || n > size - offset)
        return st_fail(STRATA_EINVAL, "%s: %zu bytes at offset %llu run past the %zu-byte buffer",
                       what, n, (unsigned long long)offset, size);
    return STRATA_OK;
}

int strata_worker_remote_copy_to(strata_worker *w, strata_buffer *b, uint64_t offset,
                                 const void *src, size_t n) {
    const char *what = "strata_worker_remote_copy_to";
    remote_entry e;
    STRATA_TRY(find(w, b, 0, &e, what));
    if (!src && n)
        return st_fail(STRATA_EINVAL, "%s: source is NULL", what);
    STRATA_TRY(check_range(b, offset, n, what));
    if (e.mpi)
        return st_mpi_remote_copy_to(w, e.worker_id, b, offset, src, n);
    if (n)
        memcpy((char *)strata_buffer_data(b) + offset, src, n);
    return STRATA_OK;
}

int strata_worker_remote_copy_from(strata_worker *w, const strata_buffer *b, uint64_t offset,
                                   void *dst, size_t n) {
    const char *what = "strata_worker_remote_copy_from";
    remote_entry e;
    STRATA_TRY(find(w, b, 0, &e, what));
    if (!dst && n)
        return st_fail(STRATA_EINVAL, "%s: destination is NULL", what);
    STRATA_TRY(check_range(b, offset, n, what));
    if (e.mpi)
        return st_mpi_remote_copy_from(w, e.worker_id, b, offset, dst, n);
    if (n)
        memcpy(dst, (const char *)strata_buffer_data(b) + offset, n);
    return STRATA_OK;
}

int strata_worker_remote_free(strata_worker *w, strata_buffer *b) {
    remote_entry e;
    STRATA_TRY(find(w, b, 1, &e, "strata_worker_remote_free"));
    if (e.mpi)
        return st_mpi_remote_free(w, e.worker_id, b);
    strata_buffer_destroy(b);
    return STRATA_OK;
}
