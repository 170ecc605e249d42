/* The text formats' single-line records in one pass: oslo.log (text/oslo.py), Python's
 * logging (text/python.py) and logfmt (text/logfmt.py) read, then made an event as
 * text/_event.Maker.event makes it (the service, the built-in identifier rules of
 * text/_known.py, the level, a request, attrs), for the lines it can read with certainty.
 *
 * Such a line is printable ASCII (so nothing is escaped but '"' and '\\', no character is a
 * Unicode digit, letter or space, and each pattern reads it one way only), starts a record of
 * its format, and is the whole record: the line after it starts one too (map_text checks it
 * with text_starts). Anything else is declined, and the Python parser, the reference, reads it:
 * continuation lines and the records they continue, rejects, dates outside the store's years,
 * a leading file word the service cannot be read from plainly, logfmt values with escapes
 * other than \" and \\ (a newline makes a message of two lines) or a time in another form
 * than RFC 3339's canonical one, identifiers the identifier check refuses. The layer is placed by the
 * caller, from the service (the built-in names and the operator's service rules read nothing
 * else). tests/correlator/sources/test_text_native.py feeds both the same generated and
 * hostile lines.
 */
#include "text_lines.h"

#include <string.h>

#include "civil.h"
#include "json_reader.h"

const char *TEXT_FORMAT_NAMES[N_TEXT_FORMATS] = {"oslo",   "python",   "logfmt", "klog",
                                                 "syslog", "journald", "json"};
FormatTables FORMAT_TABLES[N_TEXT_FORMATS];
Word HTTP_FIELDS[3][MAX_WORDS], LEVEL_CODES[MAX_WORDS];
int N_HTTP_FIELDS[3], N_LEVEL_CODES;
Word NUMBERED_LEVELS[MAX_WORDS];
int N_NUMBERED_LEVELS;

/* The most fields a record mapped here has (a logfmt line with more is declined). */
#define MAX_TEXT_FIELDS 64
/* A request line's path: _event._REQUEST_LINE's \S{1,2048}. */
#define MAX_REQUEST_PATH 2048

static int printable(const char *s, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (s[i] < 0x20 || s[i] > 0x7e) return 0;
    return 1;
}

static int is_upper(char c) { return c >= 'A' && c <= 'Z'; }
static int is_alpha(char c) { return is_upper(c) || (c >= 'a' && c <= 'z'); }
/* \w and \b's word characters, for ASCII. */
static int is_word(char c) { return is_alpha(c) || is_digit(c) || c == '_'; }
static int is_hex(char c) { return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }
/* Whether a word ends before ``p`` (\b after a word character). */
static int boundary(const char *p, const char *end) { return p == end || !is_word(*p); }

/* Whether ``out`` holds ``n`` more bytes (reserved by the caller: a line that would need more
 * is declined). */
static int room(const Buf *out, size_t n) { return out->cap - out->len >= n; }

static size_t digit_run(const char *p, const char *end) {
    const char *q = p;
    while (q < end && is_digit(*q)) q++;
    return (size_t)(q - p);
}

static int starts_with(const char *p, const char *end, const char *prefix, size_t n) {
    return (size_t)(end - p) >= n && memcmp(p, prefix, n) == 0;
}

/* -- the time ------------------------------------------------------------------------------ */

typedef struct {
    int year, month, day, hour, minute, second;
    const char *fraction;
    size_t fraction_len;
} Stamp;

/* "YYYY-MM-DD?HH:MM:SS" at p, '?' any character, as digits (validity apart). */
static int iso_stamp_at(const char *p, const char *end, Stamp *st) {
    if (end - p < 19 || p[4] != '-' || p[7] != '-' || p[13] != ':' || p[16] != ':') return -1;
    if (digits(p, 4, &st->year) || digits(p + 5, 2, &st->month) || digits(p + 8, 2, &st->day) ||
        digits(p + 11, 2, &st->hour) || digits(p + 14, 2, &st->minute) ||
        digits(p + 17, 2, &st->second))
        return -1;
    st->fraction = NULL;
    st->fraction_len = 0;
    return 0;
}

/* "YYYY-MM-DD HH:MM:SS" at p, as digits (what a format's pattern matches; validity apart). */
static int stamp_at(const char *p, const char *end, Stamp *st) {
    if (end - p < 19 || p[10] != ' ') return -1;
    return iso_stamp_at(p, end, st);
}

/* _civil.digits_ns in a zone of a fixed offset: -1 for what it refuses, and for the years
 * civil_seconds leaves to the reference. */
static int stamp_ns(const Stamp *st, int64_t offset_s, int64_t *ts_ns) {
    int64_t civil;
    if (civil_seconds(st->year, st->month, st->day, st->hour, st->minute, st->second, &civil) < 0)
        return -1;
    int64_t nanos = 0;
    for (size_t k = 0; k < 9; k++)
        nanos = nanos * 10 + (k < st->fraction_len ? st->fraction[k] - '0' : 0);
    *ts_ns = (civil - offset_s) * 1000000000LL + nanos;
    return 0;
}

/* -- what a format reads ------------------------------------------------------------------- */

typedef struct {
    Text name, value;
    Text canon; /* the value as orjson writes it, when read from JSON (else NULL) */
    int popped; /* read as the time, level or message (logfmt): not a field */
    int taken;  /* its whole value became an identifier: its column holds it, not attrs */
} Field;

typedef struct {
    Stamp stamp;
    int64_t ts_ns; /* when has_ts: read by the format itself (an RFC 3339 time) */
    int has_ts;
    int yearless; /* the stamp has no year (klog, RFC 3164) */
    Text iso;     /* a time for _civil.iso_ns (logfmt's, json's), else NULL */
    Text level; /* NULL: none (the level is "info") */
    Text level_canon; /* as orjson writes it, when read from JSON (else NULL) */
    const Word *level_name; /* the level a number names (json's numbered levels), or NULL */
    Text message;
    Field fields[MAX_TEXT_FIELDS];
    int count;
} Read;

static int text_equals(Text a, const char *b, size_t n) {
    return a.len == n && memcmp(a.text, b, n) == 0;
}

static Field *field_of(Read *r, const char *name, size_t n) {
    for (int i = 0; i < r->count; i++)
        if (!r->fields[i].popped && text_equals(r->fields[i].name, name, n))
            return &r->fields[i];
    return NULL;
}

static Field *field_named(Read *r, const char *name) { return field_of(r, name, strlen(name)); }

/* A field set as a dict item is: a repeated name keeps its place and takes the new value. */
static int set_field(Read *r, Text name, Text value) {
    Field *f = field_of(r, name.text, name.len);
    if (f != NULL) {
        f->value = value;
        return 0;
    }
    if (r->count == MAX_TEXT_FIELDS) return -1;
    r->fields[r->count++] = (Field){name, value, {NULL, 0}, 0, 0};
    return 0;
}

static void add_field(Read *r, const char *name, Text value) {
    r->fields[r->count++] = (Field){{name, strlen(name)}, value, {NULL, 0}, 0, 0};
}

/* -- oslo.log -------------------------------------------------------------------------------- */

typedef struct {
    Stamp stamp;
    Text pid, level, logger, file;
    const char *rest; /* past the head */
} OsloHead;

