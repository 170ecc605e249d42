/* Decimal numbers whose rendering orjson writes as the decimal itself. */
#include "decimal.h"

#include <stdint.h>

int decimal_value(const char *int_start, size_t int_digits, const char *frac, size_t frac_digits,
                  int negative, double *value) {
    if (int_digits == 0 || frac_digits == 0) return -1;
    if (frac_digits > 1 && frac[frac_digits - 1] == '0') return -1;
    int int_zero = int_digits == 1 && *int_start == '0';
    if (!int_zero && *int_start == '0') return -1;
    /* orjson writes the shortest text that reads back: for at most 15 significant digits
     * that is the decimal itself, without trailing zeros but for "N.0", and without an
     * exponent from 1e-4 to below 1e16 (test_record_native proves it against orjson). */
    size_t significant;
    if (int_zero) {
        size_t zeros = 0;
        while (zeros < frac_digits && frac[zeros] == '0') zeros++;
        if (zeros == frac_digits) { /* 0.0 (-0.0 is left to the reference) */
            if (negative) return -1;
            significant = 1;
        } else {
            if (zeros > 3) return -1;
            significant = frac_digits - zeros;
        }
    } else {
        significant = int_digits + (frac_digits == 1 && frac[0] == '0' ? 0 : frac_digits);
    }
    if (significant > 15) return -1;
    /* Its value, exactly as a correct strtod reads it (and with no locale): the digits as an
     * integer below 2^53 divided by a power of ten below 10^23, both exact, is one correctly
     * rounded division (Clinger's fast path). "N.0" is the integer N. */
    static const double POW10[] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,
                                   1e8,  1e9,  1e10, 1e11, 1e12, 1e13, 1e14, 1e15,
                                   1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};
    int whole = frac_digits == 1 && frac[0] == '0';
    uint64_t digits_value = 0;
    for (const char *d = int_start; d < int_start + int_digits; d++)
        digits_value = digits_value * 10 + (uint64_t)(*d - '0');
    size_t scale = 0;
    if (!whole) {
        for (size_t k = 0; k < frac_digits; k++)
            digits_value = digits_value * 10 + (uint64_t)(frac[k] - '0');
        scale = frac_digits; /* at most 18: 15 significant digits after 3 zeros */
    }
    double v = (double)digits_value / POW10[scale];
    *value = negative ? -v : v;
    return 0;
}
