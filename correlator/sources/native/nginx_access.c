/* nginx's combined access line in one pass: correlator/sources/_nginx_access.access_combined
 * (the COMBINED regex, the fields appended after the user agent) and
 * _nginx_request.access_event (the event: level, owner, identifiers, attrs), for the lines
 * it can read with certainty.
 *
 * Such a line (its trailing '\r's aside, which its raw text leaves out and its hash keeps, as
 * the parser's do) is printable ASCII without a backslash (so nothing is escaped, no character is
 * a Unicode digit or space, and each field is read one way only), starts no error-log or JSON
 * line, has a request line, a $time_local of the store's years, an HTTP status, and appended
 * fields whose meaning does not depend on a header the API reads (baggage, traceparent,
 * X-Correlation-ID), a host name, a list or an address shape (only keyed upstream fields and
 * single statuses and durations are read here). Any other line is declined, and the Python
 * parser, the reference, reads it; tests/correlator/sources/test_nginx_native.py feeds both
 * the same generated and hostile lines.
 *
 * A line mapped here matches _nginx_error's COMBINED_BYTES: it starts a record, whatever came
 * before it, so the lines declined around it are read by the parser run by run.
 */
#include "nginx_access.h"

#include <stdint.h>
#include <string.h>

#include "civil.h"
#include "decimal.h"

/* _nginx_request's clip: 512 characters, an ellipsis marking a cut. */
#define MAX_ATTR_CHARS 512

static const char MONTHS[] = "JanFebMarAprMayJunJulAugSepOctNovDec";

/* The fields _nginx_access's _extras reads after the user agent, by key. */
enum { F_REQUEST_ID, F_REQUEST_TIME, F_UPSTREAM_STATUS, F_UPSTREAM_ADDR, F_RESPONSE_TIME,
       N_FIELDS, F_DECLINE };

typedef struct {
    const char *key;
    int field;
} ExtraKey;

static const ExtraKey EXTRA_KEYS[] = {
    {"request_id", F_REQUEST_ID}, {"rid", F_REQUEST_ID},
    {"request_time", F_REQUEST_TIME}, {"rt", F_REQUEST_TIME},
    {"upstream_status", F_UPSTREAM_STATUS}, {"us", F_UPSTREAM_STATUS},
    {"ups", F_UPSTREAM_STATUS},
    {"upstream_addr", F_UPSTREAM_ADDR}, {"upstream", F_UPSTREAM_ADDR}, {"ua", F_UPSTREAM_ADDR},
    {"upstream_response_time", F_RESPONSE_TIME}, {"urt", F_RESPONSE_TIME},
    /* identifiers from headers (parse_headers' rules) and the service's name: the reference */
    {"http_x_correlation_id", F_DECLINE}, {"x_correlation_id", F_DECLINE},
    {"correlation_id", F_DECLINE}, {"cid", F_DECLINE}, {"traceparent", F_DECLINE},
    {"host", F_DECLINE}, {"server_name", F_DECLINE},
};

static int all_digits(Text t) {
    if (t.len == 0) return 0;
    for (size_t i = 0; i < t.len; i++)
        if (!is_digit(t.text[i])) return 0;
    return 1;
}

static int equals(Text t, const char *word) {
    size_t n = strlen(word);
    return t.len == n && memcmp(t.text, word, n) == 0;
}

static const char *find(const char *p, const char *end, char c) {
    const char *at = memchr(p, c, (size_t)(end - p));
    return at ? at : end;
}

