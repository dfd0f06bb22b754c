/* tests/unit/test_shm_region.c - shared-memory regions (ipc/shm_region.h).
 *
 * Owns: that the object is created with mode 0600 (checked with fstat while
 * it still exists, through st_shm_create_observed, even under umask 0), that
 * its name follows "/strata-<pid>-<counter>" and is gone from /dev/shm as
 * soon as st_shm_create returns (on success and on failure), that the region
 * is zero-filled, page-rounded and shared with a forked child both ways, and
 * that mappings are accounted (st_alloc_live_maps) and destroy is idempotent.
 * The named kind (st_shm_publish / st_shm_attach / st_shm_withdraw, for
 * processes that share no fork): the name stays with mode 0600 until
 * withdrawn, an attach maps the same memory, attach refuses a foreign name,
 * a short region and missing arguments, and a failed publish leaves nothing.
 * Must never: leave a name of this process in /dev/shm (checked at the end).
 * Forks: no TSan label.
 */
#include <dirent.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "test_support.h"

#include "ipc/child_process.h"
#include "ipc/shm_region.h"
#include "util/alloc.h"
#include "util/clock.h"

typedef struct observed {
    int calls;
    mode_t mode;
    off_t size;
    int existed; /* the name was in /dev/shm while observed */
    char name[64];
} observed;

static void observe(int fd, const char *name, void *ctx) {
    observed *o = ctx;
    struct stat st;
    o->calls++;
    snprintf(o->name, sizeof o->name, "%s", name);
    if (fstat(fd, &st) == 0) {
        o->mode = st.st_mode & 07777;
        o->size = st.st_size;
    }
    char path[96];
    snprintf(path, sizeof path, "/dev/shm%s", name);
    o->existed = stat(path, &st) == 0;
}

static int name_exists(const char *name) {
    char path[96];
    struct stat st;
    snprintf(path, sizeof path, "/dev/shm%s", name);
    return stat(path, &st) == 0;
}

/* Names of this process's regions left in /dev/shm. */
static int my_names_left(void) {
    char prefix[48];
    snprintf(prefix, sizeof prefix, ST_SHM_NAME_PREFIX "%ld-", (long)getpid());
    DIR *d = opendir("/dev/shm");
    if (!d)
        return 0;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
        n += strncmp(e->d_name, prefix, strlen(prefix)) == 0;
    closedir(d);
    return n;
}

static void the_object_is_0600_and_its_name_is_gone_at_once(void **state) {
    (void)state;
    mode_t old = umask(0); /* a permissive umask must not widen the mode */
    observed o = {0};
    st_shm r;
    int64_t maps = st_alloc_live_maps();
    assert_ok(st_shm_create_observed("region test", 5000, &r, observe, &o));
    umask(old);
    assert_int_equal(o.calls, 1);
    assert_int_equal(o.mode, 0600);
    assert_true(o.existed);
    char prefix[48];
    snprintf(prefix, sizeof prefix, "/" ST_SHM_NAME_PREFIX "%ld-", (long)getpid());
    assert_memory_equal(o.name, prefix, strlen(prefix));
    assert_false(name_exists(o.name)); /* unlinked before create returned */
    long page = sysconf(_SC_PAGESIZE);
    assert_int_equal(r.bytes % (size_t)page, 0);
    assert_true(r.bytes >= 5000 && r.bytes < 5000 + (size_t)page);
    assert_int_equal(o.size, (off_t)r.bytes);
    assert_int_equal(st_alloc_live_maps(), maps + 1);
    const unsigned char *p = r.base;
    for (size_t i = 0; i < r.bytes; i++)
        if (p[i] != 0)
            fail_msg("byte %zu is %u, not zero", i, p[i]);
    st_shm_destroy(&r);
    assert_null(r.base);
    st_shm_destroy(&r); /* idempotent */
    st_shm_destroy(NULL);
    assert_int_equal(st_alloc_live_maps(), maps);
}

static void names_are_unique_within_a_process(void **state) {
    (void)state;
    observed a = {0}, b = {0};
    st_shm ra, rb;
    assert_ok(st_shm_create_observed("region a", 1, &ra, observe, &a));
    assert_ok(st_shm_create_observed("region b", 1, &rb, observe, &b));
    assert_string_not_equal(a.name, b.name);
    assert_ptr_not_equal(ra.base, rb.base);
    st_shm_destroy(&ra);
    st_shm_destroy(&rb);
}

static int child_reads_and_writes(void *arg) {
    volatile uint64_t *w = arg;
    if (w[0] != 0x1234)
        return 3;
    w[1] = 0x5678;
    return 0;
}

static void the_mapping_is_shared_across_fork(void **state) {
    (void)state;
    st_shm r;
    assert_ok(st_shm_create("region test", 4096, &r));
    volatile uint64_t *w = r.base;
    w[0] = 0x1234;
    st_child c;
    assert_ok(st_child_spawn(&c, "region child", child_reads_and_writes, r.base));
    assert_int_equal(st_child_reap(&c, st_deadline_after(10 * TS_SEC)), 1);
    assert_string_equal(c.why, "exited with status 0");
    assert_int_equal(w[1], 0x5678);
    st_shm_destroy(&r);
}

