/* nginx's combined access line, mapped as correlator/sources/_nginx_access.access_combined and
 * _nginx_request.access_event map it, for the lines it is sure of. */
#ifndef RECORD_NATIVE_NGINX_ACCESS_H
#define RECORD_NATIVE_NGINX_ACCESS_H

#include <stddef.h>

#include "columns.h"
#include "record.h"

/* The row of a combined access line (without its newline), its texts in the line or in
 * ``out`` (reserved for four times the line and 1 KiB); -1 declines the line. */
int map_combined(const char *line, size_t len, Buf *out, Row *row);

#endif
