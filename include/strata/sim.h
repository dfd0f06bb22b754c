/* strata/sim.h - the sim backend's injection knobs, for tests and benchmarks.
 *
 * Owns: strata_sim_fault, strata_sim_injection (handed to strata_chip_open
 * through strata_chip_config.sim, or changed later with
 * strata_chip_set_sim_injection).
 * Must never: be needed by a program that does not inject delays or faults;
 * strata.h does not include it, and nothing here exists on other backends
 * (the knobs are refused there with STRATA_EINVAL).
 */
#ifndef STRATA_SIM_H
#define STRATA_SIM_H

#include <stdint.h>

#include "chip.h"
#include "export.h"
#include "types.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum strata_sim_fault {
    STRATA_SIM_FAULT_NONE = 0,
    STRATA_SIM_FAULT_PREPARE,  /* prepare fails (the run fails; the chip stays usable) */
    STRATA_SIM_FAULT_LAUNCH,   /* launch fails before anything started (reclaimed) */
    STRATA_SIM_FAULT_POLL,     /* poll reports an error (poisons the chip) */
    STRATA_SIM_FAULT_WAIT,     /* the blocking wait reports an error (poisons the chip);
                                  polls never see such a run finish */
    STRATA_SIM_FAULT_FINALIZE, /* finalize reports an error (poisons the chip) */
    STRATA_SIM_FAULT_KERNEL    /* one block of a kernel fails (device error: poisons) */
} strata_sim_fault;

typedef struct strata_sim_injection {
    uint64_t prepare_delay_ns; /* time every prepare takes at least */
    uint64_t kernel_delay_ns;  /* device time every kernel launch takes at least */
    strata_sim_fault fault;    /* which phase fails (NONE = none) */
    int32_t fault_code;        /* device code of the fault (0 = -5) */
    uint32_t fault_run;        /* 0: every run; N: only the N-th run prepared on the chip */
    char fault_kernel[STRATA_PROGRAM_NAME_MAX]; /* KERNEL: only this kernel ("" = any) */
    uint32_t fault_block;                       /* KERNEL: the failing block index */
    int refuse_overlap; /* answer "incompatible" to a prepare overlapping a run */
} strata_sim_injection;

/* Replace every injection knob of an open sim chip (STRATA_EINVAL for other backends). */
STRATA_API int strata_chip_set_sim_injection(strata_chip *chip, const strata_sim_injection *inj);

#ifdef __cplusplus
}
#endif
#endif /* STRATA_SIM_H */
