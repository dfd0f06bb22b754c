/* tests/abi/header_layering.c - which public header may pull in which.
 *
 * Owns: the rules that the backend ABI stands alone (backend.h brings in
 * types.h and no other strata header) and that strata.h, the API a program
 * includes, brings in neither the backend ABI nor the sim knobs.
 * Must never: include anything but the header under test. check_headers.cmake
 * compiles it (as C and as C++) once with CHECK_BACKEND_H and once with
 * CHECK_STRATA_H; a broken rule is an #error.
 */
#if defined(CHECK_BACKEND_H)
#include <strata/backend.h>
#if defined(STRATA_STATUS_H) || defined(STRATA_TENSOR_H) || defined(STRATA_WORKER_H) ||            \
    defined(STRATA_CHIP_H) || defined(STRATA_SIM_H) || defined(STRATA_EXPORT_H)
#error "backend.h must include no strata header but types.h (the versioned ABI stands alone)"
#endif
#ifndef STRATA_TYPES_H
#error "backend.h takes the plain types it shares with the API from types.h"
#endif

#elif defined(CHECK_STRATA_H)
#include <strata/strata.h>
#if defined(STRATA_BACKEND_H) || defined(STRATA_SIM_H)
#error "strata.h must include neither backend.h nor sim.h"
#endif

#else
#error "define CHECK_BACKEND_H or CHECK_STRATA_H"
#endif

int main(void) {
    return 0;
}
