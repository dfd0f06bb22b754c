/* util/digest.c - the callable digest: XXH3 128-bit over (kind, name).
 *
 * Owns: the one use of xxHash (Debian's libxxhash-dev: callables, and bytes
 * for mpi/), compiled in from its
 * header (XXH_INLINE_ALL): libstrata, its static archive included, then needs
 * no link flag of its own, so a program links it as it did. The kind is the hash's seed and the
 * name's bytes (without the NUL) its input; the 128-bit result is stored in
 * xxHash's canonical (big-endian) byte order, so the digest's bytes and its
 * hex form are the same on every host.
 * Must never: hash an address, an id or anything else that differs between
 * the processes of one worker; allocate.
 */
#include "util/digest.h"

#include <string.h>

#define XXH_INLINE_ALL /* the functions are static here: nothing to link */
#include <xxhash.h>

_Static_assert(sizeof(XXH128_canonical_t) == ST_DIGEST_BYTES, "the digest is one XXH128 value");

st_digest st_digest_callable(int kind, const char *name) {
    const char *n = name ? name : "";
    XXH128_hash_t h = XXH3_128bits_withSeed(n, strlen(n), (XXH64_hash_t)(uint32_t)kind);
    XXH128_canonical_t c;
    XXH128_canonicalFromHash(&c, h);
    st_digest d;
    memcpy(d.bytes, c.digest, ST_DIGEST_BYTES);
    return d;
}

st_digest st_digest_bytes(const void *p, size_t n) {
    XXH128_hash_t h = XXH3_128bits(n ? p : "", n);
    XXH128_canonical_t c;
    XXH128_canonicalFromHash(&c, h);
    st_digest d;
    memcpy(d.bytes, c.digest, ST_DIGEST_BYTES);
    return d;
}

int st_digest_equal(const st_digest *a, const st_digest *b) {
    return memcmp(a->bytes, b->bytes, ST_DIGEST_BYTES) == 0;
}

void st_digest_hex(const st_digest *d, char out[ST_DIGEST_HEX]) {
    static const char hex[] = "0123456789abcdef";
    for (unsigned i = 0; i < ST_DIGEST_BYTES; i++) {
        out[2 * i] = hex[d->bytes[i] >> 4];
        out[2 * i + 1] = hex[d->bytes[i] & 0xf];
    }
    out[2 * ST_DIGEST_BYTES] = '\0';
}
