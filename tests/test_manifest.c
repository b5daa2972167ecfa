/*
 * test_manifest.c - core/plugin/manifest.c against the catalog in
 * tests/manifests/{valid,invalid}/NAME/ and a few focused checks.
 *
 * Each invalid case holds manifest.json and error, the exact message
 * expected (one line).  Cases are loaded from inside their folder as
 * "manifest.json", so the message starts with that name.
 */
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "plugin/manifest.h"
#include "testutil.h"

/* The catalog must not shrink unnoticed: an empty folder would pass. */
#define MIN_VALID_CASES 8
#define MIN_INVALID_CASES 30

static char *catalog_path(const char *rest)
{
    char *path = NULL;
    cr_assert(asprintf(&path, "%s/tests/manifests/%s", tu_srcdir(), rest) > 0);
    return path;
}

static int is_case_dir(const struct dirent *e)
{
    return e->d_name[0] != '.';
}

/* Runs check(name) inside every case folder of kind, in name order,
 * and returns how many there were. */
static size_t for_each_case(const char *kind, void (*check)(const char *name))
{
    char *dir = catalog_path(kind);
    struct dirent **names = NULL;
    int n = scandir(dir, &names, is_case_dir, alphasort);
    cr_assert_geq(n, 0, "cannot list %s: %s", dir, strerror(errno));
    int home = open(".", O_RDONLY | O_DIRECTORY);
    cr_assert_geq(home, 0);
    for (int i = 0; i < n; i++) {
        char *case_dir = NULL;
        cr_assert(asprintf(&case_dir, "%s/%s", dir, names[i]->d_name) > 0);
        cr_assert_eq(chdir(case_dir), 0, "%s: cannot enter %s: %s", names[i]->d_name, case_dir,
                     strerror(errno));
        check(names[i]->d_name);
        cr_assert_eq(fchdir(home), 0);
        free(case_dir);
        free(names[i]);
    }
    close(home);
    free(names);
    free(dir);
    return (size_t)n;
}

static void check_valid(const char *name)
{
    soren_error err = {0};
    soren_manifest *m = NULL;
    soren_status st = soren_manifest_load("manifest.json", &m, &err);
    cr_expect_eq(st, SOREN_OK, "valid/%s: %s", name, err.text);
    cr_expect_eq(st == SOREN_OK, m != NULL, "valid/%s: out and status disagree", name);
    soren_manifest_free(m);
}

static void check_invalid(const char *name)
{
    size_t size;
    char *expected = tu_read("error", &size);
    cr_assert(size > 0 && expected[size - 1] == '\n',
              "invalid/%s: error must end with a newline", name);
    expected[size - 1] = '\0';
    cr_assert_null(strchr(expected, '\n'), "invalid/%s: error must be one line", name);

    soren_error err = {0};
    soren_manifest *m = (soren_manifest *)&err; /* must be reset to NULL */
    soren_status st = soren_manifest_load("manifest.json", &m, &err);
    cr_expect_eq(st, SOREN_EMANIFEST, "invalid/%s: status %d (%s), expected SOREN_EMANIFEST",
                 name, st, err.text);
    cr_expect_eq(err.code, st, "invalid/%s: err.code is not the status", name);
    cr_expect_null(m, "invalid/%s: out not NULL on failure", name);
    cr_expect_str_eq(err.text, expected, "invalid/%s:\n  got:      %s\n  expected: %s", name,
                     err.text, expected);
    free(expected);
}

Test(manifest, valid_catalog)
{
    size_t n = for_each_case("valid", check_valid);
    cr_assert_geq(n, MIN_VALID_CASES, "only %zu valid cases found under %s", n, tu_srcdir());
}

Test(manifest, invalid_catalog)
{
    size_t n = for_each_case("invalid", check_invalid);
    cr_assert_geq(n, MIN_INVALID_CASES, "only %zu invalid cases found under %s", n, tu_srcdir());
}

/* ---- Parsed fields -------------------------------------------------------- */

static soren_manifest *load_case(const char *name)
{
    char *rest = NULL, *path;
    cr_assert(asprintf(&rest, "valid/%s/manifest.json", name) > 0);
    path = catalog_path(rest);
    soren_error err = {0};
    soren_manifest *m = NULL;
    cr_assert_eq(soren_manifest_load(path, &m, &err), SOREN_OK, "%s: %s", name, err.text);
    free(rest);
    free(path);
    return m;
}

