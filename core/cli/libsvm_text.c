#include "libsvm_text.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- Numbers ------------------------------------------------------------ */

/* 10^0 to 10^22: every one a double exactly. */
static const double powers_of_ten[] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,
                                       1e8,  1e9,  1e10, 1e11, 1e12, 1e13, 1e14, 1e15,
                                       1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};

/* A number as strtod reads it, *end after it (at s where there is none),
 * errno as strtod sets it.  LibSVM's files are mostly short decimals
 * (0.34375, -1): digits that make an integer m of at most 2^53 and a power
 * of ten p of at most 10^22, both doubles exactly, so that m * p or m / p,
 * one correctly rounded operation, is strtod's correctly rounded value.
 * Anything else goes to strtod, which is most of a file's reading time
 * where every number goes to it. */
static double read_number(const char *s, char **end)
{
    const char *p = s;
    const int negative = *p == '-';
    if (*p == '-' || *p == '+')
        p++;
    uint64_t m = 0;
    int exponent = 0, digits = 0, exact = 1;
    for (; *p >= '0' && *p <= '9'; p++, digits++)
        if ((m = m * 10 + (uint64_t)(*p - '0')) > (1ull << 53))
            exact = 0;
    if (*p == '.')
        for (p++; *p >= '0' && *p <= '9'; p++, digits++, exponent--)
            if ((m = m * 10 + (uint64_t)(*p - '0')) > (1ull << 53))
                exact = 0;
    if (*p == 'e' || *p == 'E') {
        const char *q = p + 1;
        const int minus = *q == '-';
        if (*q == '-' || *q == '+')
            q++;
        int e = 0;
        for (; *q >= '0' && *q <= '9' && e < 1000; q++)
            e = e * 10 + (*q - '0');
        if (q > p + 1 && q[-1] >= '0' && q[-1] <= '9') {
            exponent += minus ? -e : e;
            p = q;
        }
    }
    /* inf, nan, hex, a digit string cut short, 20 digits: strtod's */
    if (!digits || !exact || exponent < -22 || exponent > 22 || (*p >= '0' && *p <= '9') ||
        *p == '.' || (unsigned)((*p | 0x20) - 'a') < 26u)
        return strtod(s, end);
    *end = (char *)p;
    const double v = exponent < 0 ? (double)m / powers_of_ten[-exponent]
                                  : (double)m * powers_of_ten[exponent];
    return negative ? -v : v;
}

/* ---- Rows ----------------------------------------------------------------- */

/* The rows that one thread reads: whole lines [begin, end) of the text,
 * rows row0 on of the file's. */
typedef struct rows_part {
    const char *begin, *end;
    size_t n, entries, d, row0;
    size_t row_cap, entry_cap;
    double *label;   /* n */
    size_t *first;   /* n + 1: each row's first entry, then the end */
    uint32_t *index; /* entries */
    float *value;    /* entries */
    size_t lines;    /* lines parsed, a bad one included */
    int bad;         /* line `lines` of the part is bad: why says how */
    char why[160];
} rows_part;

static void part_free(rows_part *p)
{
    free(p->label);
    free(p->first);
    free(p->index);
    free(p->value);
}

void sparse_rows_free(sparse_rows *r)
{
    for (size_t i = 0; i < r->part_count; i++)
        part_free(&r->parts[i]);
    free(r->parts);
    free(r->label);
    memset(r, 0, sizeof *r);
}

/* Makes room for one more row and for entries more entries; 0, or -1 out
 * of memory. */
static int part_reserve(rows_part *p, size_t entries)
{
    if (p->n + 2 > p->row_cap) {
        size_t cap = p->row_cap ? 2 * p->row_cap : 1024;
        double *label = realloc(p->label, cap * sizeof *label);
        if (label)
            p->label = label;
        size_t *first = realloc(p->first, cap * sizeof *first);
        if (first)
            p->first = first;
        if (!label || !first)
            return -1;
        p->row_cap = cap;
    }
    if (p->entries + entries > p->entry_cap) {
        size_t cap = p->entry_cap ? 2 * p->entry_cap : 1 << 16;
        while (cap < p->entries + entries)
            cap *= 2;
        uint32_t *index = realloc(p->index, cap * sizeof *index);
        if (index)
            p->index = index;
        float *value = realloc(p->value, cap * sizeof *value);
        if (value)
            p->value = value;
        if (!index || !value)
            return -1;
        p->entry_cap = cap;
    }
    return 0;
}

