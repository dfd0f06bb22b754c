/* mpi/mpi_directory.c - rank 0's copy directory (mpi/mpi_directory.h).
 *
 * Owns: the entry array and the hash table by buffer id (chained), the view
 * key comparison and the byte footprint of a view.
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
    st_free(d->bucket);
    memset(d, 0, sizeof *d);
}

static uint32_t slot_of(const st_directory *d, uint64_t id) {
    id ^= id >> 33;
    id *= 0xff51afd7ed558ccdull;
    id ^= id >> 33;
    return (uint32_t)id & (d->nbuckets - 1);
}

static int same_buffer(const st_dir_entry *e, const strata_tensor *t) {
    return e->ident.id == t->ident.id && e->ident.generation == t->ident.generation;
}

st_dir_entry *st_dir_first_of(st_directory *d, const strata_tensor *t) {
    if (!d->nbuckets)
        return NULL;
    st_dir_entry *e = d->bucket[slot_of(d, t->ident.id)];
    while (e && !same_buffer(e, t))
        e = e->next_hash;
    return e;
}

st_dir_entry *st_dir_next_of(st_dir_entry *e, const strata_tensor *t) {
    for (e = e->next_hash; e && !same_buffer(e, t); e = e->next_hash)
        ;
    return e;
}

/* Twice the buckets (at least 64) and every entry hashed again. 0: no memory. */
static int rehash(st_directory *d) {
    uint32_t nb = d->nbuckets ? d->nbuckets * 2 : 64;
    st_dir_entry **b = st_calloc(nb, sizeof *b);
    if (!b)
        return 0;
    st_free(d->bucket);
    d->bucket = b;
    d->nbuckets = nb;
    for (uint32_t i = 0; i < d->n; i++) {
        st_dir_entry *e = d->v[i];
        uint32_t k = slot_of(d, e->ident.id);
        e->next_hash = b[k];
        b[k] = e;
    }
    return 1;
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
    for (st_dir_entry *e = st_dir_first_of(d, t); e; e = st_dir_next_of(e, t))
        if (same_view(e, t))
            return e;
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
    if (d->n >= d->nbuckets && !rehash(d) && !d->nbuckets) {
        st_free(e);
        return NULL;
    }
    e->at = d->n;
    d->v[d->n++] = e;
    uint32_t k = slot_of(d, e->ident.id);
    e->next_hash = d->bucket[k];
    d->bucket[k] = e;
    return e;
}

void st_dir_remove(st_directory *d, st_dir_entry *e) {
    st_dir_entry **p = &d->bucket[slot_of(d, e->ident.id)];
    while (*p && *p != e)
        p = &(*p)->next_hash;
    if (*p)
        *p = e->next_hash;
    d->v[e->at] = d->v[--d->n];
    d->v[e->at]->at = e->at;
    st_free(e);
}

int st_dir_overlaps(const st_dir_entry *e, const strata_tensor *t) {
    if (e->ident.id != t->ident.id || e->ident.generation != t->ident.generation)
        return 0;
    uint64_t lo, hi;
    footprint(t, &lo, &hi);
    return e->lo < hi && lo < e->hi;
}
