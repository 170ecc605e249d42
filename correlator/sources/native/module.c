/* correlator.sources._record_native: the record mapping of correlator/sources/_record.py for
 * the common line, in one native pass (setup.py builds this folder into that module), and
 * nginx's combined access line the same way (map_nginx: nginx_access.c, which says what it
 * reads; the rest of this comment is of map_lines, and holds for both).
 *
 * map_lines() takes a batch of JSON lines and, for each line it can map with certainty, does
 * what the Python path does (orjson.loads, record_row_positional, the blake2b content hash)
 * and appends the row to Arrow column buffers. A line it is not certain of (not an object,
 * not valid UTF-8, a key with an escape, a repeated key, a float orjson would write in another
 * form, an integer past 64 bits, a field the mapping refuses or rewrites, nesting deeper than
 * NATIVE_DEPTH) is *declined*: its index is returned and the Python mapping, the reference,
 * maps it or names why it is refused. So every row this module writes is one the Python path
 * writes identically, hash included (tests/correlator/sources/test_record_native.py feeds both
 * the same generated and hostile lines); it never produces a reject itself.
 *
 * The mapping runs without the GIL: a batch mapped in one thread overlaps the store's insert
 * of the previous one (DuckDB releases the GIL too).
 *
 * The tables it checks against (layers, owner layers, level words, the identifier length)
 * are handed over by configure(), from agent_logging.schema and _fields, so they have one
 * home. BLAKE2b follows RFC 7693 (digest size 8, the source kind as personalisation, as
 * _lines.hasher sets up hashlib's); a batch's rows are hashed after they are mapped, four
 * lines side by side where the CPU has AVX2 (blake2b.c: 2.05 against 2.36 µs a line mapped).
 *
 * Memory: per line, one scratch buffer reserved for three times the line (renderings, decoded
 * texts and attrs fit in it, so pointers into it stay valid while the row is built); per
 * batch, the column buffers, sized from the batch's bytes at the start.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "blake2b.h"
#include "columns.h"
#include "json_reader.h"
#include "nginx_access.h"
#include "record.h"
#include "text_lines.h"

static size_t MAX_LINE_BYTES;
static int CONFIGURED, TEXT_CONFIGURED;
/* The lines hashed side by side (b2_hash_many): b2_lanes() unless hash_lanes() set 1. */
static int HASH_LANES = 1;

enum {
    C_TS_NS, C_LAYER, C_SOURCE, C_ORIGIN, C_MESSAGE, C_RAW, C_HASH, C_SERVICE, C_LEVEL,
    C_NODE_ID, C_NODE_INSTANCE_ID, C_CORRELATION_ID, C_ALLOCATION_ID, C_WORKFLOW_ID,
    C_TRACE_ID, C_SPAN_ID, C_HTTP_METHOD, C_HTTP_PATH, C_HTTP_STATUS, C_DURATION_S,
    C_OWNER_HINT, C_ERROR_TYPE, C_ENTITY_KIND, C_ENTITY_ID, C_STATE_FROM, C_STATE_TO, C_ATTRS,
    N_COLUMNS
};

/* The events table's columns, in _schema's order (the Python side checks the names). */
static const char *COLUMN_NAMES[N_COLUMNS] = {
    "ts_ns", "layer", "source", "origin", "message", "raw", "hash", "service", "level",
    "node_id", "node_instance_id", "correlation_id", "allocation_id", "workflow_id",
    "trace_id", "span_id", "http_method", "http_path", "http_status", "duration_s",
    "owner_hint", "error_type", "entity_kind", "entity_id", "state_from", "state_to", "attrs",
};

/* The width of a fixed-width column's values in bytes; 0 for a text column. */
static size_t column_width(int c) {
    if (c == C_TS_NS || c == C_HASH || c == C_DURATION_S) return 8;
    return c == C_HTTP_STATUS ? 4 : 0;
}

static int put_text(Column *c, Text t) { return col_text(c, t.text, t.len); }