/* Adds one line, of length size, which ends at a '\n', '\r' or '\0'; 0, or
 * -1 with a message in p->why. */
static int part_add(rows_part *p, const char *line, size_t size)
{
    /* a line of size bytes holds at most size / 4 + 1 entries ("1:1 ") */
    if (part_reserve(p, size / 4 + 1) != 0) {
        snprintf(p->why, sizeof p->why, "out of memory after %zu rows", p->row0 + p->n);
        return -1;
    }
    char *end = NULL;
    errno = 0;
    const double label = read_number(line, &end);
    if (end == line || errno) {
        snprintf(p->why, sizeof p->why, "expected a label at the start of the line");
        return -1;
    }
    size_t e = p->entries;
    long last = 0;
    for (const char *s = end;;) {
        while (*s == ' ' || *s == '\t')
            s++;
        if (*s == '\0' || *s == '\n' || *s == '\r')
            break;
        long index = 0;
        if (*s >= '0' && *s <= '9') {
            for (end = (char *)s; *end >= '0' && *end <= '9' && index <= UINT32_MAX; end++)
                index = index * 10 + (*end - '0');
        } else {
            index = strtol(s, &end, 10);
        }
        if (end == s || *end != ':' || index <= last || index > UINT32_MAX) {
            const int shown = (int)strcspn(s, "\r\n");
            snprintf(p->why, sizeof p->why, "expected INDEX:VALUE with indices from 1 and "
                     "increasing, at \"%.*s\"", shown < 20 ? shown : 20, s);
            return -1;
        }
        s = end + 1;
        errno = 0;
        const double value = read_number(s, &end);
        if (end == s || errno) {
            snprintf(p->why, sizeof p->why, "expected a number after %ld:", index);
            return -1;
        }
        s = end;
        p->index[e] = (uint32_t)index;
        p->value[e] = (float)value;
        e++;
        last = index;
    }
    p->label[p->n] = label;
    p->first[p->n] = p->entries;
    p->first[++p->n] = p->entries = e;
    if ((size_t)last > p->d)
        p->d = (size_t)last;
    return 0;
}

/* Parses the part's lines.  A line is read up to its '\n'; the file's last
 * line, which may have none and so nothing after it to stop a number, is
 * read from a copy that ends in '\0'. */
static void *parse_part(void *arg)
{
    rows_part *p = arg;
    for (const char *s = p->begin; s < p->end && !p->bad;) {
        const char *nl = memchr(s, '\n', (size_t)(p->end - s));
        const size_t size = nl ? (size_t)(nl + 1 - s) : (size_t)(p->end - s);
        p->lines++;
        if (nl) {
            p->bad = part_add(p, s, size) != 0;
        } else {
            char *copy = malloc(size + 1);
            if (copy) {
                memcpy(copy, s, size);
                copy[size] = '\0';
                p->bad = part_add(p, copy, size) != 0;
                free(copy);
            } else {
                snprintf(p->why, sizeof p->why, "out of memory");
                p->bad = 1;
            }
        }
        s += size;
    }
    return NULL;
}

/* ---- Threads -------------------------------------------------------------- */

/* Parts of at least PART_MIN bytes, at most PARTS_MOST of them: a thread's
 * start costs tens of microseconds, a part of this size a millisecond to
 * read. */
enum { PART_MIN = 256 << 10, PARTS_MOST = 64 };

/* How many of at most `work / PART_MIN + 1` threads to use: no more than
 * the CPUs this process may run on, nor PARTS_MOST. */
static size_t threads_for(size_t work)
{
    size_t cpus = 1;
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0) {
        cpus = (size_t)CPU_COUNT(&set);
    } else {
        long n = sysconf(_SC_NPROCESSORS_ONLN);
        cpus = n > 0 ? (size_t)n : 1;
    }
    size_t count = work / PART_MIN + 1;
    count = count < cpus ? count : cpus;
    return count < PARTS_MOST ? count : PARTS_MOST;
}

/* Threads kept for the rest of the process: starting a thread costs tens
 * of microseconds, and a classification reads two files in two passes
 * each, one thread a part.  A batch's items go to whichever thread asks
 * next, the caller's among them. */
static struct {
    pthread_mutex_t lock;
    pthread_cond_t wake, done;
    size_t workers;      /* threads started */
    unsigned long batch; /* which batch is under way */
    void *(*fn)(void *);
    char *items;
    size_t size, count;
    size_t next; /* the next item to hand out */
    size_t left; /* items not finished */
} pool = {.lock = PTHREAD_MUTEX_INITIALIZER,
          .wake = PTHREAD_COND_INITIALIZER,
          .done = PTHREAD_COND_INITIALIZER};

