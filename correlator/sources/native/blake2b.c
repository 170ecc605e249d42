/* BLAKE2b, RFC 7693: the compression function, a one-shot hash of a line, and many lines'
 * hashes at once (b2_hash_many: four lines side by side in AVX2's 64-bit lanes where the CPU
 * has it, each lane a line of its own, so no lane waits on another's words). */
#include "blake2b.h"

#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define B2_WIDE 1
#else
#define B2_WIDE 0
#endif

static const uint64_t B2_IV[8] = {
    0x6a09e667f3bcc908ULL, 0xbb67ae8584caa73bULL, 0x3c6ef372fe94f82bULL, 0xa54ff53a5f1d36f1ULL,
    0x510e527fade682d1ULL, 0x9b05688c2b3e6c1fULL, 0x1f83d9abfb41bd6bULL, 0x5be0cd19137e2179ULL,
};

static const uint8_t B2_SIGMA[12][16] = {
    {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15},
    {14, 10, 4, 8, 9, 15, 13, 6, 1, 12, 0, 2, 11, 7, 5, 3},
    {11, 8, 12, 0, 5, 2, 15, 13, 10, 14, 3, 6, 7, 1, 9, 4},
    {7, 9, 3, 1, 13, 12, 11, 14, 2, 6, 5, 10, 4, 0, 15, 8},
    {9, 0, 5, 7, 2, 4, 10, 15, 14, 1, 11, 12, 6, 8, 3, 13},
    {2, 12, 6, 10, 0, 11, 8, 3, 4, 13, 7, 5, 15, 14, 1, 9},
    {12, 5, 1, 15, 14, 13, 4, 10, 0, 7, 6, 3, 9, 2, 8, 11},
    {13, 11, 7, 14, 12, 1, 3, 9, 5, 0, 15, 4, 8, 6, 2, 10},
    {6, 15, 14, 9, 11, 3, 0, 8, 12, 2, 13, 7, 1, 4, 10, 5},
    {10, 2, 8, 4, 7, 6, 1, 5, 15, 11, 9, 14, 3, 12, 13, 0},
    {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15},
    {14, 10, 4, 8, 9, 15, 13, 6, 1, 12, 0, 2, 11, 7, 5, 3},
};

static inline uint64_t rotr64(uint64_t x, int n) { return (x >> n) | (x << (64 - n)); }

static inline uint64_t load64(const uint8_t *p) {
    uint64_t v;
    memcpy(&v, p, 8);
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    v = __builtin_bswap64(v);
#endif
    return v;
}

/* The digest's 8 bytes are the final h[0] little-endian; Python reads them big-endian. */
static inline int64_t digest_value(uint64_t h0) { return (int64_t)__builtin_bswap64(h0); }

#define B2_G(a, b, c, d, x, y)        \
    do {                              \
        a = a + b + x;                \
        d = rotr64(d ^ a, 32);        \
        c = c + d;                    \
        b = rotr64(b ^ c, 24);        \
        a = a + b + y;                \
        d = rotr64(d ^ a, 16);        \
        c = c + d;                    \
        b = rotr64(b ^ c, 63);        \
    } while (0)

static void b2_compress(uint64_t h[8], const uint8_t block[128], uint64_t t, int last) {
    uint64_t m[16], v[16];
    for (int i = 0; i < 16; i++) m[i] = load64(block + 8 * i);
    for (int i = 0; i < 8; i++) {
        v[i] = h[i];
        v[i + 8] = B2_IV[i];
    }
    v[12] ^= t; /* messages here are far below 2^64 bytes: the high counter word stays 0 */
    if (last) v[14] = ~v[14];
    for (int r = 0; r < 12; r++) {
        const uint8_t *s = B2_SIGMA[r];
        B2_G(v[0], v[4], v[8], v[12], m[s[0]], m[s[1]]);
        B2_G(v[1], v[5], v[9], v[13], m[s[2]], m[s[3]]);
        B2_G(v[2], v[6], v[10], v[14], m[s[4]], m[s[5]]);
        B2_G(v[3], v[7], v[11], v[15], m[s[6]], m[s[7]]);
        B2_G(v[0], v[5], v[10], v[15], m[s[8]], m[s[9]]);
        B2_G(v[1], v[6], v[11], v[12], m[s[10]], m[s[11]]);
        B2_G(v[2], v[7], v[8], v[13], m[s[12]], m[s[13]]);
        B2_G(v[3], v[4], v[9], v[14], m[s[14]], m[s[15]]);
    }
    for (int i = 0; i < 8; i++) h[i] ^= v[i] ^ v[i + 8];
}

/* The parameter block's state for an 8-byte digest, no key, ``person`` (up to 16 bytes). */
void b2_start(uint64_t h[8], const char *person, size_t person_len) {
    uint8_t p[16] = {0};
    memcpy(p, person, person_len > 16 ? 16 : person_len);
    for (int i = 0; i < 8; i++) h[i] = B2_IV[i];
    h[0] ^= 0x01010000ULL ^ 8ULL; /* fanout 1, depth 1, no key, digest length 8 */
    h[6] ^= load64(p);
    h[7] ^= load64(p + 8);
}