static int append_row(Column *cols, const Row *row, Text source, Text origin, Text raw) {
    int rc = 0;
    rc |= col_fixed(&cols[C_TS_NS], &row->ts_ns, 8, 1);
    rc |= put_text(&cols[C_LAYER], row->layer);
    rc |= put_text(&cols[C_SOURCE], source);
    rc |= put_text(&cols[C_ORIGIN], origin);
    rc |= put_text(&cols[C_MESSAGE], row->message);
    rc |= put_text(&cols[C_RAW], raw);
    rc |= col_fixed(&cols[C_HASH], &row->hash, 8, 1);
    rc |= put_text(&cols[C_SERVICE], row->service);
    rc |= put_text(&cols[C_LEVEL], row->level);
    for (int k = 0; k < 5; k++) rc |= put_text(&cols[C_NODE_ID + k], row->ids[k]);
    rc |= put_text(&cols[C_TRACE_ID], row->trace_id);
    rc |= put_text(&cols[C_SPAN_ID], row->span_id);
    rc |= put_text(&cols[C_HTTP_METHOD], row->method);
    rc |= put_text(&cols[C_HTTP_PATH], row->path);
    int32_t status = (int32_t)row->status;
    rc |= col_fixed(&cols[C_HTTP_STATUS], &status, 4, row->has_status);
    rc |= col_fixed(&cols[C_DURATION_S], &row->duration, 8, row->has_duration);
    rc |= put_text(&cols[C_OWNER_HINT], row->owner_hint);
    rc |= put_text(&cols[C_ERROR_TYPE], row->error_type);
    rc |= put_text(&cols[C_ENTITY_KIND], row->entity_kind);
    rc |= put_text(&cols[C_ENTITY_ID], row->entity_id);
    rc |= put_text(&cols[C_STATE_FROM], row->state_from);
    rc |= put_text(&cols[C_STATE_TO], row->state_to);
    rc |= put_text(&cols[C_ATTRS], row->attrs);
    return rc ? -1 : 0;
}

static int read_words(PyObject *seq, Word *words, int *count, const char *what) {
    PyObject *fast = PySequence_Fast(seq, what);
    if (fast == NULL) return -1;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(fast);
    if (n > MAX_WORDS) {
        Py_DECREF(fast);
        PyErr_Format(PyExc_ValueError, "%s: more than %d words", what, MAX_WORDS);
        return -1;
    }
    for (int i = 0; i < *count; i++) free(words[i].text);
    *count = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_ssize_t len;
        const char *text = PyUnicode_AsUTF8AndSize(PySequence_Fast_GET_ITEM(fast, i), &len);
        if (text == NULL) {
            Py_DECREF(fast);
            return -1;
        }
        words[i].text = malloc((size_t)len + 1);
        if (words[i].text == NULL) {
            Py_DECREF(fast);
            PyErr_NoMemory();
            return -1;
        }
        memcpy(words[i].text, text, (size_t)len + 1);
        words[i].len = (size_t)len;
        words[i].value = 0;
        *count = (int)i + 1;
    }
    Py_DECREF(fast);
    return 0;
}

/* A dict of words to a number below ``limit`` (the index of a level name, an identifier's),
 * in the dict's order. */
static int read_word_values(PyObject *dict, Word *words, int *count, const char *what,
                            long limit) {
    if (!PyDict_Check(dict)) {
        PyErr_Format(PyExc_TypeError, "%s must be a dict", what);
        return -1;
    }
    PyObject *keys = PyDict_Keys(dict);
    if (keys == NULL) return -1;
    int rc = read_words(keys, words, count, what);
    Py_DECREF(keys);
    if (rc < 0) return -1;
    for (int i = 0; i < *count; i++) {
        PyObject *value = PyDict_GetItemString(dict, words[i].text);
        long index = value ? PyLong_AsLong(value) : -1;
        if (index < 0 || index >= limit) {
            if (!PyErr_Occurred())
                PyErr_Format(PyExc_ValueError, "%s: %s is not below %ld", what, words[i].text,
                             limit);
            return -1;
        }
        words[i].value = (int)index;
    }
    return 0;
}

PyDoc_STRVAR(configure_doc,
"configure(layers, owner_layers, level_names, level_words, max_id_length, max_line_bytes)\n"
"\n"
"The tables the mapping checks against: the evidence layers, the owner layers, the model's\n"
"levels (\"info\" second), each level word with the index of its level, the identifiers'\n"
"longest length and the longest line read.");

