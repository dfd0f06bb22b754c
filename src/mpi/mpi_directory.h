/* mpi/mpi_directory.h - rank 0's record of which child ranks hold a valid
 * copy of which view of an L4 host buffer.
 *
 * Owns: the entries (one per distinct view: buffer identity, offset, dtype,
 * shape, strides), each with its cache id (how the ranks name their copy),
 * the digest of the host bytes the copies equal, and the set of holders (by
 * the session's child index); lookup of the exact view, the entries
 * overlapping a written view's bytes, and the bytes each child holds.
 * A copy is used only while the host bytes still have its digest, checked
 * at its first use in each run (the program may write host buffers between
 * runs); within a run, the writes of tasks that do not go to an MPI child
 * (sub tasks of the L4, other next-level children) drop the entries they
 * overlap (mpi_copies.c), so a stale copy is never read. An entry lives
 * while a child holds its copy or a task in flight places it (mpi_copies.c
 * removes it then), so the directory is bounded by the children's budgets.
 * Must never: be touched by any thread but the session's progress thread.
 */
#ifndef STRATA_MPI_MPI_DIRECTORY_H
#define STRATA_MPI_MPI_DIRECTORY_H

#include <stdint.h>

#include "strata/types.h"
#include "util/digest.h"

#define ST_DIR_MAX_HOLDERS 256 /* session children (ST_MPI_MAX_CHILDREN) */

typedef struct st_dir_entry {
    uint64_t id; /* the copies' name on every rank; never reused */
    strata_buffer_id ident;
    uint64_t offset;
    uint8_t dtype, rank;
    int64_t shape[STRATA_MAX_RANK], strides[STRATA_MAX_RANK];
    uint64_t lo, hi; /* bytes of the buffer the view touches: [lo, hi) */
    uint64_t bytes;  /* the view's element bytes (a copy's size) */
    st_digest digest;
    /* run_id + 1 of the run in which the host bytes were last found equal to
     * digest (or written by a child, digest then made of them); 0: never.
     * Within that run every write is seen (a child's task, settled; any
     * other task, by the dispatch observer), so a use there skips the
     * digest: a copy is checked against the host bytes once per run. */
    uint64_t checked_run;
    uint64_t last_use; /* the session's use_clock at its latest placement: eviction order */
    uint64_t holders[ST_DIR_MAX_HOLDERS / 64];
    uint32_t at;                    /* its index in v[] */
    struct st_dir_entry *next_hash; /* the next entry of its hash bucket */
} st_dir_entry;

/* Entries in a flat array (iteration, the oldest-first eviction) and in a
 * hash table by buffer id (the lookups of every task: a view's entry, the
 * entries a write overlaps, each scanning one buffer's entries only). */
typedef struct st_directory {
    st_dir_entry **v;
    uint32_t n, cap;
    st_dir_entry **bucket;
    uint32_t nbuckets; /* a power of two, or 0 before the first add */
    uint64_t next_id;
} st_directory;

void st_dir_init(st_directory *d);
void st_dir_free(st_directory *d);

/* The entry of exactly view t, or NULL. */
st_dir_entry *st_dir_find(st_directory *d, const strata_tensor *t);

/* A new entry for view t with no holders (NULL: out of memory). */
st_dir_entry *st_dir_add(st_directory *d, const strata_tensor *t);

/* Remove e (its holders must have been told to drop their copies). */
void st_dir_remove(st_directory *d, st_dir_entry *e);

/* Entry i (0 .. n-1) for iteration; removal swaps the last one in. */
static inline st_dir_entry *st_dir_at(st_directory *d, uint32_t i) {
    return i < d->n ? d->v[i] : (st_dir_entry *)0;
}

/* The first entry of t's buffer at or after `from` in its bucket (NULL: no
 * more); iterate with st_dir_next_of(e, t). Removing the current one is safe
 * when its successor was taken first. */
st_dir_entry *st_dir_first_of(st_directory *d, const strata_tensor *t);
st_dir_entry *st_dir_next_of(st_dir_entry *e, const strata_tensor *t);

/* 1 if e's bytes overlap view t's bytes (same buffer). */
int st_dir_overlaps(const st_dir_entry *e, const strata_tensor *t);

static inline int st_dir_holds(const st_dir_entry *e, int child) {
    return (int)((e->holders[child / 64] >> (child % 64)) & 1u);
}
static inline void st_dir_set(st_dir_entry *e, int child, int on) {
    if (on)
        e->holders[child / 64] |= 1ull << (child % 64);
    else
        e->holders[child / 64] &= ~(1ull << (child % 64));
}
static inline int st_dir_empty(const st_dir_entry *e) {
    for (int i = 0; i < ST_DIR_MAX_HOLDERS / 64; i++)
        if (e->holders[i])
            return 0;
    return 1;
}

#endif
