/* Discovery and loading: every way a plugin can be wrong gets its own clear
 * error, and a broken manifest never stops a listing. */
#include <criterion/criterion.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "plugin/loader.h"
#include "plugin/search.h"
#include "plugin/sha256.h"
#include "testutil.h"

static char *dir;

static void setup(void) { dir = tu_mkdtemp(); }
static void teardown(void)
{
    tu_rmtree(dir);
    free(dir);
}

TestSuite(loader, .init = setup, .fini = teardown);
TestSuite(search, .init = setup, .fini = teardown);

/* Copies a built library into the temp folder as NAME. */
static void copy_lib(const char *from_rel, const char *name)
{
    cr_assert_eq(tu_runf(NULL, NULL, "cp '%s/%s' '%s/%s'", tu_builddir(), from_rel, dir, name),
                 0);
}

static char *path_in(const char *name)
{
    char *p = NULL;
    cr_assert(asprintf(&p, "%s/%s", dir, name) > 0);
    return p;
}

static void write_text(const char *name, const char *text)
{
    char *p = path_in(name);
    tu_write(p, text, strlen(text));
    free(p);
}

/* A minimal valid manifest for a test plugin called name. */
static void write_manifest(const char *name, const char *library, const char *extra)
{
    char *text = NULL;
    cr_assert(asprintf(&text,
                       "{\"manifest_version\": 1, \"name\": \"%s\", \"version\": \"1.0.0\",\n"
                       " \"summary\": \"test\", \"library\": \"%s\",\n"
                       " \"input\": {\"format\": \"lines\"}, \"key\": {\"type\": \"string\"},\n"
                       " \"value\": {\"type\": \"u32\"}, \"combine\": \"sum\"%s}\n",
                       name, library, extra) > 0);
    char *file = NULL;
    cr_assert(asprintf(&file, "%s.json", name) > 0);
    write_text(file, text);
    free(file);
    free(text);
}

/* Opens dir/NAME.json, expecting failure with code and a message containing
 * every fragment. */
static void expect_error(const char *name, soren_status code, const char *fragment,
                         const char *fragment2)
{
    char *path = NULL;
    cr_assert(asprintf(&path, "%s/%s.json", dir, name) > 0);
    soren_error err;
    soren_error_clear(&err);
    soren_plugin *p = (soren_plugin *)1;
    soren_status rc = soren_plugin_open(path, SOREN_TRUST_CHECK, &p, &err);
    cr_expect_eq(rc, code, "%s: status %d, expected %d (%s)", name, rc, code, err.text);
    cr_expect_null(p, "%s: a failed open returns no plugin", name);
    cr_expect(strstr(err.text, fragment) != NULL, "%s: \"%s\" lacks \"%s\"", name, err.text,
              fragment);
    if (fragment2)
        cr_expect(strstr(err.text, fragment2) != NULL, "%s: \"%s\" lacks \"%s\"", name,
                  err.text, fragment2);
    free(path);
}

static soren_plugin *open_ok(const char *path)
{
    soren_error err;
    soren_error_clear(&err);
    soren_plugin *p = NULL;
    cr_assert_eq(soren_plugin_open(path, SOREN_TRUST_CHECK, &p, &err), SOREN_OK, "%s: %s", path, err.text);
    return p;
}

Test(loader, opens_a_staged_plugin)
{
    char *path = NULL;
    cr_assert(asprintf(&path, "%s/stage/plugins/wordcount.json", tu_builddir()) > 0);
    soren_plugin *p = open_ok(path);
    cr_expect_str_eq(p->table->name, "wordcount");
    cr_expect_eq(p->table->abi_major, SOREN_ABI_MAJOR);
    cr_expect_eq(p->table->stage_count, 1);
    cr_expect_not_null(p->table->stages[0].map);
    cr_expect_eq(p->table->stages[0].combine.op, SOREN_COMBINE_SUM);
    cr_expect_eq(p->library_path[0], '/', "the library path is resolved");
    soren_plugin_close(p);
    free(path);
}

