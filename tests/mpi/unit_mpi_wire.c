/* tests/mpi/unit_mpi_wire.c - the MPI layer's pieces that need no second
 * rank: frame headers (every field both ways, each refusal of the checked
 * decode), placements, which bytes of a tensor travel (tags, contiguity,
 * packing a strided view without touching anything else), rank 0's copy
 * directory (exact views, overlap), naming a function across ranks, and
 * the polling back-off's schedule (poll windows, sleep share and cap).
 * Run once, without mpirun (tests/CMakeLists.txt); a build without MPI
 * compiles it with MT_NO_MPI and it reports itself skipped.
 */
#include <stdint.h>
#include <string.h>

#include "mpi_test.h"

#ifdef MT_NO_MPI
int main(void) {
    mt_skip_without_mpi();
    return MT_SKIP;
}
#else

#include "mpi/mpi_directory.h"
#include "mpi/mpi_env.h"
#include "mpi/mpi_frame.h"
#include "mpi/mpi_symbol.h"
#include "mpi/mpi_xfer.h"
#include "util/clock.h"

static void headers(void) {
    st_mpi_hdr h, g;
    st_mpi_hdr_init(&h, ST_MPI_DONE, 7);
    h.status = STRATA_ETASK;
    h.seq = 0x0102030405060708ull;
    h.slot = 1;
    h.body_bytes = 3;
    h.arg0 = 0xfffefdfcfbfaf9f8ull;
    h.arg1 = 42;
    uint8_t m[ST_MPI_HDR_BYTES + 3] = {0};
    st_mpi_hdr_put(m, &h);
    MT_CHECK(m[0] == 'S' && m[1] == 'T' && m[2] == 'M' && m[3] == 'P', "magic bytes first");
    char why[256];
    MT_OK(st_mpi_hdr_get(m, sizeof m, &g, why, sizeof why));
    MT_CHECK(memcmp(&h, &g, sizeof h) == 0, "every field survives the round trip");

    MT_CHECK(st_mpi_hdr_get(m, ST_MPI_HDR_BYTES - 1, &g, why, sizeof why) == STRATA_EINVAL &&
                 strstr(why, "shorter"),
             "a short frame: %s", why);
    MT_CHECK(st_mpi_hdr_get(m, sizeof m - 1, &g, why, sizeof why) == STRATA_EINVAL &&
                 strstr(why, "body"),
             "a body length the message does not have: %s", why);
    uint8_t bad[sizeof m];
    memcpy(bad, m, sizeof m);
    bad[0] ^= 1;
    MT_CHECK(st_mpi_hdr_get(bad, sizeof bad, &g, why, sizeof why) == STRATA_EINVAL &&
                 strstr(why, "magic"),
             "bad magic: %s", why);
    memcpy(bad, m, sizeof m);
    bad[4] = 2;
    MT_CHECK(st_mpi_hdr_get(bad, sizeof bad, &g, why, sizeof why) == STRATA_EINVAL &&
                 strstr(why, "version 2"),
             "another protocol version: %s", why);
    for (int type = 0; type <= ST_MPI_TYPE_END; type += ST_MPI_TYPE_END) {
        memcpy(bad, m, sizeof m);
        bad[6] = (uint8_t)type;
        bad[7] = 0;
        MT_CHECK(st_mpi_hdr_get(bad, sizeof bad, &g, why, sizeof why) == STRATA_EINVAL &&
                     strstr(why, "unknown frame type"),
                 "type %d: %s", type, why);
    }
    h.body_bytes = ST_MPI_BODY_MAX + 1;
    static uint8_t big[ST_MPI_HDR_BYTES + ST_MPI_BODY_MAX + 1];
    st_mpi_hdr_put(big, &h);
    MT_CHECK(st_mpi_hdr_get(big, sizeof big, &g, why, sizeof why) == STRATA_EINVAL,
             "a body past the largest one");

    st_mpi_place p = {.kind = ST_PLACE_PEER | ST_PLACE_KEEP, .src = 2, .id = 99}, q;
    uint8_t pb[16];
    st_mpi_place_put(pb, &p);
    st_mpi_place_get(pb, &q);
    MT_CHECK(q.kind == p.kind && q.src == 2 && q.id == 99, "a placement's round trip");
}

static strata_tensor view2d(void *base, uint64_t bytes, uint64_t offset, int64_t r, int64_t c,
                            int64_t sr, int64_t sc) {
    strata_tensor t;
    memset(&t, 0, sizeof t);
    t.base = base;
    t.buffer_bytes = bytes;
    t.offset = offset;
    t.dtype = STRATA_I32;
    t.rank = 2;
    t.mem = STRATA_MEM_HOST;
    t.ident.id = 5;
    t.ident.generation = 1;
    t.ident.owner = -1;
    t.shape[0] = r;
    t.shape[1] = c;
    t.strides[0] = sr;
    t.strides[1] = sc;
    return t;
}

