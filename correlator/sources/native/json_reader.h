/* A JSON reader that writes what it reads as orjson.dumps would write it (the canonical
 * rendering), and declines (-1) what it cannot be sure orjson reads and writes alike. */
#ifndef RECORD_NATIVE_JSON_READER_H
#define RECORD_NATIVE_JSON_READER_H

#include <stddef.h>
#include <stdint.h>

#include "columns.h"

/* The deepest nesting mapped here; deeper lines are declined (the Python path refuses past
 * _record.MAX_DEPTH, 254). */
#define NATIVE_DEPTH 64
/* Members of one object mapped here; more are declined. */
#define MAX_MEMBERS 128

enum { J_NULL, J_TRUE, J_FALSE, J_INT, J_FLOAT, J_STRING, J_OBJECT, J_ARRAY };

typedef struct {
    const char *p, *end;
    Buf *out; /* the canonical rendering (what orjson.dumps writes) goes here */
} Reader;

/* One member of an object: its key (no escapes: bytes of the line), its value's kind, its
 * canonical rendering in the out buffer, and for strings the decoded text. */
typedef struct {
    const char *key;
    size_t key_len;
    int kind;
    const char *canon; /* the rendering: in out, or the line's own bytes when they are it */
    size_t canon_len;
    const char *text;        /* decoded string (line or out buffer); stable: out is reserved */
    size_t text_len;
    int64_t integer;
    double real;
    int role;
} Member;

typedef struct {
    const char *text;
    size_t len;
} Key;

static inline void skip_ws(Reader *r) {
    while (r->p < r->end && (*r->p == ' ' || *r->p == '\t' || *r->p == '\n' || *r->p == '\r'))
        r->p++;
}

/* Strict UTF-8 (no overlongs, no surrogates, nothing past U+10FFFF), as Python decodes. */
int utf8_valid(const unsigned char *s, size_t n);
/* The key of an object member at r->p (no escape, no control) and its colon. */
int read_key(Reader *r, const char **key, size_t *len);
/* Whether the key is among the first n. */
int key_seen(const Key *keys, int n, const char *key, size_t len);
/* Any value at r->p (see json_reader.c). */
int read_value(Reader *r, int depth, Member *m, int want_text);
/* An object at r->p; ``members`` (or NULL) receives its members. */
int read_object(Reader *r, int depth, Member *members, int *count);

#endif