Test(loader, missing_symbol)
{
    copy_lib("tests/plugins/.libs/no_symbol.so", "no_symbol.so");
    write_manifest("no_symbol", "no_symbol.so", "");
    expect_error("no_symbol", SOREN_EPLUGIN, "no symbol soren_plugin_v1", "not a Soren plugin");
}

Test(loader, future_abi)
{
    copy_lib("tests/plugins/.libs/future_abi.so", "future_abi.so");
    write_manifest("future_abi", "future_abi.so", "");
    expect_error("future_abi", SOREN_EPLUGIN, "built for plugin ABI 2.0, this soren-host loads "
                                              "ABI 1.x", "upgrade soren-host");
}

Test(loader, table_too_small)
{
    copy_lib("tests/plugins/.libs/small_table.so", "small_table.so");
    write_manifest("small_table", "small_table.so", "");
    expect_error("small_table", SOREN_EPLUGIN, "its plugin table is 16 bytes", NULL);
}

Test(loader, stale_embedded_manifest)
{
    copy_lib("stage/plugins/wordcount.so", "wordcount.so");
    char *orig = NULL;
    cr_assert(asprintf(&orig, "%s/plugins/wordcount/wordcount.json", tu_srcdir()) > 0);
    size_t n = 0;
    char *text = tu_read(orig, &n);
    /* The same JSON laid out otherwise says the same: it loads. */
    char *edited = NULL;
    cr_assert(asprintf(&edited, " %s", text) > 0);
    write_text("wordcount.json", edited);
    char *json = path_in("wordcount.json");
    soren_plugin_close(open_ok(json));
    /* One value changed is not what was built. */
    char *count = strstr(edited, "\"Count ");
    cr_assert_not_null(count);
    count[1] = 'c';
    write_text("wordcount.json", edited);
    expect_error("wordcount", SOREN_EPLUGIN, "differs from",
                 "rebuild the plugin, or install wordcount.so and wordcount.json together");
    free(json);
    free(orig);
    free(text);
    free(edited);
}

Test(loader, compiled_types_disagree_with_manifest)
{
    copy_lib("tests/plugins/.libs/mismatch.so", "mismatch.so");
    char *src = NULL;
    cr_assert(asprintf(&src, "%s/tests/plugins/mismatch.json", tu_srcdir()) > 0);
    size_t n = 0;
    char *text = tu_read(src, &n);
    write_text("mismatch.json", text);
    expect_error("mismatch", SOREN_EPLUGIN, "key type: the library was built for u32",
                 "says string: change the manifest's key type to u32, or set "
                 "`.key = SOREN_TYPE_STRING` in SOREN_STAGE and rebuild");
    free(src);
    free(text);
}

Test(loader, built_without_the_kit)
{
    copy_lib("tests/plugins/.libs/unembedded.so", "unembedded.so");
    write_manifest("unembedded", "unembedded.so", "");
    expect_error("unembedded", SOREN_EPLUGIN, "undefined symbol: soren__embedded_manifest; "
                 "unembedded.so was not built with Soren's plugin kit",
                 "includes plugin.mk (`soren-host new` writes one), or compile in the C source "
                 "that `embed-manifest unembedded.json` writes");
}

Test(loader, missing_library)
{
    write_manifest("absent", "absent.so", "");
    expect_error("absent", SOREN_EPLUGIN, "$.library: cannot open", "absent.so");
}

Test(loader, not_a_shared_object)
{
    write_text("garbage.so", "this is not an ELF file\n");
    write_manifest("garbage", "garbage.so", "");
    expect_error("garbage", SOREN_EPLUGIN, "garbage.so is not a shared library (no ELF header)",
                 "rebuild the plugin");
}

