/* BLAKE2b (RFC 7693) as the content hash needs it: an 8-byte digest, no key, personalised with
 * the source kind, as correlator/sources/_lines.hasher sets up hashlib's. */
#ifndef RECORD_NATIVE_BLAKE2B_H
#define RECORD_NATIVE_BLAKE2B_H

#include <stddef.h>
#include <stdint.h>

/* The state to hash from: digest length 8, ``person`` (up to 16 bytes) as personalisation. */
void b2_start(uint64_t h[8], const char *person, size_t person_len);
/* The hash of ``data`` from ``start``, as _lines.hasher's digest read big-endian, signed. */
int64_t b2_hash(const uint64_t start[8], const uint8_t *data, size_t len);
/* The lines the machine hashes side by side: 4 with AVX2, else 1. */
int b2_lanes(void);
/* The hashes of ``n`` lines (``data[i]``, ``lens[i]`` bytes) from ``start`` into ``out[i]``,
 * ``lanes`` (1, or b2_lanes()) side by side; -1 when out of memory (nothing then is certain
 * to be written). Runs without the GIL. */
int b2_hash_many(const uint64_t start[8], const uint8_t *const *data, const size_t *lens,
                 size_t n, int64_t *out, int lanes);

#endif
