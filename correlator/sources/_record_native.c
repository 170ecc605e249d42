/* The record mapping of correlator/sources/_record.py for the common line, in one native pass.
 *
 * map_lines() takes a batch of JSON lines and, for each line it can map with certainty, does
 * what the Python path does (orjson.loads, record_row_positional, the blake2b content hash)
 * and appends the row to Arrow column buffers. A line it is not certain of (not an object,
 * not valid UTF-8, a key with an escape, a repeated key, a float orjson would write in another
 * form, an integer past 64 bits, a field the mapping refuses or rewrites, nesting deeper than
 * NATIVE_DEPTH) is *declined*: its index is returned and the Python mapping, the reference,
 * maps it or names why it is refused. So every row this module writes is one the Python path
 * writes identically, hash included (tests/correlator/sources/test_record_native.py feeds both
 * the same generated and hostile lines); it never produces a reject itself.
 *
 * The mapping runs without the GIL: a batch mapped in one thread overlaps the store's insert
 * of the previous one (DuckDB releases the GIL too).
 *
 * The tables it checks against (layers, owner layers, level words, the identifier length)
 * are handed over by configure(), from agent_logging.schema and _fields, so they have one
 * home. BLAKE2b follows RFC 7693 (digest size 8, the source kind as personalisation, as
 * _lines.hasher sets up hashlib's).
 *
 * Memory: per line, one scratch buffer reserved for three times the line (renderings, decoded
 * texts and attrs fit in it, so pointers into it stay valid while the row is built); per
 * batch, the column buffers, sized from the batch's bytes at the start.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------------------------- */
/* BLAKE2b, RFC 7693                                                                     */

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
static void b2_start(uint64_t h[8], const char *person, size_t person_len) {
    uint8_t p[16] = {0};
    memcpy(p, person, person_len > 16 ? 16 : person_len);
    for (int i = 0; i < 8; i++) h[i] = B2_IV[i];
    h[0] ^= 0x01010000ULL ^ 8ULL; /* fanout 1, depth 1, no key, digest length 8 */
    h[6] ^= load64(p);
    h[7] ^= load64(p + 8);
}

/* The content hash as _lines.hasher gives it: the digest read as a big-endian signed int. */
static int64_t b2_hash(const uint64_t start[8], const uint8_t *data, size_t len) {
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
    /* The digest's 8 bytes are h[0] little-endian; Python reads them big-endian. */
    uint8_t digest[8];
    for (int i = 0; i < 8; i++) digest[i] = (uint8_t)(h[0] >> (8 * i));
    uint64_t be = 0;
    for (int i = 0; i < 8; i++) be = (be << 8) | digest[i];
    return (int64_t)be;
}

/* ------------------------------------------------------------------------------------- */
/* Growable buffers and Arrow columns                                                     */

typedef struct {
    char *data;
    size_t len, cap;
} Buf;

static int buf_reserve(Buf *b, size_t extra) {
    if (b->len + extra <= b->cap) return 0;
    size_t cap = b->cap ? b->cap : 4096;
    while (cap < b->len + extra) cap *= 2;
    char *data = realloc(b->data, cap);
    if (data == NULL) return -1;
    b->data = data;
    b->cap = cap;
    return 0;
}

static int buf_put(Buf *b, const void *src, size_t n) {
    if (buf_reserve(b, n) < 0) return -1;
    memcpy(b->data + b->len, src, n);
    b->len += n;
    return 0;
}

/* A nullable column: the validity bitmap, (strings) int32 offsets, and the values. */
typedef struct {
    Buf validity, offsets, values;
    int64_t rows, nulls;
} Column;

static int col_valid(Column *c, int valid) {
    if ((c->rows & 7) == 0) {
        char zero = 0;
        if (buf_put(&c->validity, &zero, 1) < 0) return -1;
    }
    if (valid)
        c->validity.data[c->rows >> 3] |= (char)(1 << (c->rows & 7));
    else
        c->nulls++;
    c->rows++;
    return 0;
}

static int col_text(Column *c, const char *text, size_t len) {
    if (c->rows == 0) {
        int32_t zero = 0;
        if (buf_put(&c->offsets, &zero, 4) < 0) return -1;
    }
    if (text != NULL && buf_put(&c->values, text, len) < 0) return -1;
    if (c->values.len > INT32_MAX) return -1; /* the batch is cut far below this */
    int32_t end = (int32_t)c->values.len;
    if (buf_put(&c->offsets, &end, 4) < 0) return -1;
    return col_valid(c, text != NULL);
}

static int col_fixed(Column *c, const void *value, size_t width, int valid) {
    static const char zeros[8] = {0};
    if (buf_put(&c->values, valid ? value : zeros, width) < 0) return -1;
    return col_valid(c, valid);
}

static void col_free(Column *c) {
    free(c->validity.data);
    free(c->offsets.data);
    free(c->values.data);
    memset(c, 0, sizeof *c);
}

/* ------------------------------------------------------------------------------------- */
/* The tables configure() hands over                                                      */

#define MAX_WORDS 64

typedef struct {
    char *text;
    size_t len;
    int value; /* for level words: the index of the level name */
} Word;

static Word LAYERS[MAX_WORDS], OWNERS[MAX_WORDS], LEVEL_WORDS[MAX_WORDS], LEVEL_NAMES[MAX_WORDS];
static int N_LAYERS, N_OWNERS, N_LEVEL_WORDS, N_LEVEL_NAMES;
static size_t MAX_ID_LENGTH;
static size_t MAX_LINE_BYTES;
static int CONFIGURED;

static const Word *word_find(const Word *words, int n, const char *text, size_t len) {
    for (int i = 0; i < n; i++)
        if (words[i].len == len && memcmp(words[i].text, text, len) == 0) return &words[i];
    return NULL;
}

/* ------------------------------------------------------------------------------------- */
/* A canonicalising JSON reader                                                           */

/* The deepest nesting mapped here; deeper lines are declined (the Python path refuses past
 * _record.MAX_DEPTH, 254). */
#define NATIVE_DEPTH 64
/* Members of one object mapped here; more are declined. */
#define MAX_MEMBERS 128

enum { J_NULL, J_TRUE, J_FALSE, J_INT, J_FLOAT, J_STRING, J_OBJECT, J_ARRAY };

typedef struct {
    const char *p, *end;
    Buf *out; /* the canonical rendering (what orjson.dumps writes) goes here */
} Reader;

/* One member of an object: its key (no escapes: bytes of the line), its value's kind, its
 * canonical rendering in the out buffer, and for strings the decoded text. */
typedef struct {
    const char *key;
    size_t key_len;
    int kind;
    const char *canon; /* the rendering: in out, or the line's own bytes when they are it */
    size_t canon_len;
    const char *text;        /* decoded string (line or out buffer); stable: out is reserved */
    size_t text_len;
    int64_t integer;
    double real;
    int role;
} Member;

static inline void skip_ws(Reader *r) {
    while (r->p < r->end && (*r->p == ' ' || *r->p == '\t' || *r->p == '\n' || *r->p == '\r'))
        r->p++;
}

