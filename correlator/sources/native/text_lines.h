/* The text formats' single-line records, mapped as correlator/sources/text/_source.parse maps
 * them (the format's read, then _event.Maker.event), for the lines it is sure of. */
#ifndef RECORD_NATIVE_TEXT_LINES_H
#define RECORD_NATIVE_TEXT_LINES_H

#include <stddef.h>
#include <stdint.h>

#include "columns.h"
#include "record.h"

/* The formats mapped here, by the index map_text's callers name them with. */
enum { T_OSLO, T_PYTHON, N_TEXT_FORMATS };

/* What an input's records are read with. */
typedef struct {
    int format;
    int64_t offset_s; /* the zone's fixed UTC offset (a zone with rules is not mapped here) */
    Text service;     /* --service, or NULL */
    Text file_service; /* the service the input's name gives, or NULL */
} TextOptions;

/* The text formats' level codes (_event._LEVEL_CODES: syslog's numbers, klog's letters). */
extern Word LEVEL_CODES[MAX_WORDS];
extern int N_LEVEL_CODES;

/* Whether a line (without its line end) certainly starts a record of ``format``: printable
 * ASCII that the format's ``starts`` takes. 0 is "not certain": the caller declines the line
 * before it. */
int text_starts(int format, const char *line, size_t len);

/* The row of a line that starts a record and is the whole of it, its texts in the line or in
 * ``out`` (reserved for four times the line and 1 KiB); -1 declines the line. The layer is
 * left null: it depends on the service alone here, and the caller places it. */
int map_text_line(const TextOptions *options, const char *line, size_t len, Buf *out, Row *row);

#endif
