/* The record mapping: correlator/sources/_record.record_row_positional for the lines it maps
 * unchanged, from a line's members to a row; and the tables it checks against. */
#ifndef RECORD_NATIVE_RECORD_H
#define RECORD_NATIVE_RECORD_H

#include <stddef.h>
#include <stdint.h>

#include "json_reader.h"

#define MAX_WORDS 64

typedef struct {
    char *text;
    size_t len;
    int value; /* for level words: the index of the level name */
} Word;

/* The tables configure() fills, from agent_logging.schema and _fields. */
extern Word LAYERS[MAX_WORDS], OWNERS[MAX_WORDS], LEVEL_WORDS[MAX_WORDS], LEVEL_NAMES[MAX_WORDS];
extern int N_LAYERS, N_OWNERS, N_LEVEL_WORDS, N_LEVEL_NAMES;
extern size_t MAX_ID_LENGTH;

const Word *word_find(const Word *words, int n, const char *text, size_t len);
/* Whether an identifier passes agent_logging.schema.id_problem (1 to MAX_ID_LENGTH of
 * letters, digits and . _ : / @ + ~ -). */
int safe_id(const char *s, size_t n);

/* The RFC 3339 forms _time.parse_rfc3339_ns reads, in the store's years ('T', 't' or a space;
 * a fraction after '.' or ','; spaces; Z, z, +-HH, +-HHMM or +-HH:MM); -1 declines. */
int parse_ts(const char *s, size_t n, int64_t *ts_ns);

/* A text value of a row: absent (NULL) or bytes somewhere stable while the row is built. */
typedef struct {
    const char *text;
    size_t len;
} Text;

typedef struct {
    size_t raw_len; /* the raw text: the line's first raw_len bytes (its hash is of all) */
    int64_t ts_ns, hash, status;
    double duration;
    int has_status, has_duration;
    Text layer, message, service, level, ids[5], trace_id, span_id, method, path, owner_hint,
        error_type, entity_kind, entity_id, state_from, state_to, attrs;
} Row;

/* The role of a record's member, by its key (record.c's ROLE_NAMES). */
enum {
    R_ATTR, /* stays in attrs */
    R_TS, R_LAYER, R_SERVICE, R_LEVEL, R_EVENT, R_ERROR, R_MSG, R_MESSAGE,
    R_NODE_ID, R_NODE_INSTANCE_ID, R_CORRELATION_ID, R_ALLOCATION_ID, R_WORKFLOW_ID,
    R_TRACE_ID, R_SPAN_ID, R_METHOD, R_PATH, R_STATUS, R_DURATION,
    R_ENTITY_KIND, R_ENTITY_ID, R_STATE_FROM, R_FROM_STATE, R_STATE_TO, R_TO_STATE,
    R_BULKY, /* tracebacks: in raw only */
    N_ROLES
};

typedef struct {
    Member members[MAX_MEMBERS];
    Member error_members[MAX_MEMBERS];
    Key keys[MAX_MEMBERS];
    int count, error_count, error_object;
    int at[N_ROLES]; /* the member of each role, or -1 */
} Record;

/* Once, before anything is mapped. */
void record_init(void);
/* The top-level object of a line into ``rec``; -1 declines. */
int read_record(Reader *r, Record *rec);
/* The row of a read record (its texts in ``out`` or the line); -1 declines. */
int map_record(Record *rec, Buf *out, const Text *default_layer, Row *row);

#endif
