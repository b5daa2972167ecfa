/* args.c - soren-host's options and command (see args.h). */
#include "cli/args.h"

#include <getopt.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/result.h"
#include "config.h"
#include "io/output.h"
#include "nearest.h"
#include "number.h"
#include <soren/soren.h>

static const char usage_text[] =
    "Usage: soren-host [OPTIONS] COMMAND [ARGS]\n"
    "\n"
    "Run MapReduce jobs written as Soren plugins, on a GPU where one is usable\n"
    "and on the CPU elsewhere.\n"
    "\n"
    "Commands:\n"
    "  list                 list the plugins in the plugin path (loads none)\n"
    "  info NAME|PATH       describe a plugin from its manifest\n"
    "  check NAME|PATH      validate a manifest and load its library, reporting\n"
    "                       every disagreement between them\n"
    "  run NAME|PATH [INPUT...]\n"
    "                       run a job over the INPUT files (standard input if none)\n"
    "  new NAME             write a folder NAME/ to start a plugin from: NAME.cu,\n"
    "                       NAME.json, a Makefile (make builds NAME.so against the\n"
    "                       installed SDK) and a README; never overwrites\n"
    "  devices              list the GPUs the CUDA runtime can use, with their\n"
    "                       memory and compute capability (exit status 1: none)\n"
    "  serve                run the resident host: it keeps the GPUs' contexts and\n"
    "                       the loaded plugins, and runs the jobs that run, load\n"
    "                       and the library send it (in the foreground; --detach)\n"
    "  load NAME|PATH       check a plugin as check does and load it into the\n"
    "                       running host (a rebuilt one replaces the old once its\n"
    "                       jobs end)\n"
    "  unload NAME          unload a plugin from the running host\n"
    "  ps                   what the running host holds: plugins, jobs, memory\n"
    "  stop                 stop the running host once its jobs are done\n"
    "\n"
    "Options:\n"
    "  -o, --output FILE    write the result to FILE (default: standard output);\n"
    "                       FILE appears only when the run succeeds\n"
    "      --output-parts   write the result as FILE.part-R-of-N, one file per rank\n"
    "                       of an mpirun run (FILE.part-0-of-1 without one)\n"
    "  -p, --param NAME=VALUE, --param NAME=@FILE\n"
    "                       set a job parameter (see `soren-host info NAME`)\n"
    "      --tasks N        the number of tasks of a job with index input (map\n"
    "                       runs for 0 .. N-1; default: from its manifest)\n"
    "      --iterate N      run a job whose manifest has \"iterate\" (kmeans) up to\n"
    "                       N times, each run's output written into the parameter\n"
    "                       it names for the next; stops early when a run changes\n"
    "                       nothing; the last run's output is the result\n"
    "      --device auto|cpu|gpu|both\n"
    "                       where to run (default auto: a usable GPU, else the CPU);\n"
    "                       both: the GPU and the CPU engine share stage 1's input,\n"
    "                       each taking pieces as it is free, then fold their pairs\n"
    "      --engine auto|hash|block|direct|dense|sort\n"
    "                       force a GPU engine variant (default auto: chosen from\n"
    "                       the manifest and the sample; the CPU engine runs hash,\n"
    "                       dense for index keys whose arrays fit, or direct for\n"
    "                       a job without combine and reduce)\n"
    "      --sample FRACTION\n"
    "                       first map this fraction of the records, storing\n"
    "                       nothing, to choose the variant and size the regions\n"
    "                       (0 to 1, default 0.2, at most 32 MiB of input;\n"
    "                       0 turns monitoring off)\n"
    "      --small-keys N   auto picks block when the sample has fewer than N\n"
    "                       distinct keys (default 1000)\n"
    "      --explain        after the run, print one JSON object on standard error:\n"
    "                       the sample's metrics, the variant and why, the sizes,\n"
    "                       every overflow and the phase times (explain.schema.json)\n"
    "  -t, --threads N      CPU engine threads (default: every online CPU)\n"
    "      --table-slots N  initial hash table slots: the GPU table, and each of the\n"
    "                       CPU engine's per-thread tables (default: projected)\n"
    "      --key-bytes SIZE initial GPU key space, e.g. 512M (default: projected)\n"
    "      --pair-slots N   initial GPU pair space of the direct and sort variants\n"
    "                       (default: projected).  Regions grow when they fill and\n"
    "                       the run resumes, so small sizes only cost overflows;\n"
    "                       sizes take K, M, G\n"
    "      --block-slots N  entries of the GPU's per-block tables in shared memory\n"
    "                       (rounded up to a power of two, at most 2048; default\n"
    "                       2048, or 1024 where a GPU session measures it faster):\n"
    "                       block's holds every key it can, hash's caches the\n"
    "                       frequent keys of up to 12 bytes; 0: none, every pair\n"
    "                       goes to the global table (dense: to the global array)\n"
    "      --timeout DURATION\n"
    "                       stop a run that takes longer, e.g. 90s, 5m or 2h (no\n"
    "                       unit: seconds): it fails naming the phase and the\n"
    "                       record being mapped, and writes nothing\n"
    "      --devices all|N|LIST\n"
    "                       spread the run over every GPU, the first N, or the GPUs\n"
    "                       LIST names (e.g. 0,2): each maps a share of the input,\n"
    "                       the pairs of each key meet on one of them, and the\n"
    "                       output is the one GPU's (default: the engine's choice,\n"
    "                       which --explain reports: one GPU in a process of its\n"
    "                       own; two through a resident host where they pay);\n"
    "                       under mpirun, on each process's GPUs, one run over\n"
    "                       them all\n"
    "      --device-memory SIZE\n"
    "                       the device memory a run may take, e.g. 8G: an input\n"
    "                       larger than a quarter of it is mapped in chunks of that\n"
    "                       size, each record in one (default: the GPU's free\n"
    "                       memory less an eighth; the CPU engine cuts its input\n"
    "                       the same way when given one); on the GPU a hash table\n"
    "                       that would grow past half of it folds the key space a\n"
    "                       part at a time instead, a pass over the input each\n"
    "  -f, --format tsv|csv|json|jsonl\n"
    "                       output format (default tsv)\n"
    "      --order key|value_desc|value_asc|none\n"
    "                       order of the pairs, instead of the manifest's\n"
    "      --top N          keep only the first N pairs, in that order\n"
    "      --progress       show the progress line on standard error even when it\n"
    "                       is not a terminal\n"
    "      --no-progress    never show it (default: shown on a terminal)\n"
    "      --from EXAMPLE   new: start from an installed example job (wordcount,\n"
    "                       grep, histogram, stringmatch) instead of a skeleton\n"
    "      --dir DIR        new: write the folder in DIR (default: here)\n"
    "  -P, --plugin-path DIR\n"
    "                       search DIR for plugins first (repeatable; DIR may be a\n"
    "                       colon-separated list)\n"
    "      --allow-insecure-plugin-dirs\n"
    "                       load plugins that others could have changed: files or\n"
    "                       folders above them that another user owns or others\n"
    "                       can write to (refused by default)\n"
    "  -v, --verbose        say what was decided and done, on standard error\n"
    "      --local          run: in this process, even where a host is running\n"
    "                       (a run goes through the host when one answers)\n"
    "      --socket PATH    the resident host's socket (default: $SOREN_HOST, else\n"
    "                       $XDG_RUNTIME_DIR/soren/host.sock)\n"
    "      --detach         serve: start the host in the background, its log in SOCKET.log\n"
    "      --load NAME      serve: load this plugin at start (repeatable)\n"
    "      --jobs N         serve: run up to N jobs at once (default 2)\n"
    "  -h, --help           show this help\n"
    "  -V, --version        show the version\n"
    "\n"
    "Plugins are found by name in: --plugin-path, $SOREN_PLUGIN_PATH,\n"
    "$XDG_DATA_HOME/soren/plugins (~/.local/share/soren/plugins), and\n"
    SOREN_PLUGINDIR ".\n"
    "\n"
    "Built with MPI, `mpirun -np N soren-host run ...` runs a job over N ranks,\n"
    "each mapping a slice of the input; rank 0 writes the result and reports.\n"
    "\n"
    "Exit status: 0 success, 1 job or input error, 2 usage error.\n";