/* oslo's _HEAD at p: the time, a fraction of 1-9 digits, the pid, the level, the logger, each
 * followed by one space. */
static int oslo_head_at(const char *p, const char *end, OsloHead *h) {
    if (stamp_at(p, end, &h->stamp) < 0) return -1;
    const char *q = p + 19;
    if (q < end && *q == '.') {
        size_t n = digit_run(q + 1, end);
        if (n < 1 || n > 9) return -1;
        h->stamp.fraction = q + 1;
        h->stamp.fraction_len = n;
        q += 1 + n;
    }
    if (q >= end || *q != ' ') return -1;
    q++;
    size_t n = digit_run(q, end);
    if (n == 0 || q + n >= end || q[n] != ' ') return -1;
    h->pid = (Text){q, n};
    q += n + 1;
    const char *start = q;
    while (q < end && is_upper(*q)) q++;
    if (q == start || q >= end || *q != ' ') return -1;
    h->level = (Text){start, (size_t)(q - start)};
    start = ++q;
    while (q < end && *q != ' ') q++;
    if (q == start || q >= end) return -1;
    h->logger = (Text){start, (size_t)(q - start)};
    h->rest = q + 1;
    return 0;
}

/* oslo's _head: the prefix at the start, else after one word (loghub's file names). */
static int oslo_head(const char *line, const char *end, OsloHead *h) {
    h->file = (Text){NULL, 0};
    if (oslo_head_at(line, end, h) == 0) return 0;
    if (line == end || !is_alpha(line[0])) return -1;
    const char *space = memchr(line, ' ', (size_t)(end - line));
    if (space == NULL || oslo_head_at(space + 1, end, h) < 0) return -1;
    h->file = (Text){line, (size_t)(space - line)};
    return 0;
}

/* oslo's _CONTEXT at p: "[...]" (not "[instance: "), closed on the line, and one space. */
static int oslo_context(const char *p, const char *end, Text *context, const char **after) {
    if (p >= end || *p != '[' || starts_with(p, end, "[instance: ", 11)) return -1;
    const char *close = memchr(p + 1, ']', (size_t)(end - p - 1));
    if (close == NULL) return -1;
    *context = (Text){p + 1, (size_t)(close - p - 1)};
    *after = close + 1 < end && close[1] == ' ' ? close + 2 : close + 1;
    return 0;
}

static int oslo_starts(const char *line, const char *end) {
    OsloHead h;
    Text context;
    const char *after;
    if (oslo_head(line, end, &h) < 0) return 0;
    if (h.level.len == 5 && memcmp(h.level.text, "TRACE", 5) == 0) return 0;
    return oslo_context(h.rest, end, &context, &after) == 0;
}

/* 36 characters of [0-9A-Fa-f-] (oslo's _REQUEST and _INSTANCE). */
static int loose_uuid(const char *p, const char *end) {
    if (end - p < 36) return 0;
    for (int i = 0; i < 36; i++)
        if (!is_hex(p[i]) && p[i] != '-') return 0;
    return 1;
}

/* _known._UUID: 8-4-4-4-12 hex digits. */
static int uuid_at(const char *p, const char *end) {
    if (end - p < 36) return 0;
    for (int i = 0; i < 36; i++) {
        int dash = i == 8 || i == 13 || i == 18 || i == 23;
        if (dash ? p[i] != '-' : !is_hex(p[i])) return 0;
    }
    return 1;
}

static int oslo_read(const char *line, const char *end, Read *r) {
    OsloHead h;
    Text context;
    const char *rest;
    if (oslo_head(line, end, &h) < 0 || oslo_context(h.rest, end, &context, &rest) < 0)
        return -1;
    r->stamp = h.stamp;
    r->level = h.level;
    add_field(r, "pid", h.pid);
    add_field(r, "logger", h.logger);
    if (h.file.text != NULL) add_field(r, "file", h.file);
    add_field(r, "context", context);
    /* _REQUEST.findall: the last is the request id, the first (of two or more) the global */
    Text first = {NULL, 0}, last = {NULL, 0};
    int found = 0;
    const char *c = context.text, *c_end = context.text + context.len;
    while (c < c_end) {
        if (starts_with(c, c_end, "req-", 4) && loose_uuid(c + 4, c_end)) {
            last = (Text){c, 40};
            if (!found++) first = last;
            c += 40;
        } else {
            c++;
        }
    }
    if (found) add_field(r, "request_id", last);
    if (found > 1) add_field(r, "global_request_id", first);
    if (starts_with(rest, end, "[instance: ", 11) && loose_uuid(rest + 11, end) &&
        end - rest > 47 && rest[47] == ']')
        add_field(r, "instance", (Text){rest + 11, 36});
    r->message = (Text){rest, (size_t)(end - rest)};
    return 0;
}

/* The first match of "<prefix><uuid>\b" in a message (the group: the uuid), or NULL. */
static const char *uuid_after(Text message, const char *prefix, size_t n) {
    const char *p = message.text, *end = message.text + message.len;
    while ((size_t)(end - p) >= n + 36) {
        const char *at = memchr(p, prefix[0], (size_t)(end - p));
        if (at == NULL) return NULL;
        if (starts_with(at, end, prefix, n) && uuid_at(at + n, end) &&
            boundary(at + n + 36, end))
            return at + n;
        p = at + 1;
    }
    return NULL;
}

/* (?i:\bnode) (<uuid>)\b: the uuid, or NULL. */
static const char *node_uuid(Text message) {
    const char *p = message.text, *end = message.text + message.len;
    for (; end - p >= 41; p++) {
        if ((p[0] | 0x20) != 'n' || (p[1] | 0x20) != 'o' || (p[2] | 0x20) != 'd' ||
            (p[3] | 0x20) != 'e' || p[4] != ' ')
            continue;
        if (p > message.text && is_word(p[-1])) continue;
        if (uuid_at(p + 5, end) && boundary(p + 41, end)) return p + 5;
    }
    return NULL;
}

/* The pattern rules of _known.BUILTIN_IDS for oslo, after its field rules (which come first
 * in the rules' order for the same identifiers): a compute API path names the allocation_id,
 * a bare-metal node the node_id. A uuid passes the identifier check. */
static void oslo_patterns(Read *r, Row *row) {
    if (row->ids[3].text == NULL) {
        const char *at = uuid_after(r->message, "/servers/", 9);
        if (at != NULL) row->ids[3] = (Text){at, 36};
    }
    if (row->ids[0].text == NULL) {
        const char *node = node_uuid(r->message);
        if (node == NULL) node = uuid_after(r->message, "/nodes/", 7);
        if (node != NULL) row->ids[0] = (Text){node, 36};
    }
}

/* -- Python's logging -------------------------------------------------------------------- */

static const char *PY_LEVELS[] = {"CRITICAL", "FATAL", "ERROR", "WARNING", "WARN",
                                  "INFO",     "DEBUG", "NOTSET"};

/* The length of python's _LEVEL alternative ``alt`` at p (8: "Level \d{1,3}"), or 0. */
static size_t py_level_at(const char *p, const char *end, int alt) {
    if (alt < 8) {
        size_t n = strlen(PY_LEVELS[alt]);
        return starts_with(p, end, PY_LEVELS[alt], n) ? n : 0;
    }
    if (!starts_with(p, end, "Level ", 6)) return 0;
    size_t d = digit_run(p + 6, end);
    return d >= 1 ? 6 + (d > 3 ? 3 : d) : 0;
}

