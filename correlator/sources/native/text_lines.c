/* The text formats' single-line records in one pass: oslo.log (text/oslo.py) and Python's
 * logging (text/python.py) read, then made an event as text/_event.Maker.event makes it (the
 * service, the built-in identifier rules of text/_known.py, the level, a request line, attrs),
 * for the lines it can read with certainty.
 *
 * Such a line is printable ASCII (so nothing is escaped but '"' and '\\', no character is a
 * Unicode digit, letter or space, and each pattern reads it one way only), starts a record of
 * its format, and is the whole record: the line after it starts one too (map_text checks it
 * with text_starts). Anything else is declined, and the Python parser, the reference, reads it:
 * continuation lines and the records they continue, rejects, dates outside the store's years,
 * a leading file word the service cannot be read from plainly. The layer is placed by the
 * caller, from the service (the built-in names and the operator's service rules read nothing
 * else). tests/correlator/sources/test_text_native.py feeds both the same generated and
 * hostile lines.
 */
#include "text_lines.h"

#include <string.h>

#include "civil.h"

Word LEVEL_CODES[MAX_WORDS];
int N_LEVEL_CODES;

#define MAX_TEXT_FIELDS 8
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

/* "YYYY-MM-DD HH:MM:SS" at p, as digits (what a format's pattern matches; validity apart). */
static int stamp_at(const char *p, const char *end, Stamp *st) {
    if (end - p < 19 || p[4] != '-' || p[7] != '-' || p[10] != ' ' || p[13] != ':' ||
        p[16] != ':')
        return -1;
    if (digits(p, 4, &st->year) || digits(p + 5, 2, &st->month) || digits(p + 8, 2, &st->day) ||
        digits(p + 11, 2, &st->hour) || digits(p + 14, 2, &st->minute) ||
        digits(p + 17, 2, &st->second))
        return -1;
    st->fraction = NULL;
    st->fraction_len = 0;
    return 0;
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
    const char *name;
    Text value;
    int taken; /* its whole value became an identifier: its column holds it */
} Field;

typedef struct {
    Stamp stamp;
    Text level, message;
    Field fields[MAX_TEXT_FIELDS];
    int count;
} Read;

static void add_field(Read *r, const char *name, Text value) {
    r->fields[r->count++] = (Field){name, value, 0};
}

static Field *field_named(Read *r, const char *name) {
    for (int i = 0; i < r->count; i++)
        if (strcmp(r->fields[i].name, name) == 0) return &r->fields[i];
    return NULL;
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

/* The identifiers _known.BUILTIN_IDS finds in an oslo record (ids: node_id, node_instance_id,
 * correlation_id, allocation_id, workflow_id), in their order, the fields whose whole value
 * became one marked taken. Every value is of identifier characters by construction. */
static void oslo_ids(Read *r, Row *row) {
    Field *f = field_named(r, "global_request_id");
    if (f == NULL) f = field_named(r, "request_id");
    if (f != NULL) {
        row->ids[2] = f->value;
        f->taken = 1;
    }
    f = field_named(r, "instance");
    if (f != NULL) {
        row->ids[3] = f->value;
        f->taken = 1;
    } else {
        const char *at = uuid_after(r->message, "/servers/", 9);
        if (at != NULL) row->ids[3] = (Text){at, 36};
    }
    const char *node = node_uuid(r->message);
    if (node == NULL) node = uuid_after(r->message, "/nodes/", 7);
    if (node != NULL) row->ids[0] = (Text){node, 36};
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

/* -- the event ------------------------------------------------------------------------------ */

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

/* _event._request for a record whose fields name no HTTP field: the first request line
 * quoted in the message (_REQUEST_LINE.search), its status and time. */
static void request_line(Text message, Row *row) {
    const char *end = message.text + message.len;
    for (const char *quote = message.text; quote < end; quote++) {
        quote = memchr(quote, '"', (size_t)(end - quote));
        if (quote == NULL) return;
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
        return;
    }
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

static void put_member(Buf *out, int *first, const char *name, Text value) {
    if (!*first) out->data[out->len++] = ',';
    *first = 0;
    put_string(out, (Text){name, strlen(name)});
    out->data[out->len++] = ':';
    put_string(out, value);
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
    if (!printable(line, len)) return 0;
    if (format == T_OSLO) return oslo_starts(line, end);
    return len > 0 && is_digit(line[0]) && stamp_at(line, end, &(Stamp){0}) == 0;
}

int map_text_line(const TextOptions *o, const char *line, size_t len, Buf *out, Row *row) {
    const char *end = line + len;
    Read r;
    r.count = 0;
    if (!printable(line, len)) return -1;
    if ((o->format == T_OSLO ? oslo_read(line, end, &r) : python_read(line, end, &r)) < 0)
        return -1;
    memset(row, 0, sizeof *row);
    if (stamp_ns(&r.stamp, o->offset_s, &row->ts_ns) < 0) return -1;
    if (o->service.text != NULL) {
        row->service = o->service;
    } else {
        Field *file = o->format == T_OSLO ? field_named(&r, "file") : NULL;
        if (file != NULL) {
            if (word_service(file->value, &row->service) < 0) return -1;
        } else {
            row->service = o->file_service;
        }
    }
    if (o->format == T_OSLO) oslo_ids(&r, row);
    row->message = r.message;
    int known = level_of(r.level, &row->level);
    if (memchr(r.message.text, '"', r.message.len) != NULL) request_line(r.message, row);

    char *at = out->data + out->len;
    int first = 1;
    out->data[out->len++] = '{';
    for (int i = 0; i < r.count; i++)
        if (!r.fields[i].taken) put_member(out, &first, r.fields[i].name, r.fields[i].value);
    if (!known) put_member(out, &first, "level", r.level);
    out->data[out->len++] = '}';
    row->attrs = (Text){at, (size_t)(out->data + out->len - at)};
    return 0;
}
