/* mpi/mpi_directory.c - rank 0's copy directory (mpi/mpi_directory.h).
 *
 * Owns: the entry list (a flat array scanned per lookup: a run's distinct
 * views of L4 buffers that travel to other ranks are few), the view key
 * comparison and the byte footprint of a view.
 * Must never: decide what a rank does with a copy (mpi_endpoint.c does).
 */
#include <string.h>

#include "mpi/mpi_directory.h"
#include "strata/tensor.h"
#include "util/alloc.h"
#include "util/growable.h"
#include "util/view.h"

void st_dir_init(st_directory *d) {
    memset(d, 0, sizeof *d);
    d->next_id = 1;
}

void st_dir_free(st_directory *d) {
    for (uint32_t i = 0; i < d->n; i++)
        st_free(d->v[i]);
    st_free(d->v);
    memset(d, 0, sizeof *d);
}

static int same_view(const st_dir_entry *e, const strata_tensor *t) {
    if (e->ident.id != t->ident.id || e->ident.generation != t->ident.generation ||
        e->offset != t->offset || e->dtype != t->dtype || e->rank != t->rank)
        return 0;
    for (int i = 0; i < t->rank; i++)
        if (e->shape[i] != t->shape[i] || (t->shape[i] > 1 && e->strides[i] != t->strides[i]))
            return 0;
    return 1;
}

st_dir_entry *st_dir_find(st_directory *d, const strata_tensor *t) {
    for (uint32_t i = 0; i < d->n; i++)
        if (same_view(d->v[i], t))
            return d->v[i];
    return NULL;
}

static void footprint(const strata_tensor *t, uint64_t *lo, uint64_t *hi) {
    uint64_t end = 0;
    size_t es = strata_dtype_size((strata_dtype)t->dtype);
    if (!st_view_end(t->offset, t->rank, t->shape, t->strides, es, &end))
        end = UINT64_MAX; /* cannot happen for a view the engine accepted */
    *lo = t->offset;
    *hi = end;
}

st_dir_entry *st_dir_add(st_directory *d, const strata_tensor *t) {
    if (d->n == d->cap) {
        st_dir_entry **nv =
            st_grow(d->v, &d->cap, d->n + 1, sizeof *nv, 64, NULL, "the MPI copy directory");
        if (!nv)
            return NULL;
        d->v = nv;
    }
    st_dir_entry *e = st_calloc(1, sizeof *e);
    if (!e)
        return NULL;
    e->id = d->next_id++;
    e->ident = t->ident;
    e->offset = t->offset;
    e->dtype = t->dtype;
    e->rank = t->rank;
    memcpy(e->shape, t->shape, sizeof e->shape);
    memcpy(e->strides, t->strides, sizeof e->strides);
    footprint(t, &e->lo, &e->hi);
    e->bytes = strata_dtype_size((strata_dtype)t->dtype);
    for (int i = 0; i < t->rank; i++)
        e->bytes *= (uint64_t)t->shape[i];
    d->v[d->n++] = e;
    return e;
}

void st_dir_remove(st_directory *d, st_dir_entry *e) {
    for (uint32_t i = 0; i < d->n; i++)
        if (d->v[i] == e) {
            d->v[i] = d->v[--d->n];
            st_free(e);
            return;
        }
}

int st_dir_overlaps(const st_dir_entry *e, const strata_tensor *t) {
    if (e->ident.id != t->ident.id || e->ident.generation != t->ident.generation)
        return 0;
    uint64_t lo, hi;
    footprint(t, &lo, &hi);
    return e->lo < hi && lo < e->hi;
}