static PyObject *configure(PyObject *self, PyObject *args) {
    PyObject *layers, *owners, *names, *words;
    Py_ssize_t max_id, max_line;
    if (!PyArg_ParseTuple(args, "OOOOnn", &layers, &owners, &names, &words, &max_id, &max_line))
        return NULL;
    if (read_words(layers, LAYERS, &N_LAYERS, "layers") < 0 ||
        read_words(owners, OWNERS, &N_OWNERS, "owner_layers") < 0 ||
        read_words(names, LEVEL_NAMES, &N_LEVEL_NAMES, "level_names") < 0)
        return NULL;
    if (N_LEVEL_NAMES < 2 || strcmp(LEVEL_NAMES[1].text, "info") != 0) {
        PyErr_SetString(PyExc_ValueError, "level_names: \"info\" must come second");
        return NULL;
    }
    if (read_word_values(words, LEVEL_WORDS, &N_LEVEL_WORDS, "level_words", N_LEVEL_NAMES) < 0)
        return NULL;
    MAX_ID_LENGTH = (size_t)max_id;
    MAX_LINE_BYTES = (size_t)max_line;
    CONFIGURED = 1;
    Py_RETURN_NONE;
}

static PyObject *column_buffers(Column *c, int kind_text) {
    PyObject *validity, *offsets, *values;
    if (c->nulls) {
        validity = PyBytes_FromStringAndSize(c->validity.data, (Py_ssize_t)c->validity.len);
    } else {
        validity = Py_None;
        Py_INCREF(validity);
    }
    if (kind_text) {
        offsets = c->rows ? PyBytes_FromStringAndSize(c->offsets.data, (Py_ssize_t)c->offsets.len)
                          : PyBytes_FromStringAndSize("\0\0\0\0", 4);
    } else {
        offsets = Py_None;
        Py_INCREF(offsets);
    }
    values = PyBytes_FromStringAndSize(c->values.data ? c->values.data : "",
                                       (Py_ssize_t)c->values.len);
    if (validity == NULL || offsets == NULL || values == NULL) {
        Py_XDECREF(validity);
        Py_XDECREF(offsets);
        Py_XDECREF(values);
        return NULL;
    }
    return Py_BuildValue("(NNNL)", validity, offsets, values, (long long)c->nulls);
}

PyDoc_STRVAR(map_lines_doc,
"map_lines(lines, source, origin, default_layer) -> (rows, columns, declined)\n"
"\n"
"Map JSON lines (bytes, without their newline) as _record.record_row_positional does,\n"
"attrs as JSON text. ``columns`` maps each column name of the events table to\n"
"(validity or None, offsets or None, values, null count), Arrow's buffers; ``declined``\n"
"lists the indexes of the lines left to the Python mapping. Runs without the GIL.");

/* How one line becomes a row, with what its batch is read with: -1 declines it. */
typedef int (*Mapper)(const char *line, size_t len, Buf *out, Record *rec, const void *context,
                      Row *row);
/* The lines a mapper cannot take whatever they say, marked in ``declined`` before any is
 * mapped (the text formats': the lines that are not a record of their own). */
typedef void (*Screen)(const char **lines, const size_t *lens, Py_ssize_t n,
                       const void *context, char *declined);

static int map_json_line(const char *line, size_t len, Buf *out, Record *rec,
                         const void *context, Row *row) {
    if (!utf8_valid((const unsigned char *)line, len)) return -1;
    Reader r = {line, line + len, out};
    if (read_record(&r, rec) < 0 || map_record(rec, out, context, row) < 0) return -1;
    row->raw_len = len;
    return 0;
}

/* nginx's parser hashes the line as read and keeps it without its trailing '\r's. */
static int map_nginx_line(const char *line, size_t len, Buf *out, Record *rec,
                          const void *context, Row *row) {
    size_t text_len = len;
    while (text_len && line[text_len - 1] == '\r') text_len--;
    if (map_combined(line, text_len, out, row) < 0) return -1;
    row->raw_len = text_len;
    return 0;
}

/* The length of a line without its last '\r' (the record and text paths' raw and hash leave
 * it out). */
static size_t stripped(const char *line, size_t len) {
    return len && line[len - 1] == '\r' ? len - 1 : len;
}

/* A text line is mapped when it starts a record and the next line does too (or the batch
 * ends: batches are cut before a line that starts one). */
