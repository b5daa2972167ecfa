/*
 * input.h - input files mapped into memory, and the records in them.
 *
 * Inputs are mmapped read-only (an empty file maps to size 0 with no
 * mapping).  Records are found by soren_records_*: a range [begin, end) of a
 * buffer owns every record that *starts* inside it, so cutting a buffer into
 * ranges anywhere visits each record exactly once.
 *
 *  lines: a record ends before '\n' or at the end of the buffer; a last line
 *         without '\n' counts; an empty buffer has no records; '\r' is an
 *         ordinary byte.
 *  fixed: records of record_size bytes; a size that is not a multiple of it
 *         is an input error (soren_input_check).
 *  index: no bytes: an input of `size` tasks (soren_input_tasks), record i
 *         has data NULL, size 0, offset and index i.  Ranges count tasks.
 *  pairs: a previous stage's result packed (soren_input_pairs): pair i is
 *         record i, [key bytes][value bytes] at starts[i], its size the key's
 *         size plus the value's, offset and index i.  Ranges count bytes.
 *
 * The whole input is every input laid end to end in the order given (the
 * bytes standard input would carry).  base is where an input's first byte
 * (task, pair) lies in the whole (soren_input_lay_out sets it for a run's
 * inputs), and a slice of an input (a chunk, a rank's share under MPI, see
 * engine/dist.h) adds its place in that input: records report their offset
 * and index in the whole, so a job that emits offsets or computes from task
 * numbers gets the same pairs from several files, one stream, chunks or
 * slices.  Ranges and positions stay relative to data.
 */
#ifndef SOREN_INPUT_H
#define SOREN_INPUT_H

#include <stddef.h>
#include <stdint.h>

#include "../base/result.h"
#include "../base/stage.h"
#include "../error.h"

typedef struct soren_input {
    char *path;           /* owned copy */
    const uint8_t *data;  /* NULL when size == 0 */
    uint64_t size;
    void *mapping;        /* private: what munmap releases */
    uint64_t mapping_size;
    /* pairs: record i is data[starts[i] .. starts[i + 1]), i < count */
    uint64_t *starts;     /* owned, with data (owned_data) */
    uint64_t count;
    uint8_t *owned_data;
    /* data is device memory (the library's soren_job_input_device): only
     * the GPU engine reads it, in place */
    int on_device;
    /* pairs in device memory (a stage's pairs that the GPU engine left for
     * the next, soren_gpu_session_pairs_input): their starts, device memory
     * too, not owned; starts is then NULL */
    const uint64_t *device_starts;
    /* the position of data[0] (task 0, pair 0) in the whole input */
    uint64_t base;
    /* the position of data[0] in the input it was opened as (a slice's
     * place in its file): what soren_input_pread reads from */
    uint64_t file_offset;
    /* A mapped file's identity (st_dev, st_ino; both 0 for other inputs),
     * which its slices carry: data is then the file's bytes [file_offset,
     * file_offset + size).  A reader that copies them all out (the GPU engine's staging)
     * reads the file (soren_input_reopen, soren_input_pread) rather than the
     * mapping: every page of a mapping that is touched must be mapped, and
     * unmapped again at munmap (8 GiB: 2M page entries, tens of ms). */
    uint64_t file_dev, file_ino;
    /* what soren_input_reopen opens where it is not path (owned): the
     * /proc/self/fd name of an input opened by descriptor */
    char *reopen_path;
} soren_input;

/* Maps path read-only.  Directories, FIFOs and unreadable files are input
 * errors that name the path. */
soren_status soren_input_open(soren_input *in, const char *path, soren_error *err);
/* Maps the file open at fd, which the caller keeps (the resident host's
 * client opened it); path names it in messages.  The input reads the file
 * again through /proc/self/fd (soren_input_reopen), so fd must stay open
 * until the input is closed. */
soren_status soren_input_open_fd(soren_input *in, int fd, const char *path, soren_error *err);
/* Wraps bytes the caller keeps alive (tests, stdin slurps).  No copy. */
void soren_input_wrap(soren_input *in, const char *name, const void *data, uint64_t size);
/* Lays inputs end to end: each one's base is the total size of those
 * before it, so their records are numbered in the whole input. */
void soren_input_lay_out(soren_input *inputs, size_t n);
/* in's bytes [begin, end) as a slice of it (see base): out borrows in's
 * data and file, and must not outlive in. */
void soren_input_slice(soren_input *out, const soren_input *in, uint64_t begin, uint64_t end);
/* The file that in maps, opened again by its path for soren_input_pread: a
 * descriptor the caller closes, or -1 where in maps no file or the path now
 * names another one (the mapping is then what holds the bytes). */