/* Whether ``sep`` (then anything) or the end is at p; *after past it. */
static int sep_or_end(const char *p, const char *end, const char *sep, size_t n,
                      const char **after) {
    if (p == end) {
        *after = p;
        return 1;
    }
    if (starts_with(p, end, sep, n)) {
        *after = p + n;
        return 1;
    }
    return 0;
}

static const char *non_space_run(const char *p, const char *end) {
    while (p < end && *p != ' ') p++;
    return p;
}

/* _LEVEL_NAME and then _NAME_LEVEL at the text after the time: the level, the logger and
 * where the message starts. */
static int py_level_name(const char *rest, const char *end, Text *level, Text *logger,
                         const char **message) {
    static const char *SEPS[] = {" - ", " "};
    for (int order = 0; order < 2; order++) {
        for (int s = 0; s < 2; s++) {
            const char *sep = SEPS[s];
            size_t n = strlen(sep);
            if (!starts_with(rest, end, sep, n)) continue;
            const char *p = rest + n;
            if (order == 0) { /* ( - | )(LEVEL)\1(\S+)(?:\1|\Z) */
                for (int alt = 0; alt < 9; alt++) {
                    size_t len = py_level_at(p, end, alt);
                    if (!len || !starts_with(p + len, end, sep, n)) continue;
                    const char *name = p + len + n;
                    const char *name_end = non_space_run(name, end);
                    if (name_end == name || !sep_or_end(name_end, end, sep, n, message))
                        continue;
                    *level = (Text){p, len};
                    *logger = (Text){name, (size_t)(name_end - name)};
                    return 0;
                }
            } else { /* ( - | )(\S+)\1(LEVEL)(?:\1|\Z) */
                const char *name_end = non_space_run(p, end);
                if (name_end == p || !starts_with(name_end, end, sep, n)) continue;
                const char *q = name_end + n;
                for (int alt = 0; alt < 9; alt++) {
                    size_t len = py_level_at(q, end, alt);
                    if (!len || !sep_or_end(q + len, end, sep, n, message)) continue;
                    *level = (Text){q, len};
                    *logger = (Text){p, (size_t)(name_end - p)};
                    return 0;
                }
            }
        }
    }
    return -1;
}

/* python's _ASCTIME: the time, then a fraction of up to nine digits after ',' or '.'. */
static int py_stamp(const char *line, const char *end, Stamp *st, const char **rest) {
    if (stamp_at(line, end, st) < 0) return -1;
    const char *q = line + 19;
    if (q < end && (*q == ',' || *q == '.')) {
        size_t n = digit_run(q + 1, end);
        if (n) {
            if (n > 9) n = 9;
            st->fraction = q + 1;
            st->fraction_len = n;
            q += 1 + n;
        }
    }
    *rest = q;
    return 0;
}

static int python_read(const char *line, const char *end, Read *r) {
    const char *rest, *message;
    Text logger;
    if (py_stamp(line, end, &r->stamp, &rest) < 0 ||
        py_level_name(rest, end, &r->level, &logger, &message) < 0)
        return -1;
    add_field(r, "logger", logger);
    r->message = (Text){message, (size_t)(end - message)};
    return 0;
}

/* -- logfmt --------------------------------------------------------------------------------- */

/* What the readers of quoted values and pairs say of a text: not that (the reference rejects
 * it, or reads it otherwise), or an escape this module leaves to the reference. */
enum { NOT_READ = -1, UNCERTAIN = -2 };

/* A quoted value at p ('"' there) as _quoted's _QUOTED reads it and unquote() unquotes it, of
 * the escapes \" and \\ only (unescaped into ``out``); *p past its closing quote. NOT_READ:
 * no closing quote; UNCERTAIN: another escape before it. */
static int quoted_value(const char **p, const char *end, Buf *out, Text *value) {
    const char *q = *p + 1;
    int escaped = 0;
    while (q < end && *q != '"') {
        if (*q == '\\') {
            if (q + 1 == end) return NOT_READ;
            if (q[1] != '"' && q[1] != '\\') return UNCERTAIN;
            escaped = 1;
            q++;
        }
        q++;
    }
    if (q == end) return NOT_READ;
    *value = (Text){*p + 1, (size_t)(q - *p - 1)};
    *p = q + 1;
    if (escaped) {
        if (!room(out, value->len)) return UNCERTAIN;
        char *at = out->data + out->len;
        for (size_t i = 0; i < value->len; i++) {
            if (value->text[i] == '\\') i++;
            out->data[out->len++] = value->text[i];
        }
        *value = (Text){at, (size_t)(out->data + out->len - at)};
    }
    return 0;
}

/* _quoted.pairs: key=value pairs (a quoted value, a bare one, or none: a bare key), by key,
 * the last of a repeated key; NOT_READ where the text stops being pairs, UNCERTAIN for an
 * escape other than \" and \\ in a quoted value. */
static int logfmt_pairs(const char *p, const char *end, Buf *out, Read *r) {
    while (p < end && *p == ' ') p++;
    while (end > p && end[-1] == ' ') end--;
    while (p < end) {
        while (*p == ' ') p++; /* the text ends with no space */
        const char *key = p;
        while (p < end && *p != ' ' && *p != '=' && *p != '"') p++;
        if (p == key) return NOT_READ;
        Text name = {key, (size_t)(p - key)}, value = {p, 0};
        if (p < end && *p == '=') {
            p++;
            if (p < end && *p == '"') {
                int rc = quoted_value(&p, end, out, &value);
                if (rc < 0) return rc == UNCERTAIN ? UNCERTAIN : NOT_READ;
            } else {
                const char *start = p;
                while (p < end && *p != ' ' && *p != '"') p++;
                value = (Text){start, (size_t)(p - start)};
            }
        }
        if (p < end && *p != ' ') return NOT_READ; /* (?=\s|$) */
        if (set_field(r, name, value) < 0) return UNCERTAIN;
    }
    return 0;
}

/* The first of ``names`` among the fields, taken out of them (logfmt's time, level and
 * message keys); NULL if none. */
static Field *take_first(Read *r, const char *const *names, int n) {
    for (int i = 0; i < n; i++) {
        Field *f = field_named(r, names[i]);
        if (f != NULL) {
            f->popped = 1;
            return f;
        }
    }
    return NULL;
}

static int logfmt_read(const char *line, const char *end, Buf *out, Read *r) {
    static const char *const TIME_KEYS[] = {"time", "ts", "t"};
    static const char *const LEVEL_KEYS[] = {"level", "lvl"};
    static const char *const MESSAGE_KEYS[] = {"msg", "message"};
    const char *p = line;
    while (p < end && *p == ' ') p++;
    if (p == end || logfmt_pairs(line, end, out, r) < 0) return -1; /* a blank line, or not */
    Field *time = take_first(r, TIME_KEYS, 3);
    if (time == NULL) return -1;
    r->iso = time->value;
    Field *level = take_first(r, LEVEL_KEYS, 2);
    r->level = level != NULL ? level->value : (Text){NULL, 0};
    Field *message = take_first(r, MESSAGE_KEYS, 2);
    r->message = message != NULL ? message->value : (Text){line, 0};
    return 0;
}

