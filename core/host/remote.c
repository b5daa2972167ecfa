/* remote.c - a library job run in the resident host: the client's half,
 * the host's half, and the file the pairs come back in. */
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

/* The iteration's figures after the values: runs, limit, converged, device
 * runs, and the fed parameter's size, its bytes following. */
enum { HEAD_WORDS = 6, ITERATION_WORDS = 5 };

soren_status soren_outcome_file_write(int fd, const soren_run_outcome *o, soren_error *err)
{
    const soren_result *r = &o->result;
    const soren_iterations *it = &o->iterations;
    uint64_t keys = r->count ? r->key_offset[r->count] : 0;
    uint64_t head[HEAD_WORDS] = {r->count, keys, r->value_size, (uint64_t)r->key_type,
                                 (uint64_t)r->value_type, it->runs > 0};
    uint64_t iteration[ITERATION_WORDS] = {it->runs, it->limit, (uint64_t)it->converged,
                                           it->device_runs, o->iterated_size};
    uint64_t at = 0;
    int e = write_at(fd, head, sizeof head, &at);
    if (!e && r->count)
        e = write_at(fd, r->key_offset, (r->count + 1) * sizeof *r->key_offset, &at);
    if (!e && r->count)
        e = write_at(fd, r->key_bytes, keys, &at);
    if (!e && r->count)
        e = write_at(fd, r->values, r->count * r->value_size, &at);
    if (!e && it->runs)
        e = write_at(fd, iteration, sizeof iteration, &at);
    if (!e && it->runs)
        e = write_at(fd, o->iterated, o->iterated_size, &at);
    return e ? soren_error_errno(err, SOREN_EIO, e, "cannot hand the result back") : SOREN_OK;
}

static soren_status malformed(soren_error *err, uint64_t count, uint64_t size)
{
    return soren_error_set(err, SOREN_EIO, "the result the host handed back is malformed "
                           "(%llu pairs in %llu bytes)", (unsigned long long)count,
                           (unsigned long long)size);
}

/* The iteration's figures and the fed parameter, read from at; every size
 * checked against the size bytes the file holds. */
static soren_status read_iteration(int fd, uint64_t at, uint64_t size, uint64_t count,
                                   soren_run_outcome *out, soren_error *err)
{
    uint64_t w[ITERATION_WORDS];
    if (size - at < sizeof w)
        return malformed(err, count, size);
    int e = read_at(fd, w, sizeof w, &at);
    if (e)
        return soren_error_errno(err, SOREN_EIO, e, "cannot read the result the host handed back");
    if (w[0] == 0 || w[0] > w[1] || w[2] > 1 || w[3] > w[0] || w[4] != size - at)
        return malformed(err, count, size);
    out->iterations = (soren_iterations){.runs = w[0], .limit = w[1], .converged = (int)w[2],
                                         .device_runs = w[3]};
    out->iterated = malloc(w[4] ? w[4] : 1);
    if (!out->iterated)
        return soren_error_set(err, SOREN_ENOMEM, "out of memory for a parameter of %llu bytes",
                               (unsigned long long)w[4]);
    out->iterated_size = w[4];
    e = read_at(fd, out->iterated, w[4], &at);
    return e ? soren_error_errno(err, SOREN_EIO, e, "cannot read the result the host handed back")
             : SOREN_OK;
}

soren_status soren_outcome_file_read(int fd, soren_run_outcome *out, soren_error *err)
{
    soren_result *r = &out->result;
    uint64_t head[HEAD_WORDS], at = 0;
    struct stat st;
    int e = fstat(fd, &st) != 0 ? errno : read_at(fd, head, sizeof head, &at);
    if (e)
        return soren_error_errno(err, SOREN_EIO, e, "cannot read the result the host handed back");
    uint64_t count = head[0], keys = head[1], value_size = head[2], iterated = head[5];
    uint64_t size = (uint64_t)st.st_size;
    /* Each part checked against what the file holds before it is sized. */
    uint64_t pairs_end = sizeof head;
    int fits = value_size == r->value_size && count < size && keys <= size && iterated <= 1 &&
               (!count || ((count + 1) * 8 <= size && count * value_size <= size));
    if (fits && count)
        pairs_end += (count + 1) * 8 + keys + count * value_size;
    fits = fits && (iterated ? pairs_end <= size : pairs_end == size);
    if (!fits)
        return malformed(err, count, size);
    if (count) {
        r->key_offset = malloc((count + 1) * sizeof *r->key_offset);
        r->key_bytes = malloc(keys ? keys : 1);
        r->values = malloc(count * value_size > 0 ? count * value_size : 1);
        if (!r->key_offset || !r->key_bytes || !r->values) {
            soren_result_destroy(r);
            return soren_error_set(err, SOREN_ENOMEM, "out of memory for a result of %llu pairs",
                                   (unsigned long long)count);
        }
        e = read_at(fd, r->key_offset, (count + 1) * 8, &at);
        if (!e)
            e = read_at(fd, r->key_bytes, keys, &at);
        if (!e)
            e = read_at(fd, r->values, count * value_size, &at);
        if (e) {
            soren_result_destroy(r);
            return soren_error_errno(err, SOREN_EIO, e,
                                     "cannot read the result the host handed back");
        }
        r->count = count;
    }
    return iterated ? read_iteration(fd, at, size, count, out, err) : SOREN_OK;
}

