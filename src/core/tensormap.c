/* core/tensormap.c - buffer identity -> writer / reader entries.
 *
 * Owns: slots[], an open-addressing index (linear probing, load <= 1/2,
 * backward-shift deletion); a slot whose epoch is not the map's epoch is
 * empty, so reset is one increment. keys[], the dense array of the run's
 * keys (each knows its slot, so sweeps and rehashes walk keys, not the
 * table), and parallel to it grids[], each key's grid and cell array (below).
 * pool[] holds the entries, singly linked per list, newest first; freed
 * entries go on a free list, and reset simply rewinds the pool.
 * Must never: lock, or allocate except to grow an array by doubling.
 *
 * Cells: a buffer's first entries sit in its general lists, which every
 * lookup walks. When ST_TMAP_GRID_AFTER of them have gathered, the buffer gets a
 * grid: the cell size and phase under which most of its newest entries lie
 * inside one cell (the tile size of a tiled buffer; for 2-D tiles of a
 * matrix, a row of tiles; see choose_grid). From then on an entry whose
 * byte range lies inside one cell of the grid is kept in that cell's lists,
 * and a lookup, prune or insert walks only the cells its own range meets, so
 * its cost follows the tiles a task touches, not the tiles alive in the
 * buffer. Entries no cell holds (views spanning cells: a whole-buffer view,
 * strided views over many tiles, irregular ranges) stay in the general
 * lists, which are walked as before; general entries are offered to the
 * cells again whenever their number doubles, and a buffer whose cells are
 * all empty at that point chooses its grid anew. The cell array is indexed
 * from the phase, grows by doubling and only as far as TMAP_CELLS_MIN or 4
 * cells per entry of the buffer (further cells: general lists), so a tile
 * far into a huge buffer cannot cost memory. Cell arrays stay with their key
 * record's index across runs (reset costs nothing; no allocation once warm).
 *
 * Dead entries (alive fn says 0) are dropped whenever a walk meets them, and
 * by a sweep over keys[] (and their cells) whenever nentries + nkeys + cells
 * doubles since the last sweep; the sweep also forgets keys left without
 * entries. IN lookups walk the writer lists only.
 */
#include "core/tensormap.h"

#include <stdlib.h>
#include <string.h>

#include "util/alloc.h"
#include "util/error.h"
#include "util/growable.h"

#define TMAP_INIT_SLOTS 1024u /* power of two */
#define TMAP_INIT_KEYS 512u
#define TMAP_INIT_ENTRIES 1024u
#define TMAP_SWEEP_MIN 1024u
#define TMAP_CELLS_MIN 16384u /* cells a buffer may always have (128 KiB) */
#define TMAP_CELLS_MAX (1u << 30)
#define TMAP_NO_SHIFT 0xffu /* grid is not a power of two: divide */

static inline uint64_t fmix64(uint64_t x) {
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ull;
    x ^= x >> 33;
    return x;
}

static inline uint64_t key_hash(const strata_buffer_id *k) {
    uint64_t g = ((uint64_t)k->generation << 32) | (uint32_t)k->owner;
    return fmix64(k->id ^ (g * 0x9e3779b97f4a7c15ull));
}

static inline int key_eq(const strata_buffer_id *a, const strata_buffer_id *b) {
    return a->id == b->id && a->generation == b->generation && a->owner == b->owner;
}

static int init_failed(st_tensormap *m, const char *what, size_t bytes) {
    st_tmap_destroy(m);
    return st_fail_nomem(what, bytes);
}

int st_tmap_init(st_tensormap *m) {
    memset(m, 0, sizeof *m);
    if (!(m->slots = st_calloc(TMAP_INIT_SLOTS, sizeof *m->slots)))
        return init_failed(m, "the tensor map's index", TMAP_INIT_SLOTS * sizeof *m->slots);
    if (!(m->keys = st_malloc(TMAP_INIT_KEYS * sizeof *m->keys)))
        return init_failed(m, "the tensor map's keys", TMAP_INIT_KEYS * sizeof *m->keys);
    if (!(m->grids = st_calloc(TMAP_INIT_KEYS, sizeof *m->grids)))
        return init_failed(m, "the tensor map's grids", TMAP_INIT_KEYS * sizeof *m->grids);
    if (!(m->pool = st_malloc(TMAP_INIT_ENTRIES * sizeof *m->pool)))
        return init_failed(m, "the tensor map's entries", TMAP_INIT_ENTRIES * sizeof *m->pool);
    m->cap = TMAP_INIT_SLOTS;
    m->epoch = 1;
    m->keys_cap = TMAP_INIT_KEYS;
    m->pool_cap = TMAP_INIT_ENTRIES;
    m->free_head = ST_TMAP_NIL;
    m->sweep_at = TMAP_SWEEP_MIN;
    return STRATA_OK;
}

