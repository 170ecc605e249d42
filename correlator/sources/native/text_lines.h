/* The text formats' single-line records, mapped as correlator/sources/text/_source.parse maps
 * them (the format's read, then _event.Maker.event), for the lines it is sure of. */
#ifndef RECORD_NATIVE_TEXT_LINES_H
#define RECORD_NATIVE_TEXT_LINES_H

#include <stddef.h>
#include <stdint.h>

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
/* _event's _METHOD_FIELDS, _PATH_FIELDS and _STATUS_FIELDS, and _LEVEL_CODES (the value: the
 * index of the level name). */
extern Word HTTP_FIELDS[3][MAX_WORDS], LEVEL_CODES[MAX_WORDS];
extern int N_HTTP_FIELDS[3], N_LEVEL_CODES;
/* json's numbered levels (pino's, bunyan's): the number's text, the index of its level. */
extern Word NUMBERED_LEVELS[MAX_WORDS];
extern int N_NUMBERED_LEVELS;

/* What an input's records are read with. */
typedef struct {
    int format;
    int64_t offset_s;  /* the zone's fixed UTC offset (a zone with rules is not mapped here) */
    Text service;      /* --service, or NULL */
    Text file_service; /* the service the input's name gives, or NULL */
    int64_t now_ns;    /* a yearless time's year is the latest not after now + the slack */
    int64_t latest_ns; /* (_civil.yearless_ns: now + FUTURE_SLACK_NS) */
} TextOptions;

/* Whether a line (without its line end) certainly starts a record of ``format`` as the
 * format's ``starts`` says. 0 is "not certain": the caller declines the line before it. */
int text_starts(int format, const char *line, size_t len);

/* The row of a line that starts a record and is the whole of it, its texts in the line or in
 * ``out`` (reserved for four times the line and 1 KiB); -1 declines the line. The layer is
 * left null: it depends on the service alone here, and the caller places it. */
int map_text_line(const TextOptions *options, const char *line, size_t len, Buf *out, Row *row);

#endif
