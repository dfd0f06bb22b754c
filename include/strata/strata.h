/* strata/strata.h - the one header a program includes.
 *
 * Owns: nothing but the list of public headers of the API, the version
 * macros and strata_version().
 * Must never: declare anything else, or include backend.h (the versioned
 * ABI for backend writers) or sim.h (the sim backend's test knobs); a
 * program that needs them includes them itself.
 */
#ifndef STRATA_H
#define STRATA_H

#include "export.h"
#include "status.h"
#include "types.h"
#include "tensor.h"
#include "args.h"
#include "worker.h"
#include "chip.h"

#define STRATA_VERSION_MAJOR 0
#define STRATA_VERSION_MINOR 1
#define STRATA_VERSION_PATCH 0

/* The version of the library linked at run time, as
 * (MAJOR << 16) | (MINOR << 8) | PATCH: a program compares it with the
 * macros above to refuse a library other than the one it was built for. */
STRATA_API unsigned strata_version(void);

#endif /* STRATA_H */