int soren__cli_usage_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("soren-host: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputs("\nTry 'soren-host --help'.\n", stderr);
    va_end(ap);
    return SOREN_EXIT_USAGE;
}

enum { WHY_SIZE = 160 };

/* An option's count or size from min to max, read as every number is
 * (number.h: decimal, no leading zeros; flags may allow K, M, G).  A text
 * that is no such number leaves why saying what is wrong; one out of the
 * option's range leaves it empty, as the option's message says the range. */
static int parse_count(const char *text, unsigned flags, uint64_t min, uint64_t max,
                       uint64_t *out, char *why)
{
    soren_number n;
    if (soren_number_parse(text, SOREN_NUMBER_U64, flags, &n, why, WHY_SIZE) != 0 ||
        n.u64 < min || n.u64 > max)
        return 0;
    *out = n.u64;
    return 1;
}

/* A fraction from 0 to 1, as parse_count reads a count. */
static int parse_fraction(const char *text, double *out, char *why)
{
    soren_number n;
    if (soren_number_parse(text, SOREN_NUMBER_F64, 0, &n, why, WHY_SIZE) != 0 ||
        !(n.f64 >= 0 && n.f64 <= 1))
        return 0;
    *out = n.f64;
    return 1;
}

/* The usage error of option's value text: what the option expects, and
 * what is wrong with the text where the number parser said. */