/* The content hash as _lines.hasher gives it: the digest read as a big-endian signed int. */
int64_t b2_hash(const uint64_t start[8], const uint8_t *data, size_t len) {
    uint64_t h[8];
    memcpy(h, start, sizeof h);
    uint64_t t = 0;
    while (len > 128) {
        t += 128;
        b2_compress(h, data, t, 0);
        data += 128;
        len -= 128;
    }
    uint8_t block[128] = {0};
    memcpy(block, data, len);
    t += len;
    b2_compress(h, block, t, 1);
    return digest_value(h[0]);
}

#if B2_WIDE
/* Four lines of the same number of blocks hashed side by side: word i of vector h[k] is the
 * state word k of line i. The lines' words are loaded four at a time and transposed so that
 * each vector of m holds one message word of the four lines. */
#define B2_ADD(a, b) _mm256_add_epi64(a, b)
#define B2_XOR(a, b) _mm256_xor_si256(a, b)

__attribute__((target("avx2"))) static inline __m256i wide_rotr32(__m256i x) {
    return _mm256_shuffle_epi32(x, _MM_SHUFFLE(2, 3, 0, 1));
}

__attribute__((target("avx2"))) static inline __m256i wide_rotr24(__m256i x) {
    const __m256i bytes = _mm256_setr_epi8(3, 4, 5, 6, 7, 0, 1, 2, 11, 12, 13, 14, 15, 8, 9, 10,
                                           3, 4, 5, 6, 7, 0, 1, 2, 11, 12, 13, 14, 15, 8, 9, 10);
    return _mm256_shuffle_epi8(x, bytes);
}

__attribute__((target("avx2"))) static inline __m256i wide_rotr16(__m256i x) {
    const __m256i bytes = _mm256_setr_epi8(2, 3, 4, 5, 6, 7, 0, 1, 10, 11, 12, 13, 14, 15, 8, 9,
                                           2, 3, 4, 5, 6, 7, 0, 1, 10, 11, 12, 13, 14, 15, 8, 9);
    return _mm256_shuffle_epi8(x, bytes);
}

__attribute__((target("avx2"))) static inline __m256i wide_rotr63(__m256i x) {
    return _mm256_or_si256(_mm256_srli_epi64(x, 63), _mm256_add_epi64(x, x));
}

#define B2_WIDE_G(a, b, c, d, x, y)                   \
    do {                                              \
        a = B2_ADD(B2_ADD(a, b), x);                  \
        d = wide_rotr32(B2_XOR(d, a));                \
        c = B2_ADD(c, d);                             \
        b = wide_rotr24(B2_XOR(b, c));                \
        a = B2_ADD(B2_ADD(a, b), y);                  \
        d = wide_rotr16(B2_XOR(d, a));                \
        c = B2_ADD(c, d);                             \
        b = wide_rotr63(B2_XOR(b, c));                \
    } while (0)

/* One block of each of four lines: ``blocks[i]`` is line i's, ``t`` the bytes hashed so far
 * including it (per line), ``last`` all ones for a final block. */
__attribute__((target("avx2"))) static void wide_compress(__m256i h[8],
                                                          const uint8_t *const blocks[4],
                                                          __m256i t, __m256i last) {
    __m256i m[16], v[16];
    for (int q = 0; q < 4; q++) {
        __m256i r0 = _mm256_loadu_si256((const __m256i *)(blocks[0] + 32 * q));
        __m256i r1 = _mm256_loadu_si256((const __m256i *)(blocks[1] + 32 * q));
        __m256i r2 = _mm256_loadu_si256((const __m256i *)(blocks[2] + 32 * q));
        __m256i r3 = _mm256_loadu_si256((const __m256i *)(blocks[3] + 32 * q));
        __m256i low01 = _mm256_unpacklo_epi64(r0, r1), high01 = _mm256_unpackhi_epi64(r0, r1);
        __m256i low23 = _mm256_unpacklo_epi64(r2, r3), high23 = _mm256_unpackhi_epi64(r2, r3);
        m[4 * q + 0] = _mm256_permute2x128_si256(low01, low23, 0x20);
        m[4 * q + 1] = _mm256_permute2x128_si256(high01, high23, 0x20);
        m[4 * q + 2] = _mm256_permute2x128_si256(low01, low23, 0x31);
        m[4 * q + 3] = _mm256_permute2x128_si256(high01, high23, 0x31);
    }
    for (int i = 0; i < 8; i++) {
        v[i] = h[i];
        v[i + 8] = _mm256_set1_epi64x((long long)B2_IV[i]);
    }
    v[12] = B2_XOR(v[12], t);
    v[14] = B2_XOR(v[14], last);
    for (int r = 0; r < 12; r++) {
        const uint8_t *s = B2_SIGMA[r];
        B2_WIDE_G(v[0], v[4], v[8], v[12], m[s[0]], m[s[1]]);
        B2_WIDE_G(v[1], v[5], v[9], v[13], m[s[2]], m[s[3]]);
        B2_WIDE_G(v[2], v[6], v[10], v[14], m[s[4]], m[s[5]]);
        B2_WIDE_G(v[3], v[7], v[11], v[15], m[s[6]], m[s[7]]);
        B2_WIDE_G(v[0], v[5], v[10], v[15], m[s[8]], m[s[9]]);
        B2_WIDE_G(v[1], v[6], v[11], v[12], m[s[10]], m[s[11]]);
        B2_WIDE_G(v[2], v[7], v[8], v[13], m[s[12]], m[s[13]]);
        B2_WIDE_G(v[3], v[4], v[9], v[14], m[s[14]], m[s[15]]);
    }
    for (int i = 0; i < 8; i++) h[i] = B2_XOR(h[i], B2_XOR(v[i], v[i + 8]));
}

