/* The record mapping, and the tables it checks against. */
#include "record.h"

#include "civil.h"

#include <stdio.h>
#include <string.h>

Word LAYERS[MAX_WORDS], OWNERS[MAX_WORDS], LEVEL_WORDS[MAX_WORDS], LEVEL_NAMES[MAX_WORDS];
int N_LAYERS, N_OWNERS, N_LEVEL_WORDS, N_LEVEL_NAMES;
size_t MAX_ID_LENGTH;

const Word *word_find(const Word *words, int n, const char *text, size_t len) {
    for (int i = 0; i < n; i++)
        if (words[i].len == len && memcmp(words[i].text, text, len) == 0) return &words[i];
    return NULL;
}

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

void record_init(void) {
    for (size_t i = 0; i < sizeof ROLE_NAMES / sizeof ROLE_NAMES[0]; i++)
        ROLE_LENGTHS[i] = strlen(ROLE_NAMES[i].key);
}

static int role_of(const char *key, size_t len) {
    if (len < 2 || len > 16) return R_ATTR;
    for (size_t i = 0; i < sizeof ROLE_NAMES / sizeof ROLE_NAMES[0]; i++)
        if (ROLE_LENGTHS[i] == len && ROLE_NAMES[i].key[0] == key[0] &&
            memcmp(ROLE_NAMES[i].key, key, len) == 0)
            return ROLE_NAMES[i].role;
    return R_ATTR;
}



/* The RFC 3339 forms _time.parse_rfc3339_ns reads (its _RFC3339, fully matched): a date,
 * 'T', 't' or a space, a time, a fraction of any digits after '.' or ',' (nine kept), spaces,
 * then Z, z, +-HH, +-HHMM or +-HH:MM; in the years whose every instant the store holds.
 * Anything else (other whitespace, no offset) declines. */
int parse_ts(const char *s, size_t n, int64_t *ts_ns) {
    int year, month, day, hour, minute, second;
    if (n < 20 || s[4] != '-' || s[7] != '-' || (s[10] != 'T' && s[10] != 't' && s[10] != ' ') ||
        s[13] != ':' || s[16] != ':')
        return -1;
    if (digits(s, 4, &year) || digits(s + 5, 2, &month) || digits(s + 8, 2, &day) ||
        digits(s + 11, 2, &hour) || digits(s + 14, 2, &minute) || digits(s + 17, 2, &second))
        return -1;
    int64_t civil;
    if (civil_seconds(year, month, day, hour, minute, second, &civil) < 0) return -1;
    size_t i = 19;
    int64_t fraction = 0;
    if (i < n && (s[i] == '.' || s[i] == ',')) {
        size_t start = ++i;
        while (i < n && is_digit(s[i])) {
            if (i - start < 9) fraction = fraction * 10 + (s[i] - '0');
            i++;
        }
        size_t count = i - start;
        if (count == 0) return -1;
        for (size_t k = count; k < 9; k++) fraction *= 10;
    }
    while (i < n && s[i] == ' ') i++;
    int64_t offset = 0;
    if (i + 1 == n && (s[i] == 'Z' || s[i] == 'z')) {
        offset = 0;
    } else if (i < n && (s[i] == '+' || s[i] == '-')) {
        int oh, om = 0;
        size_t left = n - i - 1;
        const char *d = s + i + 1;
        if (left == 2) {
            if (digits(d, 2, &oh) < 0) return -1;
        } else if (left == 4) {
            if (digits(d, 2, &oh) || digits(d + 2, 2, &om)) return -1;
        } else if (left == 5 && d[2] == ':') {
            if (digits(d, 2, &oh) || digits(d + 3, 2, &om)) return -1;
        } else {
            return -1;
        }
        if (oh > 23 || om > 59) return -1;
        offset = (s[i] == '-' ? -1 : 1) * (int64_t)(oh * 3600 + om * 60);
    } else {
        return -1;
    }
    *ts_ns = (civil - offset) * 1000000000LL + fraction;
    return 0;
}

