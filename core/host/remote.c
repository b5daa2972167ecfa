/* remote.c - the client's half of a library job run in the resident host,
 * and the file the pairs come back in. */
#include "remote.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "channel.h"

/* ---- The pairs file ------------------------------------------------------ */

static int write_at(int fd, const void *data, uint64_t size, uint64_t *at)
{
    const uint8_t *p = data;
    while (size) {
        ssize_t n = pwrite(fd, p, size > (1u << 30) ? (1u << 30) : (size_t)size, (off_t)*at);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return n < 0 ? errno : EIO;
        p += n;
        size -= (uint64_t)n;
        *at += (uint64_t)n;
    }
    return 0;
}

static int read_at(int fd, void *data, uint64_t size, uint64_t *at)
{
    uint8_t *p = data;
    while (size) {
        ssize_t n = pread(fd, p, size > (1u << 30) ? (1u << 30) : (size_t)size, (off_t)*at);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return n < 0 ? errno : ENODATA;
        p += n;
        size -= (uint64_t)n;
        *at += (uint64_t)n;
    }
    return 0;
}

soren_status soren_pairs_file_write(int fd, const soren_result *r, soren_error *err)
{
    uint64_t keys = r->count ? r->key_offset[r->count] : 0;
    uint64_t head[6] = {r->count, keys, r->value_size, (uint64_t)r->key_type,
                        (uint64_t)r->value_type, 0};
    uint64_t at = 0;
    int e = write_at(fd, head, sizeof head, &at);
    if (!e && r->count)
        e = write_at(fd, r->key_offset, (r->count + 1) * sizeof *r->key_offset, &at);
    if (!e && r->count)
        e = write_at(fd, r->key_bytes, keys, &at);
    if (!e && r->count)
        e = write_at(fd, r->values, r->count * r->value_size, &at);
    return e ? soren_error_errno(err, SOREN_EIO, e, "cannot hand the result back") : SOREN_OK;
}

soren_status soren_pairs_file_read(int fd, soren_result *out, soren_error *err)
{
    uint64_t head[6], at = 0;
    struct stat st;
    int e = fstat(fd, &st) != 0 ? errno : read_at(fd, head, sizeof head, &at);
    if (e)
        return soren_error_errno(err, SOREN_EIO, e, "cannot read the result the host handed back");
    uint64_t count = head[0], keys = head[1], value_size = head[2];
    uint64_t size = (uint64_t)st.st_size;
    /* Each part checked against what the file holds before it is sized. */
    int fits = value_size == out->value_size && count < size && keys <= size &&
               (!count || ((count + 1) * 8 <= size && count * value_size <= size &&
                           sizeof head + (count + 1) * 8 + keys + count * value_size == size));
    if (!fits)
        return soren_error_set(err, SOREN_EIO, "the result the host handed back is malformed "
                               "(%llu pairs in %llu bytes)", (unsigned long long)count,
                               (unsigned long long)size);
    if (!count)
        return SOREN_OK;
    out->key_offset = malloc((count + 1) * sizeof *out->key_offset);
    out->key_bytes = malloc(keys ? keys : 1);
    out->values = malloc(count * value_size > 0 ? count * value_size : 1);
    if (!out->key_offset || !out->key_bytes || !out->values) {
        soren_result_destroy(out);
        return soren_error_set(err, SOREN_ENOMEM, "out of memory for a result of %llu pairs",
                               (unsigned long long)count);
    }
    e = read_at(fd, out->key_offset, (count + 1) * 8, &at);
    if (!e)
        e = read_at(fd, out->key_bytes, keys, &at);
    if (!e)
        e = read_at(fd, out->values, count * value_size, &at);
    if (e) {
        soren_result_destroy(out);
        return soren_error_errno(err, SOREN_EIO, e, "cannot read the result the host handed back");
    }
    out->count = count;
    return SOREN_OK;
}

/* ---- The request --------------------------------------------------------- */

/* A memory file holding size bytes of data, or -1 with err set. */
static int memory_file(const char *name, const void *data, size_t size, soren_error *err)
{
    int fd = memfd_create(name, MFD_CLOEXEC);
    uint64_t at = 0;
    int e = fd < 0 ? errno : write_at(fd, data, size, &at);
    if (e) {
        if (fd >= 0)
            close(fd);
        soren_error_errno(err, SOREN_EIO, e, "cannot hand %s to the host", name);
        return -1;
    }
    return fd;
}

/* fields and descriptors of a request, grown as they are added */
typedef struct request {
    char **fields;
    size_t count;
    int fds[SOREN_MSG_MAX_FDS];
    size_t nfds;
} request;