static void failures_are_named_and_leave_nothing(void **state) {
    (void)state;
    st_shm r = {(void *)1, 1};
    assert_fails(STRATA_EINVAL, "region test: size 0", st_shm_create("region test", 0, &r));
    assert_null(r.base);
    assert_fails(STRATA_EINVAL, "cannot be mapped", st_shm_create("region test", SIZE_MAX, &r));
    int64_t maps = st_alloc_live_maps();
    observed o = {0};
    st_alloc_fail_after(1, ST_ALLOC_FAIL_ONCE, ST_ALLOC_THIS_THREAD);
    st_clear_error();
    int rc = st_shm_create_observed("region test", 4096, &r, observe, &o);
    st_alloc_hook_off();
    assert_int_equal(rc, STRATA_ENOMEM);
    assert_message_mentions("region test");
    assert_int_equal(st_alloc_failed(), 1);
    assert_int_equal(o.calls, 0);
    assert_null(r.base);
    assert_int_equal(st_alloc_live_maps(), maps);
    assert_int_equal(my_names_left(), 0);
}

/* The named kind (for processes that share no fork): the name stays, with
 * mode 0600, until withdrawn; a second mapping by name is the same memory. */
static void a_published_region_is_found_by_name_until_withdrawn(void **state) {
    (void)state;
    st_shm pub, att;
    char name[ST_SHM_NAME_MAX];
    assert_ok(st_shm_publish("region test", 100, &pub, name));
    assert_true(name_exists(name));
    char path[96];
    struct stat st;
    snprintf(path, sizeof path, "/dev/shm%s", name);
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(st.st_mode & 07777, 0600);
    assert_ok(st_shm_attach("region test", name, 100, &att));
    assert_ptr_not_equal(att.base, pub.base);
    assert_int_equal(att.bytes, pub.bytes);
    volatile uint32_t *a = pub.base, *b = att.base;
    a[3] = 0xabcd;
    assert_int_equal(b[3], 0xabcd);
    b[5] = 0x1234;
    assert_int_equal(a[5], 0x1234);
    st_shm_withdraw(name);
    assert_false(name_exists(name));
    assert_int_equal(a[3], 0xabcd); /* the mappings outlive the name */
    st_shm_destroy(&att);
    assert_fails(STRATA_EINVAL, "cannot open", st_shm_attach("region test", name, 100, &att));
    assert_null(att.base);
    st_shm_withdraw(name); /* a name already gone, "" and NULL: no-ops */
    st_shm_withdraw("");
    st_shm_withdraw(NULL);
    st_shm_destroy(&pub);
}

static void attach_refuses_what_it_should_not_map(void **state) {
    (void)state;
    st_shm pub, att = {(void *)1, 1};
    char name[ST_SHM_NAME_MAX];
    assert_ok(st_shm_publish("region test", 4096, &pub, name));
    assert_fails(STRATA_EINVAL, "not 8192", st_shm_attach("region test", name, 8192, &att));
    assert_null(att.base);
    assert_fails(STRATA_EINVAL, "not a name of strata's",
                 st_shm_attach("region test", "/other", 1, &att));
    assert_fails(STRATA_EINVAL, "size 0", st_shm_attach("region test", name, 0, &att));
    assert_fails(STRATA_EINVAL, "(NULL)", st_shm_attach("region test", NULL, 1, &att));
    st_shm_withdraw(name);
    st_shm_destroy(&pub);
    int64_t maps = st_alloc_live_maps();
    assert_int_equal(my_names_left(), 0);
    /* a publish that fails leaves no name, no mapping, and an empty name */
    st_alloc_fail_after(1, ST_ALLOC_FAIL_ONCE, ST_ALLOC_THIS_THREAD);
    int rc = st_shm_publish("region test", 4096, &pub, name);
    st_alloc_hook_off();
    assert_int_equal(rc, STRATA_ENOMEM);
    assert_string_equal(name, "");
    assert_null(pub.base);
    assert_int_equal(st_alloc_live_maps(), maps);
    assert_int_equal(my_names_left(), 0);
    assert_fails(STRATA_EINVAL, "size 0", st_shm_publish("region test", 0, &pub, name));
    assert_fails(STRATA_EINVAL, "(NULL)", st_shm_publish("region test", 1, &pub, NULL));
    assert_int_equal(my_names_left(), 0);
}

static void no_name_is_left_behind(void **state) {
    (void)state;
    assert_int_equal(my_names_left(), 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(the_object_is_0600_and_its_name_is_gone_at_once),
        cmocka_unit_test(names_are_unique_within_a_process),
        cmocka_unit_test(the_mapping_is_shared_across_fork),
        cmocka_unit_test(failures_are_named_and_leave_nothing),
        cmocka_unit_test(a_published_region_is_found_by_name_until_withdrawn),
        cmocka_unit_test(attach_refuses_what_it_should_not_map),
        cmocka_unit_test(no_name_is_left_behind),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