static void screen_text(const char **lines, const size_t *lens, Py_ssize_t n, const void *context,
                        char *declined) {
    const TextOptions *options = context;
    int next = 0;
    for (Py_ssize_t i = n - 1; i >= 0; i--) {
        size_t len = stripped(lines[i], lens[i]);
        int starts = len <= MAX_LINE_BYTES && text_starts(options->format, lines[i], len);
        if (!starts || (i < n - 1 && !next)) declined[i] = 1;
        next = starts;
    }
}

/* A batch of lines mapped by ``mapper`` into column buffers (see map_lines_doc), after
 * ``screen`` (or none); with ``strip_cr``, a line's last '\r' is not part of it (the record
 * and text paths' raw and hash leave it out; nginx's hash keeps it, and its mapper leaves it
 * out of the raw text). With ``with_lines`` the result has a fourth member: the index of each
 * row's line, as int32 bytes. */
static PyObject *map_batch(PyObject *lines, const char *source, Py_ssize_t source_len,
                           const char *origin, Py_ssize_t origin_len, const void *context,
                           Mapper mapper, Screen screen, int strip_cr, int with_lines) {
    if (!CONFIGURED) {
        PyErr_SetString(PyExc_RuntimeError, "configure() was not called");
        return NULL;
    }
    PyObject *fast = PySequence_Fast(lines, "lines must be a sequence of bytes");
    if (fast == NULL) return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(fast);
    const char **data = malloc(sizeof(char *) * (size_t)(n ? n : 1));
    size_t *lens = malloc(sizeof(size_t) * (size_t)(n ? n : 1));
    char *declined = calloc((size_t)(n ? n : 1), 1);
    /* The rows' lines as hashed (the row's line, its last '\r' left out where strip_cr says),
     * hashed together at the end, several side by side (b2_hash_many). */
    const uint8_t **hashed = malloc(sizeof(uint8_t *) * (size_t)(n ? n : 1));
    size_t *hashed_lens = malloc(sizeof(size_t) * (size_t)(n ? n : 1));
    Column *cols = calloc(N_COLUMNS, sizeof(Column));
    Record *rec = malloc(sizeof(Record));
    Buf out = {0}, row_lines = {0};
    int failed = 0;
    if (!data || !lens || !declined || !hashed || !hashed_lens || !cols || !rec) failed = 1;
    for (Py_ssize_t i = 0; !failed && i < n; i++) {
        PyObject *item = PySequence_Fast_GET_ITEM(fast, i);
        if (!PyBytes_Check(item)) {
            PyErr_Format(PyExc_TypeError, "line %zd is %.80s, not bytes", i,
                         Py_TYPE(item)->tp_name);
            failed = 2;
            break;
        }
        data[i] = PyBytes_AS_STRING(item);
        lens[i] = (size_t)PyBytes_GET_SIZE(item);
    }
    if (!failed) {
        Text source_text = {source, (size_t)source_len};
        Text origin_text = {origin, (size_t)origin_len};
        uint64_t start[8];
        b2_start(start, source, (size_t)source_len);
        /* Buffers sized for the batch at once: growing them page by page costs more. */
        size_t total = 0;
        for (Py_ssize_t i = 0; i < n; i++) total += lens[i];
        for (int c = 0; c < N_COLUMNS && !failed; c++) {
            size_t rows = (size_t)n;
            size_t values = c == C_RAW ? total : c == C_ATTRS ? total / 2 : 0;
            size_t fixed = column_width(c);
            if (buf_reserve(&cols[c].validity, rows / 8 + 1) < 0 ||
                buf_reserve(&cols[c].offsets, fixed ? 0 : 4 * (rows + 1)) < 0 ||
                buf_reserve(&cols[c].values, fixed ? fixed * rows : values) < 0)
                failed = 1;
        }
        if (with_lines && buf_reserve(&row_lines, 4 * (size_t)n) < 0) failed = 1;
        Py_BEGIN_ALLOW_THREADS
        if (screen != NULL && !failed) screen(data, lens, n, context, declined);
        for (Py_ssize_t i = 0; i < n && !failed; i++) {
            const char *line = data[i];
            size_t len = strip_cr ? stripped(line, lens[i]) : lens[i];
            if (declined[i]) continue;
            if (len > MAX_LINE_BYTES) {
                declined[i] = 1;
                continue;
            }
            out.len = 0;
            if (buf_reserve(&out, 4 * len + 1024) < 0) {
                failed = 1;
                break;
            }
            Row row;
            if (mapper(line, len, &out, rec, context, &row) < 0) {
                declined[i] = 1;
                continue;
            }
            row.hash = 0; /* b2_hash_many writes it below */
            hashed[cols[0].rows] = (const uint8_t *)line;
            hashed_lens[cols[0].rows] = len;
            if (append_row(cols, &row, source_text, origin_text, (Text){line, row.raw_len}) < 0) {
                failed = 1;
                break;
            }
            if (with_lines) {
                int32_t index = (int32_t)i;
                buf_put(&row_lines, &index, 4); /* reserved above */
            }
        }
        if (!failed && b2_hash_many(start, hashed, hashed_lens, (size_t)cols[0].rows,
                                    (int64_t *)cols[C_HASH].values.data, HASH_LANES) < 0)
            failed = 1;
        Py_END_ALLOW_THREADS
    }
    PyObject *result = NULL;
    if (failed == 1) PyErr_NoMemory();
    if (!failed) {
        PyObject *columns = PyDict_New();
        PyObject *skipped = PyList_New(0);
        int ok = columns != NULL && skipped != NULL;
        for (int c = 0; ok && c < N_COLUMNS; c++) {
            PyObject *buffers = column_buffers(&cols[c], column_width(c) == 0);
            ok = buffers != NULL && PyDict_SetItemString(columns, COLUMN_NAMES[c], buffers) == 0;
            Py_XDECREF(buffers);
        }
        for (Py_ssize_t i = 0; ok && i < n; i++) {
            if (!declined[i]) continue;
            PyObject *index = PyLong_FromSsize_t(i);
            ok = index != NULL && PyList_Append(skipped, index) == 0;
            Py_XDECREF(index);
        }
        if (ok && with_lines)
            result = Py_BuildValue("(LOOy#)", (long long)cols[0].rows, columns, skipped,
                                   row_lines.data ? row_lines.data : "",
                                   (Py_ssize_t)row_lines.len);
        else if (ok)
            result = Py_BuildValue("(LOO)", (long long)cols[0].rows, columns, skipped);
        Py_XDECREF(columns);
        Py_XDECREF(skipped);
    }
    for (int c = 0; cols && c < N_COLUMNS; c++) col_free(&cols[c]);
    free(cols);
    free(out.data);
    free(row_lines.data);
    free(rec);
    free(declined);
    free(hashed);
    free(hashed_lens);
    free(lens);
    free(data);
    Py_DECREF(fast);
    return result;
}

