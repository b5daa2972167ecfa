/*
 * faults.c - libsoren-faults.so, a test-only library that makes one call of
 * a chosen class fail, LD_PRELOADed into soren-host by tests/faults.sh.
 * Nothing of it is in libsoren or soren-host: release builds are untouched.
 *
 *   SOREN_FAULT=CLASS:N    the Nth call of CLASS (from 1) fails
 *   SOREN_FAULT=count:CLASS  nothing fails; when main returns (or exit is
 *                          called), "soren-faults: CLASS N calls" goes to
 *                          standard error, so a test can try N = 1 .. count
 *
 * Classes, and how a call of each fails:
 *   malloc      malloc, calloc, realloc (not realloc to 0 bytes, a free):
 *               NULL with errno ENOMEM.  glibc allocates through these
 *               symbols, so strdup, asprintf, fopen's buffer and jansson's
 *               allocations are counted too.
 *   file        open, openat, fopen (EIO), read, pread, fread (EIO),
 *               fstat (EIO), mmap (ENOMEM), opendir (EIO), readdir (NULL,
 *               errno EIO):
 *               the calls that read files, as soren-host makes them.
 *               (glibc's own functions call their internal aliases, so
 *               only direct calls count: fopen once, not fopen and open.)
 *   cuda-alloc  cudaMalloc, cudaMallocHost, cudaHostAlloc, cudaHostRegister:
 *               cudaErrorMemoryAllocation.
 *   cuda-copy   cudaMemcpy, cudaMemcpyAsync: cudaErrorUnknown.
 *   pread       pread, pread64 (EIO) alone: the GPU engine's staging reads a
 *               mapped input's file this way.  The CUDA libraries' own
 *               start makes about 11 calls of it too, but none of the
 *               hundreds of opens and reads that file would fail inside
 *               them.
 *
 * Only calls made while main runs count, and none inside dlopen (see
 * there): the C library's start-up, the loader's and the libraries'
 * constructors allocate before main, and a failure there is not
 * soren-host's to handle.  __libc_start_main is interposed to wrap main.  Calls from several threads are counted
 * atomically (the tests run one CPU thread, so that N means the same call
 * in every run).
 *
 * The real functions are found with dlsym(RTLD_NEXT): libc's, or the
 * sanitizer runtime's where it comes next.  dlsym itself may allocate
 * before malloc is resolved; those few bytes come from a static arena that
 * free ignores.
 */
#include <cuda_runtime_api.h>
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <execinfo.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

typedef enum fault_class { FAULT_NONE, FAULT_MALLOC, FAULT_FILE, FAULT_CUDA_ALLOC,
                           FAULT_CUDA_COPY, FAULT_PREAD, FAULT_LAST = FAULT_PREAD } fault_class;
static const char *const class_names[] = {"",          "malloc",    "file",
                                          "cuda-alloc", "cuda-copy", "pread"};

static fault_class chosen;     /* the class that counts */
static int counting;           /* count:CLASS */
static unsigned long fail_at;  /* CLASS:N */
static unsigned long calls;    /* calls of the chosen class while armed */
static volatile int armed;     /* main is running */
static int trace;              /* SOREN_FAULT_TRACE */

/* ---- Deciding ----------------------------------------------------------- */

/* Reads SOREN_FAULT once, before main (getenv does not allocate). */
static void configure(void)
{
    const char *spec = getenv("SOREN_FAULT");
    if (!spec || !*spec)
        return;
    const char *colon = strchr(spec, ':');
    if (!colon)
        goto bad;
    counting = (size_t)(colon - spec) == 5 && memcmp(spec, "count", 5) == 0;
    const char *name = counting ? colon + 1 : spec;
    size_t len = counting ? strlen(name) : (size_t)(colon - spec);
    for (int c = FAULT_MALLOC; c <= FAULT_LAST; c++)
        if (strlen(class_names[c]) == len && memcmp(name, class_names[c], len) == 0)
            chosen = (fault_class)c;
    if (!counting) {
        char *end = NULL;
        fail_at = strtoul(colon + 1, &end, 10);
        if (*end || fail_at == 0)
            goto bad;
    }
    trace = getenv("SOREN_FAULT_TRACE") != NULL;
    if (chosen != FAULT_NONE)
        return;
bad: {
    static const char msg[] = "soren-faults: SOREN_FAULT must be CLASS:N or count:CLASS, CLASS "
                              "one of malloc, file, cuda-alloc, cuda-copy, pread\n";
    (void)!write(STDERR_FILENO, msg, sizeof msg - 1);
    _exit(125);
}
}