/* Four lines of ``blocks`` blocks each (b2_blocks), hashed into out[index[0..3]]. */
__attribute__((target("avx2"))) static void wide_hash(const uint64_t start[8],
                                                      const uint8_t *const data[4],
                                                      const size_t lens[4], size_t blocks,
                                                      int64_t *out, const size_t index[4]) {
    __m256i h[8];
    for (int i = 0; i < 8; i++) h[i] = _mm256_set1_epi64x((long long)start[i]);
    const uint8_t *at[4];
    for (size_t b = 0; b + 1 < blocks; b++) {
        for (int i = 0; i < 4; i++) at[i] = data[i] + 128 * b;
        long long t = (long long)(128 * (b + 1));
        wide_compress(h, at, _mm256_set1_epi64x(t), _mm256_setzero_si256());
    }
    uint8_t tails[4][128];
    long long t[4];
    for (int i = 0; i < 4; i++) {
        size_t done = 128 * (blocks - 1);
        memset(tails[i], 0, 128);
        memcpy(tails[i], data[i] + done, lens[i] - done);
        at[i] = tails[i];
        t[i] = (long long)lens[i];
    }
    wide_compress(h, at, _mm256_setr_epi64x(t[0], t[1], t[2], t[3]), _mm256_set1_epi64x(-1));
    uint64_t words[4];
    _mm256_storeu_si256((__m256i *)words, h[0]);
    for (int i = 0; i < 4; i++) out[index[i]] = digest_value(words[i]);
}

static int wide_supported(void) {
    static int known = -1;
    if (known < 0) known = __builtin_cpu_supports("avx2") ? 1 : 0;
    return known;
}
#endif

int b2_lanes(void) {
#if B2_WIDE
    return wide_supported() ? 4 : 1;
#else
    return 1;
#endif
}

/* The blocks a line of ``len`` bytes is hashed in: its last (possibly empty) one included. */
static size_t b2_blocks(size_t len) { return len ? (len + 127) / 128 : 1; }

/* Lines of up to this many blocks are grouped by their count, four of a count hashed at
 * once; longer ones (rare: 2 KiB and more) are hashed one by one. */
#define B2_GROUPED_BLOCKS 16

int b2_hash_many(const uint64_t start[8], const uint8_t *const *data, const size_t *lens,
                 size_t n, int64_t *out, int lanes) {
#if B2_WIDE
    if (lanes >= 4 && n >= 4 && wide_supported()) {
        /* The lines in order of their block count (a counting sort), so that four side by
         * side end together: no lane runs on after its line ended. */
        size_t starts[B2_GROUPED_BLOCKS + 2] = {0};
        for (size_t i = 0; i < n; i++) {
            size_t blocks = b2_blocks(lens[i]);
            starts[(blocks <= B2_GROUPED_BLOCKS ? blocks : 0) + 1]++;
        }
        for (size_t k = 1; k < B2_GROUPED_BLOCKS + 2; k++) starts[k] += starts[k - 1];
        size_t *order = malloc(sizeof(size_t) * n);
        if (order == NULL) return -1;
        size_t fill[B2_GROUPED_BLOCKS + 1];
        memcpy(fill, starts, sizeof fill);
        for (size_t i = 0; i < n; i++) {
            size_t blocks = b2_blocks(lens[i]);
            order[fill[blocks <= B2_GROUPED_BLOCKS ? blocks : 0]++] = i;
        }
        for (size_t k = 0; k <= B2_GROUPED_BLOCKS; k++) {
            size_t i = starts[k], end = starts[k + 1];
            for (; k > 0 && i + 4 <= end; i += 4) {
                const uint8_t *group[4];
                size_t group_lens[4];
                for (int j = 0; j < 4; j++) {
                    group[j] = data[order[i + j]];
                    group_lens[j] = lens[order[i + j]];
                }
                wide_hash(start, group, group_lens, k, out, order + i);
            }
            for (; i < end; i++) out[order[i]] = b2_hash(start, data[order[i]], lens[order[i]]);
        }
        free(order);
        return 0;
    }
#endif
    for (size_t i = 0; i < n; i++) out[i] = b2_hash(start, data[i], lens[i]);
    return 0;
}