Test(manifest, fields_wordcount)
{
    char *path = catalog_path("valid/wordcount/manifest.json");
    char *dir = catalog_path("valid/wordcount");
    size_t size;
    char *bytes = tu_read(path, &size);
    soren_manifest *m = load_case("wordcount");

    cr_expect_str_eq(m->path, path);
    cr_expect_str_eq(m->dir, dir);
    cr_expect_eq(m->text_size, size);
    cr_expect_eq(memcmp(m->text, bytes, size + 1), 0, "text differs from the file");
    cr_expect_str_eq(m->name, "wordcount");
    cr_expect_str_eq(m->version, "1.0.0");
    cr_expect_str_eq(m->summary, "Count the occurrences of every word");
    cr_expect_str_eq(m->library, "wordcount.so");
    cr_expect_str_eq(m->sha256, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    cr_expect_eq(m->input.format, SOREN_INPUT_LINES);
    cr_expect_eq(m->input.record_size, 0);
    cr_expect_eq(m->input.count, 0);
    cr_expect_eq(m->key.type, SOREN_TYPE_STRING);
    cr_expect_eq(m->key.max_size, 256);
    cr_expect_eq(m->key.count, 0);
    cr_expect_eq(m->value.type, SOREN_TYPE_U32);
    cr_expect_eq(m->combine, SOREN_COMBINE_SUM);
    cr_expect_eq(m->reduce, SOREN_REDUCE_COMBINE);
    cr_expect_eq(m->output.order, SOREN_ORDER_KEY);
    cr_expect_eq(m->output.limit, 0);
    cr_assert_eq(m->param_count, 1);
    cr_expect_str_eq(m->params[0].name, "min_length");
    cr_expect_eq(m->params[0].type, SOREN_PARAM_U32);
    cr_expect_eq(m->params[0].required, 0);
    cr_expect_str_eq(m->params[0].default_value, "1");
    cr_expect_str_eq(m->params[0].help, "Shortest word counted");

    soren_manifest_free(m);
    free(bytes);
    free(dir);
    free(path);
}

Test(manifest, fields_grep)
{
    soren_manifest *m = load_case("grep");
    cr_expect_null(m->sha256);
    cr_expect_eq(m->key.type, SOREN_TYPE_STRING);
    cr_expect_eq(m->key.max_size, SOREN_KEY_MAX_SIZE_DEFAULT, "string keys default to 256 bytes");
    cr_expect_eq(m->value.type, SOREN_TYPE_U64);
    cr_expect_eq(m->combine, SOREN_COMBINE_COUNT);
    cr_expect_eq(m->reduce, SOREN_REDUCE_NONE);
    cr_expect_eq(m->output.order, SOREN_ORDER_VALUE_DESC);
    cr_expect_eq(m->output.limit, 10);
    cr_assert_eq(m->param_count, 2);
    cr_expect_str_eq(m->params[0].name, "pattern");
    cr_expect_eq(m->params[0].type, SOREN_PARAM_REGEX);
    cr_expect_eq(m->params[0].required, 1);
    cr_expect_null(m->params[0].default_value);
    cr_expect_str_eq(m->params[0].help, "POSIX ERE");
    cr_expect_str_eq(m->params[1].name, "skip");
    cr_expect_eq(m->params[1].type, SOREN_PARAM_I64);
    cr_expect_eq(m->params[1].required, 0);
    cr_expect_str_eq(m->params[1].default_value, "-3");
    cr_expect_null(m->params[1].help);
    soren_manifest_free(m);
}

Test(manifest, fields_histogram)
{
    soren_manifest *m = load_case("histogram");
    cr_expect_eq(m->input.format, SOREN_INPUT_FIXED);
    cr_expect_eq(m->input.record_size, 8);
    cr_expect_eq(m->key.type, SOREN_TYPE_U32);
    cr_expect_eq(m->key.max_size, 4, "typed keys have their native size");
    cr_expect_eq(m->combine, SOREN_COMBINE_SUM);
    cr_expect_eq(m->reduce, SOREN_REDUCE_NONE);
    cr_assert_eq(m->param_count, 3);
    cr_expect_str_eq(m->params[0].default_value, "64");
    cr_expect_eq(m->params[1].type, SOREN_PARAM_F64);
    cr_expect_str_eq(m->params[1].default_value, "0.5");
    cr_expect_str_eq(m->params[2].default_value, "1000.0", "reals are kept as jansson prints them");
    soren_manifest_free(m);
}

Test(manifest, fields_matmul)
{
    soren_manifest *m = load_case("matmul");
    cr_expect_str_eq(m->library, "lib/matmul.so");
    cr_expect_eq(m->input.format, SOREN_INPUT_INDEX);
    cr_expect_eq(m->input.count, 1024);
    cr_expect_eq(m->key.type, SOREN_TYPE_INDEX);
    cr_expect_eq(m->key.count, 1048576);
    cr_expect_eq(m->key.max_size, 4, "index keys are u32");
    cr_expect_eq(m->value.type, SOREN_TYPE_F32);
    cr_expect_eq(m->combine, SOREN_COMBINE_USER);
    cr_expect_eq(m->reduce, SOREN_REDUCE_FUNCTION);
    cr_expect_eq(m->output.order, SOREN_ORDER_NONE);
    cr_expect_eq(m->param_count, 0);
    cr_expect_null(m->params);
    soren_manifest_free(m);
}

Test(manifest, fields_minmax_and_maxtemp)
{
    soren_manifest *m = load_case("minmax");
    cr_expect_str_eq(m->version, "1.0.0-beta.2");
    cr_expect_eq(m->input.format, SOREN_INPUT_FIXED);
    cr_expect_eq(m->key.type, SOREN_TYPE_U64);
    cr_expect_eq(m->combine, SOREN_COMBINE_NONE, "stage 1 is map-only");
    cr_expect_eq(soren_manifest_stages(m), 2);
    cr_assert_eq(m->stage_count, 1);
    cr_expect_eq(m->stages[0].key.type, SOREN_TYPE_I64);
    cr_expect_eq(m->stages[0].key.max_size, 8);
    cr_expect_eq(m->stages[0].value.type, SOREN_TYPE_I64);
    cr_expect_eq(m->stages[0].combine, SOREN_COMBINE_MIN);
    cr_expect_eq(m->stages[0].reduce, SOREN_REDUCE_COMBINE);
    soren_manifest_stage second = soren_manifest_stage_at(m, 1), first = soren_manifest_stage_at(m, 0);
    cr_expect_eq(second.combine, SOREN_COMBINE_MIN);
    cr_expect_eq(first.key.type, SOREN_TYPE_U64);
    cr_expect_eq(m->output.order, SOREN_ORDER_VALUE_ASC);
    cr_expect_eq(m->output.limit, 5);
    soren_manifest_free(m);

    m = load_case("maxtemp");
    cr_expect_str_eq(m->name, "max_temp");
    cr_expect_eq(m->input.record_size, 16);
    cr_expect_eq(m->key.type, SOREN_TYPE_U64);
    cr_expect_eq(m->value.type, SOREN_TYPE_F64);
    cr_expect_eq(m->combine, SOREN_COMBINE_MAX);
    cr_expect_eq(m->reduce, SOREN_REDUCE_FUNCTION);
    cr_assert_eq(m->param_count, 3);
    cr_expect_eq(m->params[0].type, SOREN_PARAM_F32);
    cr_expect_str_eq(m->params[0].default_value, "12.5", "a string default is kept as is");
    cr_expect_eq(m->params[1].type, SOREN_PARAM_STRING);
    cr_expect_null(m->params[1].default_value);
    cr_expect_eq(m->params[2].type, SOREN_PARAM_U64);
    cr_expect_str_eq(m->params[2].default_value, "9223372036854775807");
    soren_manifest_free(m);
}

Test(manifest, fields_iterate_and_scratch)
{
    soren_manifest *m = load_case("iterate");
    cr_assert_eq(m->param_count, 3);
    cr_expect_eq(m->params[1].type, SOREN_PARAM_STRING);
    cr_expect_eq(m->params[2].type, SOREN_PARAM_SCRATCH);
    cr_expect_str_eq(m->params[2].default_value, "0");
    soren_manifest_free(m);
}

Test(manifest, limits)
{
    soren_manifest *m = load_case("limits");
    cr_expect_eq(strlen(m->name), 64);
    cr_expect_eq(strlen(m->summary), 200);
    cr_expect_eq(strlen(m->library), 255);
    cr_expect_eq(m->input.record_size, UINT64_C(1) << 31);
    cr_expect_eq(m->key.max_size, SOREN_KEY_MAX_SIZE_LIMIT);
    cr_expect_eq(m->output.limit, INT64_MAX);
    cr_expect_eq(m->param_count, SOREN_MAX_PARAMS);
    soren_manifest_free(m);

    m = load_case("index-limits");
    cr_expect_eq(m->input.count, INT64_MAX);
    cr_expect_eq(m->key.count, UINT32_MAX);
    cr_expect_eq(m->param_count, 0, "an empty params array is no parameters");
    soren_manifest_free(m);
}

Test(manifest, defaults)
{
    soren_manifest *m = load_case("minimal");
    cr_expect_null(m->sha256);
    cr_expect_eq(m->input.record_size, 0);
    cr_expect_eq(m->input.count, 0);
    cr_expect_eq(m->key.type, SOREN_TYPE_F64);
    cr_expect_eq(m->key.max_size, 8);
    cr_expect_eq(m->key.count, 0);
    cr_expect_eq(m->combine, SOREN_COMBINE_NONE);
    cr_expect_eq(m->reduce, SOREN_REDUCE_NONE);
    cr_expect_eq(m->output.order, SOREN_ORDER_KEY);
    cr_expect_eq(m->output.limit, 0);
    cr_expect_eq(m->param_count, 0);
    cr_expect_null(m->params);
    soren_manifest_free(m);

    /* An empty output object means the same as none. */
    m = load_case("index-from-param");
    cr_expect_eq(m->input.format, SOREN_INPUT_INDEX);
    cr_expect_eq(m->input.count, 0, "count 0: given by a parameter");
    cr_assert_eq(m->input.count_from.count, 1);
    cr_expect_str_eq(m->input.count_from.names[0], "tasks");
    cr_expect_eq(m->output.order, SOREN_ORDER_KEY);
    cr_expect_eq(m->output.limit, 0);
    soren_manifest_free(m);
}

Test(manifest, fields_stages)
{
    soren_manifest *m = load_case("stages");
    cr_assert_eq(soren_manifest_stages(m), 4);
    cr_expect_eq(m->combine, SOREN_COMBINE_SUM);
    cr_expect_eq(m->stages[0].key.type, SOREN_TYPE_STRING);
    cr_expect_eq(m->stages[0].key.max_size, 64);
    cr_expect_eq(m->stages[0].combine, SOREN_COMBINE_COUNT);
    cr_expect_eq(m->stages[1].key.type, SOREN_TYPE_INDEX);
    cr_expect_eq(m->stages[1].key.count, 10);
    cr_expect_eq(m->stages[1].value.type, SOREN_TYPE_U64);
    cr_expect_eq(m->stages[1].reduce, SOREN_REDUCE_FUNCTION);
    cr_expect_eq(m->stages[2].key.type, SOREN_TYPE_U64);
    cr_expect_eq(m->stages[2].key.max_size, 8);
    cr_expect_eq(m->stages[2].combine, SOREN_COMBINE_NONE);
    cr_expect_eq(m->stages[2].reduce, SOREN_REDUCE_NONE);
    soren_manifest_stage last = soren_manifest_stage_at(m, 3);
    cr_expect_eq(last.value.type, SOREN_TYPE_F64);
    cr_expect_eq(m->output.limit, 3);
    soren_manifest_free(m);

    m = load_case("index-count-from");
    cr_assert_eq(m->input.count_from.count, 3);
    cr_expect_str_eq(m->input.count_from.names[0], "rows");
    cr_expect_str_eq(m->input.count_from.names[1], "cols");
    cr_expect_str_eq(m->input.count_from.names[2], "rows");
    cr_expect_eq(soren_manifest_stages(m), 1);
    cr_expect_null(m->stages);
    soren_manifest_free(m);
}

Test(manifest, fields_key_count_from)
{
    soren_manifest *m = load_case("index-keys-count-from");
    cr_expect_eq(m->key.type, SOREN_TYPE_INDEX);
    cr_expect_eq(m->key.count, 0, "count 0: the product of the parameters and a constant");
    cr_assert_eq(m->key.count_from.count, 3);
    cr_expect_str_eq(m->key.count_from.names[0], "rows");
    cr_expect_null(m->key.count_from.names[1], "item 1 is a constant");
    cr_expect_eq(m->key.count_from.constants[1], 3);
    cr_expect_str_eq(m->key.count_from.names[2], "cols");
    cr_expect_eq(m->input.count_from.count, 0);
    soren_manifest_free(m);

    m = load_case("stage-index-keys-count-from");
    cr_expect_eq(m->key.count, 8);
    cr_expect_eq(m->key.count_from.count, 0);
    cr_assert_eq(m->stage_count, 2);
    cr_expect_eq(m->stages[0].key.count_from.count, 0);
    soren_manifest_stage last = soren_manifest_stage_at(m, 2);
    cr_expect_eq(last.key.type, SOREN_TYPE_INDEX);
    cr_expect_eq(last.key.count, 0);
    cr_assert_eq(last.key.count_from.count, SOREN_MAX_COUNT_FROM);
    cr_expect_str_eq(last.key.count_from.names[0], "rows");
    cr_expect_str_eq(last.key.count_from.names[3], "cols");
    soren_manifest_free(m);
}

/* ---- Helpers -------------------------------------------------------------- */

Test(manifest, type_size_and_name)
{
    static const struct {
        soren_type type;
        size_t size;
        const char *name;
    } types[] = {
        {SOREN_TYPE_NONE, 0, "none"}, {SOREN_TYPE_STRING, 0, "string"}, {SOREN_TYPE_U32, 4, "u32"},
        {SOREN_TYPE_U64, 8, "u64"},   {SOREN_TYPE_I64, 8, "i64"},       {SOREN_TYPE_F32, 4, "f32"},
        {SOREN_TYPE_F64, 8, "f64"},   {SOREN_TYPE_INDEX, 4, "index"},
    };
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
        cr_expect_eq(soren_type_size(types[i].type), types[i].size, "size of %s", types[i].name);
        cr_expect_str_eq(soren_type_name(types[i].type), types[i].name);
    }
    cr_expect_eq(soren_type_size(SOREN_TYPE__COUNT), 0);
    cr_expect_str_eq(soren_type_name(SOREN_TYPE__COUNT), "unknown");
}