/* The stack of the call that fails, as addresses and symbols
 * (backtrace_symbols_fd writes without allocating; backtrace may load
 * libgcc's unwinder the first time, after the failure is decided). */
static void trace_call(void)
{
    void *frames[32];
    int n = backtrace(frames, 32);
    static const char head[] = "soren-faults: the failing call:\n";
    (void)!write(STDERR_FILENO, head, sizeof head - 1);
    backtrace_symbols_fd(frames, n, STDERR_FILENO);
}

/* 1 if this call of class c is the one that fails. */
static int should_fail(fault_class c)
{
    if (!armed || c != chosen)
        return 0;
    unsigned long n = __atomic_add_fetch(&calls, 1, __ATOMIC_RELAXED);
    if (counting || n != fail_at)
        return 0;
    if (trace)
        trace_call();
    return 1;
}

/* Once, when main returns or exit is called (whichever comes first);
 * write(2) only: allocating is no longer safe there. */
static void report_count(void)
{
    if (!armed)
        return;
    armed = 0;
    if (!counting)
        return;
    char line[96];
    int n = snprintf(line, sizeof line, "soren-faults: %s %lu calls\n", class_names[chosen],
                     __atomic_load_n(&calls, __ATOMIC_RELAXED));
    (void)!write(STDERR_FILENO, line, (size_t)n);
}

/* ---- main --------------------------------------------------------------- */

typedef int main_fn(int, char **, char **);
typedef int start_fn(main_fn *, int, char **, void (*)(void), void (*)(void), void (*)(void),
                     void *);
static main_fn *real_main;

static int counted_main(int argc, char **argv, char **envp)
{
    atexit(report_count); /* soren-host may call exit instead of returning */
    armed = 1;
    int rc = real_main(argc, argv, envp);
    report_count();
    return rc;
}

int __libc_start_main(main_fn *main, int argc, char **argv, void (*init)(void),
                      void (*fini)(void), void (*rtld_fini)(void), void *stack_end)
{
    start_fn *next = (start_fn *)dlsym(RTLD_NEXT, "__libc_start_main");
    configure();
    real_main = main;
    return next(counted_main, argc, argv, init, fini, rtld_fini, stack_end);
}

/* ---- Host memory -------------------------------------------------------- */

static _Alignas(16) char arena[4096];
static size_t arena_used;
/* volatile: dlsym calls back into malloc and free, which must see it set;
 * without it the compiler kept the store from dlsym's view, and free
 * recursed into dlsym for ever. */
static volatile int resolving;

static void *arena_alloc(size_t size)
{
    size = (size + 15) & ~(size_t)15;
    if (size > sizeof arena - arena_used)
        return NULL;
    void *p = arena + arena_used;
    arena_used += size;
    return p; /* static storage: already zero, as calloc wants */
}

static int in_arena(const void *p)
{
    return (const char *)p >= arena && (const char *)p < arena + sizeof arena;
}

/* The next definition of name; NULL while dlsym is already running (it
 * may allocate: the caller then serves the arena). */
static void *next_fn(void **slot, const char *name)
{
    if (!*slot && !resolving) {
        resolving = 1;
        *slot = dlsym(RTLD_NEXT, name);
        resolving = 0;
    }
    return *slot;
}

static void *real_malloc_fn, *real_calloc_fn, *real_realloc_fn, *real_free_fn;

void *malloc(size_t size)
{
    void *(*real)(size_t) = (void *(*)(size_t))next_fn(&real_malloc_fn, "malloc");
    if (!real)
        return arena_alloc(size);
    if (should_fail(FAULT_MALLOC)) {
        errno = ENOMEM;
        return NULL;
    }
    return real(size);
}

