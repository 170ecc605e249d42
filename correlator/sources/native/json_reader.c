/* The canonicalising JSON reader. */
#include "json_reader.h"

#include "decimal.h"

#include <string.h>

int utf8_valid(const unsigned char *s, size_t n) {
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

int read_value(Reader *r, int depth, Member *m, int want_text);

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
        double value;
        if (decimal_value(int_start, int_digits, frac, frac_digits, negative, &value) < 0)
            return -1;
        m->kind = J_FLOAT;
        m->real = value;
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


/* The key of an object member at r->p: no escape, no control; *key and *len set. */
int read_key(Reader *r, const char **key, size_t *len) {
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
int key_seen(const Key *keys, int n, const char *key, size_t len) {
    for (int i = 0; i < n; i++)
        if (keys[i].len == len && memcmp(keys[i].text, key, len) == 0) return 1;
    return 0;
}

/* An object at r->p. ``members`` (or NULL) receives its members, decoded text and all;
 * *count their number. A repeated key, or a key with an escape or a control, declines. */
int read_object(Reader *r, int depth, Member *members, int *count) {
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
int read_value(Reader *r, int depth, Member *m, int want_text) {
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
