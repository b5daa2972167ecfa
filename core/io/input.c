/* input.c - mapping input files, and finding the records in them. */
#include "input.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

static const char *input_name(const soren_input *in)
{
    return in->path ? in->path : "(input)";
}

/* ---- Mapped files that shrink -------------------------------------------- */

/* The live mappings of input files, for soren__input_fault: a fixed table
 * that a signal handler reads without locks.  A slot is claimed through
 * used, filled, then published by a non-zero start; emptied by zeroing
 * start first.  A mapping that finds no free slot is left out: a read past
 * its file's end is then reported as a fault, as without the table. */
#define MAPPED_SLOTS 64

static struct mapped_slot {
    atomic_int used;
    atomic_uintptr_t start; /* 0: empty */
    atomic_uintptr_t end;
    atomic_int shrunk;
} mapped[MAPPED_SLOTS];

/* The page size, read outside the handler (sysconf is not signal-safe). */
static atomic_uintptr_t page_size;

static void mapped_add(const void *map, uint64_t size)
{
    if (!atomic_load(&page_size))
        atomic_store(&page_size, (uintptr_t)sysconf(_SC_PAGESIZE));
    for (size_t i = 0; i < MAPPED_SLOTS; i++) {
        int expected = 0;
        if (atomic_compare_exchange_strong(&mapped[i].used, &expected, 1)) {
            atomic_store(&mapped[i].shrunk, 0);
            atomic_store(&mapped[i].end, (uintptr_t)map + size);
            atomic_store(&mapped[i].start, (uintptr_t)map);
            return;
        }
    }
}

static void mapped_remove(const void *map)
{
    for (size_t i = 0; i < MAPPED_SLOTS; i++) {
        if (atomic_load(&mapped[i].start) == (uintptr_t)map) {
            atomic_store(&mapped[i].start, 0);
            atomic_store(&mapped[i].used, 0);
            return;
        }
    }
}

/* The slot whose mapping holds address a, or NULL. */
static struct mapped_slot *mapped_at(uintptr_t a)
{
    for (size_t i = 0; i < MAPPED_SLOTS; i++) {
        uintptr_t start = atomic_load(&mapped[i].start);
        if (start && a >= start && a < atomic_load(&mapped[i].end))
            return &mapped[i];
    }
    return NULL;
}

int soren__input_fault(const void *addr)
{
    struct mapped_slot *s = mapped_at((uintptr_t)addr);
    uintptr_t page = atomic_load(&page_size);
    if (!s || !page)
        return 0;
    /* Zeros from the faulting page to the mapping's end: the pages past the
     * file's new end fault no more, and the pages before it keep the
     * file's bytes. */
    uintptr_t from = (uintptr_t)addr & ~(page - 1);
    uintptr_t end = atomic_load(&s->end);
    if (mmap((void *)from, (size_t)(end - from), PROT_READ,
             MAP_FIXED | MAP_PRIVATE | MAP_ANONYMOUS, -1, 0) == MAP_FAILED)
        return 0;
    atomic_store(&s->shrunk, 1);
    return 1;
}

soren_status soren_input_check_shrunk(const soren_input *in, const char *job, soren_error *err)
{
    struct mapped_slot *s = in->file_ino && in->data ? mapped_at((uintptr_t)in->data) : NULL;
    if (!s || !atomic_load(&s->shrunk))
        return SOREN_OK;
    /* The file's size when it was mapped: where its bytes were to end. */
    uint64_t size = atomic_load(&s->end) - atomic_load(&s->start);
    return soren_error_set(err, SOREN_EINPUT, "%s: input %s ended before byte %llu: it shrank "
                           "during the run", job, input_name(in), (unsigned long long)size);
}

/* A file that says it has 0 bytes maps to an empty input; /proc and /sys
 * files say so and have bytes, which must not give an empty result
 * presented as whole.  One read tells them apart. */
static soren_status check_empty(int fd, const char *path, soren_error *err)
{
    char byte;
    ssize_t n = read(fd, &byte, 1);
    if (n < 0)
        return soren_error_errno(err, SOREN_EINPUT, errno, "cannot read input %s", path);
    if (n > 0)
        return soren_error_set(err, SOREN_EINPUT,
                               "input %s says it has 0 bytes but has some (a /proc or /sys "
                               "file), so it cannot be mapped; redirect it to standard input "
                               "instead", path);
    return SOREN_OK;
}

