/* tests/support/test_support.h - small helpers shared by the cmocka tests.
 *
 * Owns: nothing the library needs. Must never: hide a failure (every helper
 * asserts what it does).
 */
#ifndef STRATA_TEST_SUPPORT_H
#define STRATA_TEST_SUPPORT_H

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include "strata/strata.h"

/* Assert a strata call returned `expected`, printing strata_error_message() otherwise. */
#define assert_status(expected, expr)                                                              \
    do {                                                                                           \
        int ts_rc_ = (expr);                                                                       \
        if (ts_rc_ != (expected))                                                                  \
            fail_msg("%s returned %s (%d), expected %s: %s", #expr, strata_status_name(ts_rc_),    \
                     ts_rc_, strata_status_name(expected), strata_error_message());                \
    } while (0)

#define assert_ok(expr) assert_status(STRATA_OK, expr)

/* Deterministic pseudo-random numbers (xorshift64*), seeded per test. */
uint64_t ts_rand(uint64_t *state);

#endif