void st_tmap_destroy(st_tensormap *m) {
    for (uint32_t r = 0; m->grids && r < m->keys_cap; r++)
        st_free(m->grids[r].cells);
    st_free(m->grids);
    st_free(m->slots);
    st_free(m->keys);
    st_free(m->pool);
    st_free(m->fps);
    memset(m, 0, sizeof *m);
}

void st_tmap_reset(st_tensormap *m) {
    if (++m->epoch == 0) { /* once every 2^32 runs: forget the stale stamps */
        memset(m->slots, 0, (size_t)m->cap * sizeof *m->slots);
        m->epoch = 1;
    }
    m->nused = 0;
    m->nkeys = 0;
    m->ncells = 0;
    m->pool_used = 0;
    m->free_head = ST_TMAP_NIL;
    m->nentries = 0;
    m->sweep_at = TMAP_SWEEP_MIN;
}

void st_tmap_set_alive_fn(st_tensormap *m, st_tmap_alive_fn fn, void *ctx) {
    m->alive = fn;
    m->alive_ctx = ctx;
}

void st_tmap_set_fp_fn(st_tensormap *m, st_tmap_fp_fn fn, void *ctx) {
    m->fp_fn = fn;
    m->fp_ctx = ctx;
}

size_t st_tmap_live_entries(const st_tensormap *m) {
    return m->nentries;
}

size_t st_tmap_live_keys(const st_tensormap *m) {
    return m->nkeys;
}

/* ---- index ------------------------------------------------------------------ */

/* Record of key, or NIL. *pos: the empty slot that ended the probe. */
static inline uint32_t find(const st_tensormap *m, const strata_buffer_id *key, uint32_t *pos) {
    uint32_t mask = m->cap - 1;
    uint32_t i = (uint32_t)key_hash(key) & mask;
    for (;;) {
        const st_tmap_slot *s = &m->slots[i];
        if (s->epoch != m->epoch) {
            *pos = i;
            return ST_TMAP_NIL;
        }
        if (key_eq(&s->key, key))
            return s->rec;
        i = (i + 1) & mask;
    }
}

/* Rebuild the index with newcap slots. */
static int rehash(st_tensormap *m, uint32_t newcap) {
    st_tmap_slot *ns = st_calloc(newcap, sizeof *ns); /* epoch 0: all empty */
    if (!ns)
        return st_fail_nomem("growing the tensor map's index", (size_t)newcap * sizeof *ns);
    uint32_t mask = newcap - 1;
    for (uint32_t r = 0; r < m->nkeys; r++) {
        const st_tmap_slot *old = &m->slots[m->keys[r].slot];
        uint32_t i = (uint32_t)key_hash(&old->key) & mask;
        while (ns[i].epoch == m->epoch)
            i = (i + 1) & mask;
        ns[i].key = old->key;
        ns[i].epoch = m->epoch;
        ns[i].rec = r;
        m->keys[r].slot = i;
    }
    st_free(m->slots);
    m->slots = ns;
    m->cap = newcap;
    m->nused = m->nkeys;
    return STRATA_OK;
}

/* keys[] and grids[] grow together; new grids have no cells. */
static int grow_keys(st_tensormap *m) {
    uint32_t cap = m->keys_cap, gcap = m->keys_cap;
    st_tmap_grid *ng =
        st_grow(m->grids, &gcap, m->nkeys + 1, sizeof *ng, 1, NULL, "the tensor map's grids");
    if (!ng)
        return STRATA_ENOMEM;
    memset(ng + m->keys_cap, 0, (size_t)(gcap - m->keys_cap) * sizeof *ng);
    m->grids = ng;
    st_tmap_key *nk = st_grow(m->keys, &cap, gcap, sizeof *nk, 1, NULL, "the tensor map's keys");
    if (!nk)
        return STRATA_ENOMEM; /* grids grew, keys_cap did not: harmless */
    m->keys = nk;
    m->keys_cap = cap;
    return STRATA_OK;
}

