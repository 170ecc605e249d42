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

#endif
