/* tests/system/test_l4_random_graphs_process.c - test_random_graphs.c's
 * scenarios inside an L4 whose two L3 children are processes of their own
 * (RG_L4_CHILD_HOST = STRATA_HOST_PROCESS): each graph is one next-level task
 * run as one run of a child process, checked against the same sequential
 * replay. The same source, built a third time. Forks: not a concurrency
 * (TSan) test.
 */
#define RG_L4_CHILDREN 2
#define RG_L4_CHILD_HOST STRATA_HOST_PROCESS
#include "test_random_graphs.c"