/* Record of key, created (with empty lists) if absent. NIL on ENOMEM. */
static uint32_t get_or_create(st_tensormap *m, const strata_buffer_id *key) {
    uint32_t pos = 0;
    uint32_t r = find(m, key, &pos);
    if (r != ST_TMAP_NIL)
        return r;
    if ((uint64_t)(m->nused + 1) * 2 > m->cap) { /* load stays <= 1/2 */
        if (m->cap >= (1u << 31)) {
            st_fail(STRATA_ENOMEM, "tensor map is full");
            return ST_TMAP_NIL;
        }
        if (rehash(m, m->cap * 2) != STRATA_OK)
            return ST_TMAP_NIL;
        find(m, key, &pos);
    }
    if (m->nkeys == m->keys_cap && grow_keys(m) != STRATA_OK)
        return ST_TMAP_NIL;
    st_tmap_slot *s = &m->slots[pos];
    s->key = *key;
    s->epoch = m->epoch;
    s->rec = r = m->nkeys++;
    m->nused++;
    st_tmap_key *k = &m->keys[r];
    k->slot = pos;
    k->general.writers = k->general.readers = ST_TMAP_NIL;
    k->ngeneral = k->ncelled = 0;
    k->migrate_at = ST_TMAP_GRID_AFTER;
    k->gridded = 0; /* grids[r] is read only once set (it is cold) */
    return r;
}

/* Forget key record r (its lists must be empty). Empties its slot by
 * backward-shift deletion (no tombstones: probe paths stay short) and moves
 * the last record into r. */
static void remove_key(st_tensormap *m, uint32_t r) {
    uint32_t mask = m->cap - 1;
    uint32_t hole = m->keys[r].slot;
    for (uint32_t j = (hole + 1) & mask; m->slots[j].epoch == m->epoch; j = (j + 1) & mask) {
        uint32_t home = (uint32_t)key_hash(&m->slots[j].key) & mask;
        /* the entry at j may move to the hole unless its home lies in (hole, j] */
        if (((j - home) & mask) >= ((j - hole) & mask)) {
            m->slots[hole] = m->slots[j];
            m->keys[m->slots[hole].rec].slot = hole;
            hole = j;
        }
    }
    m->slots[hole].epoch = m->epoch - 1; /* any other stamp means empty (epoch is never 0) */
    m->nused--;
    if (m->keys[r].gridded)
        m->ncells -= m->grids[r].ncells;
    uint32_t last = --m->nkeys;
    if (r != last) { /* the grids swap places: each cell array stays owned by one record */
        st_tmap_grid g = m->grids[r];
        m->keys[r] = m->keys[last];
        m->grids[r] = m->grids[last];
        m->grids[last] = g;
        m->slots[m->keys[r].slot].rec = r;
    }
}

/* ---- entries ---------------------------------------------------------------- */

static uint32_t alloc_entry(st_tensormap *m) {
    uint32_t e = m->free_head;
    if (e != ST_TMAP_NIL) {
        m->free_head = m->pool[e].next;
        return e;
    }
    if (m->pool_used == m->pool_cap) {
        /* Entries and (without a footprint callback) their footprints grow
         * together: pool_cap counts both. */
        uint32_t pool_cap = m->pool_cap, fps_cap = m->pool_cap;
        st_tmap_entry *np = st_grow(m->pool, &pool_cap, m->pool_used + 1, sizeof *np, 1, NULL,
                                    "the tensor map's entries");
        if (!np)
            return ST_TMAP_NIL;
        m->pool = np;
        if (!m->fp_fn) {
            st_footprint *nf = st_grow(m->fps, &fps_cap, pool_cap, sizeof *nf, 1, NULL,
                                       "the tensor map's footprints");
            if (!nf)
                return ST_TMAP_NIL; /* pool grew, pool_cap did not: harmless */
            m->fps = nf;
        }
        m->pool_cap = pool_cap;
    }
    if (!m->fp_fn && !m->fps) {
        m->fps = st_malloc((size_t)m->pool_cap * sizeof *m->fps);
        if (!m->fps) {
            st_fail_nomem("the tensor map's footprints", (size_t)m->pool_cap * sizeof *m->fps);
            return ST_TMAP_NIL;
        }
    }
    return m->pool_used++;
}

static inline void free_entry(st_tensormap *m, uint32_t e) {
    m->pool[e].ref = 0;
    m->pool[e].next = m->free_head;
    m->free_head = e;
    m->nentries--;
}

static inline int is_dead(const st_tensormap *m, uint64_t ref) {
    return m->alive && !m->alive(m->alive_ctx, ref);
}