static PyObject *map_lines(PyObject *self, PyObject *args) {
    PyObject *lines;
    const char *source, *origin, *layer;
    Py_ssize_t source_len, origin_len, layer_len;
    if (!PyArg_ParseTuple(args, "Os#s#z#", &lines, &source, &source_len, &origin, &origin_len,
                          &layer, &layer_len))
        return NULL;
    Text default_layer = {NULL, 0};
    if (layer != NULL) {
        const Word *w = word_find(LAYERS, N_LAYERS, layer, (size_t)layer_len);
        if (w != NULL) default_layer = (Text){w->text, w->len};
    }
    return map_batch(lines, source, source_len, origin, origin_len, &default_layer,
                     map_json_line, NULL, 1, 0);
}

PyDoc_STRVAR(map_nginx_doc,
"map_nginx(lines, origin) -> (rows, columns, declined)\n"
"\n"
"Map nginx lines (bytes, without their newline): the combined access lines this module is\n"
"sure of, as _nginx_access.access_combined does, attrs as JSON text; every other line\n"
"(error-log lines, JSON access lines, continuations, rejects, and the access lines whose\n"
"reading depends on more than this module checks) is declined, by index, to the parser.\n"
"Returns as map_lines does; runs without the GIL.");

static PyObject *map_nginx(PyObject *self, PyObject *args) {
    PyObject *lines;
    const char *origin;
    Py_ssize_t origin_len;
    if (!PyArg_ParseTuple(args, "Os#", &lines, &origin, &origin_len)) return NULL;
    return map_batch(lines, "nginx", 5, origin, origin_len, NULL, map_nginx_line, NULL, 0, 0);
}

