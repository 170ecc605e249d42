/* Growable buffers, and the Arrow buffers of a nullable column (validity bitmap, int32 offsets
 * for text, values) that a batch's rows are appended to. */
#ifndef RECORD_NATIVE_COLUMNS_H
#define RECORD_NATIVE_COLUMNS_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
    char *data;
    size_t len, cap;
} Buf;

/* A nullable column: the validity bitmap, (strings) int32 offsets, and the values. */
typedef struct {
    Buf validity, offsets, values;
    int64_t rows, nulls;
} Column;

/* Room for ``extra`` more bytes; -1 when memory runs out. */
int buf_reserve(Buf *b, size_t extra);
int buf_put(Buf *b, const void *src, size_t n);
/* A text value (NULL: null) appended to a text column. */
int col_text(Column *c, const char *text, size_t len);
/* A fixed-width value (``width`` bytes) appended, or a null. */
int col_fixed(Column *c, const void *value, size_t width, int valid);
void col_free(Column *c);

#endif