/* ---- The request --------------------------------------------------------- */

/* Seals that make a memory file's bytes final: the host maps a parameter
 * so sealed instead of copying it (read_bytes), since no one can then
 * shrink the file under its mapping or change what it read. */
#define FINAL_SEALS (F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL)

/* A memory file holding size bytes of data, sealed, or -1 with err set. */
static int memory_file(const char *name, const void *data, size_t size, soren_error *err)
{
    int fd = memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING);
    uint64_t at = 0;
    int e = fd < 0 ? errno : write_at(fd, data, size, &at);
    if (!e && fcntl(fd, F_ADD_SEALS, FINAL_SEALS) != 0)
        e = errno;
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
        rc = add_field(q, err, "%llu", (unsigned long long)job->iterate);
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
                              soren_run_outcome *out, char **explain, soren_error *err)
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
        else if ((rc = soren_outcome_file_read(q.fds[SOREN_REMOTE_FD_RESULT], out, err)) ==
                     SOREN_OK &&
                 !(*explain = strdup(reply.fields[1])))
            rc = soren_error_set(err, SOREN_ENOMEM, "out of memory");
    }
    soren_msg_destroy(&reply);
    if (fd >= 0)
        close(fd);
    request_destroy(&q);
    return rc;
}

/* ---- The host's half ----------------------------------------------------- */

/* Field layout: the fixed fields below, then the parameter count V, the
 * V parameters ("t" and the text, "b" for bytes in a memory file, "-" for
 * none), the input count I, the I inputs ("f" and the path, or "m" and
 * what names a memory file), and last the token. */
enum { F_MANIFEST, F_DEVICE, F_ENGINE, F_SAMPLE, F_THREADS, F_TASKS, F_ITERATE, F_VALUES };

soren_status soren_remote_request_check(char *const *f, size_t n, size_t nfds, soren_error *err)
{
    if (n < F_VALUES + 3)
        return soren_error_set(err, SOREN_EUSAGE, "a job request of %zu fields", n);
    size_t values = (size_t)strtoull(f[F_VALUES], NULL, 10), bytes = 0;
    if (values > SOREN_MAX_PARAMS || F_VALUES + 1 + values >= n)
        return soren_error_set(err, SOREN_EUSAGE, "a job request with %zu parameters", values);
    const char *const *param = (const char *const *)f + F_VALUES + 1;
    for (size_t i = 0; i < values; i++) {
        if (!param[i][0] || !strchr("tb-", param[i][0]) || (param[i][0] != 't' && param[i][1]))
            return soren_error_set(err, SOREN_EUSAGE, "a job request's parameter %zu is "
                                   "malformed", i);
        bytes += param[i][0] == 'b';
    }
    size_t inputs = (size_t)strtoull(param[values], NULL, 10);
    if (inputs > n || F_VALUES + 3 + values + inputs != n)
        return soren_error_set(err, SOREN_EUSAGE, "a job request with %zu inputs in %zu fields",
                               inputs, n);
    const char *const *input = param + values + 1;
    for (size_t i = 0; i < inputs; i++)
        if (!input[i][0] || !strchr("fm", input[i][0]))
            return soren_error_set(err, SOREN_EUSAGE, "a job request's input %zu is malformed",
                                   i);
    if (nfds != SOREN_REMOTE_FD_REST + bytes + inputs)
        return soren_error_set(err, SOREN_EUSAGE, "a job request with %zu descriptors for %zu "
                               "parameters' bytes and %zu inputs", nfds, bytes, inputs);
    soren_device d = (soren_device)atoi(f[F_DEVICE]);
    if (d < SOREN_DEVICE_AUTO || d > SOREN_DEVICE_BOTH || !soren_engine_name_valid(f[F_ENGINE]))
        return soren_error_set(err, SOREN_EUSAGE, "a job request for device %s, engine %s",
                               f[F_DEVICE], f[F_ENGINE]);
    return SOREN_OK;
}

