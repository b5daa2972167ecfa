/*
 * new.c - `soren-host new NAME`: a plugin folder to start from.
 *
 * Writes DIR/NAME/ (DIR: --dir, else the current folder) holding
 *   NAME.cu    the skeleton (templates/plugin.cu), or with --from EXAMPLE
 *              that installed example's source (examples/EXAMPLE.cu)
 *   NAME.json  its manifest
 *   Makefile   a few lines that include plugin.mk, found with pkg-config
 *   README.md  how to build, check, run and install the job
 * from the files under the data folder (datadir), with @NAME@
 * replaced by the job's name and @IDENT@ by a C identifier made from it.
 * An example becomes a template first: its SOREN_PLUGIN name becomes @NAME@,
 * every identifier that starts with its name starts with @IDENT@ instead,
 * and its manifest's "EXAMPLE" and "EXAMPLE.so" strings become the new ones.
 *
 * Everything is read and checked (the manifest with the manifest parser)
 * before the folder is made, and a failure while writing removes what was
 * written, so a second try starts clean.  An existing NAME is refused, never
 * overwritten.  The folder and its files get no group or other write
 * permission, whatever the umask: soren-host refuses to load a plugin that
 * others can change.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/commands.h"
#include "file.h"
#include "plugin/manifest.h"

#define NAME_MAX_BYTES 64 /* as the manifest allows (manifest.c) */
#define EXIT_USAGE 2

/* The folder of soren-host's templates, examples and plugin.mk:
 * $SOREN_DATADIR where set (tests, a moved installation), else the
 * configured $(pkgdatadir). */
static const char *datadir(void)
{
    const char *dir = getenv("SOREN_DATADIR");
    return dir && *dir ? dir : SOREN_PKGDATADIR;
}