/* Maps the file open at fd into in, whose path names it in messages. */
static soren_status map_fd(soren_input *in, int fd, const char *path, soren_error *err)
{
    struct stat st;
    if (fstat(fd, &st) != 0)
        return soren_error_errno(err, SOREN_EINPUT, errno, "cannot read input %s", path);
    if (S_ISDIR(st.st_mode))
        return soren_error_set(err, SOREN_EINPUT, "input %s is a directory, not a regular file",
                               path);
    if (!S_ISREG(st.st_mode))
        return soren_error_set(err, SOREN_EINPUT,
                               "input %s is not a regular file (pipes, sockets and devices "
                               "cannot be mapped; redirect it to standard input instead)",
                               path);
    if (st.st_size == 0)
        return check_empty(fd, path, err);
    uint64_t size = (uint64_t)st.st_size;
    void *map = mmap(NULL, (size_t)size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (map == MAP_FAILED) {
        int e = errno;
        return soren_error_errno(err, e == ENOMEM ? SOREN_ENOMEM : SOREN_EINPUT, e,
                                 "cannot map input %s (%llu bytes)", path,
                                 (unsigned long long)size);
    }
    /* Advice only: a failure changes nothing. */
    (void)posix_madvise(map, (size_t)size, POSIX_MADV_SEQUENTIAL);
    mapped_add(map, size);
    in->mapping = map;
    in->mapping_size = size;
    in->data = map;
    in->size = size;
    in->file_dev = (uint64_t)st.st_dev;
    in->file_ino = (uint64_t)st.st_ino;
    return SOREN_OK;
}

soren_status soren_input_open(soren_input *in, const char *path, soren_error *err)
{
    memset(in, 0, sizeof *in);
    in->path = strdup(path);
    if (!in->path)
        return soren_error_set(err, SOREN_ENOMEM, "out of memory opening input %s", path);

    /* O_NONBLOCK: opening a FIFO must not wait for a writer before we can
     * refuse it. */
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    if (fd < 0) {
        int e = errno;
        soren_input_close(in);
        /* Many tools read standard input for "-"; soren-host does when no
         * INPUT is given. */
        return soren_error_errno(err, SOREN_EINPUT, e, "cannot read input %s%s", path,
                                 strcmp(path, "-") == 0 ? " (standard input is read when no "
                                                          "INPUT is given)" : "");
    }
    soren_status rc = map_fd(in, fd, path, err);
    close(fd);
    if (rc != SOREN_OK)
        soren_input_close(in);
    return rc;
}

soren_status soren_input_open_fd(soren_input *in, int fd, const char *path, soren_error *err)
{
    memset(in, 0, sizeof *in);
    char proc[64];
    snprintf(proc, sizeof proc, "/proc/self/fd/%d", fd);
    in->path = strdup(path);
    in->reopen_path = strdup(proc);
    if (!in->path || !in->reopen_path) {
        soren_input_close(in);
        return soren_error_set(err, SOREN_ENOMEM, "out of memory opening input %s", path);
    }
    soren_status rc = map_fd(in, fd, path, err);
    if (rc != SOREN_OK)
        soren_input_close(in);
    return rc;
}

void soren_input_wrap(soren_input *in, const char *name, const void *data, uint64_t size)
{
    memset(in, 0, sizeof *in);
    in->path = name ? strdup(name) : NULL; /* NULL on exhaustion: messages say "(input)" */
    in->data = size ? data : NULL;
    in->size = size;
}

void soren_input_lay_out(soren_input *inputs, size_t n)
{
    uint64_t at = 0;
    for (size_t i = 0; i < n; i++) {
        inputs[i].base = at;
        at += inputs[i].size;
    }
}

void soren_input_slice(soren_input *out, const soren_input *in, uint64_t begin, uint64_t end)
{
    soren_input_wrap(out, in->path, in->data ? in->data + begin : NULL, end - begin);
    out->base = in->base + begin;
    out->file_offset = in->file_offset + begin;
    out->file_dev = in->file_dev;
    out->file_ino = in->file_ino;
    out->reopen_path = in->reopen_path ? strdup(in->reopen_path) : NULL;
}

int soren_input_reopen(const soren_input *in)
{
    const char *path = in->reopen_path ? in->reopen_path : in->path;
    if (!in->file_ino || !path)
        return -1;
    /* O_NONBLOCK: the path may name a FIFO by now */
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    struct stat st;
    if (fd >= 0 && (fstat(fd, &st) != 0 || (uint64_t)st.st_dev != in->file_dev ||
                    (uint64_t)st.st_ino != in->file_ino)) {
        close(fd);
        return -1;
    }
    /* Advice only, as for the mapping: a failure changes nothing. */
    if (fd >= 0)
        (void)posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
    return fd;
}

int soren_input_pread(int fd, const soren_input *in, uint64_t at, void *buf, uint64_t n)
{
    uint8_t *to = buf;
    for (uint64_t done = 0; done < n;) {
        ssize_t got = pread(fd, to + done, (size_t)(n - done),
                            (off_t)(in->file_offset + at + done));
        if (got < 0 && errno == EINTR)
            continue;
        if (got < 0)
            return errno;
        if (got == 0)
            return ENODATA;
        done += (uint64_t)got;
    }
    return 0;
}

void soren_input_tasks(soren_input *in, uint64_t tasks)
{
    memset(in, 0, sizeof *in);
    in->size = tasks;
}

soren_status soren_input_pairs(soren_input *in, const char *name, const soren_result *res,
                               soren_error *err)
{
    memset(in, 0, sizeof *in);
    uint64_t n = res->count;
    uint64_t key_total = n ? res->key_offset[n] : 0;
    uint64_t bytes = key_total + n * res->value_size;
    in->path = strdup(name);
    in->starts = malloc((n + 1) * sizeof *in->starts);
    in->owned_data = malloc(bytes ? bytes : 1);
    if (!in->path || !in->starts || !in->owned_data) {
        soren_input_close(in);
        return soren_error_set(err, SOREN_ENOMEM, "%s: out of memory passing %llu pairs (%llu "
                               "bytes) to the next stage", name, (unsigned long long)n,
                               (unsigned long long)bytes);
    }
    uint64_t at = 0;
    for (uint64_t i = 0; i < n; i++) {
        uint64_t k0 = res->key_offset[i], klen = res->key_offset[i + 1] - k0;
        in->starts[i] = at;
        if (klen)
            memcpy(in->owned_data + at, res->key_bytes + k0, (size_t)klen);
        memcpy(in->owned_data + at + klen, res->values + i * res->value_size, res->value_size);
        at += klen + res->value_size;
    }
    in->starts[n] = at;
    in->count = n;
    in->data = n ? in->owned_data : NULL;
    in->size = bytes;
    return SOREN_OK;
}

void soren_input_close(soren_input *in)
{
    if (in->mapping) {
        mapped_remove(in->mapping);
        munmap(in->mapping, (size_t)in->mapping_size);
    }
    free(in->starts);
    free(in->owned_data);
    free(in->path);
    free(in->reopen_path);
    memset(in, 0, sizeof *in);
}

soren_status soren_input_check(const soren_input *in, const soren_stage_spec *spec,
                               soren_error *err)
{
    if (spec->input_format != SOREN_INPUT_FIXED)
        return SOREN_OK;
    if (spec->record_size == 0)
        return soren_error_set(err, SOREN_EINPUT, "%s: the record size is 0",
                               input_name(in));
    if (in->size % spec->record_size != 0)
        return soren_error_set(err, SOREN_EINPUT,
                               "%s: size %llu is not a multiple of the record size %llu "
                               "(the last record is truncated)",
                               input_name(in), (unsigned long long)in->size,
                               (unsigned long long)spec->record_size);
    return SOREN_OK;
}

void soren_records_init(soren_records *it, const soren_stage_spec *spec, const uint8_t *buf,
                        uint64_t buf_size, uint64_t begin, uint64_t end)
{
    if (end > buf_size)
        end = buf_size;
    if (begin > end)
        begin = end;
    *it = (soren_records){
        .buf = buf,
        .buf_size = buf_size,
        .pos = end,
        .end = end,
        .format = spec->input_format,
        .record_size = spec->record_size,
    };
    if (begin >= end)
        return;
    if (it->format == SOREN_INPUT_LINES) {
        /* A line starts at 0 or right after a '\n'.  Look for that '\n' only
         * up to end - 1: one that lies further starts a line of the next
         * range, so a long line is not scanned by every range it crosses. */
        if (begin == 0) {
            it->pos = 0;
        } else {
            const uint8_t *nl = memchr(buf + begin - 1, '\n', (size_t)(end - begin));
            it->pos = nl ? (uint64_t)(nl - buf) + 1 : end;
        }
        it->scanned = it->pos;
    } else if (it->format == SOREN_INPUT_FIXED && it->record_size > 0) {
        uint64_t rs = it->record_size;
        uint64_t first = begin / rs + (begin % rs != 0);
        /* first * rs cannot overflow past end's magnitude by more than rs. */
        it->pos = first > end / rs ? end : first * rs;
    }
}

/* The first pair that starts at or after byte begin. */
static uint64_t first_pair_at(const soren_input *in, uint64_t begin)
{
    uint64_t lo = 0, hi = in->count;
    while (lo < hi) {
        uint64_t mid = lo + (hi - lo) / 2;
        if (in->starts[mid] < begin)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

void soren_records_init_input(soren_records *it, const soren_stage_spec *spec,
                              const soren_input *in, uint64_t begin, uint64_t end)
{
    soren_records_init(it, spec, in->data, in->size, begin, end);
    it->base = in->base;
    if (spec->input_format == SOREN_INPUT_INDEX) {
        it->pos = begin < it->end ? begin : it->end;
    } else if (spec->input_format == SOREN_INPUT_PAIRS) {
        it->starts = in->starts;
        it->count = in->count;
        it->pos = in->count && begin < it->end ? first_pair_at(in, begin) : in->count;
    }
}

uint64_t soren_records_left(const soren_records *it)
{
    if (it->pos >= it->end)
        return 0;
    if (it->format == SOREN_INPUT_INDEX)
        return it->end - it->pos;
    if (it->format != SOREN_INPUT_FIXED || it->record_size == 0)
        return 0;
    uint64_t rs = it->record_size;
    if (rs > it->buf_size - it->pos) /* a truncated last record is not a record */
        return 0;
    uint64_t last = it->buf_size - rs < it->end - 1 ? it->buf_size - rs : it->end - 1;
    return (last - it->pos) / rs + 1;
}

void soren_records_skip(soren_records *it, uint64_t n)
{
    it->pos += it->format == SOREN_INPUT_FIXED ? n * it->record_size : n;
}

#if defined(__SSE2__)
/* The '\n' bytes of the 64 at p, a bit each. */
static uint64_t newline_bits(const uint8_t *p)
{
    const __m128i nl = _mm_set1_epi8('\n');
    uint64_t bits = 0;
    for (int i = 0; i < 4; i++) {
        __m128i v = _mm_loadu_si128((const __m128i *)(p + 16 * i));
        bits |= (uint64_t)(uint16_t)_mm_movemask_epi8(_mm_cmpeq_epi8(v, nl)) << (16 * i);
    }
    return bits;
}
#endif

/* Where the line that starts at it->pos ends: its '\n', or the buffer's
 * end.  Lines are short (text's median is under 40 bytes), and a memchr
 * call for each costs more than its scan: the buffer is turned into bits
 * 64 bytes at a time, a line taking the next bit.  The bits of a block
 * that lie before it->pos were taken by the lines before. */
static uint64_t line_end(soren_records *it)
{
#if defined(__SSE2__)
    while (!it->newlines && it->buf_size - it->scanned >= 64) {
        it->newlines = newline_bits(it->buf + it->scanned);
        it->scanned += 64;
    }
    if (it->newlines) {
        uint64_t at = it->scanned - 64 + (uint64_t)__builtin_ctzll(it->newlines);
        it->newlines &= it->newlines - 1;
        return at;
    }
#endif
    /* the last bytes, under a block */
    uint64_t from = it->scanned > it->pos ? it->scanned : it->pos;
    const uint8_t *nl = memchr(it->buf + from, '\n', (size_t)(it->buf_size - from));
    uint64_t at = nl ? (uint64_t)(nl - it->buf) : it->buf_size;
    it->scanned = nl ? at + 1 : at;
    return at;
}

int soren_records_next(soren_records *it, soren_record *r)
{
    uint64_t pos = it->pos;
    if (it->format == SOREN_INPUT_PAIRS) {
        if (pos >= it->count || it->starts[pos] >= it->end)
            return 0;
        r->data = it->buf + it->starts[pos];
        r->size = it->starts[pos + 1] - it->starts[pos];
        r->offset = it->base + pos;
        r->index = it->base + pos;
        it->pos = pos + 1;
        return 1;
    }
    if (pos >= it->end)
        return 0;
    if (it->format == SOREN_INPUT_INDEX) {
        r->data = NULL;
        r->size = 0;
        r->offset = it->base + pos;
        r->index = it->base + pos;
        it->pos = pos + 1;
        return 1;
    }
    if (it->format == SOREN_INPUT_LINES) {
        uint64_t len = line_end(it) - pos;
        r->data = it->buf + pos;
        r->size = len;
        r->offset = it->base + pos;
        r->index = it->base + pos;
        it->pos = pos + len + 1;
        return 1;
    }
    if (it->format == SOREN_INPUT_FIXED && it->record_size > 0) {
        uint64_t rs = it->record_size;
        if (rs > it->buf_size - pos) { /* a truncated last record is not a record */
            it->pos = it->end;
            return 0;
        }
        r->data = it->buf + pos;
        r->size = rs;
        r->offset = it->base + pos;
        r->index = (it->base + pos) / rs; /* a slice starts on a record */
        it->pos = pos + rs;
        return 1;
    }
    it->pos = it->end;
    return 0;
}

uint64_t soren_record_boundary(const soren_stage_spec *spec, const soren_input *in, uint64_t at)
{
    if (at == 0 || at >= in->size)
        return at == 0 ? 0 : in->size;
    if (spec->input_format == SOREN_INPUT_LINES) {
        const uint8_t *nl = memchr(in->data + at - 1, '\n', (size_t)(in->size - at + 1));
        return nl ? (uint64_t)(nl - in->data) + 1 : in->size;
    }
    if (spec->input_format == SOREN_INPUT_FIXED && spec->record_size) {
        /* soren_input_check made the size a multiple of the record size. */
        uint64_t rs = spec->record_size;
        return (at / rs + (at % rs != 0)) * rs;
    }
    return at; /* tasks */
}

/* The chunks of one input, counted (out NULL) or written to out. */
static size_t chunk_input(const soren_stage_spec *spec, const soren_input *in,
                          uint64_t chunk_bytes, soren_input *out, uint64_t *largest)
{
    size_t k = 0;
    uint64_t begin = 0;
    do {
        uint64_t end = in->size - begin > chunk_bytes
                           ? soren_record_boundary(spec, in, begin + chunk_bytes)
                           : in->size;
        if (out)
            soren_input_slice(&out[k], in, begin, end);
        if (end - begin > *largest)
            *largest = end - begin;
        k++;
        begin = end;
    } while (begin < in->size);
    return k;
}

soren_status soren_input_chunks(const soren_stage_spec *spec, const soren_input *inputs,
                                size_t n, uint64_t chunk_bytes, soren_input **chunks,
                                size_t *count, uint64_t *largest, soren_error *err)
{
    *chunks = NULL;
    *count = 0;
    *largest = 0;
    if (chunk_bytes == 0)
        chunk_bytes = 1;
    size_t total = 0;
    for (size_t i = 0; i < n; i++)
        total += chunk_input(spec, &inputs[i], chunk_bytes, NULL, largest);
    if (total == 0)
        return SOREN_OK;
    soren_input *out = calloc(total, sizeof *out);
    if (!out)
        return soren_error_set(err, SOREN_ENOMEM, "out of memory planning %zu input chunks",
                               total);
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        k += chunk_input(spec, &inputs[i], chunk_bytes, out + k, largest);
    *chunks = out;
    *count = k;
    return SOREN_OK;
}

void soren_input_chunks_free(soren_input *chunks, size_t count)
{
    for (size_t i = 0; i < count; i++)
        soren_input_close(&chunks[i]);
    free(chunks);
}
