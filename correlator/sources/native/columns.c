/* Growable buffers and Arrow columns. */
#include "columns.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int buf_reserve(Buf *b, size_t extra) {
    if (b->len + extra <= b->cap) return 0;
    size_t cap = b->cap ? b->cap : 4096;
    while (cap < b->len + extra) cap *= 2;
    char *data = realloc(b->data, cap);
    if (data == NULL) return -1;
    b->data = data;
    b->cap = cap;
    return 0;
}

int buf_put(Buf *b, const void *src, size_t n) {
    if (buf_reserve(b, n) < 0) return -1;
    memcpy(b->data + b->len, src, n);
    b->len += n;
    return 0;
}


static int col_valid(Column *c, int valid) {
    if ((c->rows & 7) == 0) {
        char zero = 0;
        if (buf_put(&c->validity, &zero, 1) < 0) return -1;
    }
    if (valid)
        c->validity.data[c->rows >> 3] |= (char)(1 << (c->rows & 7));
    else
        c->nulls++;
    c->rows++;
    return 0;
}

int col_text(Column *c, const char *text, size_t len) {
    if (c->rows == 0) {
        int32_t zero = 0;
        if (buf_put(&c->offsets, &zero, 4) < 0) return -1;
    }
    if (text != NULL && buf_put(&c->values, text, len) < 0) return -1;
    if (c->values.len > INT32_MAX) return -1; /* the batch is cut far below this */
    int32_t end = (int32_t)c->values.len;
    if (buf_put(&c->offsets, &end, 4) < 0) return -1;
    return col_valid(c, text != NULL);
}

int col_fixed(Column *c, const void *value, size_t width, int valid) {
    static const char zeros[8] = {0};
    if (buf_put(&c->values, valid ? value : zeros, width) < 0) return -1;
    return col_valid(c, valid);
}

void col_free(Column *c) {
    free(c->validity.data);
    free(c->offsets.data);
    free(c->values.data);
    memset(c, 0, sizeof *c);
}
