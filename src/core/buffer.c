/* core/buffer.c - buffers with identity and tensor views.
 *
 * Owns: strata_buffer (memory + identity) and the validation of views
 * (include/strata/tensor.h); task arguments are core/task_args.c's. Memory
 * of strata_buffer_create comes from the worker's shared arenas
 * (core/arena.h), reserved at strata_worker_create: every process child of
 * the worker sees it at the same address.
 * Must never: depend on runs or the scheduler; these are plain values.
 */
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "core/arena.h"
#include "core/buffer.h"
#include "core/engine.h"
#include "util/alloc.h"
#include "util/error.h"
#include "util/view.h"

struct strata_buffer {
    strata_worker *w;
    void *data;
    size_t nbytes;
    size_t mapped;   /* bytes of the buffer's own mapping (a large buffer), else 0 */
    st_arena *arena; /* made by strata_buffer_create (a reference held); NULL: wrapped */
    strata_buffer_id ident;
    uint8_t mem; /* strata_mem_kind */
};

void st_buffer_mark_device(strata_buffer *b, int owner) {
    b->mem = STRATA_MEM_DEVICE;
    b->ident.owner = owner;
}

static int new_buffer(strata_worker *w, void *data, size_t nbytes, size_t mapped,
                      strata_buffer **out) {
    strata_buffer *b = st_calloc(1, sizeof *b);
    if (!b)
        return STRATA_ENOMEM;
    b->w = w;
    b->data = data;
    b->nbytes = nbytes;
    b->mapped = mapped;
    b->ident.id = atomic_fetch_add(&w->next_buffer_id, 1);
    b->ident.generation = 1;
    b->ident.owner = -1;
    b->mem = STRATA_MEM_HOST;
    *out = b;
    return STRATA_OK;
}

int strata_buffer_create(strata_worker *w, size_t nbytes, strata_buffer **out) {
    if (!w || !out)
        return st_fail(STRATA_EINVAL, "strata_buffer_create: worker and out must not be NULL");
    *out = NULL;
    if (nbytes == 0)
        return st_fail(STRATA_EINVAL, "strata_buffer_create: nbytes is 0");
    st_arena *a = w->arena; /* reserved at strata_worker_create, before any child existed */
    if (!st_arena_is_owner(a))
        return st_fail(STRATA_ESTATE,
                       "strata_buffer_create: called in a process child of the worker (pid "
                       "%d): buffers of a worker are made and freed in the worker's own "
                       "process (pid %d)",
                       (int)getpid(), (int)a->owner);
    size_t own = 0;
    void *p = st_arena_alloc(a, nbytes, &own);
    if (!p)
        return st_fail_prefix(STRATA_ENOMEM, "strata_buffer_create");
    if (new_buffer(w, p, nbytes, own, out) != STRATA_OK) {
        if (own)
            st_unmap(p, own);
        else
            st_arena_free(a, p, nbytes);
        return st_fail_nomem("strata_buffer_create: the buffer record", sizeof(strata_buffer));
    }
    st_arena_get(a);
    (*out)->arena = a;
    return STRATA_OK;
}

int strata_buffer_wrap(strata_worker *w, void *data, size_t nbytes, strata_buffer **out) {
    if (!w || !data || !out)
        return st_fail(STRATA_EINVAL, "strata_buffer_wrap: worker, data and out must not be NULL");
    *out = NULL;
    if (nbytes == 0)
        return st_fail(STRATA_EINVAL, "strata_buffer_wrap: nbytes is 0");
    if (new_buffer(w, data, nbytes, 0, out) != STRATA_OK)
        return st_fail_nomem("strata_buffer_wrap: the buffer record", sizeof(strata_buffer));
    return STRATA_OK;
}

static void free_buffer(strata_buffer *b) {
    if (b->mapped)
        st_unmap(b->data, b->mapped);
    else if (b->arena)
        st_arena_free(b->arena, b->data, b->nbytes);
    st_arena_put(b->arena);
    st_free(b);
}

void strata_buffer_destroy(strata_buffer *b) {
    if (!b)
        return;
    if (b->mem == STRATA_MEM_DEVICE) {
        /* Owned by its chip: freeing it here would free it twice. */
        st_fail(STRATA_EINVAL,
                "strata_buffer_destroy: buffer is device memory of worker %d; "
                "free it with strata_worker_chip_free",
                b->ident.owner);
        return;
    }
    if (b->arena && !st_arena_is_owner(b->arena)) {
        /* The free list here is a forked copy: giving the extent back to it
         * would not free it in the owner, and would let this process hand it
         * out again. The buffer is left as it is. */
        st_fail(STRATA_ESTATE,
                "strata_buffer_destroy: called in a process child of the worker (pid %d): "
                "buffers of a worker are made and freed in the worker's own process (pid %d)",
                (int)getpid(), (int)b->arena->owner);
        return;
    }
    free_buffer(b);
}

void st_buffer_destroy_device(strata_buffer *b) {
    if (b)
        free_buffer(b);
}

void *strata_buffer_data(const strata_buffer *b) {
    return b ? b->data : NULL;
}

size_t strata_buffer_size(const strata_buffer *b) {
    return b ? b->nbytes : 0;
}

int strata_tensor_view(const strata_buffer *b, uint64_t offset, strata_dtype dtype, int rank,
                       const int64_t *shape, const int64_t *strides, strata_tensor *out) {
    const char *what = "strata_tensor_view";
    if (!b || !shape || !out)
        return st_fail(STRATA_EINVAL, "%s: buffer, shape and out must not be NULL", what);
    st_view_memory m = {b->data, b->nbytes, b->ident, b->mem};
    return st_view_build(&m, offset, dtype, rank, shape, strides, what, out);
}

int strata_tensor_contiguous(const strata_buffer *b, strata_dtype dtype, int rank,
                             const int64_t *shape, strata_tensor *out) {
    return strata_tensor_view(b, 0, dtype, rank, shape, NULL, out);
}