Test(manifest, param_index)
{
    soren_manifest *m = load_case("histogram");
    cr_expect_eq(soren_manifest_param_index(m, "bins"), 0);
    cr_expect_eq(soren_manifest_param_index(m, "lo"), 1);
    cr_expect_eq(soren_manifest_param_index(m, "hi"), 2);
    cr_expect_eq(soren_manifest_param_index(m, "h"), -1);
    cr_expect_eq(soren_manifest_param_index(m, "BINS"), -1);
    cr_expect_eq(soren_manifest_param_index(m, ""), -1);
    cr_expect_eq(soren_manifest_param_index(m, NULL), -1);
    cr_expect_eq(soren_manifest_param_index(NULL, "bins"), -1);
    soren_manifest_free(m);

    m = load_case("minimal");
    cr_expect_eq(soren_manifest_param_index(m, "bins"), -1, "no parameters at all");
    soren_manifest_free(m);
}

/* ---- Loading -------------------------------------------------------------- */

Test(manifest, missing_file)
{
    char *dir = tu_mkdtemp();
    char *path = NULL, *expected = NULL;
    cr_assert(asprintf(&path, "%s/nothing/here.json", dir) > 0);
    cr_assert(asprintf(&expected, "cannot read %s: %s", path, strerror(ENOENT)) > 0);
    soren_error err = {0};
    soren_manifest *m = (soren_manifest *)&err;
    cr_expect_eq(soren_manifest_load(path, &m, &err), SOREN_EIO);
    cr_expect_eq(err.code, SOREN_EIO);
    cr_expect_str_eq(err.text, expected);
    cr_expect_null(m);
    tu_rmtree(dir);
    free(expected);
    free(path);
    free(dir);
}

