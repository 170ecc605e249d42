/* The text formats' lines read natively: a line of oslo.log, Python's logging, logfmt, klog,
 * syslog, journald or a logging library's JSON as the format's module in
 * correlator/sources/text/ reads it (its time, level, message and named fields), for the lines
 * the reader is sure of; text_lines.c makes the event. */
#ifndef RECORD_NATIVE_TEXT_FORMATS_H
#define RECORD_NATIVE_TEXT_FORMATS_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "civil.h"
#include "columns.h"
#include "record.h"

/* The formats mapped here, by the index map_text's callers name them with. */
enum { T_OSLO, T_PYTHON, T_LOGFMT, T_KLOG, T_SYSLOG, T_JOURNALD, T_JSON, N_TEXT_FORMATS };
extern const char *TEXT_FORMAT_NAMES[N_TEXT_FORMATS];

/* What configure_text() hands over from text/_known.py and text/_event.py. */
typedef struct {
    Word id_fields[MAX_WORDS]; /* a field rule's field, its value the target: 0-4 the five
                                * identifiers, 5 trace_id, 6 span_id; in the rules' order */
    int n_id_fields;
    Word service_fields[MAX_WORDS]; /* the fields that name the service, first first */
    int n_service_fields;
    Word skipped_fields[MAX_WORDS]; /* members that are no field (journald's bookkeeping) */
    int n_skipped_fields;
} FormatTables;

extern FormatTables FORMAT_TABLES[N_TEXT_FORMATS];
/* json's numbered levels (pino's, bunyan's): the number's text, the index of its level. */
extern Word NUMBERED_LEVELS[MAX_WORDS];
extern int N_NUMBERED_LEVELS;

/* The most fields a record read here has (a line with more is declined). */
#define MAX_TEXT_FIELDS 64

static inline int printable(const char *s, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (s[i] < 0x20 || s[i] > 0x7e) return 0;
    return 1;
}

static inline int is_upper(char c) { return c >= 'A' && c <= 'Z'; }
static inline int is_alpha(char c) { return is_upper(c) || (c >= 'a' && c <= 'z'); }
/* \w and \b's word characters, for ASCII. */
static inline int is_word(char c) { return is_alpha(c) || is_digit(c) || c == '_'; }
static inline int is_hex(char c) {
    return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}
/* Whether a word ends before ``p`` (\b after a word character). */
static inline int boundary(const char *p, const char *end) { return p == end || !is_word(*p); }

/* Whether ``out`` holds ``n`` more bytes (reserved by the caller: a line that would need more
 * is declined). */
static inline int room(const Buf *out, size_t n) { return out->cap - out->len >= n; }

static inline size_t digit_run(const char *p, const char *end) {
    const char *q = p;
    while (q < end && is_digit(*q)) q++;
    return (size_t)(q - p);
}

static inline int starts_with(const char *p, const char *end, const char *prefix, size_t n) {
    return (size_t)(end - p) >= n && memcmp(p, prefix, n) == 0;
}

static inline const char *non_space_run(const char *p, const char *end) {
    while (p < end && *p != ' ') p++;
    return p;
}

typedef struct {
    int year, month, day, hour, minute, second;
    const char *fraction;
    size_t fraction_len;
} Stamp;

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
} TextRecord;

static inline int text_equals(Text a, const char *b, size_t n) {
    return a.len == n && memcmp(a.text, b, n) == 0;
}

/* Whether a line (without its line end) certainly starts a record of ``format`` as the
 * format's ``starts`` says. 0 is "not certain": the caller declines the line before it. */
int text_starts(int format, const char *line, size_t len);
/* A line read as ``format`` reads it (its unescaped texts in ``out``); -1 declines it. */
int read_text_record(int format, const char *line, const char *end, Buf *out, TextRecord *r);
/* The fields of a record by name (those read as its time, level or message are not). */
Field *field_of(TextRecord *r, const char *name, size_t n);
Field *field_named(TextRecord *r, const char *name);
/* "YYYY-MM-DD?HH:MM:SS" at p, '?' any character; stamp_at: '?' a space. */
int iso_stamp_at(const char *p, const char *end, Stamp *st);
int stamp_at(const char *p, const char *end, Stamp *st);
/* A fraction of a second at *p, as the formats' (?:[.,](\d{1,9}))? reads one where a space or
 * the line's end must follow: after one of ``marks``, 1 to 9 digits, into ``st``; *p past it.
 * No mark there: 0, nothing read; a mark without 1 to 9 digits: -1. */
int fraction_at(const char **p, const char *end, const char *marks, Stamp *st);

#endif
