/* ipc/shm_region.c - shared-memory regions mapped before a fork.
 *
 * Owns: the name counter, shm_open (O_CREAT | O_EXCL | O_RDWR, mode 0600,
 * fchmod'ed to 0600 whatever the umask), ftruncate, the MAP_SHARED mapping
 * (util/alloc.h's st_map_fd: counted with the other mappings and subject to
 * the allocation-failure hook) and the unlink that follows at once.
 * Must never: return from st_shm_create with the name still in /dev/shm, or
 * from any call with a descriptor open, on any path; reuse a name that exists
 * (O_EXCL: a stale one fails loudly).
 */
#include "ipc/shm_region.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/alloc.h"
#include "util/checked.h"
#include "util/error.h"

static _Atomic uint64_t shm_counter; /* the <counter> of the names, per process */

static int fail_errno(int status, const char *what, const char *step, const char *name, int err) {
    return st_fail(status, "shared region %s: %s %s: %s", what, step, name, strerror(err));
}

/* Create and map a new object of `bytes` (rounded up to a page) under a
 * fresh name; the name is left in place (name, *fd: the caller unlinks and
 * closes). STRATA_OK, or an error with a message and nothing left behind. */
static int create_mapped(const char *w, size_t bytes, char name[ST_SHM_NAME_MAX], int *fd_out,
                         st_shm *out) {
    long page = sysconf(_SC_PAGESIZE);
    uint64_t rounded;
    if (page <= 0 || !st_round_up_u64(bytes, (uint64_t)page, &rounded) ||
        rounded > (uint64_t)SIZE_MAX || rounded > (uint64_t)INT64_MAX)
        return st_fail(STRATA_EINVAL, "shared region %s: %zu bytes cannot be mapped", w, bytes);
    snprintf(name, ST_SHM_NAME_MAX, "/" ST_SHM_NAME_PREFIX "%ld-%llu", (long)getpid(),
             (unsigned long long)atomic_fetch_add(&shm_counter, 1));
    int fd = shm_open(name, O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0600);
    if (fd < 0) {
        int err = errno;
        return fail_errno(err == EEXIST || err == EACCES || err == EINVAL ? STRATA_EINVAL
                                                                          : STRATA_ENOMEM,
                          w, "cannot create", name, err);
    }
    int rc = STRATA_OK;
    if (fchmod(fd, 0600) != 0)
        rc = fail_errno(STRATA_EINVAL, w, "cannot set mode 0600 on", name, errno);
    else if (ftruncate(fd, (off_t)rounded) != 0)
        rc = st_fail(STRATA_ENOMEM, "shared region %s: cannot size %s to %llu bytes: %s", w, name,
                     (unsigned long long)rounded, strerror(errno));
    void *base = NULL;
    if (rc == STRATA_OK) {
        base = st_map_fd((size_t)rounded, fd);
        if (!base)
            rc = st_fail_nomem(w, (size_t)rounded);
    }
    if (rc != STRATA_OK) {
        shm_unlink(name);
        close(fd);
        return rc;
    }
    *fd_out = fd;
    out->base = base;
    out->bytes = (size_t)rounded;
    return STRATA_OK;
}

static const char *what_or_unnamed(const char *what) {
    return what ? what : "(unnamed)";
}

/* Every call leaves *out empty unless it succeeds. */
static void clear_region(st_shm *out) {
    if (out) {
        out->base = NULL;
        out->bytes = 0;
    }
}

int st_shm_create_observed(const char *what, size_t bytes, st_shm *out,
                           st_shm_observer before_unlink, void *ctx) {
    const char *w = what_or_unnamed(what);
    clear_region(out);
    if (!out || bytes == 0)
        return st_fail(STRATA_EINVAL, "shared region %s: %s", w,
                       out ? "size 0" : "no region to fill (NULL)");
    char name[ST_SHM_NAME_MAX];
    int fd = -1;
    int rc = create_mapped(w, bytes, name, &fd, out);
    if (rc != STRATA_OK)
        return rc;
    if (before_unlink)
        before_unlink(fd, name, ctx);
    shm_unlink(name); /* every path: no name outlives this call */
    close(fd);
    return STRATA_OK;
}

int st_shm_publish(const char *what, size_t bytes, st_shm *out, char name[ST_SHM_NAME_MAX]) {
    const char *w = what_or_unnamed(what);
    clear_region(out);
    if (name)
        name[0] = '\0';
    if (!out || !name || bytes == 0)
        return st_fail(STRATA_EINVAL, "shared region %s: %s", w,
                       !out || !name ? "no region or name to fill (NULL)" : "size 0");
    int fd = -1;
    int rc = create_mapped(w, bytes, name, &fd, out);
    if (rc != STRATA_OK) {
        name[0] = '\0';
        return rc;
    }
    close(fd); /* the mapping and the name keep the object */
    return STRATA_OK;
}

int st_shm_attach(const char *what, const char *name, size_t bytes, st_shm *out) {
    const char *w = what_or_unnamed(what);
    clear_region(out);
    if (!out || !name || bytes == 0)
        return st_fail(STRATA_EINVAL, "shared region %s: %s", w,
                       !out || !name ? "no region or name (NULL)" : "size 0");
    if (strncmp(name, "/" ST_SHM_NAME_PREFIX, strlen("/" ST_SHM_NAME_PREFIX)) != 0)
        return st_fail(STRATA_EINVAL, "shared region %s: '%s' is not a name of strata's", w, name);
    int fd = shm_open(name, O_RDWR | O_CLOEXEC, 0);
    if (fd < 0)
        return fail_errno(STRATA_EINVAL, w, "cannot open", name, errno);
    struct stat st;
    int rc = STRATA_OK;
    if (fstat(fd, &st) != 0)
        rc = fail_errno(STRATA_EINVAL, w, "cannot stat", name, errno);
    else if (st.st_size < 0 || (uint64_t)st.st_size < (uint64_t)bytes)
        rc = st_fail(STRATA_EINVAL, "shared region %s: %s holds %lld bytes, not %zu", w, name,
                     (long long)st.st_size, bytes);
    void *base = NULL;
    if (rc == STRATA_OK) {
        base = st_map_fd((size_t)st.st_size, fd);
        if (!base)
            rc = st_fail_nomem(w, (size_t)st.st_size);
    }
    close(fd);
    if (rc != STRATA_OK)
        return rc;
    out->base = base;
    out->bytes = (size_t)st.st_size;
    return STRATA_OK;
}

void st_shm_withdraw(const char *name) {
    if (name && name[0])
        shm_unlink(name);
}

int st_shm_create(const char *what, size_t bytes, st_shm *out) {
    return st_shm_create_observed(what, bytes, out, NULL, NULL);
}

void st_shm_destroy(st_shm *r) {
    if (!r || !r->base)
        return;
    st_unmap(r->base, r->bytes);
    r->base = NULL;
    r->bytes = 0;
}
