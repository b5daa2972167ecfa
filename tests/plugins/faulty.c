/* faulty (a test job for faults in plugin code and inputs that shrink):
 * counts lines by length, and misbehaves on the record at the byte offset
 * the environment names:
 *   SOREN_TEST_CRASH_AT=N     map dereferences NULL at the line at byte N;
 *   SOREN_TEST_OVERFLOW=1     map recurses without end (overflowing its
 *                             thread's stack) on any thread but the
 *                             process's first, which waits 0.5 s on the
 *                             line at byte 0 so that another thread maps;
 *   SOREN_TEST_SHRINK_AT=N    map truncates its input, SOREN_TEST_SHRINK_FILE,
 *                             to SOREN_TEST_SHRINK_TO bytes (default 0) at
 *                             the line at byte N;
 *   SOREN_TEST_HANG_AT=N      map never returns from the line at byte N;
 *   SOREN_TEST_SLOW_US=N      map takes N microseconds a line.
 * The CPU engine runs it (it has no GPU code). */
#include <soren/soren.h>

#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

static int at(const char *name, uint64_t offset)
{
    const char *v = getenv(name);
    return v && strtoull(v, NULL, 10) == offset;
}

/* Recurses until the stack ends; the volatile sum keeps every frame. */
static uint64_t deeper(volatile uint64_t n)
{
    volatile char frame[256];
    frame[0] = (char)n;
    return n == UINT64_MAX ? 0 : deeper(n + 1) + (uint64_t)frame[0];
}

/* The NULL store is the fault under test: UBSan, in the sanitizer build,
 * must let it happen rather than report it. */
__attribute__((no_sanitize("undefined")))
static void faulty_map(soren_emitter *e, const soren_record *r, const soren_params *p)
{
    (void)p;
    if (at("SOREN_TEST_CRASH_AT", r->offset))
        *(volatile int *)NULL = 1;
    if (getenv("SOREN_TEST_OVERFLOW")) {
        if (syscall(SYS_gettid) != getpid())
            (void)deeper(0);
        else if (r->offset == 0)
            usleep(500 * 1000);
    }
    if (at("SOREN_TEST_SHRINK_AT", r->offset)) {
        const char *to = getenv("SOREN_TEST_SHRINK_TO");
        if (truncate(getenv("SOREN_TEST_SHRINK_FILE"), to ? atoll(to) : 0) != 0)
            abort();
    }
    if (at("SOREN_TEST_HANG_AT", r->offset))
        for (;;)
            usleep(1000);
    const char *slow = getenv("SOREN_TEST_SLOW_US");
    if (slow)
        usleep((useconds_t)strtoul(slow, NULL, 10));
    uint32_t key = (uint32_t)r->size, one = 1;
    soren_emit(e, &key, sizeof key, &one);
}

SOREN_PLUGIN(faulty, SOREN_STAGE(.map = faulty_map, .combine = SOREN_SUM_U32,
                                 .key = SOREN_TYPE_U32))