PyDoc_STRVAR(configure_text_doc,
"configure_text(level_codes, numbered_levels, http_fields, formats)\n"
"\n"
"The text formats' tables, after configure(): the level codes and json's numbered levels\n"
"(dicts of a code or a number's text to the index of its level name), the fields that name\n"
"a request's method, path and status (three lists), and for each format mapped here its\n"
"identifier field rules (a dict of field to target, in the rules' order: 0-4 the five\n"
"identifiers, 5 trace_id, 6 span_id), its service fields (a list, first first) and the\n"
"members that are no field (journald's bookkeeping, a list; every \"__\" member too).");

static PyObject *configure_text(PyObject *self, PyObject *args) {
    PyObject *codes, *numbered, *http, *formats;
    if (!PyArg_ParseTuple(args, "OOOO", &codes, &numbered, &http, &formats)) return NULL;
    if (!CONFIGURED) {
        PyErr_SetString(PyExc_RuntimeError, "configure() was not called");
        return NULL;
    }
    if (read_word_values(codes, LEVEL_CODES, &N_LEVEL_CODES, "level_codes", N_LEVEL_NAMES) < 0 ||
        read_word_values(numbered, NUMBERED_LEVELS, &N_NUMBERED_LEVELS, "numbered_levels",
                         N_LEVEL_NAMES) < 0)
        return NULL;
    PyObject *fast = PySequence_Fast(http, "http_fields must be three lists");
    if (fast == NULL) return NULL;
    int rc = PySequence_Fast_GET_SIZE(fast) == 3 ? 0 : -1;
    if (rc < 0) PyErr_SetString(PyExc_ValueError, "http_fields must be three lists");
    for (int k = 0; rc == 0 && k < 3; k++)
        rc = read_words(PySequence_Fast_GET_ITEM(fast, k), HTTP_FIELDS[k], &N_HTTP_FIELDS[k],
                        "http_fields");
    Py_DECREF(fast);
    if (rc < 0) return NULL;
    for (int f = 0; f < N_TEXT_FORMATS; f++) {
        PyObject *tables = PyDict_GetItemString(formats, TEXT_FORMAT_NAMES[f]);
        PyObject *ids, *services, *skipped;
        if (tables == NULL || !PyArg_ParseTuple(tables, "OOO", &ids, &services, &skipped)) {
            if (!PyErr_Occurred())
                PyErr_Format(PyExc_ValueError, "formats: no tables for %s", TEXT_FORMAT_NAMES[f]);
            return NULL;
        }
        FormatTables *t = &FORMAT_TABLES[f];
        if (read_word_values(ids, t->id_fields, &t->n_id_fields, "identifier rules", 7) < 0 ||
            read_words(services, t->service_fields, &t->n_service_fields, "service fields") < 0 ||
            read_words(skipped, t->skipped_fields, &t->n_skipped_fields, "skipped fields") < 0)
            return NULL;
    }
    TEXT_CONFIGURED = 1;
    Py_RETURN_NONE;
}

PyDoc_STRVAR(map_text_doc,
"map_text(lines, origin, format, zone_starts, zone_offsets, service, file_service,\n"
"         now_year, latest_ns)\n"
"    -> (rows, columns, declined, row_lines)\n"
"\n"
"Map the single-line records of a text format (oslo, python, logfmt, klog, syslog,\n"
"journald or json; bytes lines without their newline) as text/_source.parse does, in a\n"
"zone given by its table (_civil.zone_table: int64 starts and int32 offsets, native byte\n"
"order), with --service (or None) and the service the input's name gives (or None), a\n"
"yearless time (klog's, RFC 3164's) in now_year or the one before, whichever puts it no later\n"
"than latest_ns (now and the slack of _civil.yearless_ns); the layer\n"
"column is left null for the caller to place from the service. Every line that is not a\n"
"record of its own, or that this module is not sure of, is declined, by index, to the\n"
"parser. Returns as map_lines does, and the index of each row's line as int32 bytes; runs\n"
"without the GIL.");

static int map_text_row(const char *line, size_t len, Buf *out, Record *rec, const void *context,
                        Row *row) {
    if (map_text_line(context, line, len, out, row) < 0) return -1;
    row->raw_len = len;
    return 0;
}

