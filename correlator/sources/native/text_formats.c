/* The text formats' lines read in one pass, as their modules in correlator/sources/text/ read
 * them, for the lines the reader can read with certainty: printable ASCII (journald's and
 * json's: UTF-8 JSON), so that nothing is escaped but '"' and '\\', no character is a Unicode
 * digit, letter or space, and each pattern reads the line one way only. Anything else is
 * declined (-1) and the Python parser, the reference, reads it: rejects, dates outside the
 * store's years, a leading file word the service cannot be read from plainly, escapes other
 * than \" and \\ (a newline makes a message of two lines), RFC 3339 times this module does
 * not read, floats the JSON reader does not render with certainty. text_lines.c makes the
 * event of what is read here. */
#include "text_formats.h"

#include "json_reader.h"

const char *TEXT_FORMAT_NAMES[N_TEXT_FORMATS] = {"oslo",   "python",   "logfmt", "klog",
                                                 "syslog", "journald", "json"};
FormatTables FORMAT_TABLES[N_TEXT_FORMATS];
Word NUMBERED_LEVELS[MAX_WORDS];
int N_NUMBERED_LEVELS;

/* -- the time ------------------------------------------------------------------------------ */

/* "YYYY-MM-DD?HH:MM:SS" at p, '?' any character, as digits (validity apart). */
int iso_stamp_at(const char *p, const char *end, Stamp *st) {
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
int fraction_at(const char **p, const char *end, const char *marks, Stamp *st) {
    const char *q = *p;
    if (q == end || memchr(marks, *q, strlen(marks)) == NULL) return 0;
    size_t n = digit_run(q + 1, end);
    if (n < 1 || n > 9) return -1;
    st->fraction = q + 1;
    st->fraction_len = n;
    *p = q + 1 + n;
    return 0;
}

int stamp_at(const char *p, const char *end, Stamp *st) {
    if (end - p < 19 || p[10] != ' ') return -1;
    return iso_stamp_at(p, end, st);
}

/* -- what a format reads ------------------------------------------------------------------- */

Field *field_of(TextRecord *r, const char *name, size_t n) {
    for (int i = 0; i < r->count; i++)
        if (!r->fields[i].popped && text_equals(r->fields[i].name, name, n))
            return &r->fields[i];
    return NULL;
}

Field *field_named(TextRecord *r, const char *name) { return field_of(r, name, strlen(name)); }

/* A field set as a dict item is: a repeated name keeps its place and takes the new value. */
static int set_field(TextRecord *r, Text name, Text value) {
    Field *f = field_of(r, name.text, name.len);
    if (f != NULL) {
        f->value = value;
        return 0;
    }
    if (r->count == MAX_TEXT_FIELDS) return -1;
    r->fields[r->count++] = (Field){name, value, {NULL, 0}, 0, 0};
    return 0;
}

static void add_field(TextRecord *r, const char *name, Text value) {
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
    if (fraction_at(&q, end, ".", &h->stamp) < 0 || q >= end || *q != ' ') return -1;
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

static int oslo_read(const char *line, const char *end, TextRecord *r) {
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

static int python_read(const char *line, const char *end, TextRecord *r) {
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
static int logfmt_pairs(const char *p, const char *end, Buf *out, TextRecord *r) {
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
static Field *take_first(TextRecord *r, const char *const *names, int n) {
    for (int i = 0; i < n; i++) {
        Field *f = field_named(r, names[i]);
        if (f != NULL) {
            f->popped = 1;
            return f;
        }
    }
    return NULL;
}

static int logfmt_read(const char *line, const char *end, Buf *out, TextRecord *r) {
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
static int klog_head(const char *line, const char *end, TextRecord *r, const char **message) {
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
    if (fraction_at(&p, end, ".", st) < 0) return -1;
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
    TextRecord r;
    const char *message;
    r.count = 0;
    return klog_head(line, end, &r, &message) == 0;
}

/* A structured message: the quoted message, and the pairs after it, which the header's keys
 * win over; a message whose pairs cannot be read is all text. */
static int klog_read(const char *line, const char *end, Buf *out, TextRecord *r) {
    const char *message;
    if (klog_head(line, end, r, &message) < 0) return -1;
    r->message = (Text){message, (size_t)(end - message)};
    if (message == end || *message != '"') return 0;
    const char *p = message;
    Text quoted;
    int rc = quoted_value(&p, end, out, &quoted);
    if (rc == UNCERTAIN) return -1;
    if (rc == NOT_READ) return 0;
    TextRecord pairs;
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

/* -- syslog ---------------------------------------------------------------------------------- */

static const char MONTHS[] = "JanFebMarAprMayJunJulAugSepOctNovDec";

/* syslog's _TAG at p: "app: ", "app[pid]: " (or without the space); *message past it, or p
 * when there is none. */
static void syslog_tag(const char *p, const char *end, TextRecord *r, const char **message) {
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
static int syslog_5424(const char *p, const char *end, Buf *out, TextRecord *r) {
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
static int syslog_read(const char *line, const char *end, Buf *out, TextRecord *r) {
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
        if (fraction_at(&q, end, ".", st) < 0 || q >= end || *q != ' ') return -1;
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
static int journald_read(const char *line, const char *end, Buf *out, TextRecord *r) {
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
    if (stamp.text == NULL || stamp.len < 1 || stamp.len > 16 ||
        digit_run(stamp.text, stamp.text + stamp.len) != stamp.len)
        return -1;
    int64_t us = 0; /* 16 digits fit: below 10^16 */
    for (size_t i = 0; i < stamp.len; i++) us = us * 10 + (stamp.text[i] - '0');
    if (us > INT64_MAX / 1000) return -1; /* after 2262: the reference rejects it */
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
static int flatten(Reader *rd, int depth, Text prefix, TextRecord *r, Leaves *leaves) {
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
static int json_read(const char *line, const char *end, Buf *out, TextRecord *r) {
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

int text_starts(int format, const char *line, size_t len) {
    const char *end = line + len;
    if (format == T_LOGFMT || format == T_SYSLOG || format == T_JOURNALD || format == T_JSON)
        return 1; /* every line starts a record */
    if (!printable(line, len)) return 0;
    if (format == T_OSLO) return oslo_starts(line, end);
    if (format == T_KLOG) return klog_starts(line, end);
    return len > 0 && is_digit(line[0]) && stamp_at(line, end, &(Stamp){0}) == 0;
}

int read_text_record(int format, const char *line, const char *end, Buf *out, TextRecord *r) {
    r->count = 0;
    r->has_ts = r->yearless = 0;
    r->iso = r->level = r->level_canon = (Text){NULL, 0};
    r->level_name = NULL;
    size_t len = (size_t)(end - line);
    int json = format == T_JOURNALD || format == T_JSON;
    if (json ? !utf8_valid((const unsigned char *)line, len) : !printable(line, len)) return -1;
    switch (format) {
    case T_OSLO: return oslo_read(line, end, r);
    case T_PYTHON: return python_read(line, end, r);
    case T_LOGFMT: return logfmt_read(line, end, out, r);
    case T_KLOG: return klog_read(line, end, out, r);
    case T_SYSLOG: return syslog_read(line, end, out, r);
    case T_JOURNALD: return journald_read(line, end, out, r);
    default: return json_read(line, end, out, r);
    }
}
