/*
 * number.h - numbers as users write them: parameters (--param rows=10,
 * soren_job_param) and the numeric options of soren-host and soren-gen read
 * through this one parser, so every number means the same thing everywhere.
 *
 * Accepted, and nothing else:
 *   unsigned (u32, u64)  decimal digits: 0, 10, 4294967295
 *   signed (i64)         the same after an optional minus sign: -10
 *   float (f32, f64)     an optional minus sign, decimal digits with an
 *                        optional point, an optional exponent: 1.5, .5,
 *                        -2e-3, 1E6
 * No leading zero before another digit (010 would read as 10 here and as 8
 * in C's octal, so it is refused rather than guessed), no 0x, no space, no
 * plus sign, no inf or nan.  A value outside the type's range is refused,
 * not clamped; a float too small to represent reads as the nearest value
 * (0 or a subnormal).  With SOREN_NUMBER_SUFFIX an unsigned number may end
 * in K, M or G (either case), times 1024, 1024^2, 1024^3.
 */
#ifndef SOREN_NUMBER_H
#define SOREN_NUMBER_H

#include <stddef.h>
#include <stdint.h>

typedef enum soren_number_type {
    SOREN_NUMBER_U32,
    SOREN_NUMBER_U64,
    SOREN_NUMBER_I64,
    SOREN_NUMBER_F32,
    SOREN_NUMBER_F64
} soren_number_type;

typedef union soren_number {
    uint32_t u32;
    uint64_t u64;
    int64_t i64;
    float f32;
    double f64;
} soren_number;

/* Flags of soren_number_parse. */
#define SOREN_NUMBER_SUFFIX 1u /* unsigned only: K, M or G multiplies by 1024^1..3 */

/* Reads the NUL-terminated text as a number of type t into *out.  Returns
 * 0, or -1 with why (why_size bytes, always terminated) saying what is
 * wrong and the form accepted, e.g. "write it without leading zeros, e.g.
 * 10" or "out of range: a u32 is from 0 to 4294967295". */
int soren_number_parse(const char *text, soren_number_type t, unsigned flags, soren_number *out,
                       char *why, size_t why_size);

#endif /* SOREN_NUMBER_H */