/* -- klog ----------------------------------------------------------------------------------- */

/* klog's _HEAD at the line's start: the level's letter, mmdd hh:mm:ss, a fraction of 1-9
 * digits, spaces, the thread id, file:line, "] ". *message past it. */
static int klog_head(const char *line, const char *end, Read *r, const char **message) {
    const char *p = line;
    if (end - p < 15 || (*p != 'I' && *p != 'W' && *p != 'E' && *p != 'F') || p[5] != ' ' ||
        p[8] != ':' || p[11] != ':')
        return -1;
    Stamp *st = &r->stamp;
    st->year = 0;
    if (digits(p + 1, 2, &st->month) || digits(p + 3, 2, &st->day) ||
        digits(p + 6, 2, &st->hour) || digits(p + 9, 2, &st->minute) ||
        digits(p + 12, 2, &st->second))
        return -1;
    st->fraction = NULL;
    st->fraction_len = 0;
    r->level = (Text){p, 1};
    r->yearless = 1;
    p += 14;
    if (p < end && *p == '.') {
        size_t n = digit_run(p + 1, end);
        if (n < 1 || n > 9) return -1;
        st->fraction = p + 1;
        st->fraction_len = n;
        p += 1 + n;
    }
    const char *spaces = p;
    while (p < end && *p == ' ') p++;
    size_t n = digit_run(p, end);
    if (p == spaces || n == 0 || p + n >= end || p[n] != ' ') return -1;
    Text pid = {p, n};
    p += n + 1;
    const char *file = p;
    while (p < end && *p != ' ' && *p != ':' && *p != ']') p++;
    if (p == file || p >= end || *p != ':') return -1;
    Text file_name = {file, (size_t)(p - file)};
    const char *number = ++p;
    n = digit_run(p, end);
    if (n == 0 || end - (p + n) < 2 || p[n] != ']' || p[n + 1] != ' ') return -1;
    add_field(r, "pid", pid);
    add_field(r, "file", file_name);
    add_field(r, "line", (Text){number, n});
    *message = p + n + 2;
    return 0;
}

static int klog_starts(const char *line, const char *end) {
    Read r;
    const char *message;
    r.count = 0;
    return klog_head(line, end, &r, &message) == 0;
}

/* A structured message: the quoted message, and the pairs after it, which the header's keys
 * win over; a message whose pairs cannot be read is all text. */
static int klog_read(const char *line, const char *end, Buf *out, Read *r) {
    const char *message;
    if (klog_head(line, end, r, &message) < 0) return -1;
    r->message = (Text){message, (size_t)(end - message)};
    if (message == end || *message != '"') return 0;
    const char *p = message;
    Text quoted;
    int rc = quoted_value(&p, end, out, &quoted);
    if (rc == UNCERTAIN) return -1;
    if (rc == NOT_READ) return 0;
    Read pairs;
    pairs.count = 0;
    rc = logfmt_pairs(p, end, out, &pairs);
    if (rc == UNCERTAIN) return -1;
    if (rc == NOT_READ) return 0;
    for (int i = 0; i < pairs.count; i++) {
        if (field_of(r, pairs.fields[i].name.text, pairs.fields[i].name.len) != NULL) continue;
        if (r->count == MAX_TEXT_FIELDS) return -1;
        r->fields[r->count++] = pairs.fields[i];
    }
    r->message = quoted;
    return 0;
}

/* _civil.yearless_ns in a zone of a fixed offset: the year of now, else the one before when
 * that puts the time past now and the slack. 29 February (a search for a leap year) is the
 * reference's. */
static int yearless_ns(Stamp *st, const TextOptions *o, int64_t *ts_ns) {
    if (st->month == 2 && st->day == 29) return -1;
    int64_t now_s = o->now_ns / 1000000000LL - (o->now_ns % 1000000000LL < 0);
    st->year = (int)year_of(now_s + o->offset_s);
    if (stamp_ns(st, o->offset_s, ts_ns) < 0) return -1;
    if (*ts_ns <= o->latest_ns) return 0;
    st->year--;
    return stamp_ns(st, o->offset_s, ts_ns);
}

/* -- syslog ---------------------------------------------------------------------------------- */

static const char MONTHS[] = "JanFebMarAprMayJunJulAugSepOctNovDec";

/* syslog's _TAG at p: "app: ", "app[pid]: " (or without the space); *message past it, or p
 * when there is none. */
static void syslog_tag(const char *p, const char *end, Read *r, const char **message) {
    const char *q = p;
    *message = p;
    while (q < end && *q != ' ' && *q != '[' && *q != ']' && *q != ':') q++;
    size_t tag_len = (size_t)(q - p);
    if (tag_len < 1 || tag_len > 128) return;
    Text pid = {NULL, 0};
    if (q < end && *q == '[') {
        const char *start = q + 1;
        const char *close = start;
        while (close < end && *close != ']' && *close != ' ') close++;
        size_t n = (size_t)(close - start);
        if (close == end || *close != ']' || n < 1 || n > 32) return;
        pid = (Text){start, n};
        q = close + 1;
    }
    if (q == end || *q != ':') return;
    q++;
    if (q < end && *q == ' ') q++;
    add_field(r, "app", (Text){p, tag_len});
    if (pid.text != NULL) add_field(r, "procid", pid);
    *message = q;
}

/* A token of RFC 5424's header at *p: 1 to ``most`` non-space characters and a space; *p past
 * the space. */
static int header_token(const char **p, const char *end, size_t most, Text *token) {
    const char *q = non_space_run(*p, end);
    size_t n = (size_t)(q - *p);
    if (n < 1 || n > most || q >= end) return -1;
    *token = (Text){*p, n};
    *p = q + 1;
    return 0;
}

/* A name of RFC 5424's structured data (_SD_ELEMENT's [^\s\]="]{1,32}) at *p. */
static int sd_name(const char **p, const char *end, Text *name) {
    const char *q = *p;
    while (q < end && *q != ' ' && *q != ']' && *q != '=' && *q != '"') q++;
    size_t n = (size_t)(q - *p);
    if (n < 1 || n > 32) return -1;
    *name = (Text){*p, n};
    *p = q;
    return 0;
}

/* RFC 5424 after "<PRI>1 " (syslog's _read_5424): the header, then STRUCTURED-DATA ("-", or
 * elements whose parameters become fields named SD-ID.name; a value with a backslash, an
 * escape, is the reference's), then the message. */
