/* chip/backend_loader.h - loading a device backend shared object.
 *
 * Owns: resolving a backend name ("sim") or path to a file, dlopen, the
 * entry-point handshake (ABI version) and the validation of the contract and
 * function table a backend returns.
 * Must never: hand out a table that failed validation, or keep a library
 * loaded after a failed load; every failure names the file and the cause.
 */
#ifndef STRATA_CHIP_BACKEND_LOADER_H
#define STRATA_CHIP_BACKEND_LOADER_H

#include <stddef.h>

#include "strata/backend.h"

#define ST_BACKEND_PATH_MAX 512

typedef struct st_backend {
    void *lib;                      /* dlopen handle; NULL for an in-process table */
    const strata_backend_ops *ops;  /* validated table */
    char path[ST_BACKEND_PATH_MAX]; /* the file it came from, or the in-process label */
} st_backend;

/* Resolve "sim" (next to libstrata, then this build tree, then the loader's
 * search path) or pass a path through. */
int st_backend_resolve(const char *name_or_path, char *out, size_t cap);

/* Load, handshake and validate. On failure *out is left empty. */
int st_backend_load(const char *name_or_path, st_backend *out);

/* Handshake and validate an entry point linked into the process (tests). */
int st_backend_from_entry(strata_backend_entry_fn entry, const char *label, st_backend *out);

/* Validate a table as the loader would (label names it in messages). */
int st_backend_check_table(const strata_backend_ops *ops, const char *label);

/* dlclose (if loaded) and clear. Safe on an empty backend. */
void st_backend_unload(st_backend *b);

#endif