Test(loader, symlink_leaving_the_folder)
{
    char *outside = tu_mkdtemp();
    cr_assert_eq(tu_runf(NULL, NULL, "cp '%s/stage/plugins/wordcount.so' '%s/w.so' && "
                                     "ln -s '%s/w.so' '%s/link.so'",
                         tu_builddir(), outside, outside, dir), 0);
    write_manifest("linked", "link.so", "");
    expect_error("linked", SOREN_EPLUGIN, "outside the manifest's folder", NULL);
    tu_rmtree(outside);
    free(outside);
}

/* The library's digest, as sha256sum gives it. */
static void digest_of(const char *path, char hex[65])
{
    int fd = open(path, O_RDONLY);
    cr_assert_geq(fd, 0, "%s", path);
    soren_error err;
    soren_error_clear(&err);
    cr_assert_eq(soren_sha256_fd(fd, path, hex, &err), SOREN_OK, "%s", err.text);
    close(fd);
    char *out = NULL;
    if (tu_runf(&out, NULL, "sha256sum '%s' 2>/dev/null", path) == 0)
        cr_expect(strncmp(out, hex, 64) == 0, "sha256sum says %.64s, Soren %s", out, hex);
    free(out);
}

/* The side-car pins the library built from it: the pin is the one member
 * the embedded copy cannot have, so a right pin loads and a wrong one is
 * refused, naming both digests. */
Test(loader, sha256_checked)
{
    copy_lib("stage/plugins/wordcount.so", "wordcount.so");
    char *lib = path_in("wordcount.so"), *json = path_in("wordcount.json");
    char hex[65];
    digest_of(lib, hex);

    char *src = NULL;
    cr_assert(asprintf(&src, "%s/plugins/wordcount/wordcount.json", tu_srcdir()) > 0);
    char *text = tu_read(src, NULL);
    char *open_brace = strchr(text, '{');
    cr_assert_not_null(open_brace);
    char *pinned = NULL;
    cr_assert(asprintf(&pinned, "{\"sha256\": \"%s\",%s", hex, open_brace + 1) > 0);
    write_text("wordcount.json", pinned);
    soren_plugin_close(open_ok(json));

    char wrong[65];
    memset(wrong, '0', 64);
    wrong[64] = '\0';
    memcpy(pinned + strlen("{\"sha256\": \""), wrong, 64);
    write_text("wordcount.json", pinned);
    char want[256];
    snprintf(want, sizeof want, "$.sha256 expects %s but the SHA-256 of %s is %s", wrong, lib,
             hex);
    expect_error("wordcount", SOREN_EPLUGIN, want, "reinstall the plugin");
    free(pinned);
    free(text);
    free(src);
    free(json);
    free(lib);
}

/* The staged wordcount, copied into the temp folder. */
static char *copy_wordcount(void)
{
    copy_lib("stage/plugins/wordcount.so", "wordcount.so");
    cr_assert_eq(tu_runf(NULL, NULL, "cp '%s/stage/plugins/wordcount.json' '%s/'", tu_builddir(),
                         dir), 0);
    return path_in("wordcount.json");
}

/* Opens json, expecting a refusal whose text holds fragment and the fix
 * (a command), and a load with the override. */
static void expect_refused(const char *json, const char *fragment, const char *fix)
{
    soren_error err;
    soren_error_clear(&err);
    soren_plugin *p = NULL;
    cr_expect_eq(soren_plugin_open(json, SOREN_TRUST_CHECK, &p, &err), SOREN_EPLUGIN,
                 "%s was loaded", json);
    cr_expect(strstr(err.text, fragment) != NULL, "\"%s\" lacks \"%s\"", err.text, fragment);
    cr_expect(strstr(err.text, fix) && strstr(err.text, "--allow-insecure-plugin-dirs"),
              "the message gives the fix and the override: %s", err.text);
    soren_plugin_close(p);
    p = NULL;
    soren_error_clear(&err);
    cr_expect_eq(soren_plugin_open(json, SOREN_TRUST_ANY, &p, &err), SOREN_OK,
                 "the override loads it: %s", err.text);
    soren_plugin_close(p);
}