Test(manifest, folder_is_not_a_file)
{
    char *dir = tu_mkdtemp();
    char *expected = NULL;
    cr_assert(asprintf(&expected, "%s is a directory, not a regular file: a manifest is a file, "
                       "NAME.json", dir) > 0);
    soren_error err = {0};
    soren_manifest *m = NULL;
    cr_expect_eq(soren_manifest_load(dir, &m, &err), SOREN_EIO);
    cr_expect_str_eq(err.text, expected);
    cr_expect_null(m);
    tu_rmtree(dir);
    free(expected);
    free(dir);
}

/* text holds the file's bytes as they are, whatever its line endings and
 * trailing bytes. */
static const char odd_bytes[] =
    "{\"manifest_version\":1,\r\n\"name\":\"wc\",\"version\":\"1.0.0\",\t\"summary\":\"S\","
    "\"library\":\"wc.so\",\"input\":{\"format\":\"lines\"},\"key\":{\"type\":\"string\"},"
    "\"value\":{\"type\":\"u32\"}}  \r\n\n";

Test(manifest, text_and_dir)
{
    char *dir = tu_mkdtemp();
    char *sub = NULL, *file = NULL;
    cr_assert(asprintf(&sub, "%s/jobs", dir) > 0);
    cr_assert(asprintf(&file, "%s/wc.json", sub) > 0);
    cr_assert_eq(mkdir(sub, 0755), 0);
    tu_write(file, odd_bytes, sizeof odd_bytes - 1);
    int home = open(".", O_RDONLY | O_DIRECTORY);
    cr_assert_geq(home, 0);

    soren_error err = {0};
    soren_manifest *m = NULL;
    cr_assert_eq(soren_manifest_load(file, &m, &err), SOREN_OK, "%s", err.text);
    cr_expect_str_eq(m->path, file);
    cr_expect_str_eq(m->dir, sub);
    cr_expect_eq(m->text_size, sizeof odd_bytes - 1);
    cr_expect_eq(memcmp(m->text, odd_bytes, sizeof odd_bytes), 0, "text is not the file's bytes");
    soren_manifest_free(m);

    /* A bare file name lives in ".". */
    cr_assert_eq(chdir(sub), 0);
    cr_assert_eq(soren_manifest_load("wc.json", &m, &err), SOREN_OK, "%s", err.text);
    cr_expect_str_eq(m->path, "wc.json");
    cr_expect_str_eq(m->dir, ".");
    cr_expect_eq(m->text_size, sizeof odd_bytes - 1);
    cr_expect_eq(memcmp(m->text, odd_bytes, sizeof odd_bytes), 0, "text is not the file's bytes");
    soren_manifest_free(m);

    cr_assert_eq(chdir(dir), 0);
    cr_assert_eq(soren_manifest_load("./jobs/wc.json", &m, &err), SOREN_OK, "%s", err.text);
    cr_expect_str_eq(m->dir, "./jobs");
    soren_manifest_free(m);

    cr_assert_eq(fchdir(home), 0);
    close(home);
    tu_rmtree(dir);
    free(file);
    free(sub);
    free(dir);
}