/* agent_logging.schema's identifier rule (_fields._SAFE_ID). */
int safe_id(const char *s, size_t n) {
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


/* The top-level object of a line: its members, with their roles; error's own members when
 * error is an object. */
int read_record(Reader *r, Record *rec) {
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

/* One record being mapped: which members left attrs (and which of error's), and the row. */
typedef struct {
    Record *rec;
    Buf *out;
    Row *row;
    char taken[MAX_MEMBERS];
    char error_taken[MAX_MEMBERS];
    int error_kept; /* members of an error object that stay in attrs["error"] */
} Mapping;

static Member *get(const Mapping *mp, int role) {
    int at = mp->rec->at[role];
    return at >= 0 ? &mp->rec->members[at] : NULL;
}

/* A member that leaves attrs (the mapping pops it). */
static void take(Mapping *mp, int role) { mp->taken[mp->rec->at[role]] = 1; }

/* A text member that becomes a column when it is a non-empty string (_record._text), and
 * otherwise stays in attrs. */
static Text take_text(Mapping *mp, int role) {
    Member *m = get(mp, role);
    if (m == NULL || !nonempty_string(m)) return (Text){NULL, 0};
    take(mp, role);
    return text_of(m);
}

/* ts, layer, service and level. */
static int map_head(Mapping *mp, const Text *default_layer) {
    Row *row = mp->row;
    Member *m = get(mp, R_TS);
    if (m == NULL || m->kind != J_STRING || parse_ts(m->text, m->text_len, &row->ts_ns) < 0)
        return -1;

    m = get(mp, R_LAYER);
    if (m != NULL && m->kind != J_NULL) {
        if (m->kind != J_STRING) return -1;
        const Word *w = word_find(LAYERS, N_LAYERS, m->text, m->text_len);
        if (w == NULL) return -1;
        row->layer = (Text){w->text, w->len};
    } else {
        if (default_layer->text == NULL) return -1;
        row->layer = *default_layer;
    }

    m = get(mp, R_SERVICE);
    row->service = (Text){NULL, 0};
    if (m != NULL && m->kind != J_NULL) {
        if (!nonempty_string(m)) return -1;
        row->service = text_of(m);
    }

    m = get(mp, R_LEVEL);
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
    return 0;
}

/* event, or else pop("msg") or pop("message") or "". */
static int map_message(Mapping *mp) {
    Row *row = mp->row;
    Member *m = get(mp, R_EVENT);
    if (m != NULL && m->kind != J_NULL) {
        if (m->kind != J_STRING) return -1;
        row->message = text_of(m);
        return 0;
    }
    row->message = (Text){"", 0};
    static const int FALLBACKS[] = {R_MSG, R_MESSAGE};
    for (int k = 0; k < 2; k++) {
        m = get(mp, FALLBACKS[k]);
        if (m == NULL) continue;
        take(mp, FALLBACKS[k]);
        if (nonempty_string(m)) {
            row->message = text_of(m);
            return 0;
        }
        if (m->kind != J_NULL && m->kind != J_STRING) return -1;
    }
    return 0;
}

/* The five identifiers, trace_id and span_id. */
static int map_ids(Mapping *mp) {
    Row *row = mp->row;
    for (int k = 0; k < 5; k++) {
        row->ids[k] = (Text){NULL, 0};
        if (take_id(get(mp, R_NODE_ID + k), mp->out, &row->ids[k]) < 0) return -1;
    }
    static const int HEX_ROLES[2] = {R_TRACE_ID, R_SPAN_ID};
    static const size_t HEX_DIGITS[2] = {32, 16};
    Text *hex[2] = {&row->trace_id, &row->span_id};
    for (int k = 0; k < 2; k++) {
        *hex[k] = (Text){NULL, 0};
        Member *m = get(mp, HEX_ROLES[k]);
        if (m == NULL || m->kind == J_NULL) continue;
        if (m->kind != J_STRING || !lower_hex(m->text, m->text_len, HEX_DIGITS[k])) return -1;
        *hex[k] = text_of(m);
    }
    return 0;
}

/* error.owner_layer and error.type to columns, error.stack dropped, the rest kept. */
static int map_error(Mapping *mp) {
    Row *row = mp->row;
    Record *rec = mp->rec;
    row->owner_hint = row->error_type = (Text){NULL, 0};
    mp->error_kept = 0;
    if (get(mp, R_ERROR) == NULL || !rec->error_object) return 0;
    for (int i = 0; i < rec->error_count; i++) {
        Member *e = &rec->error_members[i];
        if (e->key_len == 11 && memcmp(e->key, "owner_layer", 11) == 0) {
            mp->error_taken[i] = 1;
            if (e->kind == J_NULL) continue;
            if (e->kind != J_STRING) return -1;
            const Word *w = word_find(OWNERS, N_OWNERS, e->text, e->text_len);
            if (w == NULL) return -1; /* kept untrusted, after the rest: the reference's */
            row->owner_hint = (Text){w->text, w->len};
        } else if (e->key_len == 4 && memcmp(e->key, "type", 4) == 0) {
            mp->error_taken[i] = 1;
            if (e->kind == J_NULL) continue;
            if (!nonempty_string(e)) return -1;
            row->error_type = text_of(e);
        } else if (e->key_len == 5 && memcmp(e->key, "stack", 5) == 0) {
            mp->error_taken[i] = 1;
        } else {
            mp->error_kept++;
        }
    }
    return 0;
}

/* An access record's method, path, status and duration_s. */
static int map_http(Mapping *mp) {
    Row *row = mp->row;
    row->method = take_text(mp, R_METHOD);
    row->path = take_text(mp, R_PATH);
    row->has_status = row->has_duration = 0;
    Member *m = get(mp, R_STATUS);
    if (m != NULL && m->kind != J_NULL) {
        if (m->kind != J_INT || m->integer < 100 || m->integer > 599) return -1;
        row->status = m->integer;
        row->has_status = 1;
    }
    m = get(mp, R_DURATION);
    if (m != NULL && m->kind != J_NULL) {
        if (m->kind == J_INT)
            row->duration = (double)m->integer;
        else if (m->kind == J_FLOAT)
            row->duration = m->real;
        else
            return -1;
        row->has_duration = 1;
    }
    return 0;
}

/* A transition's entity_kind, entity_id, state_from/from_state and state_to/to_state. */
static void map_entity(Mapping *mp) {
    Row *row = mp->row;
    row->entity_kind = take_text(mp, R_ENTITY_KIND);
    row->entity_id = take_text(mp, R_ENTITY_ID);
    Member *m = get(mp, R_ENTITY_ID);
    if (row->entity_id.text == NULL && m != NULL && m->kind == J_INT) {
        take(mp, R_ENTITY_ID);
        row->entity_id = integer_text(mp->out, m->integer);
    }
    row->state_from = take_text(mp, R_STATE_FROM);
    if (row->state_from.text == NULL) row->state_from = take_text(mp, R_FROM_STATE);
    row->state_to = take_text(mp, R_STATE_TO);
    if (row->state_to.text == NULL) row->state_to = take_text(mp, R_TO_STATE);
}

/* attrs: what is left, in the record's order; error (what is left of it) last. */
static void write_attrs(Mapping *mp) {
    Record *rec = mp->rec;
    Buf *out = mp->out;
    size_t at = out->len;
    int first = 1;
    for (int i = 0; i < rec->count; i++)
        if (!mp->taken[i]) put_member(out, &first, &rec->members[i]);
    Member *m = get(mp, R_ERROR);
    if (m != NULL && m->kind != J_NULL && (!rec->error_object || mp->error_kept)) {
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
                if (!mp->error_taken[i]) put_member(out, &inner, &rec->error_members[i]);
            out->data[out->len++] = '}';
        }
    }
    if (first) {
        mp->row->attrs = (Text){NULL, 0};
    } else {
        out->data[out->len++] = '}';
        mp->row->attrs = (Text){out->data + at, out->len - at};
    }
}

/* The row of a line, or -1 to decline it. ``taken`` marks the members that left attrs. */
int map_record(Record *rec, Buf *out, const Text *default_layer, Row *row) {
    Mapping mp = {.rec = rec, .out = out, .row = row};
    for (int i = 0; i < rec->count; i++) {
        int role = rec->members[i].role;
        /* popped by the mapping whatever they hold (or declined): all but the text fields
         * that stay in attrs when they are not text, and msg/message, popped only in turn */
        mp.taken[i] = role != R_ATTR && role != R_METHOD && role != R_PATH &&
                      role != R_ENTITY_KIND && role != R_ENTITY_ID && role != R_STATE_FROM &&
                      role != R_FROM_STATE && role != R_STATE_TO && role != R_TO_STATE &&
                      role != R_MSG && role != R_MESSAGE;
    }
    if (map_head(&mp, default_layer) < 0 || map_message(&mp) < 0 || map_ids(&mp) < 0 ||
        map_error(&mp) < 0 || map_http(&mp) < 0)
        return -1;
    map_entity(&mp);
    write_attrs(&mp);
    return 0;
}