/* A folder, manifest or library that others than its owner can write to is
 * refused, naming the path, its mode and the fix; the override loads it. */
Test(loader, refuses_plugin_files_others_can_write)
{
    char *json = copy_wordcount(), *lib = path_in("wordcount.so");
    struct { const char *path, *what; mode_t bad, good; } cases[] = {
        {dir, "folder", 0777, 0700},
        {dir, "folder", 0770, 0700},
        {json, "manifest", 0666, 0644},
        {lib, "library", 0757, 0755},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        cr_assert_eq(chmod(cases[i].path, cases[i].bad), 0);
        char want[4096];
        snprintf(want, sizeof want, "its %s %s has mode %04o", cases[i].what, cases[i].path,
                 (unsigned)cases[i].bad);
        expect_refused(json, want, "chmod go-w");
        cr_assert_eq(chmod(cases[i].path, cases[i].good), 0);
    }
    soren_plugin *p = open_ok(json);
    soren_plugin_close(p);
    free(json);
    free(lib);
}

Test(search, resolves_names_and_paths)
{
    soren_search_path sp;
    soren_error err;
    soren_error_clear(&err);
    cr_assert_eq(soren_search_path_init(&sp, NULL, 0, &err), SOREN_OK);
    char *path = NULL;
    cr_assert_eq(soren_plugin_resolve(&sp, "wordcount", &path, &err), SOREN_OK, "%s", err.text);
    cr_expect(strstr(path, "stage/plugins/wordcount.json") != NULL, "%s", path);
    free(path);
    cr_assert_eq(soren_plugin_resolve(&sp, "./x/grep.so", &path, &err), SOREN_OK);
    cr_expect_str_eq(path, "./x/grep.json");
    free(path);
    cr_assert_eq(soren_plugin_resolve(&sp, "no_such_job", &path, &err), SOREN_EPLUGIN);
    cr_expect_null(path);
    cr_expect(strstr(err.text, "no plugin named \"no_such_job\"") != NULL, "%s", err.text);
    cr_expect(strstr(err.text, "--plugin-path") != NULL, "%s", err.text);
    soren_search_path_destroy(&sp);
}

Test(search, plugin_path_option_comes_first)
{
    write_manifest("wordcount", "wordcount.so", "");
    const char *extra[] = {dir};
    soren_search_path sp;
    soren_error err;
    soren_error_clear(&err);
    cr_assert_eq(soren_search_path_init(&sp, extra, 1, &err), SOREN_OK);
    cr_expect_str_eq(sp.dirs[0], dir);
    char *path = NULL;
    cr_assert_eq(soren_plugin_resolve(&sp, "wordcount", &path, &err), SOREN_OK);
    cr_expect(strncmp(path, dir, strlen(dir)) == 0, "%s", path);
    free(path);
    soren_search_path_destroy(&sp);
}

typedef struct listing {
    int good, broken, shadowed;
    char broken_text[1024];
} listing;

static void count_entry(void *ctx, const soren_plugin_entry *e)
{
    listing *l = ctx;
    if (!e->m) {
        l->broken++;
        snprintf(l->broken_text, sizeof l->broken_text, "%s", e->error->text);
    } else if (e->shadowed_by) {
        l->shadowed++;
    } else {
        l->good++;
    }
}

/* The listing of the plugin path with the temp folder first. */
static listing list_with_dir(soren_trust trust)
{
    const char *extra[] = {dir};
    soren_search_path sp;
    soren_error err;
    soren_error_clear(&err);
    cr_assert_eq(soren_search_path_init(&sp, extra, 1, &err), SOREN_OK, "%s", err.text);
    listing l = {0};
    cr_assert_eq(soren_plugin_list(&sp, trust, count_entry, &l, &err), SOREN_OK, "%s", err.text);
    soren_search_path_destroy(&sp);
    return l;
}