/* The full footprint of live entry e: stored, or rebuilt from its task. */
static const st_footprint *entry_fp(const st_tensormap *m, uint32_t e, st_footprint *tmp) {
    const st_tmap_entry *en = &m->pool[e];
    if (!m->fp_fn)
        return &m->fps[e];
    if (en->argpos == ST_TMAP_WHOLE)
        st_footprint_whole(en->hi, tmp);
    else
        m->fp_fn(m->fp_ctx, en->ref, en->argpos, tmp);
    return tmp;
}

/* Whether live entry e's bytes meet fp's: byte ranges answer when both views
 * are dense (every byte of a range touched); otherwise the full test. */
static int entry_overlaps(const st_tensormap *m, uint32_t e, const st_footprint *fp) {
    const st_tmap_entry *en = &m->pool[e];
    if (en->hi <= fp->lo || fp->hi <= en->lo)
        return 0;
    if (en->dense && fp->dense)
        return 1;
    st_footprint tmp;
    return st_footprint_overlap(entry_fp(m, e, &tmp), fp);
}

/* Whether cover touches every byte live entry e touches: a dense cover only
 * needs the entry's range inside its own (a view touches its first and last
 * byte). */
static int entry_covered(const st_tensormap *m, uint32_t e, const st_footprint *cover) {
    const st_tmap_entry *en = &m->pool[e];
    if (en->lo == en->hi)
        return 1;
    if (cover->dense)
        return en->lo >= cover->lo && en->hi <= cover->hi;
    if (en->lo < cover->lo || en->hi > cover->hi)
        return 0;
    st_footprint tmp;
    return st_footprint_covers(cover, entry_fp(m, e, &tmp));
}

/* Drop the dead entries of one list (and, with cover != NULL, those cover
 * covers); *count is the number of entries of the lists it belongs to. */
static void prune(st_tensormap *m, uint32_t *head, uint32_t *count, const st_footprint *cover) {
    uint32_t *link = head;
    while (*link != ST_TMAP_NIL) {
        uint32_t e = *link;
        st_tmap_entry *en = &m->pool[e];
        m->walked++;
        if (is_dead(m, en->ref) || (cover && entry_covered(m, e, cover))) {
            *link = en->next;
            free_entry(m, e);
            (*count)--;
        } else {
            link = &en->next;
        }
    }
}

/* ---- cells ------------------------------------------------------------------ */

static inline st_tmap_grid *grid_of(const st_tensormap *m, const st_tmap_key *k) {
    return &m->grids[k - m->keys];
}

/* The cell holding byte `off` (off >= phase). */
static inline uint64_t cell_at(const st_tmap_grid *g, uint64_t off) {
    uint64_t rel = off - g->phase;
    return g->shift != TMAP_NO_SHIFT ? rel >> g->shift : rel / g->grid;
}

/* The valid cells [*c0, *c1] of k whose entries may meet the byte range
 * [lo, hi); NULL if there are none, else the cells. */
static inline st_tmap_lists *cell_span(const st_tensormap *m, const st_tmap_key *k, uint64_t lo,
                                       uint64_t hi, uint32_t *c0, uint32_t *c1) {
    if (!k->gridded)
        return NULL;
    const st_tmap_grid *g = grid_of(m, k);
    if (hi <= lo || hi <= g->phase)
        return NULL;
    uint64_t a = lo < g->phase ? 0 : cell_at(g, lo);
    if (a >= g->ncells)
        return NULL;
    uint64_t b = cell_at(g, hi - 1);
    *c0 = (uint32_t)a;
    *c1 = b < g->ncells ? (uint32_t)b : g->ncells - 1;
    return g->cells;
}

/* Make cells [0, c] valid if the buffer's entries allow that many: 1 if
 * they are, 0 if not allowed (the entry stays general), -1 (ENOMEM reported)
 * if the array could not grow. */