void *calloc(size_t n, size_t size)
{
    void *(*real)(size_t, size_t) =
        (void *(*)(size_t, size_t))next_fn(&real_calloc_fn, "calloc");
    if (!real)
        return size && n > SIZE_MAX / size ? NULL : arena_alloc(n * size);
    if (should_fail(FAULT_MALLOC)) {
        errno = ENOMEM;
        return NULL;
    }
    return real(n, size);
}

void *realloc(void *p, size_t size)
{
    void *(*real)(void *, size_t) =
        (void *(*)(void *, size_t))next_fn(&real_realloc_fn, "realloc");
    if (in_arena(p)) { /* an arena block moves to the heap */
        void *q = malloc(size);
        size_t left = (size_t)(arena + sizeof arena - (char *)p);
        if (q)
            memcpy(q, p, size < left ? size : left);
        return q;
    }
    if (!real)
        return NULL;
    if (size > 0 && should_fail(FAULT_MALLOC)) {
        errno = ENOMEM;
        return NULL;
    }
    return real(p, size);
}

void free(void *p)
{
    void (*real)(void *) = (void (*)(void *))next_fn(&real_free_fn, "free");
    if (p && !in_arena(p) && real)
        real(p);
}

/* ---- Files -------------------------------------------------------------- */

/* The real function called name, of type T (file calls never come before
 * malloc is resolved, so dlsym is safe here). */
#define NEXT(T, name) ((T)dlsym(RTLD_NEXT, name))

static int fail_file(int e)
{
    errno = e;
    return -1;
}

/* open and openat take a mode only with O_CREAT or O_TMPFILE. */
static mode_t mode_arg(int flags, va_list ap)
{
    return (flags & O_CREAT) || (flags & O_TMPFILE) == O_TMPFILE ? va_arg(ap, mode_t) : 0;
}