Test(search, broken_manifest_does_not_stop_the_listing)
{
    write_text("a_broken.json", "{\"manifest_version\": 1, \"name\": 7}\n");
    write_manifest("zeta", "zeta.so", "");
    write_manifest("wordcount", "wordcount.so", ""); /* shadows the staged one */
    write_text("notes.txt", "not a manifest\n");
    listing l = list_with_dir(SOREN_TRUST_CHECK);
    cr_expect_eq(l.broken, 1);
    cr_expect(strstr(l.broken_text, "a_broken.json") != NULL, "%s", l.broken_text);
    cr_expect(strstr(l.broken_text, "$.name") != NULL, "%s", l.broken_text);
    /* zeta, wordcount (ours), then the staged histogram and grep at least. */
    cr_expect_geq(l.good, 4);
    cr_expect_eq(l.shadowed, 1, "the staged wordcount is shadowed by ours");
}

Test(search, an_untrusted_plugin_is_listed_as_refused)
{
    char *json = copy_wordcount();
    cr_assert_eq(chmod(json, 0666), 0);
    write_manifest("zeta", "zeta.so", "");
    listing l = list_with_dir(SOREN_TRUST_CHECK);
    cr_expect_eq(l.broken, 1);
    cr_expect(strstr(l.broken_text, "its manifest") && strstr(l.broken_text, "mode 0666"), "%s",
              l.broken_text);
    cr_expect_geq(l.good, 2, "zeta and the staged plugins are still listed");
    listing any = list_with_dir(SOREN_TRUST_ANY);
    cr_expect_eq(any.broken, 0, "%s", any.broken_text);
    free(json);
}

/* soren-host refuses the same plugin, exit 1, until told to allow it. */
Test(loader, soren_host_refuses_until_allowed)
{
    char *json = copy_wordcount(), *input = path_in("input.txt"), *err = NULL, *out = NULL;
    tu_write(input, "b a b\n", 6);
    cr_assert_eq(chmod(dir, 0777), 0);
    int rc = tu_runf(&out, &err, "'%s' run '%s' --device cpu '%s'", tu_host(), json, input);
    cr_expect_eq(rc, 1, "exit %d: %s", rc, err);
    cr_expect(strstr(err, "refusing the plugin: its folder") != NULL, "%s", err);
    free(err);
    free(out);
    rc = tu_runf(&out, &err, "'%s' run '%s' --device cpu --allow-insecure-plugin-dirs '%s'",
                 tu_host(), json, input);
    cr_expect_eq(rc, 0, "exit %d: %s", rc, err);
    cr_expect_str_eq(out, "a\t1\nb\t2\n");
    free(err);
    free(out);
    cr_assert_eq(chmod(dir, 0700), 0);
    free(json);
    free(input);
}

/* embed-manifest leaves the sha256 member out, first or last in the
 * object: pinning a side-car after the build leaves the embedded copy, and
 * so the library and its digest, as they were. */
Test(loader, embed_manifest_leaves_the_pin_out)
{
    char *src = NULL;
    cr_assert(asprintf(&src, "%s/plugins/wordcount/wordcount.json", tu_srcdir()) > 0);
    char *text = tu_read(src, NULL);
    char *open_brace = strchr(text, '{'), *close_brace = strrchr(text, '}');
    cr_assert(open_brace && close_brace);
    const char *pin = "\"sha256\": \"" "0123456789abcdef0123456789abcdef"
                      "0123456789abcdef0123456789abcdef\"";
    char *first = NULL, *last = NULL;
    cr_assert(asprintf(&first, "{\n  %s,%s", pin, open_brace + 1) > 0);
    *close_brace = '\0';
    cr_assert(asprintf(&last, "%s, %s\n}\n", text, pin) > 0);
    *close_brace = '}';
    const char *names[] = {"plain", "first", "last"};
    const char *texts[] = {text, first, last};
    char *embedded[3];
    for (int i = 0; i < 3; i++) {
        cr_assert_eq(tu_runf(NULL, NULL, "mkdir -p '%s/%s'", dir, names[i]), 0);
        char *json = NULL;
        cr_assert(asprintf(&json, "%s/%s/wordcount.json", dir, names[i]) > 0);
        tu_write(json, texts[i], strlen(texts[i]));
        cr_assert_eq(tu_runf(&embedded[i], NULL, "sh '%s/build-aux/embed-manifest' '%s'",
                             tu_srcdir(), json), 0);
        free(json);
    }
    cr_expect_str_eq(embedded[1], embedded[0], "a pin first in the object is left out");
    cr_expect_str_eq(embedded[2], embedded[0], "a pin last in the object is left out");
    for (int i = 0; i < 3; i++)
        free(embedded[i]);
    free(first);
    free(last);
    free(text);
    free(src);
}

