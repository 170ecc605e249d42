/* Decimal numbers whose rendering orjson (and repr) writes as the decimal itself. */
#ifndef RECORD_NATIVE_DECIMAL_H
#define RECORD_NATIVE_DECIMAL_H

#include <stddef.h>

/* The double a decimal ``[-]INT.FRAC`` names, exactly as a correct strtod reads it, when
 * orjson writes that double as the same decimal: INT without leading zeros ("0" for none),
 * FRAC without trailing zeros ("0" for none), at most 15 significant digits, from 1e-4 to
 * below 1e16 (no exponent), not -0.0. Anything else is -1: the caller declines the line. */
int decimal_value(const char *int_start, size_t int_digits, const char *frac, size_t frac_digits,
                  int negative, double *value);

#endif
