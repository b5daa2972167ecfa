/* output.c - writing a result as tsv, csv, json or jsonl, through a
 * temporary file. */
#include "output.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <float.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../utf8.h"

const char soren_format_names[] = "tsv csv json jsonl";

int soren_format_parse(const char *name, soren_format *out)
{
    static const char *const names[] = {"tsv", "csv", "json", "jsonl"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        if (strcmp(name, names[i]) == 0) {
            *out = (soren_format)i;
            return 0;
        }
    }
    return -1;
}

/* The temporary file being written, for soren_output_pending_path: a static
 * buffer, so a signal handler reads it without touching the heap. */
static char pending[PATH_MAX];
static volatile sig_atomic_t pending_set;

static void pending_put(const char *path)
{
    pending_set = 0;
    if (path && strlen(path) < sizeof pending) {
        strcpy(pending, path);
        pending_set = 1;
    }
}

const char *soren_output_pending_path(void)
{
    return pending_set ? pending : NULL;
}

static const char *dest_name(const soren_output *o)
{
    return o->path ? o->path : "standard output";
}

/* ---- Opening and committing ---------------------------------------------- */

/* The file path names once symbolic links are followed, even where the
 * last link dangles (writing then creates its target): malloc'd, or NULL
 * with errno set. */
static char *final_target(const char *path)
{
    char *cur = strdup(path);
    for (int hops = 0; cur; hops++) {
        struct stat lst;
        if (lstat(cur, &lst) != 0 || !S_ISLNK(lst.st_mode))
            return cur;
        char link[PATH_MAX];
        ssize_t n = hops < 40 ? readlink(cur, link, sizeof link - 1) : -1;
        if (n < 0) {
            int e = hops < 40 ? errno : ELOOP;
            free(cur);
            errno = e;
            return NULL;
        }
        link[n] = '\0';
        /* A relative target is relative to the link's folder. */
        const char *slash = strrchr(cur, '/');
        size_t dir = link[0] == '/' || !slash ? 0 : (size_t)(slash - cur) + 1;
        char *next = malloc(dir + (size_t)n + 1);
        if (next) {
            memcpy(next, cur, dir);
            memcpy(next + dir, link, (size_t)n + 1);
        }
        free(cur);
        cur = next;
    }
    errno = ENOMEM;
    return NULL;
}

/* Where a temporary file of target lies, split in its folder ("." for none)
 * and the name's prefix ".NAME.soren-tmp.", NAME cut to leave room for a
 * pid within NAME_MAX.  Both malloc'd; 0, or -1 out of memory. */
static int tmp_prefix(const char *target, char **dir, char **prefix)
{
    const char *slash = strrchr(target, '/');
    const char *name = slash ? slash + 1 : target;
    size_t dlen = slash ? (size_t)(slash - target) + (slash == target) : 1;
    size_t nlen = strlen(name);
    if (nlen > 200)
        nlen = 200;
    *dir = malloc(dlen + 1);
    *prefix = malloc(nlen + sizeof "..soren-tmp.");
    if (!*dir || !*prefix) {
        free(*dir);
        free(*prefix);
        return -1;
    }
    memcpy(*dir, slash ? target : ".", dlen);
    (*dir)[dlen] = '\0';
    (*prefix)[0] = '.';
    memcpy(*prefix + 1, name, nlen);
    strcpy(*prefix + 1 + nlen, ".soren-tmp.");
    return 0;
}

/* Removes the temporary files of target that a process left where it was
 * killed beyond handling (SIGKILL, a crash of the machine): those whose pid
 * names no live process, or names this one (whose own temporary file is
 * not made yet).  A live process's file is its work in progress. */