/* _time.parse_nginx_local_ns: "22/Nov/2026:13:11:19 +0000" (the month as nginx writes it). */
static int local_time(Text t, int64_t *ts_ns) {
    const char *s = t.text;
    if (t.len != 26 || s[2] != '/' || s[6] != '/' || s[11] != ':' || s[14] != ':' ||
        s[17] != ':' || s[20] != ' ' || (s[21] != '+' && s[21] != '-'))
        return -1;
    int day, year, hour, minute, second, oh, om, month = 0;
    for (int m = 0; m < 12; m++)
        if (memcmp(s + 3, MONTHS + 3 * m, 3) == 0) month = m + 1;
    int64_t civil;
    if (month == 0 || digits(s, 2, &day) || digits(s + 7, 4, &year) ||
        digits(s + 12, 2, &hour) || digits(s + 15, 2, &minute) || digits(s + 18, 2, &second) ||
        digits(s + 22, 2, &oh) || digits(s + 24, 2, &om) || oh > 23 || om > 59 ||
        civil_seconds(year, month, day, hour, minute, second, &civil) < 0)
        return -1;
    int64_t offset = (s[21] == '-' ? -1 : 1) * (int64_t)(oh * 3600 + om * 60);
    *ts_ns = (civil - offset) * 1000000000LL;
    return 0;
}

/* _nginx_request.request_line: "GET /x?y HTTP/1.1" as method, path (no query) and protocol;
 * a request it does not read as one, or whose path is empty, declines. */
static int request_line(Text request, Text *method, Text *path, Text *protocol) {
    const char *s = request.text, *end = s + request.len;
    const char *space = find(s, end, ' ');
    size_t method_len = (size_t)(space - s);
    if (space == end || method_len > 32 || !(s[0] >= 'A' && s[0] <= 'Z')) return -1;
    for (const char *p = s + 1; p < space; p++)
        if (!((*p >= 'A' && *p <= 'Z') || *p == '_' || *p == '-')) return -1;
    const char *target = space + 1;
    const char *target_end = find(target, end, ' ');
    if (target_end == target) return -1;
    *protocol = (Text){NULL, 0};
    if (target_end != end) {
        const char *proto = target_end + 1;
        size_t n = (size_t)(end - proto);
        if (!((n == 6 || (n == 8 && proto[6] == '.' && is_digit(proto[7]))) &&
              memcmp(proto, "HTTP/", 5) == 0 && is_digit(proto[5])))
            return -1;
        *protocol = (Text){proto, n};
    }
    *method = (Text){s, method_len};
    *path = (Text){target, (size_t)(find(target, target_end, '?') - target)};
    return path->len ? 0 : -1;
}

/* A quoted field at *p ('"' there): its content, *p past its closing quote; -1 without one. */
static int quoted(const char **p, const char *end, Text *content) {
    const char *close = find(*p + 1, end, '"');
    if (close == end) return -1;
    *content = (Text){*p + 1, (size_t)(close - *p - 1)};
    *p = close + 1;
    return 0;
}

enum { S_OTHER, S_ADDRESS };

/* Whether a value appended after $request_id is a "host:port" upstream address (one colon,
 * host letters, digits and . _ -, a port of digits, not "NNN:NNN", which is a status list
 * too), or of another shape read here (no colon); -1 for the rest (lists, spaces, brackets,
 * "unix:" sockets), which the reference reads. */
static int value_shape(Text value) {
    const char *colon = NULL;
    for (size_t i = 0; i < value.len; i++) {
        char c = value.text[i];
        if (c == ',' || c == ' ' || c == '[' || c == ']') return -1;
        if (c == ':') {
            if (colon != NULL) return -1;
            colon = value.text + i;
        }
    }
    if (colon == NULL) return S_OTHER;
    Text host = {value.text, (size_t)(colon - value.text)};
    Text port = {colon + 1, value.len - host.len - 1};
    if (host.len == 0 || !all_digits(port) || (host.len == 3 && port.len == 3 && all_digits(host)))
        return -1;
    for (size_t i = 0; i < host.len; i++) {
        char c = host.text[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || is_digit(c) || c == '.' ||
              c == '_' || c == '-'))
            return -1;
    }
    return S_ADDRESS;
}