/* A parameter's bytes from the memory file the program made: mapped where
 * the program sealed it (memory_file), else read whole into a copy. */
static soren_status read_bytes(int fd, soren_remote_bytes *out, soren_error *err)
{
    struct stat st;
    memset(out, 0, sizeof *out);
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || (uint64_t)st.st_size > SOREN_PARAM_FILE_MAX)
        return soren_error_set(err, SOREN_EUSAGE, "a parameter's bytes did not come as a "
                               "memory file of at most %llu bytes",
                               (unsigned long long)SOREN_PARAM_FILE_MAX);
    const size_t size = (size_t)st.st_size;
    const int seals = fcntl(fd, F_GET_SEALS);
    if (size && seals >= 0 && (seals & FINAL_SEALS) == FINAL_SEALS) {
        void *p = mmap(NULL, size, PROT_READ, MAP_SHARED, fd, 0);
        if (p != MAP_FAILED) {
            out->mapped = p;
            out->size = size;
            return SOREN_OK;
        }
    }
    out->copy = malloc(size ? size : 1);
    if (!out->copy)
        return soren_error_set(err, SOREN_ENOMEM, "out of memory");
    out->size = size;
    uint64_t at = 0;
    int e = read_at(fd, out->copy, size, &at);
    if (e)
        return soren_error_errno(err, SOREN_EIO, e, "cannot read a parameter's bytes");
    return SOREN_OK;
}

soren_status soren_remote_request_read(soren_remote_request *r, const char *job,
                                       size_t param_count, char *const *f, size_t n,
                                       const int *fds, soren_error *err)
{
    memset(r, 0, sizeof *r);
    size_t values = (size_t)strtoull(f[F_VALUES], NULL, 10);
    char *const *param = f + F_VALUES + 1, *const *input = param + values + 1;
    size_t inputs = (size_t)strtoull(param[values], NULL, 10);
    r->manifest_path = f[F_MANIFEST];
    r->token = f[n - 1];
    r->cwd_fd = fds[SOREN_REMOTE_FD_CWD];
    r->result_fd = fds[SOREN_REMOTE_FD_RESULT];
    soren_run_options *o = &r->options;
    soren_run_options_init(o);
    o->device = (soren_device)atoi(f[F_DEVICE]);
    o->engine = f[F_ENGINE];
    o->sample = strtod(f[F_SAMPLE], NULL);
    o->threads = (unsigned)strtoul(f[F_THREADS], NULL, 10);
    o->tasks = strtoull(f[F_TASKS], NULL, 10);
    o->iterate = strtoull(f[F_ITERATE], NULL, 10);
    if (values != param_count)
        return soren_error_set(err, SOREN_EUSAGE, "%s takes %zu parameters; the request gave "
                               "%zu: the plugin changed since the program opened it", job,
                               param_count, values);
    r->value_count = values;
    size_t next_fd = SOREN_REMOTE_FD_REST;
    for (size_t i = 0; i < values; i++) {
        const char *g = param[i];
        if (*g == 't') {
            r->values[i].text = g + 1;
        } else if (*g == 'b') {
            soren_remote_bytes *b = &r->bytes[i];
            soren_status rc = read_bytes(fds[next_fd++], b, err);
            if (rc != SOREN_OK)
                return rc;
            r->values[i].bytes = b->mapped ? b->mapped : b->copy;
            r->values[i].size = b->size;
        }
    }
    r->inputs = calloc(inputs ? inputs : 1, sizeof *r->inputs);
    if (!r->inputs)
        return soren_error_set(err, SOREN_ENOMEM, "out of memory");
    r->input_count = inputs;
    for (size_t i = 0; i < inputs; i++)
        r->inputs[i] = (soren_job_input){.kind = SOREN_JOB_INPUT_FD, .fd = fds[next_fd++],
                                         .path = input[i] + 1};
    return SOREN_OK;
}

void soren_remote_request_destroy(soren_remote_request *r)
{
    for (size_t i = 0; i < SOREN_MAX_PARAMS; i++) {
        if (r->bytes[i].mapped)
            munmap(r->bytes[i].mapped, r->bytes[i].size);
        free(r->bytes[i].copy);
    }
    free(r->inputs);
    memset(r, 0, sizeof *r);
}
