#include "testutil.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static const char *env_or_dot(const char *name)
{
    const char *v = getenv(name);
    return v && *v ? v : ".";
}

const char *tu_builddir(void) { return env_or_dot("SOREN_BUILDDIR"); }
const char *tu_srcdir(void) { return env_or_dot("SOREN_SRCDIR"); }

const char *tu_host(void)
{
    static char path[4096];
    snprintf(path, sizeof path, "%s/soren-host", tu_builddir());
    return path;
}

char *tu_mkdtemp(void)
{
    const char *tmp = getenv("TMPDIR");
    char *path = NULL;
    cr_assert(asprintf(&path, "%s/soren-test-XXXXXX", tmp && *tmp ? tmp : "/tmp") > 0);
    cr_assert_not_null(mkdtemp(path), "mkdtemp %s: %s", path, strerror(errno));
    return path;
}

void tu_rmtree(const char *path)
{
    if (path && *path)
        tu_runf(NULL, NULL, "rm -rf '%s'", path);
}

void tu_write(const char *path, const void *data, size_t size)
{
    FILE *f = fopen(path, "wb");
    cr_assert_not_null(f, "cannot write %s: %s", path, strerror(errno));
    cr_assert_eq(fwrite(data, 1, size, f), size, "short write to %s", path);
    cr_assert_eq(fclose(f), 0, "closing %s: %s", path, strerror(errno));
}

static char *slurp(FILE *f, size_t *size)
{
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap);
    cr_assert_not_null(buf);
    for (;;) {
        if (cap - n < 4096) {
            cap *= 2;
            buf = realloc(buf, cap);
            cr_assert_not_null(buf);
        }
        size_t got = fread(buf + n, 1, cap - n - 1, f);
        n += got;
        if (got == 0)
            break;
    }
    buf[n] = '\0';
    if (size)
        *size = n;
    return buf;
}

char *tu_read(const char *path, size_t *size)
{
    FILE *f = fopen(path, "rb");
    cr_assert_not_null(f, "cannot read %s: %s", path, strerror(errno));
    char *buf = slurp(f, size);
    fclose(f);
    return buf;
}

int tu_run(const char *cmd, char **out, char **err)
{
    char *dir = tu_mkdtemp();
    char *full = NULL, *outp = NULL, *errp = NULL;
    cr_assert(asprintf(&outp, "%s/out", dir) > 0 && asprintf(&errp, "%s/err", dir) > 0);
    cr_assert(asprintf(&full, "(%s) >'%s' 2>'%s' </dev/null", cmd, outp, errp) > 0);
    int status = system(full);
    cr_assert_neq(status, -1, "system(%s) failed", cmd);
    if (out)
        *out = tu_read(outp, NULL);
    if (err)
        *err = tu_read(errp, NULL);
    free(full);
    free(outp);
    free(errp);
    char *rm = NULL;
    cr_assert(asprintf(&rm, "rm -rf '%s'", dir) > 0);
    (void)!system(rm);
    free(rm);
    free(dir);
    if (WIFSIGNALED(status))
        return 128 + WTERMSIG(status);
    return WEXITSTATUS(status);
}

int tu_runf(char **out, char **err, const char *fmt, ...)
{
    va_list ap;
    char *cmd = NULL;
    va_start(ap, fmt);
    int n = vasprintf(&cmd, fmt, ap);
    va_end(ap);
    cr_assert(n >= 0);
    int rc = tu_run(cmd, out, err);
    free(cmd);
    return rc;
}

void tu_gen(const char *path, const char *args)
{
    char *err = NULL;
    int rc = tu_runf(NULL, &err, "'%s/soren-gen' %s -o '%s'", tu_builddir(), args, path);
    cr_assert_eq(rc, 0, "soren-gen %s: exit %d: %s", args, rc, err);
    free(err);
}

json_t *tu_explain_schema(void)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/share/explain.schema.json", tu_srcdir());
    json_error_t why;
    json_t *schema = json_load_file(path, JSON_REJECT_DUPLICATES, &why);
    cr_assert_not_null(schema, "%s: %s (line %d)", path, why.text, why.line);
    return schema;
}

char *tu_lines_of_lengths(uint32_t keys, uint32_t reps, size_t *size)
{
    *size = (size_t)reps * keys * (keys + 1) / 2;
    char *text = malloc(*size);
    cr_assert_not_null(text);
    size_t at = 0;
    for (uint32_t r = 0; r < reps; r++)
        for (uint32_t len = 1; len <= keys; len++) {
            memset(text + at, 'a' + (char)(len % 26), len - 1);
            text[at + len - 1] = '\n';
            at += len;
        }
    return text;
}

uint64_t tu_rand(uint64_t *state)
{
    uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

uint64_t tu_rand_below(uint64_t *state, uint64_t n)
{
    return n ? tu_rand(state) % n : 0;
}

float tu_rand_float(uint64_t *state)
{
    return (float)((int32_t)(tu_rand(state) >> 40) - (1 << 23)) / (float)(1 << 23);
}

size_t tu_test_bytes(long default_mb)
{
    const char *mb = getenv("SOREN_TEST_MB");
    long n = mb && *mb ? atol(mb) : default_mb;
    return (size_t)(n > 0 ? n : 1) << 20;
}