static int grow_cells(st_tensormap *m, const st_tmap_key *k, st_tmap_grid *g, uint64_t c) {
    uint64_t allowed = 4 * ((uint64_t)k->ngeneral + k->ncelled + 1);
    allowed = allowed < TMAP_CELLS_MIN ? TMAP_CELLS_MIN : allowed;
    allowed = allowed > TMAP_CELLS_MAX ? TMAP_CELLS_MAX : allowed;
    if (c >= allowed)
        return 0;
    uint64_t want = 2 * (uint64_t)g->ncells < allowed ? 2 * (uint64_t)g->ncells : allowed;
    uint32_t n = (uint32_t)(want > c + 1 ? want : c + 1);
    if (n > g->cells_cap) {
        st_tmap_lists *nc =
            st_grow(g->cells, &g->cells_cap, n, sizeof *nc, 64, NULL, "the tensor map's cells");
        if (!nc)
            return -1;
        g->cells = nc;
    }
    memset(g->cells + g->ncells, 0xff, (size_t)(n - g->ncells) * sizeof *g->cells); /* NIL */
    m->ncells += n - g->ncells;
    g->ncells = n;
    return 1;
}

/* *cell: the cell that wholly holds the byte range [lo, hi), made valid if
 * needed; NIL when none does (no grid, an empty range, a range across cells,
 * or too far into the buffer). STRATA_ENOMEM if the cells could not grow. */
static inline int home_cell(st_tensormap *m, const st_tmap_key *k, uint64_t lo, uint64_t hi,
                            uint32_t *cell) {
    *cell = ST_TMAP_NIL;
    if (!k->gridded)
        return STRATA_OK;
    st_tmap_grid *g = grid_of(m, k);
    if (hi <= lo || lo < g->phase)
        return STRATA_OK;
    uint64_t c = cell_at(g, lo);
    if (cell_at(g, hi - 1) != c)
        return STRATA_OK;
    if (c >= g->ncells) {
        int grown = grow_cells(m, k, g, c);
        if (grown <= 0)
            return grown < 0 ? STRATA_ENOMEM : STRATA_OK;
    }
    *cell = (uint32_t)c;
    return STRATA_OK;
}

/* How well (grid, phase) spreads the n nonempty ranges [lo, hi): the cells
 * holding at least one of them wholly, then how many it holds (one cell
 * holding them all would spare no lookup anything). */
static uint32_t grid_score(const uint64_t *lo, const uint64_t *hi, uint32_t n, uint64_t grid,
                           uint64_t phase) {
    uint64_t cell[ST_TMAP_GRID_AFTER];
    uint32_t held = 0, distinct = 0;
    for (uint32_t i = 0; i < n; i++) {
        if (lo[i] < phase || (lo[i] - phase) / grid != (hi[i] - 1 - phase) / grid)
            continue;
        uint64_t c = (lo[i] - phase) / grid;
        uint32_t seen = 0;
        for (uint32_t j = 0; j < held && !seen; j++)
            seen = cell[j] == c;
        distinct += !seen;
        cell[held++] = c;
    }
    return distinct * (ST_TMAP_GRID_AFTER + 1) + held;
}

static int seen_before(const uint64_t *v, uint32_t n, uint64_t x) {
    for (uint32_t i = 0; i < n; i++)
        if (v[i] == x)
            return 1;
    return 0;
}

/* The bytes from live strided entry e's first element to the same element
 * one step along its outermost axis past the view: a row of 2-D tiles of a
 * matrix (the tiles below start there). 0 for a dense or dead entry. */
static uint64_t outer_period(const st_tensormap *m, uint32_t e) {
    if (m->pool[e].dense || is_dead(m, m->pool[e].ref))
        return 0;
    st_footprint tmp;
    const st_footprint *f = entry_fp(m, e, &tmp);
    int outer = -1;
    for (int a = 0; a < f->rank; a++)
        if (f->shape[a] > 1 && (outer < 0 || f->strides[a] > f->strides[outer]))
            outer = a;
    uint64_t period;
    if (outer < 0 ||
        __builtin_mul_overflow((uint64_t)f->shape[outer], (uint64_t)f->strides[outer], &period) ||
        __builtin_mul_overflow(period, (uint64_t)f->elem, &period))
        return 0;
    return period;
}

static uint64_t pow2_at_least(uint64_t x) {
    return x > (1ull << 63) ? x : x <= 1 ? 1 : 1ull << (64 - __builtin_clzll(x - 1));
}

/* The grid of a buffer whose cells are empty, from its newest general
 * entries: among their byte spans, those spans rounded up to a power of two
 * and, for strided entries, their outer period (a 2-D tile of a matrix spans
 * a little less than its row of tiles), each phased on one of the entries,
 * the grid that spreads them best (grid_score; ties: the finer grid). Each
 * distinct (grid, phase) is scored once: one or two scores for tiles of one
 * size, at most 3 * ST_TMAP_GRID_AFTER^2 of them, once per doubling of the
 * general lists and only while no cell holds an entry. */