static int say_error(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int say_error(int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("soren-host: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    if (code == EXIT_USAGE)
        fputs("Try 'soren-host --help'.\n", stderr);
    va_end(ap);
    return code;
}

/* ---- Names ---------------------------------------------------------------- */

static int lower_or_digit(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
}

/* The manifest's rule for a job name: ^[a-z0-9][a-z0-9_-]*$, at most 64
 * bytes.  It also makes the name a safe file name (no '/', no "..").  */
static int valid_job_name(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n > NAME_MAX_BYTES || !lower_or_digit(s[0]))
        return 0;
    for (size_t i = 1; i < n; i++)
        if (!lower_or_digit(s[i]) && s[i] != '_' && s[i] != '-')
            return 0;
    return 1;
}

/* A C identifier for the job's functions: '-' becomes '_', and a name that
 * starts with a digit gets "job_" in front. */
static void make_ident(const char *name, char *ident, size_t size)
{
    size_t at = 0;
    if (name[0] >= '0' && name[0] <= '9')
        at = (size_t)snprintf(ident, size, "job_");
    for (const char *p = name; *p && at + 1 < size; p++)
        ident[at++] = *p == '-' ? '_' : *p;
    ident[at] = '\0';
}

/* ---- Text ----------------------------------------------------------------- */

/* The kit's templates and examples, as core/file.h reads them: a few kB
 * each, so anything near the cap is not one. */
static const soren_file_rules kit_file = {
    .what = "a template",
    .max = 16u << 20,
    .kind_code = SOREN_EIO,
    .size_code = SOREN_EIO,
    .read_code = SOREN_EIO,
};

static int ident_char(char c)
{
    return c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

/* A copy of text with each `from` replaced by `to`; with at_word_start,
 * only where `from` begins an identifier (so "grep" becomes "@IDENT@" in
 * grep_map but not in egrep).  NULL when out of memory. */
static char *replace_all(const char *text, const char *from, const char *to, int at_word_start)
{
    size_t nf = strlen(from), nt = strlen(to), n = strlen(text);
    size_t count = 0;
    for (const char *p = strstr(text, from); p; p = strstr(p + nf, from))
        count++;
    /* Room for every match replaced: at most count * nt more bytes. */
    char *out = malloc(n + count * nt + 1);
    if (!out)
        return NULL;
    size_t at = 0;
    const char *p = text;
    for (const char *m = strstr(p, from); m; m = strstr(p, from)) {
        int replace = !at_word_start || m == text || !ident_char(m[-1]);
        size_t keep = (size_t)(m - p) + (replace ? 0 : nf);
        memcpy(out + at, p, keep);
        at += keep;
        if (replace) {
            memcpy(out + at, to, nt);
            at += nt;
        }
        p = m + nf;
    }
    strcpy(out + at, p);
    return out;
}

/* Replaces *text with replace_all's result; 0, or -1 when out of memory
 * (and *text is then freed and NULL). */
static int replace_in(char **text, const char *from, const char *to, int at_word_start)
{
    char *next = *text ? replace_all(*text, from, to, at_word_start) : NULL;
    free(*text);
    *text = next;
    return next ? 0 : -1;
}

/* ---- The files -------------------------------------------------------------- */

enum { FILE_CU, FILE_JSON, FILE_MAKEFILE, FILE_README, FILE_COUNT };

typedef struct kit {
    const char *name;
    char ident[NAME_MAX_BYTES + 8];
    char *text[FILE_COUNT];     /* what goes into each file */
    char *folder;               /* DIR/NAME */
    char *path[FILE_COUNT];     /* where each goes */
    int written[FILE_COUNT];    /* created, so removed on a failure */
    int folder_made;
} kit;

static void kit_destroy(kit *k)
{
    for (int i = 0; i < FILE_COUNT; i++) {
        free(k->text[i]);
        free(k->path[i]);
    }
    free(k->folder);
}

/* Reads DATADIR/sub/file into k->text[which]; an exit code on failure. */
static int load(kit *k, int which, const char *sub, const char *file)
{
    char *path = NULL;
    if (asprintf(&path, "%s/%s/%s", datadir(), sub, file) < 0)
        return say_error(1, "out of memory");
    soren_error err = {0};
    int rc = 0;
    if (soren__file_read(path, &kit_file, &k->text[which], NULL, &err) != SOREN_OK)
        rc = say_error(1, "%s; is Soren installed (make install)? SOREN_DATADIR, where set, "
                          "must name the folder that holds %s/",
                       err.text, sub);
    free(path);
    return rc;
}

/* Lists the examples (DATADIR/examples/NAME.cu) after an unknown --from. */
static int unknown_example(const char *from)
{
    char *path = NULL;
    if (asprintf(&path, "%s/examples/%s.cu", datadir(), from) < 0)
        return say_error(1, "out of memory");
    int rc = say_error(EXIT_USAGE, "--from %s: no such example (%s does not exist); the "
                                   "examples are wordcount, grep, histogram and stringmatch",
                       from, path);
    free(path);
    return rc;
}

/* The example's source and manifest, turned into templates. */
static int load_example(kit *k, const char *from)
{
    char file[NAME_MAX_BYTES + 8], quoted[NAME_MAX_BYTES + 8], library[NAME_MAX_BYTES + 8],
        plugin[NAME_MAX_BYTES + 24];
    snprintf(file, sizeof file, "%s.cu", from);
    char *probe = NULL;
    if (asprintf(&probe, "%s/examples/%s", datadir(), file) < 0)
        return say_error(1, "out of memory");
    int missing = access(probe, F_OK) != 0 && errno == ENOENT;
    free(probe);
    if (missing)
        return unknown_example(from);
    int rc = load(k, FILE_CU, "examples", file);
    snprintf(file, sizeof file, "%s.json", from);
    if (rc == 0)
        rc = load(k, FILE_JSON, "examples", file);
    if (rc != 0)
        return rc;
    snprintf(plugin, sizeof plugin, "SOREN_PLUGIN(%s", from);
    snprintf(quoted, sizeof quoted, "\"%s\"", from);
    snprintf(library, sizeof library, "\"%s.so\"", from);
    if (replace_in(&k->text[FILE_CU], plugin, "SOREN_PLUGIN(@NAME@", 0) != 0 ||
        replace_in(&k->text[FILE_CU], from, "@IDENT@", 1) != 0 ||
        replace_in(&k->text[FILE_JSON], quoted, "\"@NAME@\"", 0) != 0 ||
        replace_in(&k->text[FILE_JSON], library, "\"@NAME@.so\"", 0) != 0)
        return say_error(1, "out of memory");
    return 0;
}

/* Fills in @NAME@ and @IDENT@ everywhere. */
static int instantiate(kit *k)
{
    for (int i = 0; i < FILE_COUNT; i++)
        if (replace_in(&k->text[i], "@NAME@", k->name, 0) != 0 ||
            replace_in(&k->text[i], "@IDENT@", k->ident, 0) != 0)
            return say_error(1, "out of memory");
    return 0;
}

/* The manifest about to be written must be one soren-host accepts, named
 * NAME, with library NAME.so: a broken template is caught here, not at the
 * user's first run. */
static int check_manifest(const kit *k)
{
    char source[NAME_MAX_BYTES + 8];
    snprintf(source, sizeof source, "%s.json", k->name);
    soren_error err;
    soren_error_clear(&err);
    soren_manifest *m = NULL;
    const char *text = k->text[FILE_JSON];
    int rc = 0;
    if (soren_manifest_parse(text, strlen(text), source, &m, &err) != SOREN_OK)
        rc = say_error(1, "the template gives an invalid manifest: %s; reinstall Soren",
                       err.text);
    else if (strcmp(m->name, k->name) != 0)
        rc = say_error(1, "the template's manifest names the job \"%s\", not \"%s\"; "
                          "reinstall Soren", m->name, k->name);
    soren_manifest_free(m);
    return rc;
}

/* Creates path with text, failing if it exists; mode is applied as given
 * (fchmod), not through the umask. */
static int write_new(const char *path, const char *text, mode_t mode)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);
    if (fd < 0)
        return -1;
    size_t n = strlen(text), done = 0;
    while (done < n) {
        ssize_t w = write(fd, text + done, n - done);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            int e = w < 0 ? errno : EIO;
            close(fd);
            errno = e;
            return -1;
        }
        done += (size_t)w;
    }
    if (fchmod(fd, mode) != 0 || close(fd) != 0)
        return -1;
    return 0;
}

