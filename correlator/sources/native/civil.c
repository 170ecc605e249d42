/* Civil dates and times. */
#include "civil.h"

int digits(const char *p, int n, int *value) {
    int v = 0;
    for (int i = 0; i < n; i++) {
        if (!is_digit(p[i])) return -1;
        v = v * 10 + (p[i] - '0');
    }
    *value = v;
    return 0;
}

/* Days since 1970-01-01 of a proleptic Gregorian date (era arithmetic). */
static int64_t days_from_civil(int64_t y, int m, int d) {
    y -= m <= 2;
    int64_t era = (y >= 0 ? y : y - 399) / 400;
    int64_t yoe = y - era * 400;
    int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
    int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + doe - 719468;
}

int civil_seconds(int year, int month, int day, int hour, int minute, int second,
                  int64_t *seconds) {
    if (year < 1678 || year > 2261 || month < 1 || month > 12 || day < 1) return -1;
    static const int month_days[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    int leap = (year % 4 == 0 && year % 100 != 0) || year % 400 == 0;
    if (day > month_days[month - 1] + (month == 2 && leap)) return -1;
    if (hour > 23 || minute > 59 || second > 60) return -1;
    *seconds = days_from_civil(year, month, day) * 86400 + hour * 3600 + minute * 60 + second;
    return 0;
}