/* Strict UTF-8 (no overlongs, no surrogates, nothing past U+10FFFF), as Python decodes. */
static int utf8_valid(const unsigned char *s, size_t n) {
    size_t i = 0;
    while (i < n) {
        while (i + 8 <= n) {
            uint64_t w;
            memcpy(&w, s + i, 8);
            if (w & 0x8080808080808080ULL) break;
            i += 8;
        }
        if (i >= n) break;
        unsigned char c = s[i];
        if (c < 0x80) {
            i++;
        } else if (c >= 0xC2 && c <= 0xDF) {
            if (i + 1 >= n || (s[i + 1] & 0xC0) != 0x80) return 0;
            i += 2;
        } else if (c >= 0xE0 && c <= 0xEF) {
            if (i + 2 >= n || (s[i + 1] & 0xC0) != 0x80 || (s[i + 2] & 0xC0) != 0x80) return 0;
            if (c == 0xE0 && s[i + 1] < 0xA0) return 0;
            if (c == 0xED && s[i + 1] > 0x9F) return 0;
            i += 3;
        } else if (c >= 0xF0 && c <= 0xF4) {
            if (i + 3 >= n || (s[i + 1] & 0xC0) != 0x80 || (s[i + 2] & 0xC0) != 0x80 ||
                (s[i + 3] & 0xC0) != 0x80)
                return 0;
            if (c == 0xF0 && s[i + 1] < 0x90) return 0;
            if (c == 0xF4 && s[i + 1] > 0x8F) return 0;
            i += 4;
        } else {
            return 0;
        }
    }
    return 1;
}