/* 1 if this test runs as root, which may give files to another user
 * (nobody, 65534); else 0, the test skipped, saying why. */
static int can_act_for_others(void)
{
    if (geteuid() != 0) {
        cr_skip_test("needs root, to give a folder to another user");
        return 0;
    }
    return 1;
}

/* dir/REL made a plugin folder holding wordcount; returns its manifest. */
static char *plugin_folder(const char *rel)
{
    cr_assert_eq(tu_runf(NULL, NULL, "mkdir -p '%s/%s' && cp '%s/stage/plugins/wordcount.so' "
                         "'%s/stage/plugins/wordcount.json' '%s/%s/'", dir, rel, tu_builddir(),
                         tu_builddir(), dir, rel), 0);
    char *json = NULL;
    cr_assert(asprintf(&json, "%s/%s/wordcount.json", dir, rel) > 0);
    return json;
}

/* A folder, manifest or library owned by another user is refused: that
 * user could replace the code, mode 0755 or not. */
Test(loader, refuses_plugin_files_of_another_user)
{
    if (!can_act_for_others())
        return;
    char *json = plugin_folder("theirs"), *folder = path_in("theirs");
    char *lib = path_in("theirs/wordcount.so");
    const char *paths[] = {folder, json, lib};
    const char *whats[] = {"its folder", "its manifest", "its library"};
    for (int i = 0; i < 3; i++) {
        cr_assert_eq(chown(paths[i], 65534, 65534), 0);
        char want[4200];
        snprintf(want, sizeof want, "%s %s is owned by user ", whats[i], paths[i]);
        expect_refused(json, want, "`chown root ");
        cr_assert_eq(chown(paths[i], 0, 0), 0);
    }
    soren_plugin_close(open_ok(json));
    free(json);
    free(folder);
    free(lib);
}

/* A 0755 plugin folder inside a world-writable folder is refused, naming
 * the folder above it: anyone could rename the plugin folder away and put
 * their own in its place.  Under a sticky folder owned by root, where no
 * one can rename another's folder, the plugin loads. */
Test(loader, checks_every_folder_above_the_plugin)
{
    char *json = plugin_folder("open/plugins"), *open = path_in("open");
    cr_assert_eq(chmod(open, 0777), 0);
    char want[4200];
    snprintf(want, sizeof want, "the enclosing folder %s has mode 0777", open);
    expect_refused(json, want, "chmod go-w");
    cr_assert_eq(chmod(open, 01777), 0);
    if (geteuid() == 0) {
        soren_plugin_close(open_ok(json));
    } else {
        /* sticky but not root's: refused like any other */
        snprintf(want, sizeof want, "the enclosing folder %s has mode 1777", open);
        expect_refused(json, want, "chmod go-w");
    }
    cr_assert_eq(chmod(open, 0755), 0);
    free(json);
    free(open);
}

/* The attack itself: in a world-writable folder, another user swaps root's
 * plugin folder for their own; root's soren-host refuses to run it. */