/* --timeout DURATION: whole seconds, minutes (m) or hours (h), s for
 * seconds where a unit is wanted; in *ms. */
static int parse_duration(const char *text, uint64_t *ms, char *why)
{
    size_t len = strlen(text);
    uint64_t unit = 1000;
    char number[32];
    if (len && strchr("smh", text[len - 1])) {
        unit = text[len - 1] == 'h' ? 3600000 : text[len - 1] == 'm' ? 60000 : 1000;
        len--;
    }
    if (len == 0 || len >= sizeof number)
        return 0;
    snprintf(number, sizeof number, "%.*s", (int)len, text);
    uint64_t n = 0;
    if (!parse_count(number, 0, 1, 3600000 / (unit / 1000), &n, why))
        return 0;
    *ms = n * unit;
    return 1;
}

/* --devices all|N|LIST: every GPU, the first N, or the GPUs a
 * comma-separated list names (each once); whether they exist is the run's
 * to say.  0 and fails with why set where text is none of these. */
static int parse_devices(const char *text, soren_run_options *o, char *why)
{
    o->devices_all = strcmp(text, "all") == 0;
    o->device_count = 0;
    if (o->devices_all)
        return 1;
    if (!strchr(text, ',')) {
        uint64_t n = 0;
        if (!parse_count(text, 0, 1, SOREN_MAX_DEVICES, &n, why))
            return 0;
        for (o->device_count = 0; o->device_count < n; o->device_count++)
            o->devices[o->device_count] = (int)o->device_count;
        return 1;
    }
    char number[32];
    for (const char *p = text; *p; p += *p == ',') {
        size_t len = strcspn(p, ",");
        uint64_t d = 0;
        snprintf(number, sizeof number, "%.*s", (int)(len < 31 ? len : 31), p);
        if (len == 0 || len > 30 || !parse_count(number, 0, 0, 1023, &d, why)) {
            if (!*why)
                snprintf(why, WHY_SIZE, "\"%.*s\" is not a GPU number", (int)(len < 31 ? len : 31), p);
            return 0;
        }
        for (size_t i = 0; i < o->device_count; i++)
            if (o->devices[i] == (int)d) {
                snprintf(why, WHY_SIZE, "GPU %llu is named twice", (unsigned long long)d);
                return 0;
            }
        if (o->device_count == SOREN_MAX_DEVICES) {
            snprintf(why, WHY_SIZE, "at most %d GPUs", SOREN_MAX_DEVICES);
            return 0;
        }
        o->devices[o->device_count++] = (int)d;
        p += len;
    }
    return 1;
}

static int bad_value(const char *option, const char *expected, const char *text, const char *why)
{
    return soren__cli_usage_error("%s: expected %s, got \"%s\"%s%s", option, expected, text,
                                  *why ? ": " : "", why);
}