#define DEFINE_OPEN(name)                                                                  \
    int name(const char *path, int flags, ...)                                             \
    {                                                                                      \
        va_list ap;                                                                        \
        va_start(ap, flags);                                                               \
        mode_t mode = mode_arg(flags, ap);                                                 \
        va_end(ap);                                                                        \
        if (should_fail(FAULT_FILE))                                                       \
            return fail_file(EIO);                                                         \
        return NEXT(int (*)(const char *, int, ...), #name)(path, flags, mode);            \
    }
#define DEFINE_OPENAT(name)                                                                \
    int name(int dirfd, const char *path, int flags, ...)                                  \
    {                                                                                      \
        va_list ap;                                                                        \
        va_start(ap, flags);                                                               \
        mode_t mode = mode_arg(flags, ap);                                                 \
        va_end(ap);                                                                        \
        if (should_fail(FAULT_FILE))                                                       \
            return fail_file(EIO);                                                         \
        return NEXT(int (*)(int, const char *, int, ...), #name)(dirfd, path, flags, mode); \
    }
DEFINE_OPEN(open)
DEFINE_OPEN(open64)
DEFINE_OPENAT(openat)
DEFINE_OPENAT(openat64)

#define DEFINE_FOPEN(name)                                                                 \
    FILE *name(const char *path, const char *mode)                                         \
    {                                                                                      \
        if (should_fail(FAULT_FILE)) {                                                     \
            errno = EIO;                                                                   \
            return NULL;                                                                   \
        }                                                                                  \
        return NEXT(FILE * (*)(const char *, const char *), #name)(path, mode);            \
    }
DEFINE_FOPEN(fopen)
DEFINE_FOPEN(fopen64)

ssize_t read(int fd, void *buf, size_t size)
{
    if (should_fail(FAULT_FILE))
        return fail_file(EIO);
    return NEXT(ssize_t(*)(int, void *, size_t), "read")(fd, buf, size);
}

#define DEFINE_PREAD(name, off_type)                                                       \
    ssize_t name(int fd, void *buf, size_t size, off_type off)                             \
    {                                                                                      \
        if (should_fail(FAULT_FILE) || should_fail(FAULT_PREAD))                           \
            return fail_file(EIO);                                                         \
        return NEXT(ssize_t(*)(int, void *, size_t, off_type), #name)(fd, buf, size, off); \
    }
DEFINE_PREAD(pread, off_t)
DEFINE_PREAD(pread64, off64_t)

/* A failed fread reads nothing and sets the stream's error flag, as a
 * failed read(2) under it would. */
size_t fread(void *buf, size_t size, size_t n, FILE *f)
{
    if (should_fail(FAULT_FILE)) {
        errno = EIO;
        f->_flags |= _IO_ERR_SEEN;
        return 0;
    }
    return NEXT(size_t(*)(void *, size_t, size_t, FILE *), "fread")(buf, size, n, f);
}

#define DEFINE_FSTAT(name, st_type)                                                        \
    int name(int fd, struct st_type *st)                                                   \
    {                                                                                      \
        if (should_fail(FAULT_FILE))                                                       \
            return fail_file(EIO);                                                         \
        return NEXT(int (*)(int, struct st_type *), #name)(fd, st);                        \
    }
DEFINE_FSTAT(fstat, stat)
DEFINE_FSTAT(fstat64, stat64)

#define DEFINE_MMAP(name, off_type)                                                        \
    void *name(void *addr, size_t size, int prot, int flags, int fd, off_type off)         \
    {                                                                                      \
        if (should_fail(FAULT_FILE)) {                                                     \
            errno = ENOMEM;                                                                \
            return MAP_FAILED;                                                             \
        }                                                                                  \
        return NEXT(void *(*)(void *, size_t, int, int, int, off_type), #name)(            \
            addr, size, prot, flags, fd, off);                                             \
    }
DEFINE_MMAP(mmap, off_t)
DEFINE_MMAP(mmap64, off64_t)

DIR *opendir(const char *path)
{
    if (should_fail(FAULT_FILE)) {
        errno = EIO;
        return NULL;
    }
    return NEXT(DIR * (*)(const char *), "opendir")(path);
}

#define DEFINE_READDIR(name, entry)                                                        \
    struct entry *name(DIR *d)                                                             \
    {                                                                                      \
        if (should_fail(FAULT_FILE)) {                                                     \
            errno = EIO;                                                                   \
            return NULL;                                                                   \
        }                                                                                  \
        return NEXT(struct entry * (*)(DIR *), #name)(d);                                  \
    }
DEFINE_READDIR(readdir, dirent)
DEFINE_READDIR(readdir64, dirent64)

/* ---- Libraries ---------------------------------------------------------- */

/* dlopen runs the plugin's constructors, where the CUDA runtime registers
 * its kernels; the runtime does not survive a failed allocation there (it
 * dereferences the NULL), and no caller could help that.  So nothing
 * counts while dlopen runs (soren-host opens plugins from one thread). */
void *dlopen(const char *path, int flags)
{
    int was = armed;
    armed = 0;
    void *h = NEXT(void *(*)(const char *, int), "dlopen")(path, flags);
    armed = was;
    return h;
}

/* ---- The CUDA runtime --------------------------------------------------- */

#define DEFINE_CUDA(cls, err, name, params, args)                                          \
    cudaError_t name params                                                                \
    {                                                                                      \
        if (should_fail(cls))                                                              \
            return err;                                                                    \
        return NEXT(cudaError_t(*) params, #name) args;                                    \
    }
DEFINE_CUDA(FAULT_CUDA_ALLOC, cudaErrorMemoryAllocation, cudaMalloc, (void **p, size_t size),
            (p, size))
DEFINE_CUDA(FAULT_CUDA_ALLOC, cudaErrorMemoryAllocation, cudaMallocHost,
            (void **p, size_t size), (p, size))
DEFINE_CUDA(FAULT_CUDA_ALLOC, cudaErrorMemoryAllocation, cudaHostAlloc,
            (void **p, size_t size, unsigned int flags), (p, size, flags))
DEFINE_CUDA(FAULT_CUDA_ALLOC, cudaErrorMemoryAllocation, cudaHostRegister,
            (void *p, size_t size, unsigned int flags), (p, size, flags))
DEFINE_CUDA(FAULT_CUDA_COPY, cudaErrorUnknown, cudaMemcpy,
            (void *dst, const void *src, size_t size, enum cudaMemcpyKind kind),
            (dst, src, size, kind))
DEFINE_CUDA(FAULT_CUDA_COPY, cudaErrorUnknown, cudaMemcpyAsync,
            (void *dst, const void *src, size_t size, enum cudaMemcpyKind kind,
             cudaStream_t stream),
            (dst, src, size, kind, stream))