/* Runs the batch's items until none is left to hand out; the lock held on
 * entry and on return. */
static void run_items(void)
{
    while (pool.next < pool.count) {
        char *item = pool.items + pool.next++ * pool.size;
        pthread_mutex_unlock(&pool.lock);
        pool.fn(item);
        pthread_mutex_lock(&pool.lock);
        if (--pool.left == 0)
            pthread_cond_broadcast(&pool.done);
    }
}

static void *pool_thread(void *arg)
{
    unsigned long seen = (unsigned long)(uintptr_t)arg;
    pthread_mutex_lock(&pool.lock);
    for (;;) {
        while (pool.batch == seen)
            pthread_cond_wait(&pool.wake, &pool.lock);
        seen = pool.batch;
        run_items();
    }
    return NULL;
}

/* Runs fn on each of the count items at items (each size bytes), on up to
 * count threads, the calling thread one of them; with fewer threads where
 * no more start. */
static void on_threads(void *(*fn)(void *), void *items, size_t size, size_t count)
{
    pthread_mutex_lock(&pool.lock);
    while (pool.left) /* another caller's batch */
        pthread_cond_wait(&pool.done, &pool.lock);
    for (pthread_t t; pool.workers + 1 < count; pool.workers++)
        if (pthread_create(&t, NULL, pool_thread, (void *)(uintptr_t)pool.batch) != 0 ||
            pthread_detach(t) != 0)
            break;
    pool.fn = fn;
    pool.items = items;
    pool.size = size;
    pool.count = count;
    pool.next = 0;
    pool.left = count;
    pool.batch++;
    pthread_cond_broadcast(&pool.wake);
    run_items();
    while (pool.left)
        pthread_cond_wait(&pool.done, &pool.lock);
    pthread_mutex_unlock(&pool.lock);
}

/* ---- Files ------------------------------------------------------------------- */

/* Reads fd to its end into f->bytes; 0, or -1 with errno set. */
static int read_to_end(int fd, libsvm_file *f)
{
    size_t cap = 1 << 16, used = 0;
    char *bytes = malloc(cap);
    for (;;) {
        if (!bytes) {
            errno = ENOMEM;
            return -1;
        }
        if (used == cap) {
            char *more = realloc(bytes, 2 * cap);
            if (!more) {
                free(bytes);
                errno = ENOMEM;
                return -1;
            }
            bytes = more;
            cap *= 2;
        }
        ssize_t got = read(fd, bytes + used, cap - used);
        if (got < 0 && errno == EINTR)
            continue;
        if (got < 0) {
            int saved = errno;
            free(bytes);
            errno = saved;
            return -1;
        }
        if (got == 0)
            break;
        used += (size_t)got;
    }
    *f = (libsvm_file){.bytes = bytes, .size = used};
    return 0;
}

int libsvm_file_open(const char *path, libsvm_file *f)
{
    memset(f, 0, sizeof *f);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        fprintf(stderr, "soren-svm: cannot read %s: %s\n", path, strerror(errno));
        return -1;
    }
    struct stat st;
    int rc = 0;
    if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0) {
        /* the pages of the page cache, read where they lie */
        void *at = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (at != MAP_FAILED)
            *f = (libsvm_file){.bytes = at, .size = (size_t)st.st_size, .mapped = 1};
    }
    if (!f->mapped && (rc = read_to_end(fd, f)) != 0)
        fprintf(stderr, "soren-svm: cannot read %s: %s\n", path, strerror(errno));
    close(fd);
    return rc;
}

void libsvm_file_close(libsvm_file *f)
{
    if (f->mapped)
        munmap(f->bytes, f->size);
    else
        free(f->bytes);
    memset(f, 0, sizeof *f);
}

/* ---- Parsing in parts ---------------------------------------------------------- */

/* Cuts text[0, size) into count runs of whole lines, each starting after
 * the first '\n' at or past its share's start; a share within one line is
 * left empty. */
static void cut_parts(const char *text, size_t size, rows_part *parts, size_t count)
{
    const char *end = text + size;
    parts[0].begin = text;
    for (size_t i = 1; i < count; i++) {
        const char *at = text + size / count * i;
        if (at < parts[i - 1].begin)
            at = parts[i - 1].begin;
        const char *nl = at < end ? memchr(at, '\n', (size_t)(end - at)) : NULL;
        parts[i].begin = nl ? nl + 1 : end;
        parts[i - 1].end = parts[i].begin;
    }
    parts[count - 1].end = end;
}

