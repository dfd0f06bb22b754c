/* tests/mpi/mpi_test.h - what the MPI tests share: a check that names the
 * failed condition and ends the job (rank 0 asserts; the other ranks serve
 * inside strata_worker_init and never return from it).
 *
 * Owns: MT_CHECK, MT_OK, the "skipped" exit of a build without MPI.
 * Must never: be used outside tests/mpi and examples (not the library).
 */
#ifndef STRATA_TESTS_MPI_TEST_H
#define STRATA_TESTS_MPI_TEST_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "strata/mpi.h"
#include "strata/strata.h"

/* CTest's SKIP_RETURN_CODE for the MPI tests (tests/CMakeLists.txt). */
#define MT_SKIP 77

#define MT_CHECK(cond, ...)                                                                        \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "%s:%d: check failed: %s: ", __FILE__, __LINE__, #cond);               \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fprintf(stderr, "\n");                                                                 \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

#define MT_OK(expr)                                                                                \
    do {                                                                                           \
        int mt_rc_ = (expr);                                                                       \
        MT_CHECK(mt_rc_ == STRATA_OK, "%s returned %s: %s", #expr, strata_status_name(mt_rc_),     \
                 strata_error_message());                                                          \
    } while (0)

/* Exit with MT_SKIP (saying why) when the library has no MPI. */
static inline void mt_skip_without_mpi(void) {
    if (!strata_mpi_available()) {
        printf("skipped: built without MPI (install libopenmpi-dev openmpi-bin)\n");
        exit(MT_SKIP);
    }
}

#endif