static void choose_grid(st_tensormap *m, st_tmap_key *k) {
    uint64_t lo[ST_TMAP_GRID_AFTER], hi[ST_TMAP_GRID_AFTER], cand[3 * ST_TMAP_GRID_AFTER];
    uint32_t n = 0, ncand = 0;
    uint32_t heads[2] = {k->general.writers, k->general.readers};
    for (int l = 0; l < 2; l++)
        for (uint32_t e = heads[l]; e != ST_TMAP_NIL && n < ST_TMAP_GRID_AFTER; e = m->pool[e].next)
            if (m->pool[e].hi > m->pool[e].lo) {
                lo[n] = m->pool[e].lo;
                hi[n] = m->pool[e].hi;
                cand[ncand++] = hi[n] - lo[n];
                cand[ncand++] = pow2_at_least(hi[n] - lo[n]);
                uint64_t period = outer_period(m, e);
                if (period > hi[n] - lo[n])
                    cand[ncand++] = period;
                n++;
            }
    uint64_t best_grid = 0, best_phase = 0, grids[3 * ST_TMAP_GRID_AFTER],
             phases[ST_TMAP_GRID_AFTER];
    uint32_t best_score = 0, ngrids = 0;
    for (uint32_t i = 0; i < ncand; i++) {
        uint64_t grid = cand[i];
        if (seen_before(grids, ngrids, grid))
            continue; /* tiles of one size: one or two candidates */
        grids[ngrids++] = grid;
        uint32_t nphases = 0;
        for (uint32_t j = 0; j < n; j++) {
            uint64_t phase = lo[j] % grid;
            if (seen_before(phases, nphases, phase))
                continue;
            phases[nphases++] = phase;
            uint32_t score = grid_score(lo, hi, n, grid, phase);
            if (score > best_score || (score == best_score && grid < best_grid)) {
                best_score = score;
                best_grid = grid;
                best_phase = phase;
            }
        }
    }
    if (!best_score)
        return; /* no nonempty entry: no grid yet */
    st_tmap_grid *g = grid_of(m, k);
    if (!k->gridded)
        g->ncells = 0; /* the cells the record's previous keys left are stale */
    k->gridded = 1;
    g->grid = best_grid;
    g->phase = best_phase;
    g->shift = TMAP_NO_SHIFT;
    if ((best_grid & (best_grid - 1)) == 0)
        g->shift = (uint8_t)__builtin_ctzll(best_grid);
}

/* Move the entries of one general list that a cell holds into that cell's
 * list of the same kind (`readers` says which), keeping newest first, and
 * drop the dead ones. Once the cells fail to grow the rest stay general
 * (every entry is still in exactly one list) and STRATA_ENOMEM is returned. */
static int migrate_list(st_tensormap *m, st_tmap_key *k, int readers) {
    int rc = STRATA_OK;
    uint32_t *head = readers ? &k->general.readers : &k->general.writers;
    uint32_t rev = ST_TMAP_NIL; /* the list reversed: oldest first */
    for (uint32_t e = *head, next; e != ST_TMAP_NIL; e = next) {
        next = m->pool[e].next;
        m->pool[e].next = rev;
        rev = e;
    }
    *head = ST_TMAP_NIL;
    for (uint32_t e = rev, next; e != ST_TMAP_NIL; e = next) {
        st_tmap_entry *en = &m->pool[e];
        next = en->next;
        if (is_dead(m, en->ref)) {
            free_entry(m, e);
            k->ngeneral--;
            continue;
        }
        uint32_t c = ST_TMAP_NIL;
        if (rc == STRATA_OK)
            rc = home_cell(m, k, en->lo, en->hi, &c);
        uint32_t *to = head;
        if (c != ST_TMAP_NIL) {
            st_tmap_lists *cell = &grid_of(m, k)->cells[c];
            to = readers ? &cell->readers : &cell->writers;
            k->ngeneral--;
            k->ncelled++;
        }
        en->next = *to;
        *to = e;
    }
    return rc;
}

/* Once the general entries have doubled: a grid if the cells are empty, then
 * every general entry a cell holds moves there. Amortised O(1) an entry.
 * STRATA_ENOMEM if the cells could not grow (the map stays consistent). */