static int syslog_5424(const char *p, const char *end, Buf *out, Read *r) {
    Text stamp, tokens[4];
    static const char *const NAMES[] = {"host", "app", "procid", "msgid"};
    static const size_t MOST[] = {255, 48, 128, 32};
    if (header_token(&p, end, (size_t)(end - p), &stamp) < 0) return -1;
    for (int k = 0; k < 4; k++)
        if (header_token(&p, end, MOST[k], &tokens[k]) < 0) return -1;
    if (parse_ts(stamp.text, stamp.len, &r->ts_ns) < 0) return -1;
    r->has_ts = 1;
    for (int k = 0; k < 4; k++)
        if (!text_equals(tokens[k], "-", 1)) add_field(r, NAMES[k], tokens[k]);
    if (p < end && *p == '-' && (p + 1 == end || p[1] == ' ')) {
        p = p + 1 == end ? end : p + 2;
    } else {
        const char *start = p;
        while (p < end && *p == '[') {
            Text id, name;
            p++;
            if (sd_name(&p, end, &id) < 0) return -1;
            while (p < end && *p == ' ') {
                p++;
                if (sd_name(&p, end, &name) < 0 || end - p < 2 || p[0] != '=' || p[1] != '"')
                    return -1;
                const char *value = p + 2;
                const char *close = value;
                while (close < end && *close != '"' && *close != '\\') close++;
                if (close == end || *close != '"' || !room(out, id.len + 1 + name.len)) return -1;
                char *at = out->data + out->len;
                memcpy(at, id.text, id.len);
                at[id.len] = '.';
                memcpy(at + id.len + 1, name.text, name.len);
                out->len += id.len + 1 + name.len;
                if (set_field(r, (Text){at, id.len + 1 + name.len},
                              (Text){value, (size_t)(close - value)}) < 0)
                    return -1;
                p = close + 1;
            }
            if (p == end || *p != ']') return -1;
            p++;
        }
        if (p == start) return -1;
        if (set_field(r, (Text){"structured_data", 15}, (Text){start, (size_t)(p - start)}) < 0)
            return -1;
        if (p < end && *p == ' ') p++;
    }
    r->message = (Text){p, (size_t)(end - p)};
    return 0;
}

/* syslog's RFC 3164 header ("Mmm dd hh:mm:ss[.frac] host ") or RSYSLOG_FileFormat's (an RFC
 * 3339 time, then the host), after <PRI>, or RFC 5424 (syslog_5424). */
static int syslog_read(const char *line, const char *end, Buf *out, Read *r) {
    const char *p = line;
    if (p < end && *p == '<') {
        size_t n = digit_run(p + 1, end);
        int value;
        if (n < 1 || n > 3 || p + 1 + n >= end || p[1 + n] != '>' ||
            digits(p + 1, (int)n, &value) < 0 || value > 191)
            return -1;
        static const char *const NUMBERS[] = {"0",  "1",  "2",  "3",  "4",  "5",  "6",  "7",
                                              "8",  "9",  "10", "11", "12", "13", "14", "15",
                                              "16", "17", "18", "19", "20", "21", "22", "23"};
        r->level = (Text){NUMBERS[value & 7], 1};
        add_field(r, "facility", (Text){NUMBERS[value >> 3], strlen(NUMBERS[value >> 3])});
        p += n + 2;
        if (starts_with(p, end, "1 ", 2)) return syslog_5424(p + 2, end, out, r);
    }
    Text host;
    const char *q;
    int month = 0;
    if (end - p >= 16 && is_upper(p[0]) && p[1] >= 'a' && p[1] <= 'z' && p[2] >= 'a' &&
        p[2] <= 'z' && p[3] == ' ') {
        for (int m = 0; m < 12; m++)
            if (memcmp(p, MONTHS + 3 * m, 3) == 0) month = m + 1;
        Stamp *st = &r->stamp;
        if (month == 0 || (p[4] != ' ' && !is_digit(p[4])) || !is_digit(p[5]) || p[6] != ' ' ||
            p[9] != ':' || p[12] != ':' || digits(p + 7, 2, &st->hour) ||
            digits(p + 10, 2, &st->minute) || digits(p + 13, 2, &st->second))
            return -1;
        st->month = month;
        st->day = (p[4] == ' ' ? 0 : (p[4] - '0') * 10) + (p[5] - '0');
        st->fraction = NULL;
        st->fraction_len = 0;
        q = p + 15;
        if (q < end && *q == '.') {
            size_t n = digit_run(q + 1, end);
            if (n < 1 || n > 9) return -1;
            st->fraction = q + 1;
            st->fraction_len = n;
            q += 1 + n;
        }
        if (q >= end || *q != ' ') return -1;
        r->yearless = 1;
    } else if (end - p >= 11 && is_digit(p[0]) && is_digit(p[1]) && is_digit(p[2]) &&
               is_digit(p[3]) && p[4] == '-' && is_digit(p[5]) && is_digit(p[6]) && p[7] == '-' &&
               is_digit(p[8]) && is_digit(p[9]) && p[10] == 'T') {
        q = non_space_run(p + 11, end);
        if (q == p + 11 || q >= end || parse_ts(p, (size_t)(q - p), &r->ts_ns) < 0) return -1;
        r->has_ts = 1;
    } else {
        return -1;
    }
    const char *start = ++q;
    q = non_space_run(start, end);
    if (q == start || q >= end) return -1;
    host = (Text){start, (size_t)(q - start)};
    add_field(r, "host", host);
    const char *message;
    syslog_tag(q + 1, end, r, &message);
    r->message = (Text){message, (size_t)(end - message)};
    return 0;
}

/* -- journald -------------------------------------------------------------------------------- */

static int is_skipped(const FormatTables *tables, const char *key, size_t len) {
    if (len >= 2 && key[0] == '_' && key[1] == '_') return 1;
    return word_find(tables->skipped_fields, tables->n_skipped_fields, key, len) != NULL;
}

/* ``journalctl -o json``'s line: an object of strings (a value of bytes, several values or
 * null is the reference's), __REALTIME_TIMESTAMP its time in microseconds, PRIORITY its
 * level, MESSAGE its message (one line: a message of several is the reference's), every
 * member but the bookkeeping a field. */
static int journald_read(const char *line, const char *end, Buf *out, Read *r) {
    Member members[MAX_MEMBERS];
    int count;
    Reader reader = {line, end, out};
    skip_ws(&reader);
    if (reader.p >= end || *reader.p != '{' || read_object(&reader, 0, members, &count) < 0)
        return -1;
    skip_ws(&reader);
    if (reader.p != end) return -1;
    const FormatTables *tables = &FORMAT_TABLES[T_JOURNALD];
    Text stamp = {NULL, 0};
    r->message = (Text){line, 0};
    for (int i = 0; i < count; i++) {
        Member *m = &members[i];
        if (m->kind != J_STRING) return -1;
        Text key = {m->key, m->key_len}, value = {m->text, m->text_len};
        if (!is_skipped(tables, m->key, m->key_len)) {
            if (r->count == MAX_TEXT_FIELDS) return -1;
            r->fields[r->count++] = (Field){key, value, {m->canon, m->canon_len}, 0, 0};
        } else if (text_equals(key, "MESSAGE", 7)) {
            if (memchr(value.text, '\n', value.len) != NULL) return -1;
            r->message = value;
        } else if (text_equals(key, "PRIORITY", 8)) {
            r->level = value;
            r->level_canon = (Text){m->canon, m->canon_len};
        } else if (text_equals(key, "__REALTIME_TIMESTAMP", 20)) {
            stamp = value;
        }
    }
    if (stamp.text == NULL || stamp.len < 1 || stamp.len > 16 || digit_run(stamp.text,
        stamp.text + stamp.len) != stamp.len)
        return -1; /* 16 digits of microseconds are before 2262 */
    int64_t us = 0;
    for (size_t i = 0; i < stamp.len; i++) us = us * 10 + (stamp.text[i] - '0');
    r->ts_ns = us * 1000;
    r->has_ts = 1;
    return 0;
}

