/* The text formats' single-line records made events in one pass: a line read by
 * text_formats.c, then made an event as text/_event.Maker.event makes it (its time in the
 * input's zone, the service, the built-in identifier rules of text/_known.py, the level, a
 * request, attrs), for the lines it can read with certainty.
 *
 * Such a line starts a record of its format and is the whole record: the line after it starts
 * one too (map_text checks it with text_starts). Anything else is declined, and the Python
 * parser, the reference, reads it: continuation lines and the records they continue, what
 * text_formats.c declines, identifiers the identifier check refuses. The layer is placed by the
 * caller, from the service (the built-in names and the operator's service rules read nothing
 * else). tests/correlator/sources/test_text_native.py and test_text_native_formats.py feed
 * both the same generated and hostile lines.
 */
#include "text_lines.h"

#include "json_reader.h"

Word HTTP_FIELDS[3][MAX_WORDS], LEVEL_CODES[MAX_WORDS];
int N_HTTP_FIELDS[3], N_LEVEL_CODES;

/* A request line's path: _event._REQUEST_LINE's \S{1,2048}. */
#define MAX_REQUEST_PATH 2048

/* -- the time ------------------------------------------------------------------------------ */

/* The zone's offset of a wall-clock second (_civil.wall_offset_s, from the zone's table: the
 * last segment starting at or before it); UNKNOWN_OFFSET outside the table. */
static int32_t wall_offset(const TextOptions *o, int64_t local_s) {
    size_t low = 0, high = o->zone_n; /* zone_starts[0] is the smallest int64 */
    while (high - low > 1) {
        size_t middle = low + (high - low) / 2;
        if (o->zone_starts[middle] <= local_s)
            low = middle;
        else
            high = middle;
    }
    return o->zone_offsets[low];
}

/* _civil.digits_ns in the input's zone: -1 for what it refuses, for the years civil_seconds
 * leaves to the reference, and for wall-clock times the zone's table does not cover. */
static int stamp_ns(const Stamp *st, const TextOptions *o, int64_t *ts_ns) {
    int64_t civil;
    if (civil_seconds(st->year, st->month, st->day, st->hour, st->minute, st->second, &civil) < 0)
        return -1;
    int32_t offset = wall_offset(o, civil);
    if (offset == UNKNOWN_OFFSET) return -1;
    int64_t nanos = 0;
    for (size_t k = 0; k < 9; k++)
        nanos = nanos * 10 + (k < st->fraction_len ? st->fraction[k] - '0' : 0);
    *ts_ns = (civil - offset) * 1000000000LL + nanos;
    return 0;
}

/* _civil.yearless_ns: the year of now on the zone's clock, else the one before when that puts
 * the time past now and the slack. 29 February (a search for a leap year) is the
 * reference's. */
static int yearless_ns(Stamp *st, const TextOptions *o, int64_t *ts_ns) {
    if (st->month == 2 && st->day == 29) return -1;
    st->year = o->now_year;
    if (stamp_ns(st, o, ts_ns) < 0) return -1;
    if (*ts_ns <= o->latest_ns) return 0;
    st->year--;
    return stamp_ns(st, o, ts_ns);
}

/* -- the built-in pattern rules ------------------------------------------------------------ */

/* _known._UUID: 8-4-4-4-12 hex digits. */
static int uuid_at(const char *p, const char *end) {
    if (end - p < 36) return 0;
    for (int i = 0; i < 36; i++) {
        int dash = i == 8 || i == 13 || i == 18 || i == 23;
        if (dash ? p[i] != '-' : !is_hex(p[i])) return 0;
    }
    return 1;
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
static void oslo_patterns(TextRecord *r, Row *row) {
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

/* -- the event ------------------------------------------------------------------------------ */

/* _civil.iso_ns: an RFC 3339 time, else one without an offset (_LOCAL: the date, 'T', 't' or
 * a space, the time, 1-9 digits of fraction after '.' or ','), read in the zone. */
static int iso_ns(Text t, const TextOptions *o, int64_t *ts_ns) {
    if (parse_ts(t.text, t.len, ts_ns) == 0) return 0;
    Stamp st;
    const char *p = t.text, *end = t.text + t.len;
    if (iso_stamp_at(p, end, &st) < 0 || (p[10] != 'T' && p[10] != 't' && p[10] != ' ')) return -1;
    const char *q = p + 19;
    if (fraction_at(&q, end, ".,", &st) < 0 || q != end) return -1;
    return stamp_ns(&st, o, ts_ns);
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
static int field_ids(const FormatTables *tables, TextRecord *r, Row *row) {
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
static Text first_value(TextRecord *r, const Word *names, int n) {
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
 * in attrs); -1 for a word that is not printable ASCII, or starts or ends with a space (the
 * reference strips Unicode's spaces and lowercases Unicode's letters). */
static int level_of(Text word, Text *level) {
    if (!printable(word.text, word.len) ||
        (word.len && (word.text[0] == ' ' || word.text[word.len - 1] == ' ')))
        return -1;
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

/* _event._request: the HTTP fields a record names, and a request line quoted in its message
 * when they name no method (it replaces them all); -1 for a message the request line's
 * pattern reads with Unicode's classes (not printable ASCII: the reference reads it). */
static int request_of(TextRecord *r, Row *row) {
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
static int service_of(const TextOptions *o, TextRecord *r, Text *service) {
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
    TextRecord r;
    if (read_text_record(o->format, line, end, out, &r) < 0) return -1;
    memset(row, 0, sizeof *row);
    if (r.iso.text != NULL) {
        if (iso_ns(r.iso, o, &row->ts_ns) < 0) return -1;
    } else if (r.has_ts)
        row->ts_ns = r.ts_ns;
    else if ((r.yearless ? yearless_ns(&r.stamp, o, &row->ts_ns)
                         : stamp_ns(&r.stamp, o, &row->ts_ns)) < 0)
        return -1;
    if (service_of(o, &r, &row->service) < 0 || field_ids(&FORMAT_TABLES[o->format], &r, row) < 0)
        return -1;
    if (o->format == T_OSLO) oslo_patterns(&r, row);
    row->message = r.message;
    int known = 1; /* a level word none knows is kept in attrs */
    if (r.level_name != NULL) {
        row->level = (Text){LEVEL_NAMES[r.level_name->value].text,
                            LEVEL_NAMES[r.level_name->value].len};
    } else if (r.level.text != NULL) {
        known = level_of(r.level, &row->level);
        if (known < 0) return -1;
    } else {
        row->level = (Text){LEVEL_NAMES[1].text, LEVEL_NAMES[1].len}; /* "info" */
    }
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