/* The fields after the user agent (_nginx_access._extras): $request_id first, then keyed
 * fields, single statuses and durations by shape; what the reference might read otherwise
 * declines. Values are in ``fields`` (a NULL text: absent). */
static int extras(const char *p, const char *end, Text *fields) {
    int first = 1;
    for (;;) {
        while (p < end && *p == ' ') p++;
        if (p >= end) return 0;
        Text value;
        if (*p == '"') {
            if (quoted(&p, end, &value) < 0) return 0; /* unterminated: the reference stops */
        } else {
            const char *start = p;
            while (p < end && *p != ' ' && *p != '"') p++;
            value = (Text){start, (size_t)(p - start)};
        }
        const char *eq = memchr(value.text, '=', value.len);
        if (eq != NULL) {
            Text key = {value.text, (size_t)(eq - value.text)};
            Text keyed = {eq + 1, value.len - key.len - 1};
            int field = -1;
            for (size_t k = 0; k < sizeof EXTRA_KEYS / sizeof EXTRA_KEYS[0]; k++)
                if (equals(key, EXTRA_KEYS[k].key)) field = EXTRA_KEYS[k].field;
            if (field == F_DECLINE) return -1;
            if (field >= 0) {
                if (keyed.len && !equals(keyed, "-")) fields[field] = keyed;
                first = 0;
                continue;
            }
        }
        if (first) {
            first = 0;
            if (!equals(value, "-")) fields[F_REQUEST_ID] = value;
            continue;
        }
        if (value.len == 0 || equals(value, "-")) continue;
        int shape = value_shape(value);
        if (shape < 0) return -1;
        if (shape == S_ADDRESS) {
            if (!fields[F_UPSTREAM_ADDR].len) fields[F_UPSTREAM_ADDR] = value;
            continue;
        }
        const char *dot = memchr(value.text, '.', value.len);
        if (value.len == 3 && all_digits(value)) {
            if (!fields[F_UPSTREAM_STATUS].len) fields[F_UPSTREAM_STATUS] = value;
        } else if (dot != NULL && all_digits((Text){value.text, (size_t)(dot - value.text)}) &&
                   all_digits((Text){dot + 1, value.len - (size_t)(dot - value.text) - 1})) {
            if (!fields[F_REQUEST_TIME].len)
                fields[F_REQUEST_TIME] = value;
            else if (!fields[F_RESPONSE_TIME].len)
                fields[F_RESPONSE_TIME] = value;
        }
    }
}

/* The JSON string of a text, clipped as _nginx_request.clip does (the text is printable
 * ASCII without a backslash: only '"' is escaped). */
static void put_string(Buf *out, Text t) {
    size_t n = t.len > MAX_ATTR_CHARS ? MAX_ATTR_CHARS - 1 : t.len;
    out->data[out->len++] = '"';
    for (size_t i = 0; i < n; i++) {
        if (t.text[i] == '"') out->data[out->len++] = '\\';
        out->data[out->len++] = t.text[i];
    }
    if (n < t.len) { /* U+2026 HORIZONTAL ELLIPSIS */
        memcpy(out->data + out->len, "\xe2\x80\xa6", 3);
        out->len += 3;
    }
    out->data[out->len++] = '"';
}

static void put_raw(Buf *out, const char *text, size_t n) {
    memcpy(out->data + out->len, text, n);
    out->len += n;
}

static void put_key(Buf *out, const char *key) {
    out->data[out->len++] = ',';
    out->data[out->len++] = '"';
    put_raw(out, key, strlen(key));
    out->data[out->len++] = '"';
    out->data[out->len++] = ':';
}

/* A duration as _nginx_request._float reads it and orjson writes it: a decimal (INT or
 * INT.FRAC) whose value and rendering are certain; *text its rendering, in out. Others
 * decline (-1): exponents, signs, "inf", spaces and underscores float() reads, too. */
