/*
 * protocol.h - the messages between soren-host's clients and the resident
 * host (soren-host serve), over a Unix stream socket.
 *
 * A message is a 4-byte length (little-endian: the bytes that follow it),
 * a kind byte, then fields, each a 4-byte little-endian size and that many
 * bytes of text (no NUL inside; the decoder adds one after each).  Open
 * descriptors travel beside a message's first byte (SCM_RIGHTS).
 *
 *   RUN     fields: the job's manifest path as the client resolved it, the
 *           client's working folder, then soren-host's arguments from
 *           "run" on; descriptors: standard input, the output (the
 *           client's standard output, or the temporary file it made),
 *           standard error, then one for each INPUT, in order.
 *   LOAD    fields: a manifest path, as the client resolved it.
 *   UNLOAD  fields: a plugin's name.
 *   PS, STOP  no fields.
 *   REPLY   fields: the exit code in decimal, then text: the error to say
 *           on standard error (exit code other than 0), or what ps and load
 *           print on standard output.  For a JOB, the code is the run's
 *           soren_status and the text its error or --explain line.
 *   JOB     a library job (remote.h says what it carries).
 *
 * The decoder is the part a stranger's bytes reach first: it checks every
 * size against what is left and against the limits below, and it is a fuzz
 * target (tests/fuzz/fuzz_protocol.c).
 */
#ifndef SOREN_HOST_PROTOCOL_H
#define SOREN_HOST_PROTOCOL_H

#include <stddef.h>
#include <stdint.h>

#include "../error.h"

typedef enum soren_msg_kind {
    SOREN_MSG_RUN = 1,
    SOREN_MSG_LOAD,
    SOREN_MSG_UNLOAD,
    SOREN_MSG_PS,
    SOREN_MSG_STOP,
    SOREN_MSG_REPLY,
    SOREN_MSG_JOB
} soren_msg_kind;

/* The most bytes of one message after its length, fields of one message,
 * and descriptors beside one message. */
#define SOREN_MSG_MAX_BYTES (1u << 20)
#define SOREN_MSG_MAX_FIELDS 4096u
#define SOREN_MSG_MAX_FDS 250u

/* A decoded message: field i is fields[i], NUL-terminated, all in one
 * allocation that soren_msg_destroy frees. */
typedef struct soren_msg {
    soren_msg_kind kind;
    size_t count;
    char **fields;
} soren_msg;

/* Decodes the size bytes after a message's length.  On failure *out is
 * empty and err says what was wrong with the bytes. */
soren_status soren_msg_decode(const uint8_t *bytes, size_t size, soren_msg *out,
                              soren_error *err);
void soren_msg_destroy(soren_msg *m);

/* Encodes a whole message, its length first, in *out (malloc'd, *size
 * bytes).  SOREN_EUSAGE where it would pass the limits above. */
soren_status soren_msg_encode(soren_msg_kind kind, const char *const *fields, size_t count,
                              uint8_t **out, size_t *size, soren_error *err);

#endif /* SOREN_HOST_PROTOCOL_H */
