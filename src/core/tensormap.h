/* core/tensormap.h - the dependency map of the run being built (DESIGN §5.2).
 *
 * Owns: per buffer identity, the writer entries and the reader entries
 * recorded since, each a task reference plus the footprint it touched.
 * IN waits for the last writer(s) of overlapping bytes; OUT / INOUT /
 * OUT_EXISTING wait for the last writers and every reader since, then become
 * the writer. A view without bytes meets nothing and is not stored. The
 * engine does the lookup and then the insert; this module only stores and
 * finds. A lookup's cost follows the entries in the cells of its byte range
 * (tiles of one buffer), not every entry of the buffer (tensormap.c).
 * Must never: lock (the engine calls it under its own lock), malloc on the
 * common path (entries come from a pooled free list, tables grow by
 * doubling), walk the whole table on reset, or hand a lookup an entry whose
 * task is gone.
 */
#ifndef STRATA_CORE_TENSORMAP_H
#define STRATA_CORE_TENSORMAP_H

#include <stddef.h>
#include <stdint.h>

#include "core/footprint.h"
#include "strata/tensor.h"

#define ST_TMAP_NIL UINT32_MAX /* no entry / no record */

/* 0 = that task is gone, its entries may be dropped. Must not touch the map. */
typedef int (*st_tmap_alive_fn)(void *ctx, uint64_t ref);
/* Called once per matching entry; nonzero aborts the lookup and is returned
 * as-is. Must not touch the map. */
typedef int (*st_tmap_visit_fn)(void *ctx, uint64_t ref);

/* Internal layout (embedded by the engine; treat as opaque). */
/* Rebuilds the footprint of argument `argpos` of live task `ref` (the map
 * then stores only byte ranges: ~40 bytes an entry instead of ~280). */
typedef void (*st_tmap_fp_fn)(void *ctx, uint64_t ref, uint32_t argpos, st_footprint *out);

/* General entries before a buffer gets a grid, and the sample choose_grid
 * reads. 8, not 16: a buffer of a few tiles (a 2-wide layered graph keeps 4
 * alive) never gathered 16, so every lookup walked every tile's entries
 * (views of one buffer cost 1.11 x separate buffers in instructions there;
 * 1.08 x with 8, the same as with 4). */
#define ST_TMAP_GRID_AFTER 8u

#define ST_TMAP_WHOLE UINT32_MAX /* argpos of an entry covering its whole buffer [0, hi) */

typedef struct st_tmap_entry {
    uint64_t ref;    /* task reference, never 0 while stored */
    uint64_t lo, hi; /* the footprint's byte range */
    uint32_t next;   /* next (older) entry of the same list, or free-list link */
    uint32_t argpos; /* where fp_fn finds the view, or ST_TMAP_WHOLE */
    uint8_t dense;   /* the footprint touches every byte of [lo, hi) */
} st_tmap_entry;

typedef struct st_tmap_slot { /* open-addressing index (linear probing) */
    strata_buffer_id key;
    uint32_t epoch; /* the slot is in use only while equal to the map's epoch */
    uint32_t rec;   /* index into keys[] */
} st_tmap_slot;

typedef struct st_tmap_lists { /* list heads, newest first */
    uint32_t writers, readers;
} st_tmap_lists;

/* One buffer identity of the current run. Its entries are in `general`, or,
 * once the buffer holds many, in the cell of a regular grid over its bytes
 * that wholly holds their byte range (its st_tmap_grid). A lookup then walks
 * only the cells its footprint's range meets (see tensormap.c). */
typedef struct st_tmap_key {
    uint32_t slot;
    st_tmap_lists general;      /* entries held by no cell */
    uint32_t ngeneral, ncelled; /* entries in general / in cells */
    uint32_t migrate_at;        /* move general entries into cells when ngeneral reaches it */
    uint8_t gridded;            /* its grid is set */
} st_tmap_key;

/* The grid of key record r, keys[r]'s cold half (a lookup of a buffer
 * without one never reads it): cell c is [phase + c * grid, phase + (c + 1)
 * * grid). */
typedef struct st_tmap_grid {
    uint64_t grid;        /* cell bytes, while the key is gridded */
    uint64_t phase;       /* < grid */
    st_tmap_lists *cells; /* stays with the record index across runs */
    uint32_t ncells;      /* cells[0, ncells) are valid (while the key is gridded) */
    uint32_t cells_cap;
    uint8_t shift; /* log2(grid) when grid is a power of two */
} st_tmap_grid;

typedef struct st_tensormap {
    st_tmap_slot *slots;
    uint32_t cap;   /* slots, a power of two */
    uint32_t epoch; /* never 0 */
    uint32_t nused;
    st_tmap_key *keys;   /* dense array of the current run's keys */
    st_tmap_grid *grids; /* parallel to keys[] (keys_cap of them) */
    uint32_t nkeys, keys_cap;
    size_t ncells;       /* cells valid this run, all keys together (sweeps walk them) */
    st_tmap_entry *pool; /* entries: [0, pool_used) handed out, free ones chained */
    uint32_t pool_used, pool_cap, free_head;
    size_t nentries; /* entries stored */
    size_t sweep_at; /* sweep for dead entries when nentries + nkeys + ncells reaches this */
    uint64_t walked; /* entries lookups and prunes looked at, ever (tests read it) */
    st_tmap_alive_fn alive;
    void *alive_ctx;
    st_tmap_fp_fn fp_fn; /* NULL: full footprints are kept in fps[] instead */
    void *fp_ctx;
    st_footprint *fps; /* parallel to pool, only without fp_fn */
} st_tensormap;

int st_tmap_init(st_tensormap *m); /* STRATA_ENOMEM on failure */
void st_tmap_destroy(st_tensormap *m);

/* Drop every entry in O(1) (epoch stamp; storage is reclaimed lazily). Called
 * when a new run starts building. */
void st_tmap_reset(st_tensormap *m);

/* Without an alive fn every entry counts as alive. */
void st_tmap_set_alive_fn(st_tensormap *m, st_tmap_alive_fn fn, void *ctx);

/* Rebuild footprints from the tasks instead of storing them (set before the
 * first insert). Without it the map stores every footprint it is given. */
void st_tmap_set_fp_fn(st_tensormap *m, st_tmap_fp_fn fn, void *ctx);

/* Visit every live writer entry under key overlapping fp; with
 * include_readers also every live reader entry overlapping fp. Dead entries
 * met on the way are dropped. A ref may be visited more than once (a task
 * that recorded several views). Returns 0, or the first nonzero visit result. */
int st_tmap_lookup(st_tensormap *m, const strata_buffer_id *key, const st_footprint *fp,
                   int include_readers, st_tmap_visit_fn visit, void *ctx);

/* Record a writer: first drop every entry (writer or reader) under key whose
 * footprint fp covers (and every dead one), then add it. STRATA_ENOMEM if
 * the map could not grow. */
int st_tmap_insert_writer(st_tensormap *m, const strata_buffer_id *key, const st_footprint *fp,
                          uint64_t ref, uint32_t argpos);

/* Record a reader; skipped if the same ref with an identical footprint is
 * already the newest reader. STRATA_ENOMEM if the map could not grow. */
int st_tmap_insert_reader(st_tensormap *m, const strata_buffer_id *key, const st_footprint *fp,
                          uint64_t ref, uint32_t argpos);

size_t st_tmap_live_entries(const st_tensormap *m); /* entries currently stored */
size_t st_tmap_live_keys(const st_tensormap *m);    /* buffer identities currently stored */

#endif
