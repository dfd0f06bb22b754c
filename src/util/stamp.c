/* util/stamp.c - choosing the stamp source and converting stamps.
 *
 * Owns: the process's st_stamp_clock (written once, under pthread_once), the
 * calibration of stamps against CLOCK_MONOTONIC.
 * Must never: change the source once chosen (stamps already taken would
 * change meaning), or be called on a record path (st_stamp is inline).
 */
#include <fcntl.h>
#include <pthread.h>
#include <string.h>
#include <unistd.h>

#include "util/stamp.h"

#if ST_STAMP_HAVE_TSC
#include <cpuid.h>
#endif

st_stamp_clock st_stamp_process_clock;

static pthread_once_t stamp_once = PTHREAD_ONCE_INIT;

int st_stamp_tsc_usable(const char *clocksource, int invariant_tsc) {
    return ST_STAMP_HAVE_TSC && invariant_tsc && clocksource && strcmp(clocksource, "tsc") == 0;
}

/* The kernel's current clocksource into buf ("" if it cannot be read). */
static const char *kernel_clocksource(char *buf, size_t cap) {
    buf[0] = '\0';
    int fd = open("/sys/devices/system/clocksource/clocksource0/current_clocksource",
                  O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return NULL;
    ssize_t n = read(fd, buf, cap - 1);
    close(fd);
    if (n <= 0)
        return NULL;
    buf[n] = '\0';
    buf[strcspn(buf, "\n")] = '\0';
    return buf;
}

static int cpu_tsc_invariant(void) {
#if ST_STAMP_HAVE_TSC
    unsigned a, b, c, d;
    if (!__get_cpuid(0x80000007u, &a, &b, &c, &d))
        return 0;
    return (d >> 8) & 1u; /* "invariant TSC": constant rate, runs in every C-state */
#else
    return 0;
#endif
}

/* A stamp and the CLOCK_MONOTONIC time beside it: of a few tries, the one
 * whose two clock reads around the stamp lie closest together. */
static void read_pair(int tsc, uint64_t *tick, uint64_t *ns) {
    uint64_t best = UINT64_MAX;
    for (int i = 0; i < 5; i++) {
        uint64_t before = st_now_ns();
        uint64_t t = tsc ? st_stamp() : before;
        uint64_t after = st_now_ns();
        if (after - before < best) {
            best = after - before;
            *tick = t;
            *ns = tsc ? before + (after - before) / 2 : before;
        }
    }
}

static void choose_source(void) {
    char name[64];
    st_stamp_clock *c = &st_stamp_process_clock;
    c->tsc = st_stamp_tsc_usable(kernel_clocksource(name, sizeof name), cpu_tsc_invariant());
    read_pair(c->tsc, &c->tick, &c->ns);
}

void st_stamp_setup(void) {
    pthread_once(&stamp_once, choose_source);
}

st_stamp_scale st_stamp_scale_between(const st_stamp_clock *c, uint64_t tick1, uint64_t ns1) {
    st_stamp_scale sc = {.tick0 = c->tick, .ns0 = c->ns, .ns_per_tick = 1.0};
    if (c->tsc && tick1 > c->tick && ns1 > c->ns)
        sc.ns_per_tick = (double)(ns1 - c->ns) / (double)(tick1 - c->tick);
    return sc;
}

st_stamp_scale st_stamp_scale_now(void) {
    const st_stamp_clock *c = &st_stamp_process_clock;
    uint64_t tick, ns;
    read_pair(c->tsc, &tick, &ns);
    return st_stamp_scale_between(c, tick, ns);
}

uint64_t st_stamp_to_ns(const st_stamp_scale *sc, uint64_t stamp) {
    if (stamp >= sc->tick0)
        return sc->ns0 + (uint64_t)((double)(stamp - sc->tick0) * sc->ns_per_tick);
    uint64_t back = (uint64_t)((double)(sc->tick0 - stamp) * sc->ns_per_tick);
    return back < sc->ns0 ? sc->ns0 - back : 0;
}

uint64_t st_stamp_span_ns(const st_stamp_scale *sc, uint64_t ticks) {
    return (uint64_t)((double)ticks * sc->ns_per_tick);
}