Test(loader, soren_host_refuses_a_folder_planted_by_another_user)
{
    if (!can_act_for_others())
        return;
    if (tu_runf(NULL, NULL, "setpriv --version") != 0) {
        cr_skip_test("needs setpriv (util-linux), to act as another user");
        return;
    }
    char *json = plugin_folder("parent/plugins"), *parent = path_in("parent");
    char *input = path_in("x.txt");
    tu_write(input, "a\n", 2);
    cr_assert_eq(chmod(dir, 0755), 0);
    cr_assert_eq(chmod(parent, 0777), 0);
    cr_assert_eq(tu_runf(NULL, NULL, "cd '%s' && setpriv --reuid=65534 --regid=65534 "
                         "--clear-groups sh -c 'mv plugins p.old && mkdir plugins && "
                         "cp p.old/wordcount.so p.old/wordcount.json plugins/'", parent), 0);
    char *out = NULL, *err = NULL;
    int rc = tu_runf(&out, &err, "'%s' run wordcount -P '%s/plugins' --device cpu '%s'",
                     tu_host(), parent, input);
    cr_expect_eq(rc, 1, "exit %d: %s", rc, err);
    char want[4200];
    snprintf(want, sizeof want, "its manifest %s/plugins/wordcount.json is owned by user ",
             parent);
    cr_expect(strstr(err, want) != NULL, "\"%s\" lacks \"%s\"", err, want);
    cr_expect_str_eq(out, "");
    cr_assert_eq(chmod(parent, 0755), 0);
    cr_assert_eq(chmod(dir, 0700), 0);
    free(out);
    free(err);
    free(json);
    free(parent);
    free(input);
}

/* wordcount.json that says it is evil: refused by name and listed as
 * BROKEN, so that the name wordcount means no plugin here, the same to
 * list and to run. */
Test(search, a_manifest_is_named_by_its_file)
{
    char *json = copy_wordcount();
    char *text = tu_read(json, NULL);
    char *name = strstr(text, "\"wordcount\"");
    cr_assert_not_null(name);
    memcpy(name, "\"evilcount\"", strlen("\"evilcount\""));
    tu_write(json, text, strlen(text));
    char want[4200];
    snprintf(want, sizeof want, "%s: $.name is \"evilcount\" but the file is wordcount.json",
             json);
    soren_error err;
    soren_error_clear(&err);
    soren_plugin *p = NULL;
    cr_expect_eq(soren_plugin_open(json, SOREN_TRUST_ANY, &p, &err), SOREN_EMANIFEST);
    cr_expect(strstr(err.text, want) != NULL, "\"%s\" lacks \"%s\"", err.text, want);
    soren_plugin_close(p);

    listing l = list_with_dir(SOREN_TRUST_CHECK);
    cr_expect_eq(l.broken, 1);
    cr_expect(strstr(l.broken_text, want) != NULL, "%s", l.broken_text);
    cr_expect_eq(l.shadowed, 1, "the staged wordcount is shadowed by the broken one");

    char *out = NULL, *errtext = NULL;
    int rc = tu_runf(&out, &errtext, "'%s' list -v -P '%s'", tu_host(), dir);
    cr_expect_eq(rc, 0, "%s", errtext);
    cr_expect(strstr(out, "wordcount        BROKEN   ") != NULL, "%s", out);
    char shadow[4200];
    snprintf(shadow, sizeof shadow, "shadowed by %s\n", json);
    cr_expect(strstr(out, shadow) != NULL, "\"%s\" lacks \"%s\"", out, shadow);
    free(out);
    free(errtext);
    rc = tu_runf(&out, &errtext, "'%s' run wordcount -P '%s' --device cpu /dev/null", tu_host(),
                 dir);
    cr_expect_eq(rc, 1);
    cr_expect(strstr(errtext, want) != NULL, "\"%s\" lacks \"%s\"", errtext, want);
    free(out);
    free(errtext);
    free(text);
    free(json);
}

/* A FIFO and a 1 GB sparse file among the manifests are listed as BROKEN
 * at once, with their reasons; the listing goes on. */
