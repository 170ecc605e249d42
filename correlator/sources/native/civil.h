/* Civil dates and times as correlator/sources/_time.py reads them: fixed-width digits, the
 * proleptic Gregorian calendar, and the years whose every instant the store holds. */
#ifndef RECORD_NATIVE_CIVIL_H
#define RECORD_NATIVE_CIVIL_H

#include <stdint.h>

static inline int is_digit(char c) { return c >= '0' && c <= '9'; }

/* ``n`` ASCII digits at ``p`` as *value; -1 when one is not a digit. */
int digits(const char *p, int n, int *value);
/* Epoch seconds of a civil date and time, no offset applied; -1 when a field is out of range
 * (a second of 60 is a leap second, counted as the next second's start, as _time does) or
 * the year is outside 1678-2261, whose every instant fits 64-bit nanoseconds whatever the
 * offset. */
int civil_seconds(int year, int month, int day, int hour, int minute, int second,
                  int64_t *seconds);

#endif