static int duration(Text t, Buf *out, double *value, Text *text) {
    const char *s = t.text, *end = s + t.len;
    const char *dot = find(s, end, '.');
    Text whole = {s, (size_t)(dot - s)};
    Text frac = dot == end ? (Text){"0", 1} : (Text){dot + 1, (size_t)(end - dot - 1)};
    if (!all_digits(whole) || !all_digits(frac)) return -1;
    while (whole.len > 1 && whole.text[0] == '0') whole = (Text){whole.text + 1, whole.len - 1};
    while (frac.len > 1 && frac.text[frac.len - 1] == '0') frac.len--;
    if (decimal_value(whole.text, whole.len, frac.text, frac.len, 0, value) < 0) return -1;
    char *at = out->data + out->len;
    put_raw(out, whole.text, whole.len);
    out->data[out->len++] = '.';
    put_raw(out, frac.text, frac.len);
    *text = (Text){at, (size_t)(out->data + out->len - at)};
    return 0;
}

/* The fields of the line, as access_combined reads them. */
typedef struct {
    Text client, user, time, request, status, sent, agent;
    Text extra[N_FIELDS];
} Combined;

/* The COMBINED regex over a line that passed the screening of map_combined. */
static int read_combined(const char *s, const char *end, Combined *c) {
    const char *p = s;
    /* (\S+) \S+ (\S+) \[ : three tokens, one space after each; the first is $remote_addr,
     * the third $remote_user */
    Text tokens[3];
    for (int k = 0; k < 3; k++) {
        const char *start = p;
        p = find(p, end, ' ');
        if (p == start || p == end) return -1;
        tokens[k] = (Text){start, (size_t)(p - start)};
        p++;
    }
    c->client = tokens[0];
    c->user = tokens[2];
    if (*p != '[') return -1;
    const char *close = find(p + 1, end, ']');
    if (close == end || close == p + 1) return -1;
    c->time = (Text){p + 1, (size_t)(close - p - 1)};
    p = close + 1;
    if (end - p < 2 || p[0] != ' ' || p[1] != '"') return -1;
    p++;
    if (quoted(&p, end, &c->request) < 0) return -1;
    /* " (\d{3}) (\d+|-)" */
    if (end - p < 6 || p[0] != ' ' || !is_digit(p[1]) || !is_digit(p[2]) || !is_digit(p[3]) ||
        p[4] != ' ')
        return -1;
    c->status = (Text){p + 1, 3};
    p += 5;
    const char *sent = p;
    if (*p == '-') {
        p++;
    } else {
        while (p < end && is_digit(*p)) p++;
        if (p == sent) return -1;
    }
    c->sent = (Text){sent, (size_t)(p - sent)};
    /* (?: "referer" "agent")? then the rest */
    c->agent = (Text){NULL, 0};
    const char *q = p;
    Text referer, agent;
    if (end - q >= 2 && q[0] == ' ' && q[1] == '"' && (q++, quoted(&q, end, &referer) == 0) &&
        end - q >= 2 && q[0] == ' ' && q[1] == '"' && (q++, quoted(&q, end, &agent) == 0)) {
        c->agent = agent;
        p = q;
    }
    memset(c->extra, 0, sizeof c->extra);
    return extras(p, end, c->extra);
}

