/* tests/unit/test_digest.c - the callable digest (util/digest.h).
 *
 * Owns: that the digest of a fixed (kind, name) is a pinned value (it
 * crosses processes and builds, so it must never drift), that names and
 * kinds each change it, equality, and the hex form.
 * Must never: compute the expected value with the code under test.
 */
#include <string.h>

#include "test_support.h"

#include "util/digest.h"

static void hex_of(int kind, const char *name, char out[ST_DIGEST_HEX]) {
    st_digest d = st_digest_callable(kind, name);
    st_digest_hex(&d, out);
}

/* Pinned once from XXH3-128 (seed = kind, input = the name's bytes, canonical
 * big-endian bytes); the empty name with seed 0 is xxHash's published
 * XXH3_128bits("") value. */
static void a_fixed_kind_and_name_give_a_pinned_digest(void **state) {
    (void)state;
    char hex[ST_DIGEST_HEX];
    hex_of(1, "vector_add", hex);
    assert_string_equal(hex, "ac00fef33ac59325f8e2c2956d914125");
    hex_of(0, "", hex);
    assert_string_equal(hex, "99aa06d3014798d86001c324468d497f");
    hex_of(0, NULL, hex); /* NULL is the empty name */
    assert_string_equal(hex, "99aa06d3014798d86001c324468d497f");
}

static void different_names_or_kinds_give_different_digests(void **state) {
    (void)state;
    st_digest a = st_digest_callable(1, "vector_add");
    st_digest same = st_digest_callable(1, "vector_add");
    st_digest other_name = st_digest_callable(1, "vector_adc");
    st_digest longer = st_digest_callable(1, "vector_add2");
    st_digest other_kind = st_digest_callable(2, "vector_add");
    assert_true(st_digest_equal(&a, &same));
    assert_false(st_digest_equal(&a, &other_name));
    assert_false(st_digest_equal(&a, &longer));
    assert_false(st_digest_equal(&a, &other_kind));
    assert_false(st_digest_equal(&other_name, &other_kind));
}

static void the_hex_form_is_lowercase_and_32_digits(void **state) {
    (void)state;
    st_digest d;
    for (unsigned i = 0; i < ST_DIGEST_BYTES; i++)
        d.bytes[i] = (uint8_t)(i * 0x11);
    char hex[ST_DIGEST_HEX];
    memset(hex, 'x', sizeof hex);
    st_digest_hex(&d, hex);
    assert_int_equal(strlen(hex), 2 * ST_DIGEST_BYTES);
    assert_string_equal(hex, "00112233445566778899aabbccddeeff");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(a_fixed_kind_and_name_give_a_pinned_digest),
        cmocka_unit_test(different_names_or_kinds_give_different_digests),
        cmocka_unit_test(the_hex_form_is_lowercase_and_32_digits),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