static soren_status add_field(request *q, soren_error *err, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static soren_status add_field(request *q, soren_error *err, const char *fmt, ...)
{
    char **grown = realloc(q->fields, (q->count + 1) * sizeof *grown);
    if (!grown)
        return soren_error_set(err, SOREN_ENOMEM, "out of memory");
    q->fields = grown;
    va_list ap;
    va_start(ap, fmt);
    int n = vasprintf(&q->fields[q->count], fmt, ap);
    va_end(ap);
    if (n < 0)
        return soren_error_set(err, SOREN_ENOMEM, "out of memory");
    q->count++;
    return SOREN_OK;
}

static soren_status add_fd(request *q, int fd, soren_error *err)
{
    if (fd < 0)
        return SOREN_EIO;
    if (q->nfds == SOREN_MSG_MAX_FDS) {
        close(fd);
        return soren_error_set(err, SOREN_EUSAGE, "over %u inputs and parameters to hand to "
                               "the host: run the job in this process",
                               SOREN_MSG_MAX_FDS - 2);
    }
    q->fds[q->nfds++] = fd;
    return SOREN_OK;
}

static void request_destroy(request *q)
{
    for (size_t i = 0; i < q->count; i++)
        free(q->fields[i]);
    free(q->fields);
    for (size_t i = 0; i < q->nfds; i++)
        close(q->fds[i]);
}

static soren_status build(request *q, const soren_remote_job *job, soren_error *err)
{
    const soren_job_options *o = job->options;
    char *manifest = realpath(job->manifest_path, NULL);
    if (!manifest)
        return soren_error_errno(err, SOREN_EPLUGIN, errno, "cannot resolve %s",
                                 job->manifest_path);
    soren_status rc = add_field(q, err, "%s", manifest);
    free(manifest);
    if (rc == SOREN_OK)
        rc = add_field(q, err, "%d", (int)o->device);
    if (rc == SOREN_OK)
        rc = add_field(q, err, "%s", o->engine ? o->engine : "auto");
    if (rc == SOREN_OK)
        rc = add_field(q, err, "%.17g", o->sample);
    if (rc == SOREN_OK)
        rc = add_field(q, err, "%u", o->threads);
    if (rc == SOREN_OK)
        rc = add_field(q, err, "%llu", (unsigned long long)job->tasks);
    if (rc == SOREN_OK)
        rc = add_field(q, err, "%zu", job->value_count);
    if (rc == SOREN_OK)
        rc = add_fd(q, open(".", O_PATH | O_DIRECTORY | O_CLOEXEC), err);
    if (rc == SOREN_OK)
        rc = add_fd(q, memfd_create("soren-result", MFD_CLOEXEC), err);
    if (rc == SOREN_EIO)
        return soren_error_errno(err, SOREN_EIO, errno, "cannot prepare a run in the host");
    for (size_t j = 0; rc == SOREN_OK && j < job->value_count; j++) {
        const soren_param_value *v = &job->values[j];
        if (v->bytes) {
            rc = add_field(q, err, "b");
            if (rc == SOREN_OK)
                rc = add_fd(q, memory_file("a parameter", v->bytes, v->size, err), err);
        } else {
            rc = v->text ? add_field(q, err, "t%s", v->text) : add_field(q, err, "-");
        }
    }
    if (rc == SOREN_OK)
        rc = add_field(q, err, "%zu", job->input_count);
    for (size_t i = 0; rc == SOREN_OK && i < job->input_count; i++) {
        const soren_remote_input *in = &job->inputs[i];
        if (in->path) {
            rc = add_field(q, err, "f%s", in->path);
            int fd = open(in->path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
            if (rc == SOREN_OK && fd < 0)
                return soren_error_errno(err, SOREN_EINPUT, errno, "cannot read input %s",
                                         in->path);
            if (rc == SOREN_OK)
                rc = add_fd(q, fd, err);
        } else {
            rc = add_field(q, err, "m(memory input)");
            if (rc == SOREN_OK)
                rc = add_fd(q, memory_file("a memory input", in->data, in->size, err), err);
        }
    }
    if (rc == SOREN_OK)
        rc = add_field(q, err, "%s", job->token);
    return rc;
}

soren_status soren_remote_run(const char *socket, const soren_remote_job *job,
                              soren_result *out, char **explain, soren_error *err)
{
    *explain = NULL;
    char path[4096];
    soren_status rc = soren_channel_path(socket, path, sizeof path, err);
    if (rc != SOREN_OK)
        return rc;
    request q = {0};
    rc = build(&q, job, err);
    soren_error why;
    soren_error_clear(&why);
    int fd = rc == SOREN_OK ? soren_channel_connect(path, &why) : -1;
    if (rc == SOREN_OK && fd < 0)
        rc = soren_error_set(err, SOREN_EDEVICE, "no host to run the job in: %s: start one "
                             "with 'soren-host serve --detach', or run the job in this process "
                             "(soren_job_options.host NULL)", why.text);
    if (rc == SOREN_OK)
        rc = soren_channel_send_msg(fd, SOREN_MSG_JOB, (const char *const *)q.fields, q.count,
                                    q.fds, q.nfds, err);
    soren_msg reply = {0};
    if (rc == SOREN_OK) {
        int none[1], closed = 0;
        size_t n = 0;
        if (soren_channel_recv(fd, &reply, none, 0, &n, &closed, err) != SOREN_OK)
            rc = soren_error_set(err, SOREN_EJOB, "the host at %s stopped while running job "
                                 "%s: its log may say more", path, job->manifest_path);
        else if (reply.kind != SOREN_MSG_REPLY || reply.count != 2)
            rc = soren_error_set(err, SOREN_EJOB, "the host answered with a message of kind %d",
                                 (int)reply.kind);
    }
    if (rc == SOREN_OK) {
        int code = (int)strtol(reply.fields[0], NULL, 10);
        if (code != 0)
            rc = soren_error_set(err, code < 0 ? (soren_status)code : SOREN_EJOB, "%s",
                                 reply.fields[1]);
        else if ((rc = soren_pairs_file_read(q.fds[1], out, err)) == SOREN_OK &&
                 !(*explain = strdup(reply.fields[1])))
            rc = soren_error_set(err, SOREN_ENOMEM, "out of memory");
    }
    soren_msg_destroy(&reply);
    if (fd >= 0)
        close(fd);
    request_destroy(&q);
    return rc;
}
