/* chip/backend_loader.c - loading a device backend shared object.
 *
 * Owns: the five load failures with their messages (file missing, not a
 * shared object, entry point missing, ABI version mismatch, malformed
 * contract or table) and the "sim" name lookup.
 * Must never: call anything in a backend but its entry point, or leave a
 * library open after a failure.
 */
#include "chip/backend_loader.h"

#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "util/error.h"

#define ST_SIM_FILE "libstrata_sim.so"

/* Directory of the object this code is linked into (libstrata.so, or the
 * executable when linked statically). */
static int own_directory(char *out, size_t cap) {
    Dl_info info;
    if (dladdr((void *)&own_directory, &info) == 0 || !info.dli_fname)
        return -1;
    const char *slash = strrchr(info.dli_fname, '/');
    if (!slash)
        return -1;
    size_t len = (size_t)(slash - info.dli_fname);
    if (len + 1 > cap)
        return -1;
    memcpy(out, info.dli_fname, len);
    out[len] = '\0';
    return 0;
}

int st_backend_resolve(const char *name, char *out, size_t cap) {
    if (!name || !name[0])
        return st_fail(STRATA_EINVAL,
                       "backend name is empty: pass \"sim\" or the path of a backend .so");
    if (strcmp(name, "sim") != 0) {
        if ((size_t)snprintf(out, cap, "%s", name) >= cap)
            return st_fail(STRATA_EINVAL, "backend path '%.64s...' is longer than %zu bytes", name,
                           cap - 1);
        return STRATA_OK;
    }
    char dir[ST_BACKEND_PATH_MAX];
    if (own_directory(dir, sizeof dir) == 0 &&
        (size_t)snprintf(out, cap, "%s/%s", dir, ST_SIM_FILE) < cap && access(out, F_OK) == 0)
        return STRATA_OK;
#ifdef STRATA_SIM_BUILD_PATH
    if (access(STRATA_SIM_BUILD_PATH, F_OK) == 0) {
        snprintf(out, cap, "%s", STRATA_SIM_BUILD_PATH);
        return STRATA_OK;
    }
#endif
    snprintf(out, cap, "%s", ST_SIM_FILE); /* let the dynamic loader search */
    return STRATA_OK;
}

/* 1 if the file starts with an ELF header. */
static int has_elf_header(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f)
        return 0;
    unsigned char magic[4] = {0};
    size_t n = fread(magic, 1, sizeof magic, f);
    fclose(f);
    return n == 4 && magic[0] == 0x7f && magic[1] == 'E' && magic[2] == 'L' && magic[3] == 'F';
}

#define REQUIRE_FN(field)                                                                          \
    do {                                                                                           \
        if (!ops->field)                                                                           \
            return st_fail(STRATA_EABI,                                                            \
                           "backend '%s': malformed function table: '" #field                      \
                           "' is NULL (every function is required; rebuild the backend)",          \
                           label);                                                                 \
    } while (0)

int st_backend_check_table(const strata_backend_ops *ops, const char *label) {
    if (ops->abi_version != STRATA_BACKEND_ABI_VERSION)
        return st_fail(STRATA_EABI,
                       "backend '%s': its table declares ABI version %u but this strata loads "
                       "version %u: rebuild the backend against this strata",
                       label, ops->abi_version, STRATA_BACKEND_ABI_VERSION);
    if (ops->struct_size != sizeof(strata_backend_ops))
        return st_fail(STRATA_EABI,
                       "backend '%s': function table of %u bytes, this strata expects %zu: "
                       "rebuild the backend against this strata",
                       label, ops->struct_size, sizeof(strata_backend_ops));
    const strata_backend_contract *c = &ops->contract;
    if (c->abi_version != STRATA_BACKEND_ABI_VERSION || c->reserved != 0)
        return st_fail(STRATA_EABI,
                       "backend '%s': malformed contract: ABI version %u (expected %u), reserved "
                       "%u (must be 0)",
                       label, c->abi_version, STRATA_BACKEND_ABI_VERSION, c->reserved);
    if (c->pipeline_depth < 1 || c->pipeline_depth > STRATA_BACKEND_MAX_DEPTH)
        return st_fail(STRATA_EABI,
                       "backend '%s': malformed contract: pipeline depth %u (must be 1..%u)", label,
                       c->pipeline_depth, STRATA_BACKEND_MAX_DEPTH);
    if (c->concurrent_prepare > 1 || (c->concurrent_prepare && c->pipeline_depth < 2))
        return st_fail(STRATA_EABI,
                       "backend '%s': malformed contract: concurrent_prepare %u with pipeline "
                       "depth %u (concurrent prepare needs depth 2)",
                       label, c->concurrent_prepare, c->pipeline_depth);
    if (c->run_storage_bytes == 0 || c->run_storage_bytes > STRATA_NATIVE_RUN_BYTES)
        return st_fail(STRATA_EABI,
                       "backend '%s': malformed contract: run storage of %llu bytes (must be "
                       "1..%d)",
                       label, (unsigned long long)c->run_storage_bytes, STRATA_NATIVE_RUN_BYTES);
    if (!ops->name || !ops->name[0])
        return st_fail(STRATA_EABI, "backend '%s': malformed function table: no name", label);
    REQUIRE_FN(open);
    REQUIRE_FN(close);
    REQUIRE_FN(configure);
    REQUIRE_FN(mem_alloc);
    REQUIRE_FN(mem_free);
    REQUIRE_FN(copy_to);
    REQUIRE_FN(copy_from);
    REQUIRE_FN(committed_bytes);
    REQUIRE_FN(register_program);
    REQUIRE_FN(unregister_program);
    REQUIRE_FN(prepare);
    REQUIRE_FN(launch);
    REQUIRE_FN(poll);
    REQUIRE_FN(wait);
    REQUIRE_FN(finalize);
    return STRATA_OK;
}