Test(search, a_listing_reads_no_stalling_or_huge_manifest)
{
    write_manifest("zeta", "zeta.so", "");
    char *fifo = path_in("stall.json"), *huge = path_in("huge.json");
    cr_assert_eq(mkfifo(fifo, 0644), 0);
    tu_write(huge, "", 0);
    cr_assert_eq(truncate(huge, 1L << 30), 0);
    listing l = list_with_dir(SOREN_TRUST_CHECK);
    cr_expect_eq(l.broken, 2);
    cr_expect_geq(l.good, 2, "zeta and the staged plugins are still listed");
    char *out = NULL, *errtext = NULL;
    int rc = tu_runf(&out, &errtext, "timeout 20 '%s' list -P '%s'", tu_host(), dir);
    cr_expect_eq(rc, 0, "%s", errtext);
    char want[4200];
    snprintf(want, sizeof want, "huge             BROKEN   %s holds 1073741824 bytes, more "
             "than a manifest may have (1 MiB)", huge);
    cr_expect(strstr(out, want) != NULL, "\"%s\" lacks \"%s\"", out, want);
    snprintf(want, sizeof want, "stall            BROKEN   %s is a pipe or FIFO, not a regular "
             "file", fifo);
    cr_expect(strstr(out, want) != NULL, "\"%s\" lacks \"%s\"", out, want);
    free(out);
    free(errtext);
    free(fifo);
    free(huge);
}

/* The library is loaded through the descriptor it was checked on, held
 * open (never as a standard stream) while it is loaded; a descriptor
 * number used by a library loaded before, and resident still, never
 * brings that library back in place of another. */
Test(loader, loads_each_library_through_its_checked_descriptor)
{
    const char *names[] = {"wordcount", "grep", "histogram", "wordcount"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        char *json = NULL;
        cr_assert(asprintf(&json, "%s/stage/plugins/%s.json", tu_builddir(), names[i]) > 0);
        soren_plugin *p = open_ok(json);
        cr_expect_str_eq(p->table->name, names[i]);
        struct link_map *lm = NULL;
        cr_assert_eq(dlinfo(p->handle, RTLD_DI_LINKMAP, &lm), 0);
        int fd = -1;
        cr_assert_eq(sscanf(lm->l_name, "/proc/self/fd/%d", &fd), 1, "%s", lm->l_name);
        cr_expect_gt(fd, 2);
        char link[64], target[4096];
        snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
        ssize_t n = readlink(link, target, sizeof target - 1);
        cr_assert_gt(n, 0);
        target[n] = '\0';
        cr_expect_str_eq(target, p->library_path);
        /* Resident after its close, as a library with unique symbols is,
         * under the name of a descriptor the next open is likely to get. */
        cr_assert_not_null(dlopen(link, RTLD_NOW | RTLD_NOLOAD | RTLD_NODELETE), "%s",
                           dlerror());
        soren_plugin_close(p);
        free(json);
    }
}

/* One plugin open twice at once, then closed once: the descriptor the
 * second open used, free again, never names that library for the next
 * plugin opened (the dynamic loader keeps every name a library was opened
 * by). */
Test(loader, a_library_opened_twice_keeps_one_name)
{
    char *wc = NULL, *hist = NULL;
    cr_assert(asprintf(&wc, "%s/stage/plugins/wordcount.json", tu_builddir()) > 0);
    cr_assert(asprintf(&hist, "%s/stage/plugins/histogram.json", tu_builddir()) > 0);
    soren_plugin *first = open_ok(wc);
    soren_plugin *second = open_ok(wc);
    cr_expect_eq(first->handle, second->handle);
    soren_plugin_close(second);
    soren_plugin *other = open_ok(hist);
    cr_expect_str_eq(other->table->name, "histogram");
    soren_plugin_close(other);
    soren_plugin_close(first);
    free(wc);
    free(hist);
}