static int hexval(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

static int read_hex4(const char *p) {
    int v = 0;
    for (int i = 0; i < 4; i++) {
        int d = hexval(p[i]);
        if (d < 0) return -1;
        v = v * 16 + d;
    }
    return v;
}

static void put_utf8(Buf *b, uint32_t cp) {
    char *o = b->data + b->len;
    if (cp < 0x80) {
        o[0] = (char)cp;
        b->len += 1;
    } else if (cp < 0x800) {
        o[0] = (char)(0xC0 | (cp >> 6));
        o[1] = (char)(0x80 | (cp & 0x3F));
        b->len += 2;
    } else if (cp < 0x10000) {
        o[0] = (char)(0xE0 | (cp >> 12));
        o[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        o[2] = (char)(0x80 | (cp & 0x3F));
        b->len += 3;
    } else {
        o[0] = (char)(0xF0 | (cp >> 18));
        o[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
        o[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
        o[3] = (char)(0x80 | (cp & 0x3F));
        b->len += 4;
    }
}

/* The escape at *q (just past its backslash): its code point, *q moved past it. -1 declines:
 * an unknown escape, a lone surrogate, or NUL (left to the reference). */
static int unescape(const char **q, const char *end, uint32_t *cp) {
    const char *p = *q;
    if (p >= end) return -1;
    char e = *p++;
    switch (e) {
        case '"': *cp = '"'; break;
        case '\\': *cp = '\\'; break;
        case '/': *cp = '/'; break;
        case 'b': *cp = '\b'; break;
        case 'f': *cp = '\f'; break;
        case 'n': *cp = '\n'; break;
        case 'r': *cp = '\r'; break;
        case 't': *cp = '\t'; break;
        case 'u': {
            if (end - p < 4) return -1;
            int high = read_hex4(p);
            if (high < 0) return -1;
            p += 4;
            if (high >= 0xD800 && high <= 0xDBFF) {
                if (end - p < 6 || p[0] != '\\' || p[1] != 'u') return -1;
                int low = read_hex4(p + 2);
                if (low < 0xDC00 || low > 0xDFFF) return -1;
                p += 6;
                *cp = 0x10000 + (((uint32_t)high - 0xD800) << 10) + ((uint32_t)low - 0xDC00);
            } else if ((high >= 0xDC00 && high <= 0xDFFF) || high == 0) {
                return -1;
            } else {
                *cp = (uint32_t)high;
            }
            break;
        }
        default: return -1;
    }
    *q = p;
    return 0;
}

/* A code point as orjson writes it inside a string. */
static void render_code_point(Buf *out, uint32_t cp) {
    static const char hex[] = "0123456789abcdef";
    char *o = out->data + out->len;
    switch (cp) {
        case '"': o[0] = '\\'; o[1] = '"'; out->len += 2; return;
        case '\\': o[0] = '\\'; o[1] = '\\'; out->len += 2; return;
        case '\b': o[0] = '\\'; o[1] = 'b'; out->len += 2; return;
        case '\f': o[0] = '\\'; o[1] = 'f'; out->len += 2; return;
        case '\n': o[0] = '\\'; o[1] = 'n'; out->len += 2; return;
        case '\r': o[0] = '\\'; o[1] = 'r'; out->len += 2; return;
        case '\t': o[0] = '\\'; o[1] = 't'; out->len += 2; return;
        default: break;
    }
    if (cp < 0x20) {
        memcpy(o, "\\u00", 4);
        o[4] = hex[cp >> 4];
        o[5] = hex[cp & 15];
        out->len += 6;
        return;
    }
    put_utf8(out, cp);
}

/* A string at r->p (its opening quote). Writes its rendering as orjson writes it (\" \\ \b
 * \f \n \r \t, other controls as \u00XX, everything else as UTF-8) to out. With want_text,
 * *text is its decoded content: the line's own bytes when it has no escape, else a copy
 * written to out after the rendering (so only members whose container's rendering is not
 * used whole ask for it). Returns the rendering's length, or -1 to decline. The buffer was
 * reserved for three times the line: nothing written here reallocates it. */
static long read_string(Reader *r, int want_text, const char **text, size_t *text_len) {
    const char *start = ++r->p, *p = start;
    Buf *out = r->out;
    size_t at = out->len;
    int escaped = 0;
    out->data[out->len++] = '"';
    while (1) {
        const char *run = p;
        while (p < r->end && *p != '"' && *p != '\\' && (unsigned char)*p >= 0x20) p++;
        memcpy(out->data + out->len, run, (size_t)(p - run));
        out->len += (size_t)(p - run);
        if (p >= r->end || (unsigned char)*p < 0x20) return -1;
        if (*p == '"') break;
        p++;
        uint32_t cp;
        if (unescape(&p, r->end, &cp) < 0) return -1;
        render_code_point(out, cp);
        escaped = 1;
    }
    out->data[out->len++] = '"';
    long rendered = (long)(out->len - at);
    r->p = p + 1;
    if (!want_text) return rendered;
    if (!escaped) {
        *text = start;
        *text_len = (size_t)(p - start);
        return rendered;
    }
    size_t text_at = out->len;
    const char *q = start;
    while (q < p) {
        if (*q != '\\') {
            out->data[out->len++] = *q++;
            continue;
        }
        q++;
        uint32_t cp;
        unescape(&q, p + 1, &cp); /* proven above */
        put_utf8(out, cp);
    }
    *text = out->data + text_at;
    *text_len = out->len - text_at;
    return rendered;
}

static int read_value(Reader *r, int depth, Member *m, int want_text);

/* A number at r->p. Integers within 64 signed bits, and floats whose text is what orjson
 * writes for them, are taken (their text is their rendering); any other number declines. */
static int read_number(Reader *r, Member *m) {
    const char *s = r->p, *p = s;
    int negative = 0;
    if (p < r->end && *p == '-') {
        negative = 1;
        p++;
    }
    const char *int_start = p;
    if (p >= r->end || *p < '0' || *p > '9') return -1;
    if (*p == '0')
        p++;
    else
        while (p < r->end && *p >= '0' && *p <= '9') p++;
    size_t int_digits = (size_t)(p - int_start);
    int int_zero = int_digits == 1 && *int_start == '0';
    if (p < r->end && (*p == 'e' || *p == 'E')) return -1; /* an exponent: orjson rewrites it */
    if (p < r->end && *p == '.') {
        const char *frac = ++p;
        while (p < r->end && *p >= '0' && *p <= '9') p++;
        size_t frac_digits = (size_t)(p - frac);
        if (frac_digits == 0) return -1;
        if (p < r->end && (*p == 'e' || *p == 'E')) return -1;
        /* orjson writes the shortest text that reads back: for at most 15 significant digits
         * that is the decimal itself, without trailing zeros but for "N.0", and without an
         * exponent from 1e-4 to below 1e16 (test_record_native proves it against orjson). */
        if (frac_digits > 1 && frac[frac_digits - 1] == '0') return -1;
        size_t significant;
        if (int_zero) {
            size_t zeros = 0;
            while (zeros < frac_digits && frac[zeros] == '0') zeros++;
            if (zeros == frac_digits) { /* 0.0 (-0.0 is left to the reference) */
                if (negative) return -1;
                significant = 1;
            } else {
                if (zeros > 3) return -1;
                significant = frac_digits - zeros;
            }
        } else {
            significant = int_digits + (frac_digits == 1 && frac[0] == '0' ? 0 : frac_digits);
        }
        if (significant > 15) return -1;
        /* Its value, exactly as a correct strtod reads it (and with no locale): the digits
         * as an integer below 2^53 divided by a power of ten below 10^23, both exact, is one
         * correctly rounded division (Clinger's fast path). "N.0" is the integer N. */
        static const double POW10[] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,
                                       1e8,  1e9,  1e10, 1e11, 1e12, 1e13, 1e14, 1e15,
                                       1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};
        int whole = frac_digits == 1 && frac[0] == '0';
        uint64_t digits_value = 0;
        for (const char *d = int_start; d < int_start + int_digits; d++)
            digits_value = digits_value * 10 + (uint64_t)(*d - '0');
        size_t scale = 0;
        if (!whole) {
            for (size_t k = 0; k < frac_digits; k++)
                digits_value = digits_value * 10 + (uint64_t)(frac[k] - '0');
            scale = frac_digits; /* at most 18: 15 significant digits after 3 zeros */
        }
        double value = (double)digits_value / POW10[scale];
        m->kind = J_FLOAT;
        m->real = negative ? -value : value;
    } else {
        if (int_digits > 19) return -1;
        if (negative && int_zero) return -1; /* -0: orjson writes 0 */
        uint64_t v = 0;
        for (const char *d = int_start; d < p; d++) v = v * 10 + (uint64_t)(*d - '0');
        /* 19 digits fit in 64 unsigned bits; past the signed range is left to the reference */
        if (v > (uint64_t)INT64_MAX + (uint64_t)negative) return -1;
        m->kind = J_INT;
        m->integer = negative ? (int64_t)(0 - v) : (int64_t)v;
    }
    r->p = p;
    return 0;
}

typedef struct {
    const char *text;
    size_t len;
} Key;

/* The key of an object member at r->p: no escape, no control; *key and *len set. */
static int read_key(Reader *r, const char **key, size_t *len) {
    if (r->p >= r->end || *r->p != '"') return -1;
    const char *k = r->p + 1, *q = k;
    while (q < r->end && *q != '"' && *q != '\\' && (unsigned char)*q >= 0x20) q++;
    if (q >= r->end || *q != '"') return -1;
    *key = k;
    *len = (size_t)(q - k);
    r->p = q + 1;
    skip_ws(r);
    if (r->p >= r->end || *r->p != ':') return -1;
    r->p++;
    skip_ws(r);
    return 0;
}

/* Whether the key was seen among the first n of an object (orjson keeps a repeated key's last
 * value at its first place: such a line is the reference's). */
static int key_seen(const Key *keys, int n, const char *key, size_t len) {
    for (int i = 0; i < n; i++)
        if (keys[i].len == len && memcmp(keys[i].text, key, len) == 0) return 1;
    return 0;
}

/* An object at r->p. ``members`` (or NULL) receives its members, decoded text and all;
 * *count their number. A repeated key, or a key with an escape or a control, declines. */
static int read_object(Reader *r, int depth, Member *members, int *count) {
    Key keys[MAX_MEMBERS];
    int n = 0;
    Buf *out = r->out;
    r->p++;
    out->data[out->len++] = '{';
    skip_ws(r);
    if (r->p < r->end && *r->p == '}') {
        r->p++;
        out->data[out->len++] = '}';
        *count = 0;
        return 0;
    }
    while (1) {
        skip_ws(r);
        const char *key;
        size_t key_len;
        if (n >= MAX_MEMBERS || read_key(r, &key, &key_len) < 0) return -1;
        if (key_seen(keys, n, key, key_len)) return -1;
        keys[n].text = key;
        keys[n].len = key_len;
        if (n) out->data[out->len++] = ',';
        memcpy(out->data + out->len, key - 1, key_len + 2);
        out->len += key_len + 2;
        out->data[out->len++] = ':';
        Member scratch;
        Member *m = members ? &members[n] : &scratch;
        m->key = key;
        m->key_len = key_len;
        if (read_value(r, depth + 1, m, members != NULL) < 0) return -1;
        n++;
        skip_ws(r);
        if (r->p >= r->end) return -1;
        if (*r->p == ',') {
            r->p++;
            continue;
        }
        if (*r->p != '}') return -1;
        r->p++;
        out->data[out->len++] = '}';
        *count = n;
        return 0;
    }
}

static int read_array(Reader *r, int depth) {
    Buf *out = r->out;
    r->p++;
    out->data[out->len++] = '[';
    skip_ws(r);
    if (r->p < r->end && *r->p == ']') {
        r->p++;
        out->data[out->len++] = ']';
        return 0;
    }
    for (int first = 1;; first = 0) {
        skip_ws(r);
        if (!first) out->data[out->len++] = ',';
        Member m;
        if (read_value(r, depth + 1, &m, 0) < 0) return -1;
        skip_ws(r);
        if (r->p >= r->end) return -1;
        if (*r->p == ',') {
            r->p++;
            continue;
        }
        if (*r->p != ']') return -1;
        r->p++;
        out->data[out->len++] = ']';
        return 0;
    }
}

/* Any value at r->p: its kind and rendering (m->canon, m->canon_len); for a string with
 * want_text, its decoded text too. A member whose container's rendering is not used whole
 * (want_text: the record's own members, error's) keeps a string without escapes, a number or
 * a literal as the line's own bytes, which are its rendering; anything else is written to
 * out, where a container's rendering is written whole. */
static int read_value(Reader *r, int depth, Member *m, int want_text) {
    if (depth > NATIVE_DEPTH || r->p >= r->end) return -1;
    Buf *out = r->out;
    size_t at = out->len;
    const char *p = r->p;
    m->text = NULL;
    m->text_len = 0;
    switch (*p) {
        case '"': {
            if (want_text) { /* no escape: the line's bytes are the rendering and the text */
                const char *q = p + 1;
                while (q < r->end && *q != '"' && *q != '\\' && (unsigned char)*q >= 0x20) q++;
                if (q < r->end && *q == '"') {
                    m->kind = J_STRING;
                    m->canon = p;
                    m->canon_len = (size_t)(q + 1 - p);
                    m->text = p + 1;
                    m->text_len = (size_t)(q - p - 1);
                    r->p = q + 1;
                    return 0;
                }
            }
            long rendered = read_string(r, want_text, &m->text, &m->text_len);
            if (rendered < 0) return -1;
            m->kind = J_STRING;
            m->canon = out->data + at;
            m->canon_len = (size_t)rendered;
            return 0;
        }
        case '{': {
            int count;
            if (read_object(r, depth, NULL, &count) < 0) return -1;
            m->kind = J_OBJECT;
            m->canon = out->data + at;
            m->canon_len = out->len - at;
            return 0;
        }
        case '[':
            if (read_array(r, depth) < 0) return -1;
            m->kind = J_ARRAY;
            m->canon = out->data + at;
            m->canon_len = out->len - at;
            return 0;
        case 't':
            if (r->end - p < 4 || memcmp(p, "true", 4) != 0) return -1;
            m->kind = J_TRUE;
            r->p += 4;
            break;
        case 'f':
            if (r->end - p < 5 || memcmp(p, "false", 5) != 0) return -1;
            m->kind = J_FALSE;
            r->p += 5;
            break;
        case 'n':
            if (r->end - p < 4 || memcmp(p, "null", 4) != 0) return -1;
            m->kind = J_NULL;
            r->p += 4;
            break;
        default:
            if (read_number(r, m) < 0) return -1; /* its text is its rendering */
    }
    /* A literal or a number: the line's bytes, copied only inside a container. */
    m->canon = p;
    m->canon_len = (size_t)(r->p - p);
    if (!want_text) {
        memcpy(out->data + out->len, p, m->canon_len);
        out->len += m->canon_len;
        m->canon = out->data + at;
    }
    return 0;
}

/* ------------------------------------------------------------------------------------- */
/* The record mapping: _record.record_row_positional for the lines it maps unchanged       */

enum {
    R_ATTR, /* stays in attrs */
    R_TS, R_LAYER, R_SERVICE, R_LEVEL, R_EVENT, R_ERROR, R_MSG, R_MESSAGE,
    R_NODE_ID, R_NODE_INSTANCE_ID, R_CORRELATION_ID, R_ALLOCATION_ID, R_WORKFLOW_ID,
    R_TRACE_ID, R_SPAN_ID, R_METHOD, R_PATH, R_STATUS, R_DURATION,
    R_ENTITY_KIND, R_ENTITY_ID, R_STATE_FROM, R_FROM_STATE, R_STATE_TO, R_TO_STATE,
    R_BULKY, /* tracebacks: in raw only */
    N_ROLES
};

typedef struct {
    const char *key;
    int role;
} RoleName;

static const RoleName ROLE_NAMES[] = {
    {"ts", R_TS}, {"layer", R_LAYER}, {"service", R_SERVICE}, {"level", R_LEVEL},
    {"event", R_EVENT}, {"error", R_ERROR}, {"msg", R_MSG}, {"message", R_MESSAGE},
    {"node_id", R_NODE_ID}, {"node_instance_id", R_NODE_INSTANCE_ID},
    {"correlation_id", R_CORRELATION_ID}, {"allocation_id", R_ALLOCATION_ID},
    {"workflow_id", R_WORKFLOW_ID}, {"trace_id", R_TRACE_ID}, {"span_id", R_SPAN_ID},
    {"method", R_METHOD}, {"path", R_PATH}, {"status", R_STATUS}, {"duration_s", R_DURATION},
    {"entity_kind", R_ENTITY_KIND}, {"entity_id", R_ENTITY_ID}, {"state_from", R_STATE_FROM},
    {"from_state", R_FROM_STATE}, {"state_to", R_STATE_TO}, {"to_state", R_TO_STATE},
    {"exception", R_BULKY}, {"stack", R_BULKY}, {"exc_info", R_BULKY}, {"stack_info", R_BULKY},
};

static size_t ROLE_LENGTHS[sizeof ROLE_NAMES / sizeof ROLE_NAMES[0]];

static int role_of(const char *key, size_t len) {
    if (len < 2 || len > 16) return R_ATTR;
    for (size_t i = 0; i < sizeof ROLE_NAMES / sizeof ROLE_NAMES[0]; i++)
        if (ROLE_LENGTHS[i] == len && ROLE_NAMES[i].key[0] == key[0] &&
            memcmp(ROLE_NAMES[i].key, key, len) == 0)
            return ROLE_NAMES[i].role;
    return R_ATTR;
}

/* A text value of a row: absent (NULL) or bytes somewhere stable while the row is built. */
typedef struct {
    const char *text;
    size_t len;
} Text;

typedef struct {
    int64_t ts_ns, hash, status;
    double duration;
    int has_status, has_duration;
    Text layer, message, service, level, ids[5], trace_id, span_id, method, path, owner_hint,
        error_type, entity_kind, entity_id, state_from, state_to, attrs;
} Row;

static int is_digit(char c) { return c >= '0' && c <= '9'; }

static int digits(const char *p, int n, int *value) {
    int v = 0;
    for (int i = 0; i < n; i++) {
        if (!is_digit(p[i])) return -1;
        v = v * 10 + (p[i] - '0');
    }
    *value = v;
    return 0;
}

/* Days since 1970-01-01 of a proleptic Gregorian date (era arithmetic). */
static int64_t days_from_civil(int64_t y, int m, int d) {
    y -= m <= 2;
    int64_t era = (y >= 0 ? y : y - 399) / 400;
    int64_t yoe = y - era * 400;
    int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
    int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + doe - 719468;
}

/* The canonical RFC 3339 forms _time.parse_rfc3339_ns reads (YYYY-MM-DDTHH:MM:SS, 1 to 9
 * fraction digits after ".", then Z or ±HH:MM), in the years whose every instant the store
 * holds; anything else (a space, a comma, more digits, another offset form) declines. */
static int parse_ts(const char *s, size_t n, int64_t *ts_ns) {
    int year, month, day, hour, minute, second;
    if (n < 20 || s[4] != '-' || s[7] != '-' || s[10] != 'T' || s[13] != ':' || s[16] != ':')
        return -1;
    if (digits(s, 4, &year) || digits(s + 5, 2, &month) || digits(s + 8, 2, &day) ||
        digits(s + 11, 2, &hour) || digits(s + 14, 2, &minute) || digits(s + 17, 2, &second))
        return -1;
    if (year < 1678 || year > 2261 || month < 1 || month > 12 || day < 1) return -1;
    static const int month_days[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    int leap = (year % 4 == 0 && year % 100 != 0) || year % 400 == 0;
    if (day > month_days[month - 1] + (month == 2 && leap)) return -1;
    if (hour > 23 || minute > 59 || second > 60) return -1;
    size_t i = 19;
    int64_t fraction = 0;
    if (i < n && s[i] == '.') {
        size_t start = ++i;
        while (i < n && is_digit(s[i])) fraction = fraction * 10 + (s[i++] - '0');
        size_t count = i - start;
        if (count == 0 || count > 9) return -1;
        for (size_t k = count; k < 9; k++) fraction *= 10;
    }
    int64_t offset = 0;
    if (i + 1 == n && s[i] == 'Z') {
        offset = 0;
    } else if (i + 6 == n && (s[i] == '+' || s[i] == '-') && s[i + 3] == ':') {
        int oh, om;
        if (digits(s + i + 1, 2, &oh) || digits(s + i + 4, 2, &om) || oh > 23 || om > 59)
            return -1;
        offset = (s[i] == '-' ? -1 : 1) * (int64_t)(oh * 3600 + om * 60);
    } else {
        return -1;
    }
    int64_t seconds = days_from_civil(year, month, day) * 86400 + hour * 3600 + minute * 60 +
                      second - offset;
    *ts_ns = seconds * 1000000000LL + fraction;
    return 0;
}

/* agent_logging.schema's identifier rule (_fields._SAFE_ID). */
static int safe_id(const char *s, size_t n) {
    if (n < 1 || n > MAX_ID_LENGTH) return 0;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || is_digit(c) || c == '.' ||
              c == '_' || c == ':' || c == '/' || c == '@' || c == '+' || c == '~' || c == '-'))
            return 0;
    }
    return 1;
}

static int lower_hex(const char *s, size_t n, size_t want) {
    if (n != want) return 0;
    int zero = 1;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (!(is_digit(c) || (c >= 'a' && c <= 'f'))) return 0;
        zero &= c == '0';
    }
    return !zero; /* the all-zero id means "none" and is refused */
}