static int handshake(strata_backend_entry_fn entry, const char *label, st_backend *out) {
    uint32_t theirs = 0;
    const strata_backend_ops *ops = entry(STRATA_BACKEND_ABI_VERSION, &theirs);
    if (!ops)
        return st_fail(STRATA_EABI,
                       "backend '%s' was built for backend ABI version %u but this strata loads "
                       "version %u: rebuild the backend against this strata",
                       label, theirs, STRATA_BACKEND_ABI_VERSION);
    STRATA_TRY(st_backend_check_table(ops, label));
    out->ops = ops;
    return STRATA_OK;
}

int st_backend_from_entry(strata_backend_entry_fn entry, const char *label, st_backend *out) {
    if (!entry || !out)
        return st_fail(STRATA_EINVAL, "backend entry point or output is NULL");
    memset(out, 0, sizeof *out);
    snprintf(out->path, sizeof out->path, "%s", label ? label : "(in-process)");
    int rc = handshake(entry, out->path, out);
    if (rc != STRATA_OK)
        memset(out, 0, sizeof *out);
    return rc;
}

int st_backend_load(const char *name_or_path, st_backend *out) {
    if (!out)
        return st_fail(STRATA_EINVAL, "backend output is NULL");
    memset(out, 0, sizeof *out);
    char path[ST_BACKEND_PATH_MAX];
    STRATA_TRY(st_backend_resolve(name_or_path, path, sizeof path));
    int searched = strchr(path, '/') == NULL;
    if (!searched && access(path, F_OK) != 0)
        return st_fail(STRATA_EINVAL,
                       "backend '%s': file not found (%s): set the chip config's backend to the "
                       "path of a built backend, or \"sim\"",
                       path, strerror(errno));
    if (!searched && !has_elf_header(path))
        return st_fail(STRATA_EINVAL,
                       "backend '%s': not a shared object (no ELF header): pass the path of the "
                       "backend's .so file",
                       path);
    dlerror();
    void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        const char *why = dlerror();
        return st_fail(STRATA_EINVAL, "backend '%s': cannot be loaded as a shared object: %s%s",
                       path, why ? why : "unknown dlopen error",
                       searched ? " (searched the dynamic loader's path; pass a full path)" : "");
    }
    dlerror();
    void *sym = dlsym(lib, STRATA_BACKEND_ENTRY_SYMBOL);
    if (!sym) {
        dlclose(lib);
        return st_fail(STRATA_EABI,
                       "backend '%s': entry point '%s' missing: not a strata backend, or built "
                       "against another strata (rebuild it)",
                       path, STRATA_BACKEND_ENTRY_SYMBOL);
    }
    strata_backend_entry_fn entry;
    memcpy(&entry, &sym, sizeof entry); /* dlsym yields a data pointer */
    snprintf(out->path, sizeof out->path, "%s", path);
    int rc = handshake(entry, path, out);
    if (rc != STRATA_OK) {
        dlclose(lib);
        memset(out, 0, sizeof *out);
        return rc;
    }
    out->lib = lib;
    return STRATA_OK;
}

void st_backend_unload(st_backend *b) {
    if (!b)
        return;
    if (b->lib)
        dlclose(b->lib);
    memset(b, 0, sizeof *b);
}
