/* ipc/shm_region.h - a shared-memory region a parent maps before it forks.
 *
 * Owns: creating a named POSIX shared-memory object with mode 0600 and
 * O_EXCL (a stale name fails loudly instead of being reused), mapping it
 * MAP_SHARED, and unlinking the name at once: every process of the worker
 * maps it by inheriting the mapping across fork, so no name is left behind
 * even if every process is killed. Names are "/strata-<pid>-<counter>".
 * Regions of processes that share no fork (the MPI ranks of one host) are
 * found by name instead: st_shm_publish leaves the name in place until the
 * publisher's st_shm_withdraw, which it makes as soon as every process has
 * attached (or failed to).
 * Must never: leave a name in /dev/shm past st_shm_create's return, or be
 * used for memory a child creates after the fork (the parent could not map it).
 */
#ifndef STRATA_IPC_SHM_REGION_H
#define STRATA_IPC_SHM_REGION_H

#include <stddef.h>

typedef struct st_shm {
    void *base;
    size_t bytes;
} st_shm;

/* Create, map and unlink a zero-filled region of `bytes` (rounded up to a
 * page). `what` names it in messages. STRATA_OK, or STRATA_ENOMEM /
 * STRATA_EINVAL with a message. */
int st_shm_create(const char *what, size_t bytes, st_shm *out);

/* The longest name st_shm_create and st_shm_publish make, its NUL included. */
#define ST_SHM_NAME_MAX 64

/* A region for processes that share no fork: create and map it as
 * st_shm_create does, but leave its name (written to `name`) in /dev/shm for
 * st_shm_attach in the others. The publisher must st_shm_withdraw(name) on
 * every path once they have attached. On failure nothing is left and name
 * is "". */
int st_shm_publish(const char *what, size_t bytes, st_shm *out, char name[ST_SHM_NAME_MAX]);
/* Map a region another process published, of at least `bytes` (its whole
 * size is mapped). Only names with strata's prefix are opened. */
int st_shm_attach(const char *what, const char *name, size_t bytes, st_shm *out);
/* Remove a published name ("" and NULL are no-ops); the mappings stay. */
void st_shm_withdraw(const char *name);

/* Unmap (NULL base is a no-op; idempotent). */
void st_shm_destroy(st_shm *r);

/* Tests only: st_shm_create that calls before_unlink(fd, name, ctx) once the
 * region is mapped, while the name still exists and the descriptor is open
 * (test_shm_region.c checks the mode with fstat there). Nothing else is
 * different; the observer must not close fd. */
typedef void (*st_shm_observer)(int fd, const char *name, void *ctx);
int st_shm_create_observed(const char *what, size_t bytes, st_shm *out,
                           st_shm_observer before_unlink, void *ctx);

/* The prefix of every name st_shm_create makes ("/strata-"): the tests
 * check /dev/shm holds none once they finish. */
#define ST_SHM_NAME_PREFIX "strata-"

#endif