static int nonempty_string(const Member *m) { return m->kind == J_STRING && m->text_len > 0; }

static Text text_of(const Member *m) { return (Text){m->text, m->text_len}; }

/* An integer's decimal text, written to out (reserved). */
static Text integer_text(Buf *out, int64_t v) {
    char *at = out->data + out->len;
    int n = snprintf(at, 24, "%lld", (long long)v);
    out->len += (size_t)n;
    return (Text){at, (size_t)n};
}

/* One of the five identifiers: absent, a safe string, or an integer as its text. */
static int take_id(const Member *m, Buf *out, Text *id) {
    if (m == NULL || m->kind == J_NULL) return 0;
    if (m->kind == J_STRING && safe_id(m->text, m->text_len)) {
        *id = text_of(m);
        return 0;
    }
    if (m->kind == J_INT) {
        *id = integer_text(out, m->integer);
        return 0;
    }
    return -1; /* refused: the reference notes why in attrs["rejected_ids"] */
}

/* A member's key and value appended to an attrs object being written to out. */
static void put_member(Buf *out, int *first, const Member *m) {
    out->data[out->len++] = *first ? '{' : ',';
    *first = 0;
    out->data[out->len++] = '"';
    memcpy(out->data + out->len, m->key, m->key_len);
    out->len += m->key_len;
    out->data[out->len++] = '"';
    out->data[out->len++] = ':';
    memcpy(out->data + out->len, m->canon, m->canon_len);
    out->len += m->canon_len;
}

