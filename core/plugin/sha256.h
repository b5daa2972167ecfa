/*
 * sha256.h - FIPS 180-4 SHA-256, for the manifest's optional "sha256" check
 * of a plugin library before it is loaded.
 */
#ifndef SOREN_SHA256_H
#define SOREN_SHA256_H

#include "../error.h"

/* Digest of the file open on fd (found at path, named in errors), from its
 * first byte, as 64 lowercase hex digits plus NUL. */
soren_status soren_sha256_fd(int fd, const char *path, char hex[65], soren_error *err);

#endif /* SOREN_SHA256_H */
