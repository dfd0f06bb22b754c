/* core/tensormap.c - buffer identity -> writer / reader entries.
 *
 * Owns: three arrays. slots[] is an open-addressing index (linear probing,
 * load <= 1/2, backward-shift deletion); a slot whose epoch is not the map's
 * epoch is empty, so reset is one increment. keys[] is the dense array of
 * the run's keys (each knows its slot, so sweeps and rehashes walk keys, not
 * the table). pool[] holds the entries, singly linked per list, newest
 * first; freed entries go on a free list, and reset simply rewinds the pool.
 * Must never: lock, or allocate except to grow an array by doubling.
 *
 * Dead entries (alive fn says 0) are dropped whenever a walk meets them, and
 * by a sweep over keys[] whenever nentries + nkeys doubles since the last
 * sweep; the sweep also forgets keys left without entries. IN lookups walk
 * the writer list only.
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
    if (m->nkeys == m->keys_cap) {
        st_tmap_key *nk = st_grow(m->keys, &m->keys_cap, m->nkeys + 1, sizeof *nk, 1, NULL,
                                  "the tensor map's keys");
        if (!nk)
            return ST_TMAP_NIL;
        m->keys = nk;
    }
    st_tmap_slot *s = &m->slots[pos];
    s->key = *key;
    s->epoch = m->epoch;
    s->rec = r = m->nkeys++;
    m->nused++;
    st_tmap_key *k = &m->keys[r];
    k->slot = pos;
    k->writers = k->readers = ST_TMAP_NIL;
    k->nwriters = k->nreaders = 0;
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
    uint32_t last = --m->nkeys;
    if (r != last) {
        m->keys[r] = m->keys[last];
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

/* Drop the dead entries of one list (and, with cover != NULL, those cover covers). */
static void prune(st_tensormap *m, uint32_t *head, uint32_t *count, const st_footprint *cover) {
    uint32_t *link = head;
    while (*link != ST_TMAP_NIL) {
        uint32_t e = *link;
        st_tmap_entry *en = &m->pool[e];
        if (is_dead(m, en->ref) || (cover && entry_covered(m, e, cover))) {
            *link = en->next;
            free_entry(m, e);
            (*count)--;
        } else {
            link = &en->next;
        }
    }
}

static void sweep(st_tensormap *m) {
    /* downwards: remove_key moves an already swept record into the hole */
    for (uint32_t r = m->nkeys; r-- > 0;) {
        st_tmap_key *k = &m->keys[r];
        prune(m, &k->writers, &k->nwriters, NULL);
        prune(m, &k->readers, &k->nreaders, NULL);
        if (k->writers == ST_TMAP_NIL && k->readers == ST_TMAP_NIL)
            remove_key(m, r);
    }
    size_t items = m->nentries + m->nkeys;
    m->sweep_at = items * 2 > TMAP_SWEEP_MIN ? items * 2 : TMAP_SWEEP_MIN;
}

static inline void maybe_sweep(st_tensormap *m) {
    if (m->nentries + m->nkeys >= m->sweep_at)
        sweep(m);
}

static int scan(st_tensormap *m, uint32_t *head, uint32_t *count, const st_footprint *fp,
                st_tmap_visit_fn visit, void *ctx) {
    uint32_t *link = head;
    while (*link != ST_TMAP_NIL) {
        uint32_t e = *link;
        st_tmap_entry *en = &m->pool[e];
        /* Disjoint byte ranges first: the cheap test spares the liveness check
         * (a slot access) for the many tiles of one buffer that cannot
         * matter; dead ones among them go at the next prune or sweep. */
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

/* ---- public operations ------------------------------------------------------ */

int st_tmap_lookup(st_tensormap *m, const strata_buffer_id *key, const st_footprint *fp,
                   int include_readers, st_tmap_visit_fn visit, void *ctx) {
    uint32_t pos = 0;
    uint32_t r = find(m, key, &pos);
    if (r == ST_TMAP_NIL)
        return 0;
    st_tmap_key *k = &m->keys[r];
    int rc = scan(m, &k->writers, &k->nwriters, fp, visit, ctx);
    if (rc == 0 && include_readers)
        rc = scan(m, &k->readers, &k->nreaders, fp, visit, ctx);
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

int st_tmap_insert_writer(st_tensormap *m, const strata_buffer_id *key, const st_footprint *fp,
                          uint64_t ref, uint32_t argpos) {
    uint32_t r = get_or_create(m, key);
    if (r == ST_TMAP_NIL)
        return STRATA_ENOMEM;
    st_tmap_key *k = &m->keys[r];
    prune(m, &k->writers, &k->nwriters, fp);
    prune(m, &k->readers, &k->nreaders, fp);
    uint32_t e = alloc_entry(m);
    if (e == ST_TMAP_NIL)
        return STRATA_ENOMEM;
    k = &m->keys[r];
    push(m, &k->writers, &k->nwriters, e, fp, ref, argpos);
    maybe_sweep(m);
    return STRATA_OK;
}

int st_tmap_insert_reader(st_tensormap *m, const strata_buffer_id *key, const st_footprint *fp,
                          uint64_t ref, uint32_t argpos) {
    uint32_t r = get_or_create(m, key);
    if (r == ST_TMAP_NIL)
        return STRATA_ENOMEM;
    st_tmap_key *k = &m->keys[r];
    while (k->readers != ST_TMAP_NIL && is_dead(m, m->pool[k->readers].ref)) {
        uint32_t e = k->readers;
        k->readers = m->pool[e].next;
        k->nreaders--;
        free_entry(m, e);
    }
    if (k->readers != ST_TMAP_NIL) {
        const st_tmap_entry *newest = &m->pool[k->readers];
        int same =
            newest->ref == ref && newest->lo == fp->lo && newest->hi == fp->hi &&
            (m->fp_fn ? newest->argpos == argpos : st_footprint_equal(&m->fps[k->readers], fp));
        if (same)
            return STRATA_OK;
    }
    uint32_t e = alloc_entry(m);
    if (e == ST_TMAP_NIL)
        return STRATA_ENOMEM;
    k = &m->keys[r];
    push(m, &k->readers, &k->nreaders, e, fp, ref, argpos);
    maybe_sweep(m);
    return STRATA_OK;
}
