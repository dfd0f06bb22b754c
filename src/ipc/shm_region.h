/* ipc/shm_region.h - a shared-memory region a parent maps before it forks.
 *
 * Owns: creating a named POSIX shared-memory object with mode 0600 and
 * O_EXCL (a stale name fails loudly instead of being reused), mapping it
 * MAP_SHARED, and unlinking the name at once: every process of the worker
 * maps it by inheriting the mapping across fork, so no name is left behind
 * even if every process is killed. Names are "/strata-<pid>-<counter>".
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