static void remove_leftovers(const char *dir, const char *prefix)
{
    DIR *d = opendir(dir);
    if (!d)
        return;
    size_t plen = strlen(prefix);
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (strncmp(e->d_name, prefix, plen) != 0)
            continue;
        const char *digits = e->d_name + plen;
        char *rest;
        errno = 0;
        long pid = strtol(digits, &rest, 10);
        if (!isdigit((unsigned char)*digits) || *rest || errno || pid <= 0 || pid > INT_MAX)
            continue;
        if (pid == (long)getpid() || (kill((pid_t)pid, 0) != 0 && errno == ESRCH))
            unlinkat(dirfd(d), e->d_name, 0);
    }
    closedir(d);
}

/* The error of a temporary file that could not be made in dir. */
static soren_status create_failed(const char *path, const char *dir, int e, soren_error *err)
{
    if (e == ENOENT)
        return soren_error_set(err, SOREN_EIO, "cannot create output %s: folder %s does not "
                               "exist; create it (mkdir -p %s) or choose another --output",
                               path, dir, dir);
    if (e == EACCES || e == EPERM || e == EROFS)
        return soren_error_errno(err, SOREN_EIO, e, "cannot create output %s: folder %s is not "
                                 "writable (the output is written to a temporary file there, "
                                 "then renamed); choose another --output", path, dir);
    return soren_error_errno(err, SOREN_EIO, e, "cannot create output %s (a temporary file in "
                             "%s)", path, dir);
}

/* Opens o->target's temporary file (o->tmp_path) with mode: st of the
 * existing target, or NULL for a new file. */
static soren_status open_tmp(soren_output *o, const struct stat *st, soren_error *err)
{
    char *dir = NULL, *prefix = NULL;
    if (tmp_prefix(o->target, &dir, &prefix) != 0)
        return soren_error_set(err, SOREN_ENOMEM, "out of memory opening output %s", o->path);
    remove_leftovers(dir, prefix);
    soren_status rc = SOREN_OK;
    size_t size = strlen(dir) + strlen(prefix) + 24;
    o->tmp_path = malloc(size);
    if (!o->tmp_path) {
        rc = soren_error_set(err, SOREN_ENOMEM, "out of memory opening output %s", o->path);
        goto done;
    }
    snprintf(o->tmp_path, size, "%s/%s%ld", dir, prefix, (long)getpid());
    /* Pending before it exists, so a signal as it is made removes it. */
    pending_put(o->tmp_path);
    /* A new file gets the mode open(2) gives (0666 less the umask); a
     * replaced one keeps its own, set while no byte is written yet. */
    int fd = open(o->tmp_path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, st ? 0600 : 0666);
    if (fd < 0) {
        rc = create_failed(o->path, dir, errno, err);
        pending_put(NULL);
        free(o->tmp_path);
        o->tmp_path = NULL;
        goto done;
    }
    if (st && fchmod(fd, st->st_mode & 07777) != 0) {
        rc = soren_error_errno(err, SOREN_EIO, errno, "cannot give output %s the mode %04o of "
                               "the file it replaces", o->path, (unsigned)(st->st_mode & 07777));
        close(fd);
        goto done;
    }
    o->file = fdopen(fd, "w");
    if (!o->file) {
        rc = soren_error_errno(err, SOREN_EIO, errno, "cannot write output %s", o->path);
        close(fd);
    }
done:
    free(dir);
    free(prefix);
    return rc;
}

