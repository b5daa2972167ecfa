/* protocol.c - encoding and decoding the resident host's messages. */
#include "protocol.h"

#include <stdlib.h>
#include <string.h>

static uint32_t get_u32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static void put_u32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
    p[2] = (uint8_t)(v >> 16);
    p[3] = (uint8_t)(v >> 24);
}

void soren_msg_destroy(soren_msg *m)
{
    free(m->fields);
    memset(m, 0, sizeof *m);
}

soren_status soren_msg_decode(const uint8_t *bytes, size_t size, soren_msg *out,
                              soren_error *err)
{
    memset(out, 0, sizeof *out);
    if (size < 1 || size > SOREN_MSG_MAX_BYTES)
        return soren_error_set(err, SOREN_EINPUT, "a message of %zu bytes (1 to %u)", size,
                               SOREN_MSG_MAX_BYTES);
    if (bytes[0] < SOREN_MSG_RUN || bytes[0] > SOREN_MSG_JOB)
        return soren_error_set(err, SOREN_EINPUT, "a message of unknown kind %u", bytes[0]);
    /* One pass counts the fields and checks their sizes; the second copies
     * them after the pointer array, each followed by its NUL. */
    size_t count = 0, text = 0;
    for (size_t at = 1; at < size; count++) {
        if (count == SOREN_MSG_MAX_FIELDS)
            return soren_error_set(err, SOREN_EINPUT, "a message of over %u fields",
                                   SOREN_MSG_MAX_FIELDS);
        if (size - at < 4)
            return soren_error_set(err, SOREN_EINPUT, "field %zu's size is cut off", count);
        uint32_t n = get_u32(bytes + at);
        at += 4;
        if (n > size - at)
            return soren_error_set(err, SOREN_EINPUT,
                                   "field %zu says %u bytes, but %zu are left", count, n,
                                   size - at);
        if (memchr(bytes + at, '\0', n))
            return soren_error_set(err, SOREN_EINPUT, "field %zu holds a NUL byte", count);
        at += n;
        text += (size_t)n + 1;
    }
    char **fields = malloc(count * sizeof *fields + text + 1);
    if (!fields)
        return soren_error_set(err, SOREN_ENOMEM, "out of memory reading a message");
    char *to = (char *)(fields + count);
    for (size_t i = 0, at = 1; i < count; i++) {
        uint32_t n = get_u32(bytes + at);
        at += 4;
        memcpy(to, bytes + at, n);
        to[n] = '\0';
        fields[i] = to;
        to += (size_t)n + 1;
        at += n;
    }
    out->kind = (soren_msg_kind)bytes[0];
    out->count = count;
    out->fields = fields;
    return SOREN_OK;
}

soren_status soren_msg_encode(soren_msg_kind kind, const char *const *fields, size_t count,
                              uint8_t **out, size_t *size, soren_error *err)
{
    *out = NULL;
    *size = 0;
    if (count > SOREN_MSG_MAX_FIELDS)
        return soren_error_set(err, SOREN_EUSAGE, "%zu fields, over the %u one message holds",
                               count, SOREN_MSG_MAX_FIELDS);
    size_t body = 1;
    for (size_t i = 0; i < count; i++) {
        body += 4 + strlen(fields[i]);
        if (body > SOREN_MSG_MAX_BYTES)
            return soren_error_set(err, SOREN_EUSAGE,
                                   "the arguments take over the %u bytes one message holds",
                                   SOREN_MSG_MAX_BYTES);
    }
    uint8_t *buf = malloc(4 + body);
    if (!buf)
        return soren_error_set(err, SOREN_ENOMEM, "out of memory writing a message");
    put_u32(buf, (uint32_t)body);
    buf[4] = (uint8_t)kind;
    size_t at = 5;
    for (size_t i = 0; i < count; i++) {
        size_t n = strlen(fields[i]);
        put_u32(buf + at, (uint32_t)n);
        memcpy(buf + at + 4, fields[i], n);
        at += 4 + n;
    }
    *out = buf;
    *size = 4 + body;
    return SOREN_OK;
}