int sparse_rows_parse(const char *text, size_t size, const char *path, size_t first_line,
                      sparse_rows *r)
{
    memset(r, 0, sizeof *r);
    const size_t count = threads_for(size);
    r->parts = calloc(count, sizeof *r->parts);
    if (!r->parts) {
        fprintf(stderr, "soren-svm: %s: out of memory\n", path);
        return -1;
    }
    r->part_count = count;
    cut_parts(text, size, r->parts, count);
    on_threads(parse_part, r->parts, sizeof *r->parts, count);

    size_t line = first_line;
    for (size_t i = 0; i < count; i++) {
        rows_part *p = &r->parts[i];
        line += p->lines;
        if (p->bad) {
            fprintf(stderr, "soren-svm: %s:%zu: %s\n", path, line, p->why);
            sparse_rows_free(r);
            return -1;
        }
        p->row0 = r->n;
        r->n += p->n;
        r->d = p->d > r->d ? p->d : r->d;
    }
    r->label = malloc((r->n ? r->n : 1) * sizeof *r->label);
    if (!r->label) {
        fprintf(stderr, "soren-svm: %s: out of memory for %zu rows\n", path, r->n);
        sparse_rows_free(r);
        return -1;
    }
    for (size_t i = 0; i < count; i++)
        if (r->parts[i].n) /* an empty part has no array */
            memcpy(r->label + r->parts[i].row0, r->parts[i].label,
                   r->parts[i].n * sizeof *r->label);
    return 0;
}

/* ---- Dense rows ------------------------------------------------------------- */

typedef struct dense_part {
    const rows_part *p;
    float *out;
    size_t width; /* floats a row */
} dense_part;

static void *fill_dense(void *arg)
{
    const dense_part *s = arg;
    const rows_part *p = s->p;
    for (size_t i = 0; i < p->n; i++) {
        float *row = s->out + (p->row0 + i) * s->width;
        memset(row, 0, s->width * sizeof *row);
        for (size_t e = p->first[i]; e < p->first[i + 1]; e++)
            if (p->index[e] <= s->width)
                row[p->index[e] - 1] = p->value[e];
    }
    return NULL;
}

void sparse_rows_dense(const sparse_rows *r, float *out, size_t width)
{
    dense_part parts[PARTS_MOST];
    for (size_t i = 0; i < r->part_count; i++)
        parts[i] = (dense_part){.p = &r->parts[i], .out = out, .width = width};
    on_threads(fill_dense, parts, sizeof *parts, r->part_count);
}

/* Columns [k0, k1) of every row: a thread each, so that no two threads
 * write to one page (a row's features lie a column, thousands of bytes,
 * apart) and each writes a stretch of its own. */
typedef struct column_range {
    const sparse_rows *r;
    float *out;
    size_t k0, k1, stride;
} column_range;

/* The first of entries [lo, hi) of p whose index is at least index: where
 * the row lists every feature before it, the entry index - 1 places on. */
static size_t first_entry_from(const rows_part *p, size_t lo, size_t hi, uint32_t index)
{
    if (lo + index - 1 < hi && p->index[lo + index - 1] == index)
        return lo + index - 1;
    while (lo < hi) {
        const size_t mid = lo + (hi - lo) / 2;
        if (p->index[mid] < index)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static void *fill_columns(void *arg)
{
    const column_range *c = arg;
    for (size_t q = 0; q < c->r->part_count; q++) {
        const rows_part *p = &c->r->parts[q];
        for (size_t i = 0; i < p->n; i++) {
            const size_t hi = p->first[i + 1];
            for (size_t e = first_entry_from(p, p->first[i], hi, (uint32_t)c->k0 + 1);
                 e < hi && p->index[e] <= c->k1; e++)
                c->out[(p->index[e] - 1) * c->stride + p->row0 + i] = p->value[e];
        }
    }
    return NULL;
}

void sparse_rows_columns(const sparse_rows *r, float *out, size_t features, size_t stride)
{
    column_range ranges[PARTS_MOST];
    size_t count = r->part_count < features ? r->part_count : features;
    for (size_t i = 0; i < count; i++)
        ranges[i] = (column_range){.r = r, .out = out, .k0 = features * i / count,
                                   .k1 = features * (i + 1) / count, .stride = stride};
    if (count)
        on_threads(fill_columns, ranges, sizeof *ranges, count);
}