/* -- json ------------------------------------------------------------------------------------ */

/* _civil.epoch_ns of a non-negative number written INT[.FRAC] (json's Decimal of a float's
 * repr, which the JSON reader's rendering is): in the unit its magnitude says, truncated to
 * the nanosecond; -1 past the store's range. */
static int epoch_ns(Text number, int64_t *ts_ns) {
    const char *dot = memchr(number.text, '.', number.len);
    size_t int_len = dot ? (size_t)(dot - number.text) : number.len;
    if (int_len == 0 || int_len > 19 || number.text[0] == '-') return -1;
    __int128 whole = 0;
    for (size_t i = 0; i < int_len; i++) whole = whole * 10 + (number.text[i] - '0');
    int digits_of_unit = whole < (__int128)100000000000LL      ? 9
                         : whole < (__int128)100000000000000LL ? 6
                         : whole < (__int128)100000000000000000LL ? 3
                                                                  : 0;
    __int128 ns = whole;
    for (int k = 0; k < digits_of_unit; k++) ns *= 10;
    if (dot != NULL) {
        const char *frac = dot + 1, *frac_end = number.text + number.len;
        __int128 part = 0;
        for (int k = 0; k < digits_of_unit; k++)
            part = part * 10 + (frac + k < frac_end ? frac[k] - '0' : 0);
        ns += part;
    }
    if (ns > (__int128)INT64_MAX) return -1;
    *ts_ns = (int64_t)ns;
    return 0;
}

/* The leaves of a JSON line (text/json.py's _flatten): each field's value as read, by the
 * field's index. */
typedef struct {
    Member members[MAX_TEXT_FIELDS];
    const Member *of[MAX_TEXT_FIELDS];
    int count;
} Leaves;

/* Whether the object at r->p ('{' there) is empty. */
static int empty_object(const Reader *r) {
    const char *q = r->p + 1;
    while (q < r->end && (*q == ' ' || *q == '\t' || *q == '\n' || *q == '\r')) q++;
    return q < r->end && *q == '}';
}

/* The members of the object at rd->p ('{' there), ``depth`` levels deep, as fields named
 * with their dotted path (``prefix`` and a dot before each key; none at the top): a nested
 * object is flattened, anything else (an empty object too) is a leaf, and a name given twice
 * keeps its first place and its last value, as the reference's dict does. -1 declines
 * (a repeated key in one object, nesting past the JSON reader's depth, too many fields). */
static int flatten(Reader *rd, int depth, Text prefix, Read *r, Leaves *leaves) {
    Key keys[MAX_MEMBERS];
    int n = 0;
    Buf *out = rd->out;
    if (depth > NATIVE_DEPTH) return -1;
    rd->p++;
    skip_ws(rd);
    if (rd->p < rd->end && *rd->p == '}') {
        rd->p++;
        return 0;
    }
    for (;;) {
        skip_ws(rd);
        const char *key;
        size_t key_len;
        if (n >= MAX_MEMBERS || read_key(rd, &key, &key_len) < 0) return -1;
        if (key_seen(keys, n, key, key_len)) return -1;
        keys[n++] = (Key){key, key_len};
        Text name = {key, key_len};
        if (prefix.text != NULL) {
            if (!room(out, prefix.len + 1 + key_len)) return -1;
            char *at = out->data + out->len;
            memcpy(at, prefix.text, prefix.len);
            at[prefix.len] = '.';
            memcpy(at + prefix.len + 1, key, key_len);
            out->len += prefix.len + 1 + key_len;
            name = (Text){at, prefix.len + 1 + key_len};
        }
        if (rd->p < rd->end && *rd->p == '{' && !empty_object(rd)) {
            if (flatten(rd, depth + 1, name, r, leaves) < 0) return -1;
        } else {
            if (leaves->count == MAX_TEXT_FIELDS) return -1;
            Member *m = &leaves->members[leaves->count++];
            m->key = name.text;
            m->key_len = name.len;
            if (read_value(rd, depth + 1, m, 1) < 0) return -1;
            Text canon = {m->canon, m->canon_len};
            Field field = m->kind == J_STRING ? (Field){name, {m->text, m->text_len}, canon, 0, 0}
                                              : (Field){name, canon, {NULL, 0}, 0, 0};
            Field *f = field_of(r, name.text, name.len);
            if (f == NULL) {
                if (r->count == MAX_TEXT_FIELDS) return -1;
                f = &r->fields[r->count++];
            }
            *f = field;
            leaves->of[f - r->fields] = m;
        }
        skip_ws(rd);
        if (rd->p >= rd->end) return -1;
        if (*rd->p == ',') {
            rd->p++;
            continue;
        }
        if (*rd->p != '}') return -1;
        rd->p++;
        return 0;
    }
}

/* JSON lines of logging libraries (text/json.py): an object, flattened, its time, level and
 * message by the first of their keys, every other leaf a field (a string as it is, any other
 * value as its JSON text). */
static int json_read(const char *line, const char *end, Buf *out, Read *r) {
    static const char *const TIME_KEYS[] = {"time", "ts", "@timestamp", "timestamp", "asctime",
                                            "T"};
    static const char *const LEVEL_KEYS[] = {"level", "log.level", "severity", "levelname", "L"};
    static const char *const MESSAGE_KEYS[] = {"msg", "message", "M", "event"};
    Leaves leaves;
    leaves.count = 0;
    Reader reader = {line, end, out};
    skip_ws(&reader);
    if (reader.p >= end || *reader.p != '{' || flatten(&reader, 1, (Text){NULL, 0}, r, &leaves) < 0)
        return -1;
    skip_ws(&reader);
    if (reader.p != end) return -1;
    Field *time = take_first(r, TIME_KEYS, 6);
    if (time == NULL) return -1;
    const Member *m = leaves.of[time - r->fields];
    if (m->kind == J_STRING) {
        r->iso = time->value;
    } else if (m->kind != J_INT && m->kind != J_FLOAT) {
        return -1;
    } else if (epoch_ns(time->value, &r->ts_ns) < 0) {
        return -1;
    } else {
        r->has_ts = 1;
    }
    Field *level = take_first(r, LEVEL_KEYS, 5);
    if (level != NULL) {
        m = leaves.of[level - r->fields];
        r->level = level->value;
        r->level_canon = level->canon;
        if (m->kind == J_INT)
            r->level_name = word_find(NUMBERED_LEVELS, N_NUMBERED_LEVELS, level->value.text,
                                      level->value.len);
    }
    Field *message = take_first(r, MESSAGE_KEYS, 4);
    r->message = message != NULL ? message->value : (Text){line, 0};
    return memchr(r->message.text, '\n', r->message.len) == NULL ? 0 : -1;
}

/* -- the event ------------------------------------------------------------------------------ */

/* _civil.iso_ns: an RFC 3339 time, else one without an offset (_LOCAL: the date, 'T', 't' or
 * a space, the time, 1-9 digits of fraction after '.' or ','), read in the zone. */
