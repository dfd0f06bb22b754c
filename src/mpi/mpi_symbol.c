/* mpi/mpi_symbol.c - a function's address across ranks (mpi/mpi_symbol.h).
 *
 * Owns: the walk over the loaded objects (dl_iterate_phdr) that finds the
 * object holding an address and an object's base, and the dladdr check of a
 * resolution.
 * Must never: hand out an address it could not place in the named object.
 */
#include <dlfcn.h>
#include <link.h>
#include <stdio.h>
#include <string.h>

#include "mpi/mpi_symbol.h"
#include "strata/status.h"
#include "util/error.h"

typedef struct walk {
    uintptr_t addr;   /* find the object holding it (0: find by name) */
    const char *name; /* or the object of this name */
    int found;
    char object[ST_SYM_PATH_MAX];
    uintptr_t base, end;
} walk;

static int visit(struct dl_phdr_info *info, size_t size, void *arg) {
    (void)size;
    walk *w = arg;
    uintptr_t lo = UINTPTR_MAX, hi = 0;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_LOAD)
            continue;
        uintptr_t a = (uintptr_t)info->dlpi_addr + ph->p_vaddr;
        if (a < lo)
            lo = a;
        if (a + ph->p_memsz > hi)
            hi = a + ph->p_memsz;
    }
    const char *name = info->dlpi_name ? info->dlpi_name : "";
    int match = w->addr ? (w->addr >= lo && w->addr < hi) : strcmp(name, w->name) == 0;
    if (!match)
        return 0;
    w->found = 1;
    snprintf(w->object, sizeof w->object, "%s", name);
    w->base = lo;
    w->end = hi;
    return 1;
}

int st_symbol_name(const void *p, st_symbol_ref *out) {
    memset(out, 0, sizeof *out);
    walk w = {.addr = (uintptr_t)p};
    dl_iterate_phdr(visit, &w);
    if (!w.found)
        return st_fail(STRATA_EINVAL, "the function at %p lies in no loaded object", p);
    snprintf(out->object, sizeof out->object, "%s", w.object);
    out->offset = (uint64_t)((uintptr_t)p - w.base);
    Dl_info di;
    if (dladdr(p, &di) && di.dli_sname && di.dli_saddr == p)
        snprintf(out->symbol, sizeof out->symbol, "%s", di.dli_sname);
    return STRATA_OK;
}

int st_symbol_resolve(const st_symbol_ref *ref, void **out) {
    walk w = {.name = ref->object};
    dl_iterate_phdr(visit, &w);
    const char *obj = ref->object[0] ? ref->object : "the main program";
    if (!w.found)
        return st_fail(STRATA_EINVAL, "%s is not loaded on this rank", obj);
    if (ref->offset >= (uint64_t)(w.end - w.base))
        return st_fail(STRATA_EINVAL, "offset 0x%llx lies past %s on this rank",
                       (unsigned long long)ref->offset, obj);
    void *p = (void *)(w.base + (uintptr_t)ref->offset);
    if (ref->symbol[0]) {
        Dl_info di;
        if (!dladdr(p, &di) || !di.dli_sname || strcmp(di.dli_sname, ref->symbol) != 0)
            return st_fail(STRATA_EINVAL,
                           "offset 0x%llx of %s is not '%s' on this rank (not the same binary?)",
                           (unsigned long long)ref->offset, obj, ref->symbol);
    }
    *out = p;
    return STRATA_OK;
}
