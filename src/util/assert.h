/* util/assert.h - internal invariant checks.
 *
 * Owns: ST_ASSERT, which checks engine invariants (never user input) in debug
 * builds and compiles away in Release.
 * Must never: be used to validate anything a caller passed in; bad input is
 * reported with a status, not an abort.
 */
#ifndef STRATA_UTIL_ASSERT_H
#define STRATA_UTIL_ASSERT_H

#include <stdio.h>
#include <stdlib.h>

#ifdef STRATA_DEBUG_ASSERT
#define ST_ASSERT(cond, ...)                                                                       \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "strata: invariant broken at %s:%d: %s: ", __FILE__, __LINE__, #cond); \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fputc('\n', stderr);                                                                   \
            abort();                                                                               \
        }                                                                                          \
    } while (0)
#else
#define ST_ASSERT(cond, ...) ((void)0)
#endif

#endif