typedef struct {
    Member members[MAX_MEMBERS];
    Member error_members[MAX_MEMBERS];
    Key keys[MAX_MEMBERS];
    int count, error_count, error_object;
    int at[N_ROLES]; /* the member of each role, or -1 */
} Record;

/* The top-level object of a line: its members, with their roles; error's own members when
 * error is an object. */
static int read_record(Reader *r, Record *rec) {
    for (int i = 0; i < N_ROLES; i++) rec->at[i] = -1;
    rec->count = rec->error_count = rec->error_object = 0;
    skip_ws(r);
    if (r->p >= r->end || *r->p != '{') return -1;
    r->p++;
    skip_ws(r);
    if (r->p < r->end && *r->p == '}') {
        r->p++;
    } else {
        while (1) {
            if (rec->count >= MAX_MEMBERS) return -1;
            Member *m = &rec->members[rec->count];
            if (read_key(r, &m->key, &m->key_len) < 0) return -1;
            if (key_seen(rec->keys, rec->count, m->key, m->key_len)) return -1;
            rec->keys[rec->count] = (Key){m->key, m->key_len};
            m->role = role_of(m->key, m->key_len);
            if (m->role == R_ERROR && r->p < r->end && *r->p == '{') {
                size_t at = r->out->len;
                if (read_object(r, 1, rec->error_members, &rec->error_count) < 0) return -1;
                m->kind = J_OBJECT;
                m->canon = r->out->data + at;
                m->canon_len = r->out->len - at;
                rec->error_object = 1;
            } else if (read_value(r, 1, m, 1) < 0) {
                return -1;
            }
            if (m->role != R_ATTR && m->role != R_BULKY) rec->at[m->role] = rec->count;
            rec->count++;
            skip_ws(r);
            if (r->p >= r->end) return -1;
            if (*r->p == ',') {
                r->p++;
                skip_ws(r);
                continue;
            }
            if (*r->p != '}') return -1;
            r->p++;
            break;
        }
    }
    skip_ws(r);
    return r->p == r->end ? 0 : -1;
}

