/* util/digest.h - the stable digest a callable crosses processes by.
 *
 * Owns: the digest of a callable's description (its kind and name), computed
 * with xxHash's XXH3 128-bit hash (Debian's libxxhash-dev), and its text
 * form for messages; the same hash over plain bytes (the MPI layer checks a
 * rank's cached copy against the host bytes it stands for).
 * Must never: hash anything that differs between processes of one worker
 * (addresses, ids): a child resolves the digest to its own entry.
 */
#ifndef STRATA_UTIL_DIGEST_H
#define STRATA_UTIL_DIGEST_H

#include <stddef.h>
#include <stdint.h>

#define ST_DIGEST_BYTES 16u
#define ST_DIGEST_HEX (ST_DIGEST_BYTES * 2 + 1)

typedef struct st_digest {
    uint8_t bytes[ST_DIGEST_BYTES];
} st_digest;

/* Digest of (kind, name): kind is a small integer (st_callable_kind). */
st_digest st_digest_callable(int kind, const char *name);

/* Digest of n bytes at p (contents only; p may be NULL when n is 0). */
st_digest st_digest_bytes(const void *p, size_t n);

/* 1 if equal. */
int st_digest_equal(const st_digest *a, const st_digest *b);

/* Lowercase hex, NUL-terminated, into out[ST_DIGEST_HEX]. */
void st_digest_hex(const st_digest *d, char out[ST_DIGEST_HEX]);

#endif
