// label: concurrency
/* tests/system/test_l4_random_graphs.c - test_random_graphs.c's scenarios
 * inside an L4: each random graph is one next-level task of an L4, run as one
 * run of one of its two thread-hosted L3 children (RG_L4_CHILDREN = 2), and
 * checked against the same sequential replay. The same source, built a second
 * time.
 */
#define RG_L4_CHILDREN 2
#include "test_random_graphs.c"