int soren_input_reopen(const soren_input *in);
/* Reads in's bytes [at, at + n) (positions in data) into buf from fd, a
 * descriptor of soren_input_reopen: 0, or the errno of the failure
 * (ENODATA where the file ends first: it shrank since it was mapped). */
int soren_input_pread(int fd, const soren_input *in, uint64_t at, void *buf, uint64_t n);
/* An index input of tasks tasks (size counts tasks; there are no bytes). */
void soren_input_tasks(soren_input *in, uint64_t tasks);
/* Packs a stage's result, pair by pair in its order, as the pairs input of
 * the next stage (a copy: the result may be freed afterwards). */
soren_status soren_input_pairs(soren_input *in, const char *name, const soren_result *res,
                               soren_error *err);
/* Safe on a zeroed input and after a failed soren_input_open. */
void soren_input_close(soren_input *in);

/* An input error where the file that in maps (or a slice of it) shrank
 * while mapped, which soren__input_fault saw; SOREN_OK otherwise.  job
 * names the job in the message. */
soren_status soren_input_check_shrunk(const soren_input *in, const char *job, soren_error *err);
/* For a SIGBUS handler: where addr lies in a mapped input, maps zeros over
 * its pages from addr's on, marks the input shrunk and returns 1; else 0.
 * Async-signal-safe. */
int soren__input_fault(const void *addr);

/* Checks the input against the stage's record format (fixed: size is a
 * multiple of record_size), naming the file in the error. */
soren_status soren_input_check(const soren_input *in, const soren_stage_spec *spec,
                               soren_error *err);

/* Iterator over the records that start in [begin, end) of buf. */
typedef struct soren_records {
    const uint8_t *buf;
    uint64_t buf_size;
    uint64_t pos;  /* start of the next record (pairs: its number) */
    uint64_t end;  /* records starting at or after end belong to the next range */
    soren_input_format format;
    uint64_t record_size;
    const uint64_t *starts; /* pairs */
    uint64_t count;         /* pairs */
    uint64_t base;          /* added to each record's offset and index (a slice's base) */
    /* lines: the '\n' bytes of [scanned - 64, scanned) not yet given, a
     * bit each (line_end) */
    uint64_t scanned, newlines;
} soren_records;

/* Lines and fixed records of a buffer. */
void soren_records_init(soren_records *it, const soren_stage_spec *spec, const uint8_t *buf,
                        uint64_t buf_size, uint64_t begin, uint64_t end);
/* Records of any format in [begin, end) of an input (units as above),
 * numbered in the whole input where it is a slice (its base). */
void soren_records_init_input(soren_records *it, const soren_stage_spec *spec,
                              const soren_input *in, uint64_t begin, uint64_t end);
/* Fills *r with the next record; returns 0 when none is left. */
int soren_records_next(soren_records *it, soren_record *r);
/* For fixed records and tasks, whose records lie a stride apart: how many
 * records soren_records_next has left to give; 0 for other formats. */
uint64_t soren_records_left(const soren_records *it);
/* Passes over the next n records (at most soren_records_left). */
void soren_records_skip(soren_records *it, uint64_t n);

/* The first record start at or after byte at of in, by the rule above (a
 * line starts at 0 or after a '\n', a fixed record at a multiple of its
 * size), or in->size; at itself for index input.  Where a slice of in
 * (an MPI rank's, a chunk) begins and ends, so each record lies in one. */
uint64_t soren_record_boundary(const soren_stage_spec *spec, const soren_input *in, uint64_t at);

/* Cuts lines or fixed inputs into chunks that begin on record starts, so
 * each record lies in one chunk: a chunk runs from its start to the first
 * record start at least chunk_bytes (0 counts as 1) further on, or to its
 * input's end, so a record that crosses that point lengthens its chunk,
 * and an input of at most chunk_bytes is one chunk.  Each chunk refers to its input's
 * bytes (which must outlive it), keeps its path for messages, and counts
 * its records in the whole input (base).  *chunks is malloc'd with *count
 * entries (none for no inputs); *largest is the most bytes of one.  Free
 * with soren_input_chunks_free. */
soren_status soren_input_chunks(const soren_stage_spec *spec, const soren_input *inputs,
                                size_t n, uint64_t chunk_bytes, soren_input **chunks,
                                size_t *count, uint64_t *largest, soren_error *err);
void soren_input_chunks_free(soren_input *chunks, size_t count);

#endif /* SOREN_INPUT_H */
