/* tests/system/test_l3_chips_process.c - test_l3_chips.c's scenarios with
 * every chip in a process of its own (strata_chip_config.host =
 * STRATA_HOST_PROCESS): the same source, built a second time. Forks: not a
 * concurrency (TSan) test.
 */
#define TS_CHIP_HOST STRATA_HOST_PROCESS
#include "test_l3_chips.c"
