/* strata/strata.h - the one header a program includes.
 *
 * Owns: nothing but the list of public headers.
 * Must never: declare anything itself.
 */
#ifndef STRATA_H
#define STRATA_H

#include "status.h"
#include "tensor.h"
#include "worker.h"
#include "backend.h"
#include "chip.h"

#define STRATA_VERSION_MAJOR 0
#define STRATA_VERSION_MINOR 1
#define STRATA_VERSION_PATCH 0

#endif /* STRATA_H */
