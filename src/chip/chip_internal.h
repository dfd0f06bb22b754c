/* chip/chip_internal.h - what the L3 chip endpoint needs from a strata_chip.
 *
 * Owns: accessors to a chip's lane and program registry for code inside the
 * library (src/exec/chip_endpoint.c).
 * Must never: be included by anything outside src/; the public face of a
 * chip is include/strata/chip.h.
 */
#ifndef STRATA_CHIP_CHIP_INTERNAL_H
#define STRATA_CHIP_CHIP_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "chip/chip_worker.h"
#include "chip/run_lane.h"
#include "strata/chip.h"

st_run_lane *st_chip_lane(strata_chip *chip);
st_chip_worker *st_chip_worker_of(strata_chip *chip);
/* The backend id and name of a registered program (STRATA_EINVAL if unknown). */
int st_chip_program_info(strata_chip *chip, strata_chip_program prog, uint32_t *backend_id,
                         char *name, size_t cap);

#endif
