/* The text formats' single-line records, mapped as correlator/sources/text/_source.parse maps
 * them (the format's read, text_formats.c, then _event.Maker.event), for the lines it is sure
 * of. */
#ifndef RECORD_NATIVE_TEXT_LINES_H
#define RECORD_NATIVE_TEXT_LINES_H

#include <stddef.h>
#include <stdint.h>

#include "columns.h"
#include "record.h"
#include "text_formats.h"

/* _event's _METHOD_FIELDS, _PATH_FIELDS and _STATUS_FIELDS, and _LEVEL_CODES (the value: the
 * index of the level name), which configure_text() hands over. */
extern Word HTTP_FIELDS[3][MAX_WORDS], LEVEL_CODES[MAX_WORDS];
extern int N_HTTP_FIELDS[3], N_LEVEL_CODES;

/* What _civil.ZoneTable gives where it does not know a wall-clock time's offset. */
#define UNKNOWN_OFFSET INT32_MIN

/* What an input's records are read with. */
typedef struct {
    int format;
    /* The zone's offsets by wall-clock time (_civil.zone_table): from zone_starts[i] (seconds
     * since 1970 on the zone's clock; the first is the smallest int64) to the next start,
     * zone_offsets[i] seconds east of UTC, or UNKNOWN_OFFSET. */
    const int64_t *zone_starts;
    const int32_t *zone_offsets;
    size_t zone_n;
    Text service;      /* --service, or NULL */
    Text file_service; /* the service the input's name gives, or NULL */
    int now_year;      /* a yearless time is this year's on the zone's clock, or the one */
    int64_t latest_ns; /* before when that puts it past latest_ns (now + FUTURE_SLACK_NS) */
} TextOptions;

/* The row of a line that starts a record and is the whole of it, its texts in the line or in
 * ``out`` (reserved for four times the line and 1 KiB); -1 declines the line. The layer is
 * left null: it depends on the service alone here, and the caller places it. */
int map_text_line(const TextOptions *options, const char *line, size_t len, Buf *out, Row *row);

#endif