soren_status soren_output_open(soren_output *o, const char *path, soren_error *err)
{
    memset(o, 0, sizeof *o);
    if (!path || strcmp(path, "-") == 0) {
        o->file = stdout;
        return SOREN_OK;
    }
    o->path = strdup(path);
    o->target = final_target(path);
    if (!o->path || !o->target) {
        int e = errno;
        soren_output_abort(o);
        if (e == ENOMEM)
            return soren_error_set(err, SOREN_ENOMEM, "out of memory opening output %s", path);
        return soren_error_errno(err, SOREN_EIO, e, "cannot follow the symbolic link output %s",
                                 path);
    }

    struct stat st;
    int exists = stat(o->target, &st) == 0;
    soren_status rc = SOREN_OK;
    if (exists && S_ISDIR(st.st_mode)) {
        rc = soren_error_set(err, SOREN_EIO, "output %s is a directory", path);
    } else if (exists && !S_ISREG(st.st_mode)) {
        /* A device or a FIFO (/dev/null, a pipe): write to it directly; a
         * temporary file renamed over it would replace the device node. */
        o->file = fopen(o->target, "w");
        if (!o->file)
            rc = soren_error_errno(err, SOREN_EIO, errno, "cannot write output %s", path);
    } else if (exists && access(o->target, W_OK) != 0) {
        /* Renaming over it would succeed where its folder is writable, so
         * the file's own permission is asked first, as writing in place
         * would. */
        rc = soren_error_errno(err, SOREN_EIO, errno, "output %s (mode %04o) is not writable: "
                               "make it writable (chmod u+w %s) or choose another --output",
                               path, (unsigned)(st.st_mode & 07777), path);
    } else {
        rc = open_tmp(o, exists ? &st : NULL, err);
    }
    if (rc != SOREN_OK)
        soren_output_abort(o);
    return rc;
}

/* The error of a write that failed with errno e: EFBIG (SIGXFSZ being
 * ignored, see signals.h) names the file size limit. */