/* The row of a line, or -1 to decline it. ``taken`` marks the members that left attrs. */
static int map_record(Record *rec, Buf *out, const Text *default_layer, Row *row) {
    char taken[MAX_MEMBERS] = {0};
    Member *ms = rec->members;
#define GET(role) (rec->at[role] >= 0 ? &ms[rec->at[role]] : NULL)
#define TAKE(role) (taken[rec->at[role]] = 1)
    for (int i = 0; i < rec->count; i++)
        if (ms[i].role != R_ATTR && ms[i].role != R_METHOD && ms[i].role != R_PATH &&
            ms[i].role != R_ENTITY_KIND && ms[i].role != R_ENTITY_ID &&
            ms[i].role != R_STATE_FROM && ms[i].role != R_FROM_STATE &&
            ms[i].role != R_STATE_TO && ms[i].role != R_TO_STATE && ms[i].role != R_MSG &&
            ms[i].role != R_MESSAGE)
            taken[i] = 1; /* popped by the mapping whatever they hold (or declined below) */

    Member *m = GET(R_TS);
    if (m == NULL || m->kind != J_STRING || parse_ts(m->text, m->text_len, &row->ts_ns) < 0)
        return -1;

    m = GET(R_LAYER);
    if (m != NULL && m->kind != J_NULL) {
        if (m->kind != J_STRING) return -1;
        const Word *w = word_find(LAYERS, N_LAYERS, m->text, m->text_len);
        if (w == NULL) return -1;
        row->layer = (Text){w->text, w->len};
    } else {
        if (default_layer->text == NULL) return -1;
        row->layer = *default_layer;
    }

    m = GET(R_SERVICE);
    row->service = (Text){NULL, 0};
    if (m != NULL && m->kind != J_NULL) {
        if (!nonempty_string(m)) return -1;
        row->service = text_of(m);
    }

    m = GET(R_LEVEL);
    const Word *level = &LEVEL_NAMES[1]; /* "info": configure() puts it there */
    if (m != NULL && m->kind != J_NULL) {
        if (m->kind != J_STRING) return -1;
        const Word *w = word_find(LEVEL_WORDS, N_LEVEL_WORDS, m->text, m->text_len);
        if (w == NULL && m->text_len <= 16) {
            char lower[16];
            for (size_t i = 0; i < m->text_len; i++) {
                char c = m->text[i];
                if (c >= 'A' && c <= 'Z') c = (char)(c - 'A' + 'a');
                else if (!(c >= 'a' && c <= 'z')) return -1;
                lower[i] = c;
            }
            w = word_find(LEVEL_WORDS, N_LEVEL_WORDS, lower, m->text_len);
        }
        if (w == NULL) return -1;
        level = &LEVEL_NAMES[w->value];
    }
    row->level = (Text){level->text, level->len};

    m = GET(R_EVENT);
    if (m != NULL && m->kind != J_NULL) {
        if (m->kind != J_STRING) return -1;
        row->message = text_of(m);
    } else {
        /* pop("msg") or pop("message") or "" */
        row->message = (Text){"", 0};
        Member *msg = GET(R_MSG);
        int found = 0;
        if (msg != NULL) {
            TAKE(R_MSG);
            if (nonempty_string(msg)) {
                row->message = text_of(msg);
                found = 1;
            } else if (msg->kind != J_NULL && msg->kind != J_STRING) {
                return -1;
            }
        }
        Member *message = GET(R_MESSAGE);
        if (!found && message != NULL) {
            TAKE(R_MESSAGE);
            if (nonempty_string(message))
                row->message = text_of(message);
            else if (message->kind != J_NULL && message->kind != J_STRING)
                return -1;
        }
    }

    for (int k = 0; k < 5; k++) {
        row->ids[k] = (Text){NULL, 0};
        if (take_id(GET(R_NODE_ID + k), out, &row->ids[k]) < 0) return -1;
    }
    row->trace_id = row->span_id = (Text){NULL, 0};
    m = GET(R_TRACE_ID);
    if (m != NULL && m->kind != J_NULL) {
        if (m->kind != J_STRING || !lower_hex(m->text, m->text_len, 32)) return -1;
        row->trace_id = text_of(m);
    }
    m = GET(R_SPAN_ID);
    if (m != NULL && m->kind != J_NULL) {
        if (m->kind != J_STRING || !lower_hex(m->text, m->text_len, 16)) return -1;
        row->span_id = text_of(m);
    }

    row->owner_hint = row->error_type = (Text){NULL, 0};
    char error_taken[MAX_MEMBERS] = {0};
    int error_kept = 0;
    m = GET(R_ERROR);
    if (m != NULL && rec->error_object) {
        for (int i = 0; i < rec->error_count; i++) {
            Member *e = &rec->error_members[i];
            if (e->key_len == 11 && memcmp(e->key, "owner_layer", 11) == 0) {
                error_taken[i] = 1;
                if (e->kind == J_NULL) continue;
                if (e->kind != J_STRING) return -1;
                const Word *w = word_find(OWNERS, N_OWNERS, e->text, e->text_len);
                if (w == NULL) return -1; /* kept untrusted, after the rest: the reference's */
                row->owner_hint = (Text){w->text, w->len};
            } else if (e->key_len == 4 && memcmp(e->key, "type", 4) == 0) {
                error_taken[i] = 1;
                if (e->kind == J_NULL) continue;
                if (!nonempty_string(e)) return -1;
                row->error_type = text_of(e);
            } else if (e->key_len == 5 && memcmp(e->key, "stack", 5) == 0) {
                error_taken[i] = 1;
            } else {
                error_kept++;
            }
        }
    }

    row->method = row->path = (Text){NULL, 0};
    row->has_status = row->has_duration = 0;
    m = GET(R_METHOD);
    if (m != NULL && nonempty_string(m)) {
        TAKE(R_METHOD);
        row->method = text_of(m);
    }
    m = GET(R_PATH);
    if (m != NULL && nonempty_string(m)) {
        TAKE(R_PATH);
        row->path = text_of(m);
    }
    m = GET(R_STATUS);
    if (m != NULL && m->kind != J_NULL) {
        if (m->kind != J_INT || m->integer < 100 || m->integer > 599) return -1;
        row->status = m->integer;
        row->has_status = 1;
    }
    m = GET(R_DURATION);
    if (m != NULL && m->kind != J_NULL) {
        if (m->kind == J_INT)
            row->duration = (double)m->integer;
        else if (m->kind == J_FLOAT)
            row->duration = m->real;
        else
            return -1;
        row->has_duration = 1;
    }

    row->entity_kind = row->entity_id = row->state_from = row->state_to = (Text){NULL, 0};
    m = GET(R_ENTITY_KIND);
    if (m != NULL && nonempty_string(m)) {
        TAKE(R_ENTITY_KIND);
        row->entity_kind = text_of(m);
    }
    m = GET(R_ENTITY_ID);
    if (m != NULL && nonempty_string(m)) {
        TAKE(R_ENTITY_ID);
        row->entity_id = text_of(m);
    } else if (m != NULL && m->kind == J_INT) {
        TAKE(R_ENTITY_ID);
        row->entity_id = integer_text(out, m->integer);
    }
    static const int STATES[2][2] = {{R_STATE_FROM, R_FROM_STATE}, {R_STATE_TO, R_TO_STATE}};
    for (int k = 0; k < 2; k++) {
        Text *state = k == 0 ? &row->state_from : &row->state_to;
        for (int j = 0; j < 2 && state->text == NULL; j++) {
            m = GET(STATES[k][j]);
            if (m != NULL && nonempty_string(m)) {
                TAKE(STATES[k][j]);
                *state = text_of(m);
            }
        }
    }

    /* attrs: what is left, in the record's order; error (what is left of it) last. */
    size_t at = out->len;
    int first = 1;
    for (int i = 0; i < rec->count; i++)
        if (!taken[i]) put_member(out, &first, &ms[i]);
    if (m = GET(R_ERROR), m != NULL && m->kind != J_NULL && (!rec->error_object || error_kept)) {
        out->data[out->len++] = first ? '{' : ',';
        first = 0;
        memcpy(out->data + out->len, "\"error\":", 8);
        out->len += 8;
        if (!rec->error_object) {
            memcpy(out->data + out->len, m->canon, m->canon_len);
            out->len += m->canon_len;
        } else {
            int inner = 1;
            for (int i = 0; i < rec->error_count; i++)
                if (!error_taken[i]) put_member(out, &inner, &rec->error_members[i]);
            out->data[out->len++] = '}';
        }
    }
    if (first) {
        row->attrs = (Text){NULL, 0};
    } else {
        out->data[out->len++] = '}';
        row->attrs = (Text){out->data + at, out->len - at};
    }
    return 0;
#undef GET
#undef TAKE
}