Test(manifest, parse_from_memory)
{
    soren_error err = {0};
    soren_manifest *m = NULL;
    cr_assert_eq(soren_manifest_parse(odd_bytes, sizeof odd_bytes - 1, "wc.json", &m, &err),
                 SOREN_OK, "%s", err.text);
    cr_expect_null(m->path, "no file, no path");
    cr_expect_null(m->dir);
    cr_expect_eq(m->text_size, sizeof odd_bytes - 1);
    cr_expect_eq(memcmp(m->text, odd_bytes, sizeof odd_bytes), 0, "text is not a copy");
    cr_expect_neq(m->text, odd_bytes);
    cr_expect_str_eq(m->name, "wc");
    soren_manifest_free(m);

    /* The source names the text in messages; parse reads only size bytes. */
    static const char text[] = "{\"manifest_version\": 3}garbage";
    m = (soren_manifest *)&err;
    cr_expect_eq(soren_manifest_parse(text, 23, "plugin wc.so", &m, &err), SOREN_EMANIFEST);
    cr_expect_null(m);
    cr_expect_str_eq(err.text, "plugin wc.so: $.manifest_version: expected 1 (this soren-host "
                               "reads manifest version 1), got 3");
}

Test(manifest, first_error_wins)
{
    soren_error err = {0};
    soren_manifest *m = NULL;
    soren_error_set(&err, SOREN_EUSAGE, "earlier");
    cr_expect_eq(soren_manifest_parse("[]", 2, "x.json", &m, &err), SOREN_EMANIFEST);
    cr_expect_null(m);
    cr_expect_eq(err.code, SOREN_EUSAGE);
    cr_expect_str_eq(err.text, "earlier");
}