static int iso_ns(Text t, const TextOptions *o, int64_t *ts_ns) {
    if (parse_ts(t.text, t.len, ts_ns) == 0) return 0;
    Stamp st;
    const char *p = t.text, *end = t.text + t.len;
    if (iso_stamp_at(p, end, &st) < 0 || (p[10] != 'T' && p[10] != 't' && p[10] != ' ')) return -1;
    const char *q = p + 19;
    if (q < end && (*q == '.' || *q == ',')) {
        size_t n = digit_run(q + 1, end);
        if (n < 1 || n > 9) return -1;
        st.fraction = q + 1;
        st.fraction_len = n;
        q += 1 + n;
    }
    if (q != end) return -1;
    return stamp_ns(&st, o->offset_s, ts_ns);
}

/* _fields.take_id for a text value: the five identifiers of identifier characters, a trace
 * or span id of lowercase hex, not all zeros. */
static int id_passes(int target, Text value) {
    if (target < 5) return safe_id(value.text, value.len);
    size_t want = target == 5 ? 32 : 16;
    int zeros = 1;
    if (value.len != want) return 0;
    for (size_t i = 0; i < want; i++) {
        char c = value.text[i];
        if (!(is_digit(c) || (c >= 'a' && c <= 'f'))) return 0;
        if (c != '0') zeros = 0;
    }
    return !zeros;
}

/* _rules.IdRules.find for the format's field rules: the first rule in order that gives an
 * identifier a value gives it, and its field leaves attrs; -1 (declined) when a value fails
 * the identifier check (the reference notes it in attrs). */
static int field_ids(const FormatTables *tables, Read *r, Row *row) {
    for (int k = 0; k < tables->n_id_fields; k++) {
        const Word *rule = &tables->id_fields[k];
        Text *to = rule->value < 5 ? &row->ids[rule->value]
                   : rule->value == 5 ? &row->trace_id
                                      : &row->span_id;
        if (to->text != NULL) continue;
        Field *f = field_of(r, rule->text, rule->len);
        if (f == NULL || f->value.len == 0) continue;
        if (!id_passes(rule->value, f->value)) return -1;
        *to = f->value;
        f->taken = 1;
    }
    return 0;
}

/* _event._first: the first of ``names`` with a non-empty value, or NULL. */
static Text first_value(Read *r, const Word *names, int n) {
    for (int i = 0; i < n; i++) {
        Field *f = field_of(r, names[i].text, names[i].len);
        if (f != NULL && f->value.len) return f->value;
    }
    return (Text){NULL, 0};
}

static const char *METHODS[] = {"GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"};

/* _REQUEST_LINE's " time: ([0-9]{1,6}(?:\.[0-9]{1,9})?)\b" number at p: its length, or 0. */
static size_t request_time_at(const char *p, const char *end, size_t *fraction) {
    size_t d = digit_run(p, end);
    if (d == 0 || d > 6) return 0;
    const char *e = p + d;
    *fraction = 0;
    if (e < end && *e == '.') {
        size_t f = digit_run(e + 1, end);
        if (f >= 1 && f <= 9 && boundary(e + 1 + f, end)) {
            *fraction = f;
            return d + 1 + f;
        }
        return d; /* the whole part alone: \b falls before the '.' */
    }
    return boundary(e, end) ? d : 0;
}

/* _REQUEST_LINE's "[1-5][0-9][0-9]\b" at p. */
static int status_at(const char *p, const char *end) {
    return end - p >= 3 && p[0] >= '1' && p[0] <= '5' && is_digit(p[1]) && is_digit(p[2]) &&
           boundary(p + 3, end);
}

/* The first request line quoted in a message (_REQUEST_LINE.search), its status and time,
 * in the row; 0 when there is none. */
static int request_line(Text message, Row *row) {
    const char *end = message.text + message.len;
    for (const char *quote = message.text; quote < end; quote++) {
        quote = memchr(quote, '"', (size_t)(end - quote));
        if (quote == NULL) return 0;
        const char *p = quote + 1;
        size_t method_len = 0;
        for (size_t m = 0; m < sizeof METHODS / sizeof METHODS[0] && !method_len; m++) {
            size_t n = strlen(METHODS[m]);
            if (starts_with(p, end, METHODS[m], n) && p + n < end && p[n] == ' ') method_len = n;
        }
        if (!method_len) continue;
        const char *path = p + method_len + 1;
        const char *path_end = non_space_run(path, end);
        size_t path_len = (size_t)(path_end - path);
        if (path_len < 1 || path_len > MAX_REQUEST_PATH ||
            !starts_with(path_end, end, " HTTP/", 6))
            continue;
        const char *v = path_end + 6;
        size_t k = 0;
        while (k < 3 && v + k < end && (is_digit(v[k]) || v[k] == '.')) k++;
        if (k == 0 || v + k >= end || v[k] != '"') continue;
        const char *after = v + k + 1;
        row->method = (Text){p, method_len};
        row->path = (Text){path, path_len};
        if (after < end && *after == ' ') {
            const char *s = after + 1;
            if (starts_with(s, end, "status: ", 8) && status_at(s + 8, end)) s += 8;
            if (status_at(s, end)) {
                row->status = (s[0] - '0') * 100 + (s[1] - '0') * 10 + (s[2] - '0');
                row->has_status = 1;
                after = s + 3;
            }
        }
        for (const char *t = after; end - t >= 7; t++) {
            t = memchr(t, ' ', (size_t)(end - t));
            if (t == NULL) break;
            if (!starts_with(t, end, " time: ", 7)) continue;
            size_t fraction;
            size_t len = request_time_at(t + 7, end, &fraction);
            if (!len) continue;
            /* float() of at most 15 digits: the digits as an integer (exact) over a power of
             * ten (exact), one correctly rounded division, as float() rounds */
            static const double POW10[] = {1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9};
            int64_t mantissa = 0;
            for (size_t i = 0; i < len; i++)
                if (t[7 + i] != '.') mantissa = mantissa * 10 + (t[7 + i] - '0');
            row->duration = (double)mantissa / POW10[fraction];
            row->has_duration = 1;
            break;
        }
        return 1;
    }
    return 0;
}

/* _event._level: the level of a word, and whether it is one (else "info", and the word kept
 * in attrs). */
static int level_of(Text word, Text *level) {
    const Word *w = word_find(LEVEL_WORDS, N_LEVEL_WORDS, word.text, word.len);
    if (w == NULL && word.len <= 16) {
        char lower[16];
        for (size_t i = 0; i < word.len; i++)
            lower[i] = is_upper(word.text[i]) ? (char)(word.text[i] - 'A' + 'a') : word.text[i];
        w = word_find(LEVEL_WORDS, N_LEVEL_WORDS, lower, word.len);
    }
    if (w == NULL) w = word_find(LEVEL_CODES, N_LEVEL_CODES, word.text, word.len);
    const Word *name = &LEVEL_NAMES[w != NULL ? w->value : 1]; /* "info" second */
    *level = (Text){name->text, name->len};
    return w != NULL;
}

static void put(Buf *out, const char *text, size_t n) {
    memcpy(out->data + out->len, text, n);
    out->len += n;
}

/* A JSON string as orjson writes it, of printable ASCII: only '"' and '\\' are escaped. */
static void put_string(Buf *out, Text t) {
    out->data[out->len++] = '"';
    for (size_t i = 0; i < t.len; i++) {
        if (t.text[i] == '"' || t.text[i] == '\\') out->data[out->len++] = '\\';
        out->data[out->len++] = t.text[i];
    }
    out->data[out->len++] = '"';
}

