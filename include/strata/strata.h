/* strata/strata.h - the one header a program includes.
 *
 * Owns: nothing but the list of public headers of the API, and the version
 * macros.
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

#endif /* STRATA_H */