static void transfers(void) {
    int32_t buf[64];
    for (int i = 0; i < 64; i++)
        buf[i] = i;
    strata_tensor dense = view2d(buf, sizeof buf, 0, 4, 8, 8, 1);
    strata_tensor strided = view2d(buf, sizeof buf, 4, 3, 4, 10, 2); /* from element 1 */
    MT_CHECK(st_xfer_dirs(&dense, STRATA_IN) == ST_XFER_IN, "IN goes");
    MT_CHECK(st_xfer_dirs(&dense, STRATA_NO_DEP) == ST_XFER_IN, "NO_DEP goes");
    MT_CHECK(st_xfer_dirs(&dense, STRATA_OUT) == ST_XFER_OUT, "OUT comes back");
    MT_CHECK(st_xfer_dirs(&dense, STRATA_OUT_EXISTING) == ST_XFER_OUT, "OUT_EXISTING comes back");
    MT_CHECK(st_xfer_dirs(&dense, STRATA_INOUT) == (ST_XFER_IN | ST_XFER_OUT), "INOUT both");
    strata_tensor dev = dense;
    dev.mem = STRATA_MEM_DEVICE;
    MT_CHECK(st_xfer_dirs(&dev, STRATA_INOUT) == 0, "device memory stays");
    MT_CHECK(st_xfer_bytes(&strided) == 3 * 4 * 4, "only the view's elements");
    MT_CHECK(st_xfer_contiguous(&dense) && !st_xfer_contiguous(&strided), "contiguity");
    strata_tensor row = view2d(buf, sizeof buf, 0, 1, 8, 99, 1); /* a size-1 axis's stride */
    MT_CHECK(st_xfer_contiguous(&row), "a size-1 axis's stride does not matter");
    int32_t packed[12];
    st_xfer_pack(&strided, packed);
    for (int r = 0; r < 3; r++)
        for (int c = 0; c < 4; c++)
            MT_CHECK(packed[r * 4 + c] == 1 + r * 10 + c * 2, "packed[%d][%d] = %d", r, c,
                     packed[r * 4 + c]);
    for (int i = 0; i < 12; i++)
        packed[i] = -1 - i;
    st_xfer_unpack(&strided, packed);
    for (int i = 0; i < 64; i++) {
        int k = i - 1, r = k / 10, c = (k % 10) / 2;
        int in_view = k >= 0 && r < 3 && (k % 10) % 2 == 0 && c < 4;
        int32_t want = in_view ? -1 - (r * 4 + c) : i;
        MT_CHECK(buf[i] == want, "buf[%d] = %d, expected %d", i, buf[i], want);
    }
}

static void directory(void) {
    st_directory d;
    st_dir_init(&d);
    int32_t buf[64];
    strata_tensor a = view2d(buf, sizeof buf, 0, 2, 8, 8, 1);  /* bytes [0, 64) */
    strata_tensor b = view2d(buf, sizeof buf, 64, 2, 8, 8, 1); /* bytes [64, 128) */
    strata_tensor c = view2d(buf, sizeof buf, 32, 2, 8, 8, 1); /* bytes [32, 96) */
    st_dir_entry *ea = st_dir_add(&d, &a);
    MT_CHECK(ea && st_dir_find(&d, &a) == ea && !st_dir_find(&d, &b), "exact views only");
    st_dir_entry *eb = st_dir_add(&d, &b);
    MT_CHECK(eb && eb->id != ea->id && eb->bytes == 64, "a new id per view, its bytes");
    MT_CHECK(st_dir_overlaps(ea, &c) && st_dir_overlaps(eb, &c) && !st_dir_overlaps(ea, &b),
             "overlap by bytes");
    strata_tensor other = a;
    other.ident.id = 6;
    MT_CHECK(!st_dir_overlaps(ea, &other) && !st_dir_find(&d, &other), "another buffer");
    st_dir_set(ea, 3, 1);
    st_dir_set(ea, 200, 1);
    MT_CHECK(st_dir_holds(ea, 3) && st_dir_holds(ea, 200) && !st_dir_holds(ea, 4), "holders");
    st_dir_set(ea, 3, 0);
    st_dir_set(ea, 200, 0);
    MT_CHECK(st_dir_empty(ea), "no holder left");
    st_dir_remove(&d, ea);
    MT_CHECK(!st_dir_find(&d, &a) && st_dir_find(&d, &b) == eb, "removed");
    /* many buffers and views (the table grows): each found, removal keeps the rest */
    enum { MANY = 600 };
    static strata_tensor v[MANY];
    for (int i = 0; i < MANY; i++) {
        v[i] = view2d(buf, sizeof buf, (uint64_t)(i % 4) * 8, 1, 2, 2, 1);
        v[i].ident.id = 100 + (uint64_t)(i / 4);
        MT_CHECK(st_dir_add(&d, &v[i]) != NULL, "add %d", i);
    }
    for (int i = 0; i < MANY; i += 2)
        st_dir_remove(&d, st_dir_find(&d, &v[i]));
    for (int i = 0; i < MANY; i++)
        MT_CHECK((st_dir_find(&d, &v[i]) != NULL) == (i % 2 == 1), "view %d after removals", i);
    int of_one = 0;
    for (st_dir_entry *e = st_dir_first_of(&d, &v[5]); e; e = st_dir_next_of(e, &v[5]))
        of_one++;
    MT_CHECK(of_one == 2, "one buffer's entries: %d", of_one);
    MT_CHECK(d.n == MANY / 2 + 1, "the array holds the rest (%u)", d.n);
    st_dir_free(&d);
}

