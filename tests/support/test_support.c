/* tests/support/test_support.c - helpers shared by the cmocka tests. */
#include "test_support.h"

uint64_t ts_rand(uint64_t *state) {
    uint64_t x = *state ? *state : 0x9e3779b97f4a7c15ull;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *state = x;
    return x * 0x2545f4914f6cdd1dull;
}
