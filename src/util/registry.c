/* util/registry.c - a registry of named entries (see registry.h).
 *
 * Owns: id assignment (the lowest free id, else the next new one, published
 * by a release store of `count`), the name checks, the capacity error.
 * Must never: allocate, lock, or write an entry a lock-free reader may
 * already see (a new id is filled before `count` covers it).
 */
#include "util/registry.h"

#include <string.h>

#include "strata/status.h"
#include "util/assert.h"
#include "util/error.h"

void st_registry_init(st_registry *r, st_registry_entry *entries, uint32_t capacity,
                      const char *kind, const char *scope) {
    memset(entries, 0, (size_t)capacity * sizeof *entries);
    r->entries = entries;
    r->capacity = capacity;
    atomic_init(&r->count, 0);
    r->kind = kind;
    r->scope = scope;
}

int32_t st_registry_find(const st_registry *r, const char *name) {
    uint32_t n = st_registry_count(r);
    for (uint32_t i = 0; i < n; i++)
        if (r->entries[i].name && strcmp(r->entries[i].name, name) == 0)
            return (int32_t)i;
    return -1;
}

/* The lowest id no entry holds, or `count` (a new id) if every one is held. */
static uint32_t free_id(const st_registry *r, uint32_t count) {
    for (uint32_t i = 0; i < count; i++)
        if (!r->entries[i].name)
            return i;
    return count;
}

int st_registry_add(st_registry *r, const char *name, void *payload, const char *what,
                    int32_t *id) {
    ST_ASSERT(name && payload, "a registry entry needs a name and a payload");
    if (st_registry_find(r, name) >= 0)
        return st_fail(STRATA_EINVAL, "%s: %s '%s' is already registered", what, r->kind, name);
    uint32_t n = st_registry_count(r);
    uint32_t i = free_id(r, n);
    if (i >= r->capacity)
        return st_fail(STRATA_ECAPACITY, "%s: at most %u %ss per %s", what, r->capacity, r->kind,
                       r->scope);
    r->entries[i] = (st_registry_entry){.name = name, .payload = payload};
    if (i == n) /* publish: a reader that sees the new count sees the entry */
        atomic_store_explicit(&r->count, n + 1, memory_order_release);
    *id = (int32_t)i;
    return STRATA_OK;
}

void *st_registry_remove(st_registry *r, int32_t id) {
    void *payload = st_registry_get(r, id);
    if (payload)
        r->entries[id] = (st_registry_entry){0};
    return payload;
}
