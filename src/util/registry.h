/* util/registry.h - a registry of named entries: unique name -> dense id,
 * each with a payload pointer.
 *
 * Owns: the one registry strata has (a worker's callables, a chip's
 * programs): unique names, ids from 0 up to a fixed capacity (the lowest free
 * id is reused after a removal), lookup by id and by name, the capacity and
 * duplicate errors, and the publication that lets readers look an id up
 * without the owner's lock.
 * Must never: allocate (the owner hands it the entry storage), take a lock
 * (the owner serialises every call but st_registry_get), or own a name or a
 * payload (both belong to the owner, which keeps them valid while
 * registered).
 *
 * Lock-free readers: an entry is written before the release store that
 * publishes its id (`count`), and st_registry_get loads `count` with acquire,
 * so a reader that sees an id sees its entry. A removed id may be reused, so
 * st_registry_remove is only for owners whose readers all hold its lock (a
 * chip's programs); an append-only registry (a worker's callables) may be
 * read from any thread.
 */
#ifndef STRATA_UTIL_REGISTRY_H
#define STRATA_UTIL_REGISTRY_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

typedef struct st_registry_entry {
    const char *name; /* the payload's own copy of its name; NULL: a free id */
    void *payload;
} st_registry_entry;

typedef struct st_registry {
    st_registry_entry *entries; /* `capacity` of them, owned by the registry's owner */
    uint32_t capacity;
    _Atomic uint32_t count; /* ids handed out so far, free ones included: readers' bound */
    const char *kind;       /* what an entry is, in messages: "callable", "program" */
    const char *scope;      /* what holds the registry, in messages: "worker", "chip" */
} st_registry;

/* An empty registry over `entries` (zeroed here). */
void st_registry_init(st_registry *r, st_registry_entry *entries, uint32_t capacity,
                      const char *kind, const char *scope);

/* Register payload (not NULL) under name (owner's lock held); *id is its id. Errors,
 * prefixed with `what`: STRATA_EINVAL "<kind> '<name>' is already
 * registered", STRATA_ECAPACITY "at most <capacity> <kind>s per <scope>". */
int st_registry_add(st_registry *r, const char *name, void *payload, const char *what, int32_t *id);

/* Free id (owner's lock held, no lock-free readers); returns its payload, or
 * NULL if id is not registered. */
void *st_registry_remove(st_registry *r, int32_t id);

/* The id registered under name, or -1 (owner's lock held). */
int32_t st_registry_find(const st_registry *r, const char *name);

/* Ids below this were handed out (some may be free again). */
static inline uint32_t st_registry_count(const st_registry *r) {
    return atomic_load_explicit(&((st_registry *)r)->count, memory_order_acquire);
}

/* The payload of id, or NULL if id is not registered. Any thread when the
 * registry is append-only; see the top of this file. */
static inline void *st_registry_get(const st_registry *r, int32_t id) {
    return id >= 0 && (uint32_t)id < st_registry_count(r) ? r->entries[id].payload : NULL;
}

/* The payload of an id already checked with st_registry_get by a thread
 * ordered before this one (e.g. through a lock both took): no bound check. */
static inline void *st_registry_at(const st_registry *r, int32_t id) {
    return r->entries[id].payload;
}

#endif