/* Not a usage error: nothing the user typed was wrong. */
static int out_of_memory(void)
{
    fputs("soren-host: out of memory reading the command line\n", stderr);
    return 1;
}

static int push(const char ***list, size_t *count, const char *value)
{
    const char **grown = realloc(*list, (*count + 1) * sizeof *grown);
    if (!grown)
        return 0;
    grown[(*count)++] = value;
    *list = grown;
    return 1;
}

/* The usage error of an option getopt_long did not know, with the long
 * option nearest to it where one is (--devcie=gpu: did you mean --device?). */
static int unknown_option(const char *arg, const struct option *options)
{
    const char *nearest = NULL;
    if (strncmp(arg, "--", 2) == 0) {
        char word[65];
        size_t n = strcspn(arg + 2, "=");
        snprintf(word, sizeof word, "%.*s", (int)(n < 64 ? n : 64), arg + 2);
        const char *names[64];
        size_t count = 0;
        for (const struct option *o = options; o->name && count < 64; o++)
            names[count++] = o->name;
        nearest = soren__nearest(word, names, count);
    }
    if (nearest)
        return soren__cli_usage_error("unknown option %s; did you mean --%s?", arg, nearest);
    return soren__cli_usage_error("unknown option %s", arg);
}

int soren__cli_parse_args(soren__cli_args *c, int argc, char **argv)
{
    enum {
        OPT_DEVICE = 256, OPT_ENGINE, OPT_TABLE_SLOTS, OPT_KEY_BYTES, OPT_PAIR_SLOTS,
        OPT_SAMPLE, OPT_SMALL_KEYS, OPT_EXPLAIN, OPT_ALLOW_INSECURE, OPT_ORDER, OPT_TOP,
        OPT_PROGRESS, OPT_NO_PROGRESS, OPT_FROM, OPT_DIR, OPT_TASKS, OPT_ITERATE,
        OPT_OUTPUT_PARTS, OPT_DEVICE_MEMORY, OPT_BLOCK_SLOTS, OPT_LOCAL, OPT_SOCKET,
        OPT_DETACH, OPT_LOAD, OPT_JOBS, OPT_DEVICES, OPT_TIMEOUT
    };
    static const struct option options[] = {
        {"output", required_argument, 0, 'o'},   {"param", required_argument, 0, 'p'},
        {"device", required_argument, 0, OPT_DEVICE}, {"engine", required_argument, 0, OPT_ENGINE},
        {"threads", required_argument, 0, 't'},  {"format", required_argument, 0, 'f'},
        {"plugin-path", required_argument, 0, 'P'}, {"verbose", no_argument, 0, 'v'},
        {"help", no_argument, 0, 'h'},           {"version", no_argument, 0, 'V'},
        {"table-slots", required_argument, 0, OPT_TABLE_SLOTS},
        {"key-bytes", required_argument, 0, OPT_KEY_BYTES},
        {"pair-slots", required_argument, 0, OPT_PAIR_SLOTS},
        {"block-slots", required_argument, 0, OPT_BLOCK_SLOTS},
        {"device-memory", required_argument, 0, OPT_DEVICE_MEMORY},
        {"devices", required_argument, 0, OPT_DEVICES},
        {"timeout", required_argument, 0, OPT_TIMEOUT},
        {"sample", required_argument, 0, OPT_SAMPLE},
        {"small-keys", required_argument, 0, OPT_SMALL_KEYS},
        {"explain", no_argument, 0, OPT_EXPLAIN},
        {"allow-insecure-plugin-dirs", no_argument, 0, OPT_ALLOW_INSECURE},
        {"order", required_argument, 0, OPT_ORDER},
        {"top", required_argument, 0, OPT_TOP},
        {"progress", no_argument, 0, OPT_PROGRESS},
        {"no-progress", no_argument, 0, OPT_NO_PROGRESS},
        {"from", required_argument, 0, OPT_FROM},
        {"dir", required_argument, 0, OPT_DIR},
        {"tasks", required_argument, 0, OPT_TASKS},
        {"iterate", required_argument, 0, OPT_ITERATE},
        {"output-parts", no_argument, 0, OPT_OUTPUT_PARTS},
        {"local", no_argument, 0, OPT_LOCAL},
        {"socket", required_argument, 0, OPT_SOCKET},
        {"detach", no_argument, 0, OPT_DETACH},
        {"load", required_argument, 0, OPT_LOAD},
        {"jobs", required_argument, 0, OPT_JOBS},
        {0, 0, 0, 0}};
    soren_run_options_init(&c->run);
    c->progress = -1;
    opterr = 0;
    int opt;
    char why[WHY_SIZE];
    while ((opt = getopt_long(argc, argv, ":o:p:t:f:P:vhV", options, NULL)) != -1) {
        switch (opt) {
        case 'o': c->run.output = optarg; break;
        case 'p':
            if (!push(&c->params, &c->param_count, optarg))
                return out_of_memory();
            break;
        case OPT_DEVICE:
            if (strcmp(optarg, "auto") == 0)
                c->run.device = SOREN_DEVICE_AUTO;
            else if (strcmp(optarg, "cpu") == 0)
                c->run.device = SOREN_DEVICE_CPU;
            else if (strcmp(optarg, "gpu") == 0)
                c->run.device = SOREN_DEVICE_GPU;
            else if (strcmp(optarg, "both") == 0)
                c->run.device = SOREN_DEVICE_BOTH;
            else
                return soren__cli_usage_error("--device: expected auto, cpu, gpu or both, got \"%s\"", optarg);
            break;
        case OPT_ENGINE:
            if (!soren_engine_name_valid(optarg))
                return soren__cli_usage_error("--engine: expected one of auto, hash, block, direct, dense, "
                                   "sort, got \"%s\"", optarg);
            c->run.engine = optarg;
            break;
        case 't': {
            uint64_t n = 0;
            if (!parse_count(optarg, 0, 1, 4096, &n, why))
                return bad_value("--threads", "a number from 1 to 4096", optarg, why);
            c->run.threads = (unsigned)n;
            break;
        }
        case 'f':
            if (soren_format_parse(optarg, &c->run.format) != 0)
                return soren__cli_usage_error("--format: expected one of %s, got \"%s\"",
                                   soren_format_names, optarg);
            break;
        case OPT_ORDER: {
            soren_order order;
            if (soren_order_parse(optarg, &order) != 0)
                return soren__cli_usage_error("--order: expected one of %s, got \"%s\"",
                                   soren_order_names, optarg);
            c->run.order = (int)order;
            break;
        }
        case OPT_TOP:
            if (!parse_count(optarg, 0, 1, UINT64_MAX, &c->run.top, why))
                return bad_value("--top", "a number of pairs from 1 up", optarg, why);
            break;
        case OPT_TASKS:
            if (!parse_count(optarg, 0, 1, UINT64_MAX, &c->run.tasks, why))
                return bad_value("--tasks", "a number of tasks from 1 up", optarg, why);
            break;
        case OPT_ITERATE:
            if (!parse_count(optarg, 0, 1, UINT64_MAX, &c->run.iterate, why))
                return bad_value("--iterate", "a number of runs from 1 up", optarg, why);
            break;
        case OPT_OUTPUT_PARTS: c->run.output_parts = 1; break;
        case OPT_LOCAL: c->local = 1; break;
        case OPT_SOCKET: c->socket = optarg; break;
        case OPT_DETACH: c->detach = 1; break;
        case OPT_LOAD:
            if (!push(&c->loads, &c->load_count, optarg))
                return out_of_memory();
            break;
        case OPT_JOBS: {
            uint64_t n = 0;
            if (!parse_count(optarg, 0, 1, 4096, &n, why))
                return bad_value("--jobs", "a number from 1 to 4096", optarg, why);
            c->host_jobs = (unsigned)n;
            break;
        }
        case OPT_PROGRESS: c->progress = 1; break;
        case OPT_NO_PROGRESS: c->progress = 0; break;
        case OPT_FROM: c->new_from = optarg; break;
        case OPT_DIR: c->new_dir = optarg; break;
        case 'P':
            if (!push(&c->plugin_paths, &c->plugin_path_count, optarg))
                return out_of_memory();
            break;
        case OPT_TABLE_SLOTS:
        case OPT_KEY_BYTES:
        case OPT_PAIR_SLOTS: {
            uint64_t *dst = opt == OPT_TABLE_SLOTS ? &c->run.gpu.table_slots
                          : opt == OPT_KEY_BYTES   ? &c->run.gpu.key_bytes
                                                   : &c->run.gpu.pair_slots;
            if (!parse_count(optarg, SOREN_NUMBER_SUFFIX, 1, UINT64_MAX, dst, why))
                return bad_value(opt == OPT_TABLE_SLOTS ? "--table-slots"
                                 : opt == OPT_KEY_BYTES ? "--key-bytes"
                                                        : "--pair-slots",
                                 "a size such as 65536, 64K, 512M or 2G", optarg, why);
            break;
        }
        case OPT_BLOCK_SLOTS: {
            uint64_t n = 0;
            if (!parse_count(optarg, 0, 0, UINT64_MAX, &n, why))
                return bad_value("--block-slots", "a count such as 256 (0: no per-block tables)",
                                 optarg, why);
            c->run.gpu.block_slots = n ? n : SOREN_GPU_NO_BLOCK_TABLE;
            break;
        }
        case OPT_TIMEOUT:
            if (!parse_duration(optarg, &c->run.timeout_ms, why))
                return bad_value("--timeout", "a duration such as 90, 90s, 5m or 2h (seconds "
                                 "where no unit is given), from 1 s to 1000 h", optarg, why);
            break;
        case OPT_DEVICES:
            if (!parse_devices(optarg, &c->run, why))
                return bad_value("--devices", "all, a count such as 2, or GPU numbers such as "
                                 "0,2", optarg, why);
            break;
        case OPT_DEVICE_MEMORY:
            if (!parse_count(optarg, SOREN_NUMBER_SUFFIX, 1, UINT64_MAX, &c->run.device_memory,
                             why))
                return bad_value("--device-memory", "a size such as 512M or 8G", optarg, why);
            break;
        case OPT_SAMPLE:
            if (!parse_fraction(optarg, &c->run.sample, why))
                return bad_value("--sample", "a fraction from 0 to 1 (0 turns monitoring off)",
                                 optarg, why);
            break;
        case OPT_SMALL_KEYS:
            if (!parse_count(optarg, 0, 0, UINT64_MAX, &c->run.small_keys, why))
                return bad_value("--small-keys", "a number of distinct keys such as 1000", optarg,
                                 why);
            break;
        case OPT_EXPLAIN: c->run.explain = 1; break;
        case OPT_ALLOW_INSECURE: c->trust = SOREN_TRUST_ANY; break;
        case 'v': c->run.verbose = 1; break;
        case 'h': fputs(usage_text, stdout); return 0;
        case 'V':
            printf("soren-host %s (plugin ABI %d.%d)\n", PACKAGE_VERSION, SOREN_ABI_MAJOR,
                   SOREN_ABI_MINOR);
            return 0;
        case ':': return soren__cli_usage_error("%s needs a value", argv[optind - 1]);
        default: return unknown_option(argv[optind - 1], options);
        }
    }
    if (optind >= argc)
        return soren__cli_usage_error("%s", "no command given (list, info, check, run, new, devices, serve, load, unload, ps or stop)");
    c->command = argv[optind];
    if ((c->new_from || c->new_dir) && strcmp(c->command, "new") != 0)
        return soren__cli_usage_error("%s applies to the new command only",
                           c->new_from ? "--from" : "--dir");
    if ((c->detach || c->load_count || c->host_jobs) && strcmp(c->command, "serve") != 0)
        return soren__cli_usage_error("%s applies to the serve command only",
                                      c->detach ? "--detach" : c->load_count ? "--load"
                                                                             : "--jobs");
    if (c->local && strcmp(c->command, "run") != 0)
        return soren__cli_usage_error("%s", "--local applies to the run command only");
    c->args = argv + optind + 1;
    c->arg_count = argc - optind - 1;
    c->run.params = c->params;
    c->run.param_count = c->param_count;
    return -1;
}

void soren__cli_args_destroy(soren__cli_args *c)
{
    free(c->params);
    free(c->plugin_paths);
    free(c->loads);
    c->params = NULL;
    c->plugin_paths = NULL;
    c->loads = NULL;
    c->param_count = c->plugin_path_count = c->load_count = 0;
}