/* ------------------------------------------------------------------------------------- */
/* The module                                                                             */

enum {
    C_TS_NS, C_LAYER, C_SOURCE, C_ORIGIN, C_MESSAGE, C_RAW, C_HASH, C_SERVICE, C_LEVEL,
    C_NODE_ID, C_NODE_INSTANCE_ID, C_CORRELATION_ID, C_ALLOCATION_ID, C_WORKFLOW_ID,
    C_TRACE_ID, C_SPAN_ID, C_HTTP_METHOD, C_HTTP_PATH, C_HTTP_STATUS, C_DURATION_S,
    C_OWNER_HINT, C_ERROR_TYPE, C_ENTITY_KIND, C_ENTITY_ID, C_STATE_FROM, C_STATE_TO, C_ATTRS,
    N_COLUMNS
};

/* The events table's columns, in _schema's order (the Python side checks the names). */
static const char *COLUMN_NAMES[N_COLUMNS] = {
    "ts_ns", "layer", "source", "origin", "message", "raw", "hash", "service", "level",
    "node_id", "node_instance_id", "correlation_id", "allocation_id", "workflow_id",
    "trace_id", "span_id", "http_method", "http_path", "http_status", "duration_s",
    "owner_hint", "error_type", "entity_kind", "entity_id", "state_from", "state_to", "attrs",
};

static int put_text(Column *c, Text t) { return col_text(c, t.text, t.len); }

static int append_row(Column *cols, const Row *row, Text source, Text origin, Text raw) {
    int rc = 0;
    rc |= col_fixed(&cols[C_TS_NS], &row->ts_ns, 8, 1);
    rc |= put_text(&cols[C_LAYER], row->layer);
    rc |= put_text(&cols[C_SOURCE], source);
    rc |= put_text(&cols[C_ORIGIN], origin);
    rc |= put_text(&cols[C_MESSAGE], row->message);
    rc |= put_text(&cols[C_RAW], raw);
    rc |= col_fixed(&cols[C_HASH], &row->hash, 8, 1);
    rc |= put_text(&cols[C_SERVICE], row->service);
    rc |= put_text(&cols[C_LEVEL], row->level);
    for (int k = 0; k < 5; k++) rc |= put_text(&cols[C_NODE_ID + k], row->ids[k]);
    rc |= put_text(&cols[C_TRACE_ID], row->trace_id);
    rc |= put_text(&cols[C_SPAN_ID], row->span_id);
    rc |= put_text(&cols[C_HTTP_METHOD], row->method);
    rc |= put_text(&cols[C_HTTP_PATH], row->path);
    int32_t status = (int32_t)row->status;
    rc |= col_fixed(&cols[C_HTTP_STATUS], &status, 4, row->has_status);
    rc |= col_fixed(&cols[C_DURATION_S], &row->duration, 8, row->has_duration);
    rc |= put_text(&cols[C_OWNER_HINT], row->owner_hint);
    rc |= put_text(&cols[C_ERROR_TYPE], row->error_type);
    rc |= put_text(&cols[C_ENTITY_KIND], row->entity_kind);
    rc |= put_text(&cols[C_ENTITY_ID], row->entity_id);
    rc |= put_text(&cols[C_STATE_FROM], row->state_from);
    rc |= put_text(&cols[C_STATE_TO], row->state_to);
    rc |= put_text(&cols[C_ATTRS], row->attrs);
    return rc ? -1 : 0;
}

static int read_words(PyObject *seq, Word *words, int *count, const char *what) {
    PyObject *fast = PySequence_Fast(seq, what);
    if (fast == NULL) return -1;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(fast);
    if (n > MAX_WORDS) {
        Py_DECREF(fast);
        PyErr_Format(PyExc_ValueError, "%s: more than %d words", what, MAX_WORDS);
        return -1;
    }
    for (int i = 0; i < *count; i++) free(words[i].text);
    *count = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_ssize_t len;
        const char *text = PyUnicode_AsUTF8AndSize(PySequence_Fast_GET_ITEM(fast, i), &len);
        if (text == NULL) {
            Py_DECREF(fast);
            return -1;
        }
        words[i].text = malloc((size_t)len + 1);
        if (words[i].text == NULL) {
            Py_DECREF(fast);
            PyErr_NoMemory();
            return -1;
        }
        memcpy(words[i].text, text, (size_t)len + 1);
        words[i].len = (size_t)len;
        words[i].value = 0;
        *count = (int)i + 1;
    }
    Py_DECREF(fast);
    return 0;
}

PyDoc_STRVAR(configure_doc,
"configure(layers, owner_layers, level_names, level_words, max_id_length, max_line_bytes)\n"
"\n"
"The tables the mapping checks against: the evidence layers, the owner layers, the model's\n"
"levels (\"info\" second), each level word with the index of its level, the identifiers'\n"
"longest length and the longest line read.");

static PyObject *configure(PyObject *self, PyObject *args) {
    PyObject *layers, *owners, *names, *words;
    Py_ssize_t max_id, max_line;
    if (!PyArg_ParseTuple(args, "OOOOnn", &layers, &owners, &names, &words, &max_id, &max_line))
        return NULL;
    if (read_words(layers, LAYERS, &N_LAYERS, "layers") < 0 ||
        read_words(owners, OWNERS, &N_OWNERS, "owner_layers") < 0 ||
        read_words(names, LEVEL_NAMES, &N_LEVEL_NAMES, "level_names") < 0)
        return NULL;
    if (N_LEVEL_NAMES < 2 || strcmp(LEVEL_NAMES[1].text, "info") != 0) {
        PyErr_SetString(PyExc_ValueError, "level_names: \"info\" must come second");
        return NULL;
    }
    PyObject *keys = PyDict_Keys(words);
    if (keys == NULL) return NULL;
    int rc = read_words(keys, LEVEL_WORDS, &N_LEVEL_WORDS, "level_words");
    Py_DECREF(keys);
    if (rc < 0) return NULL;
    for (int i = 0; i < N_LEVEL_WORDS; i++) {
        PyObject *value = PyDict_GetItemString(words, LEVEL_WORDS[i].text);
        long index = value ? PyLong_AsLong(value) : -1;
        if (index < 0 || index >= N_LEVEL_NAMES) {
            if (!PyErr_Occurred())
                PyErr_Format(PyExc_ValueError, "level_words: %s names no level",
                             LEVEL_WORDS[i].text);
            return NULL;
        }
        LEVEL_WORDS[i].value = (int)index;
    }
    MAX_ID_LENGTH = (size_t)max_id;
    MAX_LINE_BYTES = (size_t)max_line;
    CONFIGURED = 1;
    Py_RETURN_NONE;
}