/* A member of attrs: its name (no escape needed but '"' and '\\'), and its value as orjson
 * writes it (``canon``, when read from JSON) or as a string of printable ASCII. */
static void put_member(Buf *out, int *first, Text name, Text value, Text canon) {
    if (!*first) out->data[out->len++] = ',';
    *first = 0;
    put_string(out, name);
    out->data[out->len++] = ':';
    if (canon.text != NULL) {
        memcpy(out->data + out->len, canon.text, canon.len);
        out->len += canon.len;
    } else {
        put_string(out, value);
    }
}

/* The service of a file word (_event.file_service): its name up to the first dot; -1 for
 * a word that is a path or whose name would be empty (the reference reads those). */
static int word_service(Text word, Text *service) {
    if (memchr(word.text, '/', word.len) != NULL) return -1;
    const char *dot = memchr(word.text, '.', word.len);
    size_t n = dot != NULL ? (size_t)(dot - word.text) : word.len;
    if (n == 0) return -1;
    *service = (Text){word.text, n};
    return 0;
}

int text_starts(int format, const char *line, size_t len) {
    const char *end = line + len;
    if (format == T_LOGFMT || format == T_SYSLOG || format == T_JOURNALD || format == T_JSON)
        return 1; /* every line starts a record */
    if (!printable(line, len)) return 0;
    if (format == T_OSLO) return oslo_starts(line, end);
    if (format == T_KLOG) return klog_starts(line, end);
    return len > 0 && is_digit(line[0]) && stamp_at(line, end, &(Stamp){0}) == 0;
}

/* _event._request: the HTTP fields a record names, and a request line quoted in its message
 * when they name no method (it replaces them all); -1 for a message the request line's
 * pattern reads with Unicode's classes (not printable ASCII: the reference reads it). */
static int request_of(Read *r, Row *row) {
    Text method = {NULL, 0}, path = {NULL, 0}, status = {NULL, 0};
    int any = 0;
    for (int k = 0; k < 3 && !any; k++)
        for (int i = 0; i < N_HTTP_FIELDS[k] && !any; i++)
            any = field_of(r, HTTP_FIELDS[k][i].text, HTTP_FIELDS[k][i].len) != NULL;
    if (any) {
        method = first_value(r, HTTP_FIELDS[0], N_HTTP_FIELDS[0]);
        path = first_value(r, HTTP_FIELDS[1], N_HTTP_FIELDS[1]);
        status = first_value(r, HTTP_FIELDS[2], N_HTTP_FIELDS[2]);
    }
    if (method.text == NULL && memchr(r->message.text, '"', r->message.len) != NULL) {
        if (!printable(r->message.text, r->message.len)) return -1;
        if (request_line(r->message, row)) return 0;
    }
    row->method = method;
    row->path = path;
    if (status.len == 3 && is_digit(status.text[0]) && is_digit(status.text[1]) &&
        is_digit(status.text[2])) {
        row->status = (status.text[0] - '0') * 100 + (status.text[1] - '0') * 10 +
                      (status.text[2] - '0');
        row->has_status = 1;
    }
    return 0;
}

/* _event.Maker._service: --service, else the first of the format's service fields present
 * (a file's name up to its first dot), else the input's name's; -1 for a file word the
 * reference reads. */
static int service_of(const TextOptions *o, Read *r, Text *service) {
    if (o->service.text != NULL) {
        *service = o->service;
        return 0;
    }
    const FormatTables *tables = &FORMAT_TABLES[o->format];
    for (int i = 0; i < tables->n_service_fields; i++) {
        const Word *name = &tables->service_fields[i];
        Field *f = field_of(r, name->text, name->len);
        if (f == NULL || f->value.len == 0) continue;
        if (text_equals((Text){name->text, name->len}, "file", 4))
            return word_service(f->value, service);
        *service = f->value;
        return 0;
    }
    *service = o->file_service;
    return 0;
}

int map_text_line(const TextOptions *o, const char *line, size_t len, Buf *out, Row *row) {
    const char *end = line + len;
    Read r;
    r.count = 0;
    r.has_ts = r.yearless = 0;
    r.iso = (Text){NULL, 0};
    r.level = r.level_canon = (Text){NULL, 0};
    r.level_name = NULL;
    int json = o->format == T_JOURNALD || o->format == T_JSON;
    if (json ? !utf8_valid((const unsigned char *)line, len) : !printable(line, len)) return -1;
    int read = o->format == T_JOURNALD ? journald_read(line, end, out, &r)
               : o->format == T_JSON   ? json_read(line, end, out, &r)
               : o->format == T_OSLO   ? oslo_read(line, end, &r)
               : o->format == T_PYTHON ? python_read(line, end, &r)
               : o->format == T_KLOG   ? klog_read(line, end, out, &r)
               : o->format == T_SYSLOG ? syslog_read(line, end, out, &r)
                                       : logfmt_read(line, end, out, &r);
    if (read < 0) return -1;
    memset(row, 0, sizeof *row);
    if (r.iso.text != NULL) {
        if (iso_ns(r.iso, o, &row->ts_ns) < 0) return -1;
    } else if (r.has_ts)
        row->ts_ns = r.ts_ns;
    else if ((r.yearless ? yearless_ns(&r.stamp, o, &row->ts_ns)
                         : stamp_ns(&r.stamp, o->offset_s, &row->ts_ns)) < 0)
        return -1;
    if (service_of(o, &r, &row->service) < 0 || field_ids(&FORMAT_TABLES[o->format], &r, row) < 0)
        return -1;
    if (o->format == T_OSLO) oslo_patterns(&r, row);
    row->message = r.message;
    int known = r.level.text == NULL || r.level_name != NULL || level_of(r.level, &row->level);
    if (r.level_name != NULL)
        row->level = (Text){LEVEL_NAMES[r.level_name->value].text,
                            LEVEL_NAMES[r.level_name->value].len};
    if (r.level.text == NULL) row->level = (Text){LEVEL_NAMES[1].text, LEVEL_NAMES[1].len};
    if (request_of(&r, row) < 0) return -1;

    /* attrs: at most every byte escaped, and the quotes, colons and commas */
    size_t need = 2 + (known ? 0 : (r.level_canon.text ? r.level_canon.len : 2 * r.level.len) + 12);
    for (int i = 0; i < r.count; i++)
        need += 2 * r.fields[i].name.len + 6 +
                (r.fields[i].canon.text ? r.fields[i].canon.len : 2 * r.fields[i].value.len);
    if (!room(out, need)) return -1;
    char *at = out->data + out->len;
    int first = 1;
    out->data[out->len++] = '{';
    for (int i = 0; i < r.count; i++)
        if (!r.fields[i].popped && !r.fields[i].taken)
            put_member(out, &first, r.fields[i].name, r.fields[i].value, r.fields[i].canon);
    if (!known) put_member(out, &first, (Text){"level", 5}, r.level, r.level_canon);
    out->data[out->len++] = '}';
    /* no attrs at all is null (_schema: an empty dict is not written) */
    row->attrs = first ? (Text){NULL, 0} : (Text){at, (size_t)(out->data + out->len - at)};
    return 0;
}