static PyObject *map_text(PyObject *self, PyObject *args) {
    PyObject *lines;
    const char *origin, *format, *service, *file_service;
    Py_ssize_t origin_len, format_len, service_len, file_service_len;
    const char *starts, *offsets;
    Py_ssize_t starts_len, offsets_len;
    int now_year;
    long long latest_ns;
    if (!PyArg_ParseTuple(args, "Os#s#y#y#z#z#iL", &lines, &origin, &origin_len, &format,
                          &format_len, &starts, &starts_len, &offsets, &offsets_len, &service,
                          &service_len, &file_service, &file_service_len, &now_year,
                          &latest_ns))
        return NULL;
    if (!TEXT_CONFIGURED) {
        PyErr_SetString(PyExc_RuntimeError, "configure_text() was not called");
        return NULL;
    }
    TextOptions options = {.format = -1};
    for (int f = 0; f < N_TEXT_FORMATS; f++)
        if (strcmp(format, TEXT_FORMAT_NAMES[f]) == 0) options.format = f;
    if (options.format < 0) {
        PyErr_Format(PyExc_ValueError,
                     "format %.80s is not mapped here (oslo, python, logfmt, klog, syslog, "
                     "journald, json)",
                     format);
        return NULL;
    }
    size_t n = (size_t)starts_len / sizeof(int64_t);
    if (n == 0 || (size_t)starts_len != n * sizeof(int64_t) ||
        (size_t)offsets_len != n * sizeof(int32_t) || ((const int64_t *)starts)[0] != INT64_MIN) {
        PyErr_SetString(PyExc_ValueError,
                         "zone_starts and zone_offsets: n int64 starts, the first the smallest, "
                         "and n int32 offsets");
        return NULL;
    }
    for (size_t i = 0; i < n; i++) {
        int32_t offset = ((const int32_t *)offsets)[i];
        if ((i && ((const int64_t *)starts)[i] <= ((const int64_t *)starts)[i - 1]) ||
            (offset != UNKNOWN_OFFSET && (offset <= -86400 || offset >= 86400))) {
            PyErr_SetString(PyExc_ValueError,
                             "zone_starts must ascend, and an offset is less than a day");
            return NULL;
        }
    }
    options.zone_starts = (const int64_t *)starts;
    options.zone_offsets = (const int32_t *)offsets;
    options.zone_n = n;
    options.now_year = now_year;
    options.latest_ns = latest_ns;
    if (service != NULL) options.service = (Text){service, (size_t)service_len};
    if (file_service != NULL) options.file_service = (Text){file_service, (size_t)file_service_len};
    return map_batch(lines, "text", 4, origin, origin_len, &options, map_text_row, screen_text, 1,
                     1);
}

PyDoc_STRVAR(hash_lanes_doc,
"hash_lanes(lanes=None) -> int\n"
"\n"
"How many lines the content hash runs side by side: 4 where the CPU has AVX2, else 1. Given\n"
"1, every line is hashed alone from then on; given 4, side by side again where the CPU can\n"
"(the tests compare both with hashlib). Returns the number in use.");

static PyObject *hash_lanes(PyObject *self, PyObject *args) {
    int lanes = 0;
    if (!PyArg_ParseTuple(args, "|i", &lanes)) return NULL;
    if (lanes != 0 && lanes != 1 && lanes != 4) {
        PyErr_SetString(PyExc_ValueError, "lanes must be 1 or 4");
        return NULL;
    }
    if (lanes) HASH_LANES = lanes == 4 ? b2_lanes() : 1;
    return PyLong_FromLong(HASH_LANES);
}

static PyMethodDef METHODS[] = {
    {"configure", configure, METH_VARARGS, configure_doc},
    {"map_lines", map_lines, METH_VARARGS, map_lines_doc},
    {"map_nginx", map_nginx, METH_VARARGS, map_nginx_doc},
    {"configure_text", configure_text, METH_VARARGS, configure_text_doc},
    {"map_text", map_text, METH_VARARGS, map_text_doc},
    {"hash_lanes", hash_lanes, METH_VARARGS, hash_lanes_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef MODULE = {
    .m_base = PyModuleDef_HEAD_INIT,
    .m_name = "_record_native",
    .m_doc = "The record mapping of _record for the common JSON line, natively (see the source).",
    .m_size = -1,
    .m_methods = METHODS,
};

PyMODINIT_FUNC PyInit__record_native(void) {
    record_init();
    HASH_LANES = b2_lanes();
    return PyModule_Create(&MODULE);
}