static soren_status write_failed(const soren_output *o, int e, soren_error *err)
{
    struct rlimit rl;
    if (e == EFBIG && getrlimit(RLIMIT_FSIZE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY)
        return soren_error_set(err, SOREN_EIO, "writing output %s: it would pass the file size "
                               "limit of %llu bytes (ulimit -f); raise the limit or write a "
                               "smaller result", dest_name(o),
                               (unsigned long long)rl.rlim_cur);
    return soren_error_errno(err, SOREN_EIO, e, "writing output %s", dest_name(o));
}

soren_status soren_output_open_fd(soren_output *o, int fd, const char *name, soren_error *err)
{
    memset(o, 0, sizeof *o);
    if (name && strcmp(name, "-") != 0 && !(o->path = strdup(name)))
        return soren_error_set(err, SOREN_ENOMEM, "out of memory opening output %s", name);
    int own = fcntl(fd, F_DUPFD_CLOEXEC, 0);
    if (own < 0 || !(o->file = fdopen(own, "w"))) {
        int e = errno;
        if (own >= 0)
            close(own);
        soren_output_abort(o);
        return soren_error_errno(err, SOREN_EIO, e, "cannot write output %s",
                                 name ? name : "standard output");
    }
    return SOREN_OK;
}

soren_status soren_output_commit(soren_output *o, soren_error *err)
{
    if (!o->file)
        return soren_error_set(err, SOREN_EIO, "output %s is not open", dest_name(o));
    errno = 0;
    if (o->file == stdout) {
        int bad = fflush(stdout) != 0 || ferror(stdout);
        int e = errno;
        o->file = NULL;
        if (bad)
            return write_failed(o, e ? e : EIO, err);
        return SOREN_OK;
    }
    soren_status rc = SOREN_OK;
    int e = 0;
    if (fflush(o->file) != 0 || ferror(o->file))
        e = errno ? errno : EIO;
    /* fsync: the rename must not publish a name whose data a crash loses.
     * Devices and pipes (no temporary file) need no sync. */
    if (!e && o->tmp_path && fsync(fileno(o->file)) != 0 && errno != EINVAL)
        e = errno;
    if (fclose(o->file) != 0 && !e)
        e = errno ? errno : EIO;
    o->file = NULL;
    if (e) {
        rc = write_failed(o, e, err);
    } else if (o->tmp_path) {
        /* The target, not the link: a symbolic link keeps pointing at the
         * new contents. */
        if (rename(o->tmp_path, o->target) != 0)
            rc = soren_error_errno(err, SOREN_EIO, errno, "cannot write output %s",
                                   dest_name(o));
        if (rc == SOREN_OK) {
            pending_put(NULL);
            free(o->tmp_path);
            o->tmp_path = NULL;
        }
    }
    soren_output_abort(o); /* removes a temporary file left by a failure */
    return rc;
}

void soren_output_abort(soren_output *o)
{
    if (o->file && o->file != stdout)
        fclose(o->file);
    o->file = NULL;
    if (o->tmp_path) {
        pending_put(NULL);
        unlink(o->tmp_path);
        free(o->tmp_path);
        o->tmp_path = NULL;
    }
    free(o->path);
    o->path = NULL;
    free(o->target);
    o->target = NULL;
}

/* ---- Formatting ---------------------------------------------------------- */

/* A buffer in front of the FILE: the writers add a few bytes at a time. */
typedef struct writer {
    FILE *f;
    int error; /* errno of the first failed write, or 0 */
    size_t n;
    char buf[1 << 16];
} writer;

static void w_flush(writer *w)
{
    errno = 0;
    if (w->n && !w->error && fwrite(w->buf, 1, w->n, w->f) != w->n)
        w->error = errno ? errno : EIO;
    w->n = 0;
}

static inline void w_reserve(writer *w, size_t n)
{
    if (sizeof w->buf - w->n < n)
        w_flush(w);
}

static inline void w_byte(writer *w, char c)
{
    w_reserve(w, 1);
    w->buf[w->n++] = c;
}

static void w_bytes(writer *w, const void *p, size_t n)
{
    if (n > sizeof w->buf / 2) {
        w_flush(w);
        errno = 0;
        if (!w->error && fwrite(p, 1, n, w->f) != n)
            w->error = errno ? errno : EIO;
        return;
    }
    w_reserve(w, n);
    memcpy(w->buf + w->n, p, n);
    w->n += n;
}

static void w_str(writer *w, const char *s)
{
    w_bytes(w, s, strlen(s));
}

const char *soren__u64_digits(char buf[SOREN_U64_DIGITS], uint64_t v)
{
    char *at = buf + SOREN_U64_DIGITS;
    do {
        *--at = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    return at;
}

static void w_u64(writer *w, uint64_t v)
{
    char tmp[SOREN_U64_DIGITS];
    const char *d = soren__u64_digits(tmp, v);
    w_bytes(w, d, (size_t)(tmp + sizeof tmp - d));
}

static void w_i64(writer *w, int64_t v)
{
    if (v < 0) {
        w_byte(w, '-');
        w_u64(w, (uint64_t)0 - (uint64_t)v);
    } else {
        w_u64(w, (uint64_t)v);
    }
}

/* 1 if text reads back (strtof for f32, strtod for f64) to v's bits. */
static int reads_back(const char *text, double v, int is_f32)
{
    if (is_f32) {
        float want = (float)v, got = strtof(text, NULL);
        return memcmp(&want, &got, sizeof want) == 0;
    }
    double got = strtod(text, NULL);
    return memcmp(&v, &got, sizeof v) == 0;
}

/* Writes the finite v with the fewest significant digits that read back to
 * the same bits.  A decimal of at most FLT_DIG (DBL_DIG) digits reads back
 * to only one normal float (double), so when %.6g (%.15g) reads back it is
 * the shortest; %g drops trailing zeros, so 0.1 prints "0.1".  Otherwise one
 * more digit at a time, up to 9 (17), which always reads back.  At most four
 * tries for f32 and three for f64, instead of a slower shortest-digits
 * algorithm of our own.  Subnormals have fewer bits, so several short
 * decimals read back to one of them: those start from one digit. */
static int format_float(char *buf, size_t size, double v, int is_f32)
{
    int subnormal = fabs(v) < (is_f32 ? FLT_MIN : DBL_MIN);
    int first = subnormal ? 1 : is_f32 ? FLT_DIG : DBL_DIG, last = is_f32 ? 9 : 17;
    int n = 0;
    for (int digits = first; digits <= last; digits++) {
        n = snprintf(buf, size, "%.*g", digits, v);
        if (reads_back(buf, v, is_f32))
            break;
    }
    return n;
}

/* Writes a number of type t.  Non-finite floats are written inf, -inf and
 * nan; in JSON, which has no such numbers, as strings.  Every NaN is "nan",
 * whatever its sign bit and payload: which NaN an operation yields differs
 * between CPUs and GPUs (x86's inf - inf has its sign bit set, and %g
 * would write "-nan"), so one spelling keeps their outputs the same. */
static void w_number(writer *w, soren_type t, const void *p, int json)
{
    char tmp[64];
    switch (t) {
    case SOREN_TYPE_U32:
    case SOREN_TYPE_INDEX: {
        uint32_t v;
        memcpy(&v, p, 4);
        w_u64(w, v);
        return;
    }
    case SOREN_TYPE_U64: {
        uint64_t v;
        memcpy(&v, p, 8);
        w_u64(w, v);
        return;
    }
    case SOREN_TYPE_I64: {
        int64_t v;
        memcpy(&v, p, 8);
        w_i64(w, v);
        return;
    }
    case SOREN_TYPE_F32:
    case SOREN_TYPE_F64: {
        int is_f32 = t == SOREN_TYPE_F32;
        double v;
        if (is_f32) {
            float f;
            memcpy(&f, p, 4);
            v = f;
        } else {
            memcpy(&v, p, 8);
        }
        if (isfinite(v)) {
            w_bytes(w, tmp, (size_t)format_float(tmp, sizeof tmp, v, is_f32));
            return;
        }
        const char *name = isnan(v) ? "nan" : v < 0 ? "-inf" : "inf";
        if (json)
            w_byte(w, '"');
        w_str(w, name);
        if (json)
            w_byte(w, '"');
        return;
    }
    default:
        return;
    }
}

static void w_tsv_string(writer *w, const uint8_t *s, uint64_t n)
{
    uint64_t run = 0; /* start of the bytes not yet written */
    for (uint64_t i = 0; i < n; i++) {
        char esc;
        switch (s[i]) {
        case '\\': esc = '\\'; break;
        case '\t': esc = 't'; break;
        case '\n': esc = 'n'; break;
        case '\r': esc = 'r'; break;
        default: continue;
        }
        w_bytes(w, s + run, (size_t)(i - run));
        w_byte(w, '\\');
        w_byte(w, esc);
        run = i + 1;
    }
    w_bytes(w, s + run, (size_t)(n - run));
}

/* RFC 4180: a field holding a comma, a double quote, CR or LF is quoted,
 * with its double quotes doubled; any other field is written as it is. */
static void w_csv_string(writer *w, const uint8_t *s, uint64_t n)
{
    int quote = 0;
    for (uint64_t i = 0; i < n && !quote; i++)
        quote = s[i] == ',' || s[i] == '"' || s[i] == '\r' || s[i] == '\n';
    if (!quote) {
        w_bytes(w, s, (size_t)n);
        return;
    }
    w_byte(w, '"');
    uint64_t run = 0;
    for (uint64_t i = 0; i < n; i++) {
        if (s[i] != '"')
            continue;
        w_bytes(w, s + run, (size_t)(i + 1 - run)); /* through the quote ... */
        w_byte(w, '"');                              /* ... and once more */
        run = i + 1;
    }
    w_bytes(w, s + run, (size_t)(n - run));
    w_byte(w, '"');
}

static void w_json_string(writer *w, const uint8_t *s, uint64_t n)
{
    static const char hex[] = "0123456789abcdef";
    w_byte(w, '"');
    uint64_t i = 0;
    while (i < n) {
        uint8_t c = s[i];
        if (c >= 0x20 && c < 0x80 && c != '"' && c != '\\') {
            uint64_t j = i + 1;
            while (j < n && s[j] >= 0x20 && s[j] < 0x80 && s[j] != '"' && s[j] != '\\')
                j++;
            w_bytes(w, s + i, (size_t)(j - i));
            i = j;
            continue;
        }
        if (c == '"' || c == '\\') {
            w_byte(w, '\\');
            w_byte(w, (char)c);
            i++;
            continue;
        }
        size_t len = c < 0x20 ? 0 : soren__utf8_length(s + i, n - i);
        if (len) {
            w_bytes(w, s + i, len);
            i += len;
            continue;
        }
        /* A control character is \u00XX.  A byte outside any valid UTF-8
         * sequence (always 0x80 or more) is the lone low surrogate \udcXX,
         * which no valid text produces: Python's surrogateescape reads it
         * back as the byte, and no two keys write the same string. */
        char esc[6] = {'\\', 'u', c < 0x20 ? '0' : 'd', c < 0x20 ? '0' : 'c', hex[c >> 4],
                       hex[c & 15]};
        w_bytes(w, esc, sizeof esc);
        i++;
    }
    w_byte(w, '"');
}

static void w_key(writer *w, const soren_result *r, uint64_t i, soren_format fmt)
{
    const uint8_t *k = r->key_bytes + r->key_offset[i];
    uint64_t n = r->key_offset[i + 1] - r->key_offset[i];
    size_t ts = soren_type_size(r->key_type);
    int json = fmt == SOREN_FORMAT_JSON || fmt == SOREN_FORMAT_JSONL;
    if (r->key_type != SOREN_TYPE_STRING && ts != 0 && n == ts)
        w_number(w, r->key_type, k, json);
    else if (json)
        w_json_string(w, k, n);
    else if (fmt == SOREN_FORMAT_CSV)
        w_csv_string(w, k, n);
    else
        w_tsv_string(w, k, n);
}

/* Pair i as one line (json: one array element, a comma after all but the
 * last). */
static void w_pair(writer *w, const soren_result *r, uint64_t i, soren_format fmt)
{
    const uint8_t *v = r->values + i * r->value_size;
    switch (fmt) {
    case SOREN_FORMAT_JSON:
    case SOREN_FORMAT_JSONL:
        w_str(w, "{\"key\": ");
        w_key(w, r, i, fmt);
        w_str(w, ", \"value\": ");
        w_number(w, r->value_type, v, 1);
        w_str(w, fmt == SOREN_FORMAT_JSON && i + 1 < r->count ? "},\n" : "}\n");
        return;
    case SOREN_FORMAT_CSV:
        w_key(w, r, i, fmt);
        w_byte(w, ',');
        w_number(w, r->value_type, v, 0);
        w_str(w, "\r\n");
        return;
    case SOREN_FORMAT_TSV:
        w_key(w, r, i, fmt);
        w_byte(w, '\t');
        w_number(w, r->value_type, v, 0);
        w_byte(w, '\n');
        return;
    }
}

soren_status soren_output_write(soren_output *o, const soren_result *r, soren_format fmt,
                                soren_error *err)
{
    if (!o->file)
        return soren_error_set(err, SOREN_EIO, "output %s is not open", dest_name(o));
    if (fmt != SOREN_FORMAT_TSV && fmt != SOREN_FORMAT_CSV && fmt != SOREN_FORMAT_JSON &&
        fmt != SOREN_FORMAT_JSONL)
        return soren_error_set(err, SOREN_EUSAGE, "unknown output format %d (expected one of "
                               "%s)", (int)fmt, soren_format_names);
    writer *w = malloc(sizeof *w);
    if (!w)
        return soren_error_set(err, SOREN_ENOMEM, "out of memory writing %s", dest_name(o));
    w->f = o->file;
    w->error = 0;
    w->n = 0;
    if (fmt == SOREN_FORMAT_JSON)
        w_str(w, r->count ? "[\n" : "[");
    for (uint64_t i = 0; i < r->count && !w->error; i++)
        w_pair(w, r, i, fmt);
    if (fmt == SOREN_FORMAT_JSON)
        w_str(w, "]\n");
    w_flush(w);
    int e = w->error;
    free(w);
    if (e)
        return write_failed(o, e, err);
    return SOREN_OK;
}