static int migrate(st_tensormap *m, st_tmap_key *k) {
    int rc = STRATA_OK;
    if (k->ncelled == 0)
        choose_grid(m, k);
    if (k->gridded) {
        rc = migrate_list(m, k, 0);
        int rc2 = migrate_list(m, k, 1);
        rc = rc ? rc : rc2;
    }
    uint64_t next = 2 * (uint64_t)k->ngeneral;
    k->migrate_at = next < ST_TMAP_GRID_AFTER ? ST_TMAP_GRID_AFTER
                    : next > UINT32_MAX       ? UINT32_MAX
                                              : (uint32_t)next;
    return rc;
}

/* Drop the entries of key k that cover covers (and the dead ones met):
 * the general lists, and the cells cover's range meets. */
static inline void prune_lists(st_tensormap *m, st_tmap_lists *l, uint32_t *count,
                               const st_footprint *cover) {
    if (l->writers != ST_TMAP_NIL)
        prune(m, &l->writers, count, cover);
    if (l->readers != ST_TMAP_NIL)
        prune(m, &l->readers, count, cover);
}

static inline void prune_covered(st_tensormap *m, st_tmap_key *k, const st_footprint *cover) {
    prune_lists(m, &k->general, &k->ngeneral, cover);
    uint32_t c0 = 0, c1 = 0;
    st_tmap_lists *cells = cell_span(m, k, cover->lo, cover->hi, &c0, &c1);
    for (uint32_t c = c0; cells && c <= c1; c++)
        prune_lists(m, &cells[c], &k->ncelled, cover);
}

/* ---- sweeps ----------------------------------------------------------------- */

static void sweep(st_tensormap *m) {
    /* downwards: remove_key moves an already swept record into the hole */
    for (uint32_t r = m->nkeys; r-- > 0;) {
        st_tmap_key *k = &m->keys[r];
        prune_lists(m, &k->general, &k->ngeneral, NULL);
        const st_tmap_grid *g = &m->grids[r];
        for (uint32_t c = 0; k->ncelled && c < g->ncells; c++)
            prune_lists(m, &g->cells[c], &k->ncelled, NULL);
        if (k->ngeneral == 0 && k->ncelled == 0)
            remove_key(m, r);
    }
    size_t items = m->nentries + m->nkeys + m->ncells;
    m->sweep_at = items * 2 > TMAP_SWEEP_MIN ? items * 2 : TMAP_SWEEP_MIN;
}

static inline void maybe_sweep(st_tensormap *m) {
    if (m->nentries + m->nkeys + m->ncells >= m->sweep_at)
        sweep(m);
}

/* ---- lookups ---------------------------------------------------------------- */

static int scan(st_tensormap *m, uint32_t *head, uint32_t *count, const st_footprint *fp,
                st_tmap_visit_fn visit, void *ctx) {
    uint32_t *link = head;
    while (*link != ST_TMAP_NIL) {
        uint32_t e = *link;
        st_tmap_entry *en = &m->pool[e];
        m->walked++;
        /* Disjoint byte ranges first: the cheap test spares the liveness check
         * (a slot access) for entries that cannot matter; dead ones among
         * them go at the next prune or sweep. */
        if (en->hi <= fp->lo || fp->hi <= en->lo) {
            link = &en->next;
            continue;
        }
        if (is_dead(m, en->ref)) {
            *link = en->next;
            free_entry(m, e);
            (*count)--;
            continue;
        }
        if (entry_overlaps(m, e, fp)) {
            int rc = visit(ctx, en->ref);
            if (rc)
                return rc;
        }
        link = &en->next;
    }
    return 0;
}

/* Empty lists (most cells, most general lists of a tiled buffer) cost no call. */
static inline int scan_lists(st_tensormap *m, st_tmap_lists *l, uint32_t *count,
                             const st_footprint *fp, int include_readers, st_tmap_visit_fn visit,
                             void *ctx) {
    int rc = 0;
    if (l->writers != ST_TMAP_NIL)
        rc = scan(m, &l->writers, count, fp, visit, ctx);
    if (rc == 0 && include_readers && l->readers != ST_TMAP_NIL)
        rc = scan(m, &l->readers, count, fp, visit, ctx);
    return rc;
}

/* ---- public operations ------------------------------------------------------ */