/* Removes what this run made, after a failure. */
static void undo(kit *k)
{
    for (int i = 0; i < FILE_COUNT; i++)
        if (k->written[i])
            unlink(k->path[i]);
    if (k->folder_made)
        rmdir(k->folder);
}

/* Masks from a mode the permission bits the umask removes, and always the
 * group's and others' write permission. */
static mode_t private_mode(mode_t mode)
{
    mode_t mask = umask(0);
    umask(mask);
    return mode & ~mask & ~(mode_t)022;
}

static int write_folder(kit *k, const char *dir)
{
    static const char *const suffix[FILE_COUNT] = {".cu", ".json", NULL, NULL};
    static const char *const fixed[FILE_COUNT] = {NULL, NULL, "Makefile", "README.md"};
    if (asprintf(&k->folder, "%s/%s", dir, k->name) < 0)
        return say_error(1, "out of memory");
    for (int i = 0; i < FILE_COUNT; i++) {
        int n = fixed[i] ? asprintf(&k->path[i], "%s/%s", k->folder, fixed[i])
                         : asprintf(&k->path[i], "%s/%s%s", k->folder, k->name, suffix[i]);
        if (n < 0)
            return say_error(1, "out of memory");
    }
    if (mkdir(k->folder, private_mode(0777)) != 0) {
        int e = errno;
        if (e == EEXIST)
            return say_error(1, "%s already exists: soren-host new never overwrites; choose "
                                "another NAME, another --dir, or remove %s", k->folder,
                             k->folder);
        return say_error(1, "cannot create %s: %s%s", k->folder, strerror(e),
                         e == ENOENT ? " (create the folder it goes in first, or choose "
                                       "another --dir)" : "");
    }
    k->folder_made = 1;
    /* mkdir's mode passed through the umask: state it exactly. */
    if (chmod(k->folder, private_mode(0777)) != 0)
        return say_error(1, "cannot set the mode of %s: %s", k->folder, strerror(errno));
    for (int i = 0; i < FILE_COUNT; i++) {
        if (write_new(k->path[i], k->text[i], private_mode(0666)) != 0)
            return say_error(1, "cannot write %s: %s", k->path[i], strerror(errno));
        k->written[i] = 1;
    }
    return 0;
}

int soren__cli_new(const char *name, const char *from, const char *dir)
{
    if (!valid_job_name(name))
        return say_error(EXIT_USAGE, "new: \"%s\" is not a job name: use lowercase letters, "
                                     "digits, '_' and '-', starting with a letter or digit, "
                                     "at most 64 bytes (e.g. charcount)", name);
    if (from && !valid_job_name(from))
        return unknown_example(from);
    kit k = {.name = name};
    make_ident(name, k.ident, sizeof k.ident);
    int rc = from ? load_example(&k, from) : load(&k, FILE_CU, "templates", "plugin.cu");
    if (rc == 0 && !from)
        rc = load(&k, FILE_JSON, "templates", "plugin.json");
    if (rc == 0)
        rc = load(&k, FILE_MAKEFILE, "templates", "plugin.Makefile");
    if (rc == 0)
        rc = load(&k, FILE_README, "templates", "plugin.README.md");
    if (rc == 0)
        rc = instantiate(&k);
    if (rc == 0)
        rc = check_manifest(&k);
    if (rc == 0) {
        rc = write_folder(&k, dir ? dir : ".");
        if (rc != 0)
            undo(&k);
    }
    if (rc == 0)
        printf("%s/: %s.cu, %s.json, Makefile, README.md%s%s\n"
               "next: cd %s && make && soren-host run ./%s.json INPUT\n",
               k.folder, name, name, from ? ", from the example " : "", from ? from : "",
               k.folder, name);
    kit_destroy(&k);
    return rc;
}