static PyObject *column_buffers(Column *c, int kind_text) {
    PyObject *validity, *offsets, *values;
    if (c->nulls) {
        validity = PyBytes_FromStringAndSize(c->validity.data, (Py_ssize_t)c->validity.len);
    } else {
        validity = Py_None;
        Py_INCREF(validity);
    }
    if (kind_text) {
        offsets = c->rows ? PyBytes_FromStringAndSize(c->offsets.data, (Py_ssize_t)c->offsets.len)
                          : PyBytes_FromStringAndSize("\0\0\0\0", 4);
    } else {
        offsets = Py_None;
        Py_INCREF(offsets);
    }
    values = PyBytes_FromStringAndSize(c->values.data ? c->values.data : "",
                                       (Py_ssize_t)c->values.len);
    if (validity == NULL || offsets == NULL || values == NULL) {
        Py_XDECREF(validity);
        Py_XDECREF(offsets);
        Py_XDECREF(values);
        return NULL;
    }
    return Py_BuildValue("(NNNL)", validity, offsets, values, (long long)c->nulls);
}

PyDoc_STRVAR(map_lines_doc,
"map_lines(lines, source, origin, default_layer) -> (rows, columns, declined)\n"
"\n"
"Map JSON lines (bytes, without their newline) as _record.record_row_positional does,\n"
"attrs as JSON text. ``columns`` maps each column name of the events table to\n"
"(validity or None, offsets or None, values, null count), Arrow's buffers; ``declined``\n"
"lists the indexes of the lines left to the Python mapping. Runs without the GIL.");

static PyObject *map_lines(PyObject *self, PyObject *args) {
    PyObject *lines;
    const char *source, *origin, *layer;
    Py_ssize_t source_len, origin_len, layer_len;
    if (!PyArg_ParseTuple(args, "Os#s#z#", &lines, &source, &source_len, &origin, &origin_len,
                          &layer, &layer_len))
        return NULL;
    if (!CONFIGURED) {
        PyErr_SetString(PyExc_RuntimeError, "configure() was not called");
        return NULL;
    }
    PyObject *fast = PySequence_Fast(lines, "lines must be a sequence of bytes");
    if (fast == NULL) return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(fast);
    const char **data = malloc(sizeof(char *) * (size_t)(n ? n : 1));
    size_t *lens = malloc(sizeof(size_t) * (size_t)(n ? n : 1));
    char *declined = calloc((size_t)(n ? n : 1), 1);
    Column *cols = calloc(N_COLUMNS, sizeof(Column));
    Record *rec = malloc(sizeof(Record));
    Buf out = {0};
    int failed = 0;
    if (!data || !lens || !declined || !cols || !rec) failed = 1;
    for (Py_ssize_t i = 0; !failed && i < n; i++) {
        PyObject *item = PySequence_Fast_GET_ITEM(fast, i);
        if (!PyBytes_Check(item)) {
            PyErr_Format(PyExc_TypeError, "line %zd is %.80s, not bytes", i,
                         Py_TYPE(item)->tp_name);
            failed = 2;
            break;
        }
        data[i] = PyBytes_AS_STRING(item);
        lens[i] = (size_t)PyBytes_GET_SIZE(item);
    }
    if (!failed) {
        Text source_text = {source, (size_t)source_len};
        Text origin_text = {origin, (size_t)origin_len};
        Text default_layer = {NULL, 0};
        if (layer != NULL) {
            const Word *w = word_find(LAYERS, N_LAYERS, layer, (size_t)layer_len);
            if (w != NULL) default_layer = (Text){w->text, w->len};
        }
        uint64_t start[8];
        b2_start(start, source, (size_t)source_len);
        /* Buffers sized for the batch at once: growing them page by page costs more. */
        size_t total = 0;
        for (Py_ssize_t i = 0; i < n; i++) total += lens[i];
        for (int c = 0; c < N_COLUMNS && !failed; c++) {
            size_t rows = (size_t)n;
            size_t values = c == C_RAW ? total : c == C_ATTRS ? total / 2 : 0;
            int fixed = c == C_TS_NS || c == C_HASH || c == C_DURATION_S ? 8 : c == C_HTTP_STATUS ? 4 : 0;
            if (buf_reserve(&cols[c].validity, rows / 8 + 1) < 0 ||
                buf_reserve(&cols[c].offsets, fixed ? 0 : 4 * (rows + 1)) < 0 ||
                buf_reserve(&cols[c].values, fixed ? fixed * rows : values) < 0)
                failed = 1;
        }
        Py_BEGIN_ALLOW_THREADS
        for (Py_ssize_t i = 0; i < n; i++) {
            const char *line = data[i];
            size_t len = lens[i];
            if (len && line[len - 1] == '\r') len--;
            if (len > MAX_LINE_BYTES || !utf8_valid((const unsigned char *)line, len)) {
                declined[i] = 1;
                continue;
            }
            out.len = 0;
            if (buf_reserve(&out, 3 * len + 1024) < 0) {
                failed = 1;
                break;
            }
            Reader r = {line, line + len, &out};
            Row row;
            if (read_record(&r, rec) < 0 || map_record(rec, &out, &default_layer, &row) < 0) {
                declined[i] = 1;
                continue;
            }
            row.hash = b2_hash(start, (const uint8_t *)line, len);
            if (append_row(cols, &row, source_text, origin_text, (Text){line, len}) < 0) {
                failed = 1;
                break;
            }
        }
        Py_END_ALLOW_THREADS
    }
    PyObject *result = NULL;
    if (failed == 1) PyErr_NoMemory();
    if (!failed) {
        PyObject *columns = PyDict_New();
        PyObject *skipped = PyList_New(0);
        int ok = columns != NULL && skipped != NULL;
        for (int c = 0; ok && c < N_COLUMNS; c++) {
            int text = c != C_TS_NS && c != C_HASH && c != C_HTTP_STATUS && c != C_DURATION_S;
            PyObject *buffers = column_buffers(&cols[c], text);
            ok = buffers != NULL && PyDict_SetItemString(columns, COLUMN_NAMES[c], buffers) == 0;
            Py_XDECREF(buffers);
        }
        for (Py_ssize_t i = 0; ok && i < n; i++) {
            if (!declined[i]) continue;
            PyObject *index = PyLong_FromSsize_t(i);
            ok = index != NULL && PyList_Append(skipped, index) == 0;
            Py_XDECREF(index);
        }
        if (ok) result = Py_BuildValue("(LOO)", (long long)cols[0].rows, columns, skipped);
        Py_XDECREF(columns);
        Py_XDECREF(skipped);
    }
    for (int c = 0; cols && c < N_COLUMNS; c++) col_free(&cols[c]);
    free(cols);
    free(out.data);
    free(rec);
    free(declined);
    free(lens);
    free(data);
    Py_DECREF(fast);
    return result;
}

static PyMethodDef METHODS[] = {
    {"configure", configure, METH_VARARGS, configure_doc},
    {"map_lines", map_lines, METH_VARARGS, map_lines_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef MODULE = {
    .m_base = PyModuleDef_HEAD_INIT,
    .m_name = "_record_native",
    .m_doc = "The record mapping of _record for the common JSON line, natively (see the source).",
    .m_size = -1,
    .m_methods = METHODS,
};

PyMODINIT_FUNC PyInit__record_native(void) {
    for (size_t i = 0; i < sizeof ROLE_NAMES / sizeof ROLE_NAMES[0]; i++)
        ROLE_LENGTHS[i] = strlen(ROLE_NAMES[i].key);
    return PyModule_Create(&MODULE);
}