int st_tmap_lookup(st_tensormap *m, const strata_buffer_id *key, const st_footprint *fp,
                   int include_readers, st_tmap_visit_fn visit, void *ctx) {
    if (fp->hi <= fp->lo)
        return 0; /* a view without bytes meets nothing */
    uint32_t pos = 0;
    uint32_t r = find(m, key, &pos);
    if (r == ST_TMAP_NIL)
        return 0;
    st_tmap_key *k = &m->keys[r];
    int rc = scan_lists(m, &k->general, &k->ngeneral, fp, include_readers, visit, ctx);
    uint32_t c0 = 0, c1 = 0;
    st_tmap_lists *cells = rc ? NULL : cell_span(m, k, fp->lo, fp->hi, &c0, &c1);
    for (uint32_t c = c0; cells && c <= c1 && rc == 0; c++)
        rc = scan_lists(m, &cells[c], &k->ncelled, fp, include_readers, visit, ctx);
    return rc;
}

static void push(st_tensormap *m, uint32_t *head, uint32_t *count, uint32_t e,
                 const st_footprint *fp, uint64_t ref, uint32_t argpos) {
    st_tmap_entry *en = &m->pool[e];
    en->ref = ref;
    en->lo = fp->lo;
    en->hi = fp->hi;
    en->argpos = argpos;
    en->dense = fp->dense;
    if (!m->fp_fn)
        m->fps[e] = *fp;
    en->next = *head;
    *head = e;
    (*count)++;
    m->nentries++;
}

/* Before an insert into k (so that a failure leaves nothing half done):
 * the migration, when due; then *l: the lists a new entry of fp's range goes
 * to, and *count theirs. STRATA_ENOMEM if the cells could not grow. */
static inline int home_lists(st_tensormap *m, st_tmap_key *k, const st_footprint *fp,
                             st_tmap_lists **l, uint32_t **count) {
    if (k->ngeneral >= k->migrate_at)
        STRATA_TRY(migrate(m, k));
    uint32_t c;
    STRATA_TRY(home_cell(m, k, fp->lo, fp->hi, &c));
    if (c == ST_TMAP_NIL) {
        *count = &k->ngeneral;
        *l = &k->general;
    } else {
        *count = &k->ncelled;
        *l = &grid_of(m, k)->cells[c];
    }
    return STRATA_OK;
}

int st_tmap_insert_writer(st_tensormap *m, const strata_buffer_id *key, const st_footprint *fp,
                          uint64_t ref, uint32_t argpos) {
    if (fp->hi <= fp->lo)
        return STRATA_OK; /* writes no byte: nothing will wait for it */
    uint32_t r = get_or_create(m, key);
    if (r == ST_TMAP_NIL)
        return STRATA_ENOMEM;
    st_tmap_key *k = &m->keys[r];
    prune_covered(m, k, fp);
    st_tmap_lists *l;
    uint32_t *count;
    STRATA_TRY(home_lists(m, k, fp, &l, &count));
    uint32_t e = alloc_entry(m);
    if (e == ST_TMAP_NIL)
        return STRATA_ENOMEM;
    push(m, &l->writers, count, e, fp, ref, argpos);
    maybe_sweep(m); /* may move k */
    return STRATA_OK;
}

int st_tmap_insert_reader(st_tensormap *m, const strata_buffer_id *key, const st_footprint *fp,
                          uint64_t ref, uint32_t argpos) {
    if (fp->hi <= fp->lo)
        return STRATA_OK; /* reads no byte: no writer will wait for it */
    uint32_t r = get_or_create(m, key);
    if (r == ST_TMAP_NIL)
        return STRATA_ENOMEM;
    st_tmap_key *k = &m->keys[r];
    st_tmap_lists *l;
    uint32_t *count;
    STRATA_TRY(home_lists(m, k, fp, &l, &count));
    while (l->readers != ST_TMAP_NIL && is_dead(m, m->pool[l->readers].ref)) {
        uint32_t e = l->readers;
        l->readers = m->pool[e].next;
        (*count)--;
        free_entry(m, e);
    }
    /* An identical newest reader of the same lists: an identical reader would
     * live in the same lists, so this is never weaker than the buffer's
     * newest reader. */
    if (l->readers != ST_TMAP_NIL) {
        const st_tmap_entry *newest = &m->pool[l->readers];
        int same =
            newest->ref == ref && newest->lo == fp->lo && newest->hi == fp->hi &&
            (m->fp_fn ? newest->argpos == argpos : st_footprint_equal(&m->fps[l->readers], fp));
        if (same)
            return STRATA_OK;
    }
    uint32_t e = alloc_entry(m);
    if (e == ST_TMAP_NIL)
        return STRATA_ENOMEM;
    push(m, &l->readers, count, e, fp, ref, argpos);
    maybe_sweep(m); /* may move k */
    return STRATA_OK;
}
