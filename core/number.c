/* number.c - decimal numbers as users write them (see number.h). */
#include "number.h"

#include <errno.h>
#include <float.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

static const char *const type_names[] = {"a u32", "a u64", "an i64", "an f32", "an f64"};

static int refuse(char *why, size_t why_size, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int refuse(char *why, size_t why_size, const char *fmt, ...)
{
    if (why_size) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(why, why_size, fmt, ap);
        va_end(ap);
    }
    return -1;
}

static int is_digit(char c)
{
    return c >= '0' && c <= '9';
}

static size_t count_digits(const char *s)
{
    size_t n = 0;
    while (is_digit(s[n]))
        n++;
    return n;
}

/* The form the type takes, for a text that is not in it. */
static int not_in_form(soren_number_type t, unsigned flags, char *why, size_t why_size)
{
    switch (t) {
    case SOREN_NUMBER_U32:
    case SOREN_NUMBER_U64:
        if (flags & SOREN_NUMBER_SUFFIX)
            return refuse(why, why_size, "write decimal digits, optionally followed by K, M "
                          "or G, e.g. 64K (no sign, space or 0x)");
        return refuse(why, why_size, "write decimal digits, e.g. 10 (no sign, space or 0x)");
    case SOREN_NUMBER_I64:
        return refuse(why, why_size, "write decimal digits after an optional minus sign, "
                      "e.g. -10 (no space or 0x)");
    case SOREN_NUMBER_F32:
    case SOREN_NUMBER_F64:
        break;
    }
    return refuse(why, why_size, "write a decimal number such as 0.5, -1.5 or 2e-3 (no space, "
                  "hex, inf or nan)");
}

/* digits (n of them, n > 1) start with a zero: name the number without. */
static int leading_zero(const char *text, const char *digits, char *why, size_t why_size)
{
    const char *s = digits;
    while (s[0] == '0' && is_digit(s[1]))
        s++;
    return refuse(why, why_size, "write it without leading zeros, e.g. %.*s%.40s",
                  (int)(digits - text), text, s);
}

/* Digits (valid, n of them) as an unsigned value up to max; 0 if past it. */
static int digits_value(const char *s, size_t n, uint64_t max, uint64_t *out)
{
    uint64_t v = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned d = (unsigned)(s[i] - '0');
        if (v > max / 10 || d > max - v * 10)
            return 0;
        v = v * 10 + d;
    }
    *out = v;
    return 1;
}

static int parse_unsigned(const char *text, soren_number_type t, unsigned flags,
                          soren_number *out, char *why, size_t why_size)
{
    size_t n = count_digits(text);
    const char *end = text + n;
    unsigned shift = 0;
    if (flags & SOREN_NUMBER_SUFFIX) {
        switch (*end) {
        case 'K': case 'k': shift = 10; break;
        case 'M': case 'm': shift = 20; break;
        case 'G': case 'g': shift = 30; break;
        default: break;
        }
        if (shift)
            end++;
    }
    if (n == 0 || *end)
        return not_in_form(t, flags, why, why_size);
    if (n > 1 && text[0] == '0')
        return leading_zero(text, text, why, why_size);
    uint64_t max = t == SOREN_NUMBER_U32 ? UINT32_MAX : UINT64_MAX, v = 0;
    if (!digits_value(text, n, max >> shift, &v))
        return refuse(why, why_size, "out of range: %s is from 0 to %llu", type_names[t],
                      (unsigned long long)max);
    v <<= shift;
    if (t == SOREN_NUMBER_U32)
        out->u32 = (uint32_t)v;
    else
        out->u64 = v;
    return 0;
}

static int parse_signed(const char *text, soren_number *out, char *why, size_t why_size)
{
    int negative = text[0] == '-';
    const char *digits = text + negative;
    size_t n = count_digits(digits);
    if (n == 0 || digits[n])
        return not_in_form(SOREN_NUMBER_I64, 0, why, why_size);
    if (n > 1 && digits[0] == '0')
        return leading_zero(text, digits, why, why_size);
    uint64_t magnitude = 0, max = negative ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX;
    if (!digits_value(digits, n, max, &magnitude))
        return refuse(why, why_size, "out of range: an i64 is from %lld to %lld",
                      (long long)INT64_MIN, (long long)INT64_MAX);
    out->i64 = negative ? (int64_t)(0 - magnitude) : (int64_t)magnitude;
    return 0;
}

static int parse_float(const char *text, soren_number_type t, soren_number *out, char *why,
                       size_t why_size)
{
    const char *digits = text + (text[0] == '-');
    size_t whole = count_digits(digits);
    const char *s = digits + whole;
    size_t fraction = 0;
    if (*s == '.') {
        fraction = count_digits(s + 1);
        s += 1 + fraction;
    }
    if (whole + fraction == 0)
        return not_in_form(t, 0, why, why_size);
    if (*s == 'e' || *s == 'E') {
        s++;
        if (*s == '-' || *s == '+')
            s++;
        size_t exponent = count_digits(s);
        if (exponent == 0)
            return not_in_form(t, 0, why, why_size);
        s += exponent;
    }
    if (*s)
        return not_in_form(t, 0, why, why_size);
    if (whole > 1 && digits[0] == '0')
        return leading_zero(text, digits, why, why_size);
    /* The text is plain decimal now; strtof and strtod round it correctly.
     * They take the point from LC_NUMERIC, which libsoren never sets: like
     * the output's writer, it reads numbers in the C locale's terms. */
    errno = 0;
    if (t == SOREN_NUMBER_F32) {
        float v = strtof(text, NULL);
        if (errno == ERANGE && (v > FLT_MAX || v < -FLT_MAX))
            return refuse(why, why_size, "out of range: an f32 is at most %.9g in magnitude",
                          (double)FLT_MAX);
        out->f32 = v;
    } else {
        double v = strtod(text, NULL);
        if (errno == ERANGE && (v > DBL_MAX || v < -DBL_MAX))
            return refuse(why, why_size, "out of range: an f64 is at most %.17g in magnitude",
                          DBL_MAX);
        out->f64 = v;
    }
    return 0;
}

int soren_number_parse(const char *text, soren_number_type t, unsigned flags, soren_number *out,
                       char *why, size_t why_size)
{
    if (why_size)
        why[0] = '\0';
    switch (t) {
    case SOREN_NUMBER_U32:
    case SOREN_NUMBER_U64: return parse_unsigned(text, t, flags, out, why, why_size);
    case SOREN_NUMBER_I64: return parse_signed(text, out, why, why_size);
    case SOREN_NUMBER_F32:
    case SOREN_NUMBER_F64: return parse_float(text, t, out, why, why_size);
    }
    return refuse(why, why_size, "unknown number type %d", (int)t);
}