static void symbols(void) {
    st_symbol_ref ref;
    void *p = NULL;
    MT_OK(st_symbol_name((const void *)(uintptr_t)&headers, &ref));
    MT_OK(st_symbol_resolve(&ref, &p));
    MT_CHECK(p == (void *)(uintptr_t)&headers, "a function of the program resolves to itself");
    MT_OK(st_symbol_name((const void *)(uintptr_t)&qsort, &ref));
    MT_CHECK(ref.object[0] && ref.symbol[0], "a library function: its object and symbol");
    MT_OK(st_symbol_resolve(&ref, &p));
    MT_CHECK(p == (void *)(uintptr_t)&qsort, "and it resolves");
    st_symbol_ref bad = ref;
    bad.symbol[0] = 'X'; /* another name */
    MT_CHECK(st_symbol_resolve(&bad, &p) == STRATA_EINVAL, "another symbol at the offset");
    bad = ref;
    snprintf(bad.object, sizeof bad.object, "/no/such/object.so");
    MT_CHECK(st_symbol_resolve(&bad, &p) == STRATA_EINVAL, "an object not loaded");
    bad = ref;
    bad.offset = UINT64_MAX / 2;
    MT_CHECK(st_symbol_resolve(&bad, &p) == STRATA_EINVAL, "an offset past the object");
}

/* The back-off's schedule, exactly (st_backoff_sleep_for: nothing here
 * sleeps or reads a clock), then that a reset step starts a new wait. */
static void backoff(void) {
    const uint64_t poll = ST_BACKOFF_POLL_NS, busy_poll = ST_BACKOFF_BUSY_POLL_NS;
    MT_CHECK(st_backoff_sleep_for(0, 0) == 0, "a wait that just began polls");
    MT_CHECK(st_backoff_sleep_for(poll - 1, 0) == 0, "idle: polls to the end of its window");
    MT_CHECK(st_backoff_sleep_for(poll, 0) == poll / ST_BACKOFF_SHARE,
             "idle past its window: sleeps an eighth of the wait");
    MT_CHECK(st_backoff_sleep_for(poll, 1) == 0,
             "owed an answer: still polls where an idle loop sleeps");
    MT_CHECK(st_backoff_sleep_for(busy_poll - 1, 1) == 0, "busy: polls to the end of its window");
    MT_CHECK(st_backoff_sleep_for(busy_poll, 1) == busy_poll / ST_BACKOFF_SHARE,
             "busy past its window: sleeps an eighth of the wait");
    MT_CHECK(st_backoff_sleep_for(1000000000ull, 1) == ST_BACKOFF_SLEEP_MAX_NS,
             "busy: a long wait sleeps the cap");
    MT_CHECK(st_backoff_sleep_for(1000000000ull, 0) == ST_BACKOFF_SLEEP_MAX_NS,
             "idle: a long wait sleeps the cap");
    st_backoff b = {0};
    b.since = st_now_ns() - 1000000000ull;
    st_backoff_reset(&b);
    MT_CHECK(st_backoff_step(&b) == 0, "after a reset the wait begins again: it polls");
}

int main(void) {
    backoff();
    headers();
    transfers();
    directory();
    symbols();
    printf("unit_mpi_wire: all checks passed\n");
    return 0;
}
#endif