int map_combined(const char *line, size_t len, Buf *out, Row *row) {
    const char *end = line + len;
    if (len < 20 || line[0] == '{' || line[0] == '[' || line[0] == ' ') return -1;
    /* an error-log line starts "YYYY/": the reference reads it as one */
    if (is_digit(line[0]) && is_digit(line[1]) && is_digit(line[2]) && is_digit(line[3]) &&
        line[4] == '/')
        return -1;
    for (size_t i = 0; i < len; i++)
        if (line[i] < 0x20 || line[i] > 0x7e || line[i] == '\\') return -1;
    Combined c;
    int status;
    if (read_combined(line, end, &c) < 0 || local_time(c.time, &row->ts_ns) < 0 ||
        digits(c.status.text, 3, &status) < 0 || status < 100 || status > 599)
        return -1;
    Text method, path, protocol;
    if (request_line(c.request, &method, &path, &protocol) < 0) return -1;
    if (method.len + path.len + 5 > MAX_ATTR_CHARS) return -1; /* the message is clipped */
    Text request_id = c.extra[F_REQUEST_ID];
    if (request_id.len && !safe_id(request_id.text, request_id.len)) return -1;
    double request_time = 0;
    Text request_time_text = {NULL, 0};
    if (c.extra[F_REQUEST_TIME].len &&
        duration(c.extra[F_REQUEST_TIME], out, &request_time, &request_time_text) < 0)
        return -1;

    int64_t ts_ns = row->ts_ns;
    memset(row, 0, sizeof *row);
    row->ts_ns = ts_ns;
    row->layer = (Text){"ingress", 7};
    row->service = (Text){"nginx", 5};
    row->method = method;
    row->path = path;
    row->status = status;
    row->has_status = 1;
    row->duration = request_time;
    row->has_duration = request_time_text.text != NULL;
    if (request_id.len) row->ids[2] = request_id; /* correlation_id */
    row->level = status >= 500 ? (Text){"error", 5}
                 : status >= 400 ? (Text){"warning", 7}
                                 : (Text){"info", 4};
    if (status == 502 || status == 504) row->owner_hint = (Text){"ingress", 7};
    if (status == 401 || status == 403) row->owner_hint = (Text){"api_auth", 8};
    if (status >= 400) {
        char *at = out->data + out->len;
        put_raw(out, "HTTP ", 5);
        put_raw(out, c.status.text, 3);
        row->error_type = (Text){at, 8};
    }
    /* message: f"{method} {path} {status}" (longer than clip keeps: declined above) */
    char *at = out->data + out->len;
    put_raw(out, method.text, method.len);
    out->data[out->len++] = ' ';
    put_raw(out, path.text, path.len);
    out->data[out->len++] = ' ';
    put_raw(out, c.status.text, 3);
    row->message = (Text){at, (size_t)(out->data + out->len - at)};

    /* attrs, in access_event's order */
    at = out->data + out->len;
    put_raw(out, "{\"log\":\"access\",\"format\":\"combined\"", 35);
    if (request_id.len) {
        put_key(out, "request_id");
        put_string(out, request_id);
    }
    put_key(out, "client");
    put_string(out, c.client);
    if (!equals(c.user, "-")) {
        put_key(out, "remote_user");
        put_string(out, c.user);
    }
    if (c.extra[F_UPSTREAM_STATUS].len) {
        put_key(out, "upstream_status");
        put_string(out, c.extra[F_UPSTREAM_STATUS]);
    }
    if (c.extra[F_UPSTREAM_ADDR].len) {
        put_key(out, "upstream_addr");
        put_string(out, c.extra[F_UPSTREAM_ADDR]);
    }
    if (c.extra[F_RESPONSE_TIME].len) {
        put_key(out, "upstream_response_time_s");
        put_string(out, c.extra[F_RESPONSE_TIME]);
    }
    if (request_time_text.text != NULL) {
        put_key(out, "request_time_s");
        put_raw(out, request_time_text.text, request_time_text.len);
    }
    if (c.sent.len <= 18 && all_digits(c.sent)) {
        Text sent = c.sent;
        while (sent.len > 1 && sent.text[0] == '0') sent = (Text){sent.text + 1, sent.len - 1};
        put_key(out, "bytes_sent");
        put_raw(out, sent.text, sent.len);
    }
    if (c.agent.len && !equals(c.agent, "-")) {
        put_key(out, "user_agent");
        put_string(out, c.agent);
    }
    if (protocol.text != NULL) {
        put_key(out, "protocol");
        put_string(out, protocol);
    }
    out->data[out->len++] = '}';
    row->attrs = (Text){at, (size_t)(out->data + out->len - at)};
    return 0;
}
