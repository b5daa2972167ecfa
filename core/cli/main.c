/*
 * soren-host - run Soren MapReduce jobs (plugins) on a GPU or the CPU.
 *
 * Exit codes: 0 success, 1 job or input error, 2 usage error,
 * 128+N killed by signal N (after removing a partial output).
 */
#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdint.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/commands.h"
#include "config.h"
#ifdef HAVE_MPI
#include "cli/mpi.h"
#endif
#include "engine/job.h"
#include "plugin/loader.h"
#include "plugin/search.h"
#include <soren/soren.h>

#define EXIT_USAGE 2

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
    "      --device auto|cpu|gpu\n"
    "                       where to run (default auto: a usable GPU, else the CPU)\n"
    "      --engine auto|hash|block|direct|dense|sort\n"
    "                       force a GPU engine variant (default auto: chosen from\n"
    "                       the manifest and the sample; the CPU engine runs hash,\n"
    "                       or direct for a job without combine and reduce)\n"
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
    "                       load plugins whose folder, manifest or library others\n"
    "                       than the owner can write to (refused by default)\n"
    "  -v, --verbose        say what was decided and done, on standard error\n"
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

typedef struct cli {
    const char *command;
    char **args; /* after the command */
    int arg_count;
    soren_run_options run;
    const char **plugin_paths;
    size_t plugin_path_count;
    soren_trust trust; /* --allow-insecure-plugin-dirs */
    const char **params;
    size_t param_count;
    int progress;          /* --progress 1, --no-progress 0, else -1: on a terminal */
    const char *new_from;  /* new --from */
    const char *new_dir;   /* new --dir */
} cli;

static int usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int usage_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("soren-host: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputs("\nTry 'soren-host --help'.\n", stderr);
    va_end(ap);
    return EXIT_USAGE;
}

static int report(const soren_error *err)
{
    fprintf(stderr, "soren-host: %s\n", err->text);
    return soren_status_exit_code(err->code);
}

/* A partial output must not survive an interrupted run. */
static void on_signal(int sig)
{
    const char *pending = soren_output_pending_path();
    if (pending)
        unlink(pending);
    signal(sig, SIG_DFL);
    raise(sig);
}

static int parse_threads(const char *text, unsigned *out)
{
    char *end = NULL;
    unsigned long n = strtoul(text, &end, 10);
    if (!*text || *end || text[0] == '-' || n < 1 || n > 4096)
        return 0;
    *out = (unsigned)n;
    return 1;
}

/* A positive count or size, with an optional K, M or G (powers of 1024). */
static int parse_size(const char *text, uint64_t *out)
{
    char *end = NULL;
    if (!*text || text[0] == '-')
        return 0;
    errno = 0;
    unsigned long long n = strtoull(text, &end, 10);
    if (errno == ERANGE)
        return 0;
    unsigned shift = 0;
    if (*end == 'K' || *end == 'k')
        shift = 10;
    else if (*end == 'M' || *end == 'm')
        shift = 20;
    else if (*end == 'G' || *end == 'g')
        shift = 30;
    if (shift)
        end++;
    if (*end || n == 0 || n > (UINT64_MAX >> shift))
        return 0;
    *out = (uint64_t)n << shift;
    return 1;
}

/* A count from 0 up, digits only. */
static int parse_count(const char *text, uint64_t *out)
{
    char *end = NULL;
    if (*text < '0' || *text > '9')
        return 0;
    errno = 0;
    unsigned long long n = strtoull(text, &end, 10);
    if (errno == ERANGE || *end)
        return 0;
    *out = n;
    return 1;
}

/* A fraction from 0 to 1 (NaN and infinities are not). */
static int parse_fraction(const char *text, double *out)
{
    char *end = NULL;
    errno = 0;
    double x = strtod(text, &end);
    if (end == text || *end || errno == ERANGE || !(x >= 0 && x <= 1))
        return 0;
    *out = x;
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

/* Fills c from argv; returns -1 to go on, or an exit code. */
static int parse_args(cli *c, int argc, char **argv)
{
    enum {
        OPT_DEVICE = 256, OPT_ENGINE, OPT_TABLE_SLOTS, OPT_KEY_BYTES, OPT_PAIR_SLOTS,
        OPT_SAMPLE, OPT_SMALL_KEYS, OPT_EXPLAIN, OPT_ALLOW_INSECURE, OPT_ORDER, OPT_TOP,
        OPT_PROGRESS, OPT_NO_PROGRESS, OPT_FROM, OPT_DIR, OPT_TASKS, OPT_ITERATE,
        OPT_OUTPUT_PARTS
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
        {0, 0, 0, 0}};
    soren_run_options_init(&c->run);
    c->progress = -1;
    opterr = 0;
    int opt;
    while ((opt = getopt_long(argc, argv, ":o:p:t:f:P:vhV", options, NULL)) != -1) {
        switch (opt) {
        case 'o': c->run.output = optarg; break;
        case 'p':
            if (!push(&c->params, &c->param_count, optarg))
                return usage_error("%s", "out of memory");
            break;
        case OPT_DEVICE:
            if (strcmp(optarg, "auto") == 0)
                c->run.device = SOREN_DEVICE_AUTO;
            else if (strcmp(optarg, "cpu") == 0)
                c->run.device = SOREN_DEVICE_CPU;
            else if (strcmp(optarg, "gpu") == 0)
                c->run.device = SOREN_DEVICE_GPU;
            else
                return usage_error("--device: expected auto, cpu or gpu, got \"%s\"", optarg);
            break;
        case OPT_ENGINE:
            if (!soren_engine_name_valid(optarg))
                return usage_error("--engine: expected one of auto, hash, block, direct, dense, "
                                   "sort, got \"%s\"", optarg);
            c->run.engine = optarg;
            break;
        case 't':
            if (!parse_threads(optarg, &c->run.threads))
                return usage_error("--threads: expected a number from 1 to 4096, got \"%s\"",
                                   optarg);
            break;
        case 'f':
            if (soren_format_parse(optarg, &c->run.format) != 0)
                return usage_error("--format: expected one of %s, got \"%s\"",
                                   soren_format_names, optarg);
            break;
        case OPT_ORDER: {
            soren_order order;
            if (soren_order_parse(optarg, &order) != 0)
                return usage_error("--order: expected one of %s, got \"%s\"",
                                   soren_order_names, optarg);
            c->run.order = (int)order;
            break;
        }
        case OPT_TOP:
            if (!parse_count(optarg, &c->run.top) || c->run.top == 0)
                return usage_error("--top: expected a number of pairs from 1 up, got \"%s\"",
                                   optarg);
            break;
        case OPT_TASKS:
            if (!parse_count(optarg, &c->run.tasks) || c->run.tasks == 0)
                return usage_error("--tasks: expected a number of tasks from 1 up, got \"%s\"",
                                   optarg);
            break;
        case OPT_ITERATE:
            if (!parse_count(optarg, &c->run.iterate) || c->run.iterate == 0)
                return usage_error("--iterate: expected a number of runs from 1 up, got \"%s\"",
                                   optarg);
            break;
        case OPT_OUTPUT_PARTS: c->run.output_parts = 1; break;
        case OPT_PROGRESS: c->progress = 1; break;
        case OPT_NO_PROGRESS: c->progress = 0; break;
        case OPT_FROM: c->new_from = optarg; break;
        case OPT_DIR: c->new_dir = optarg; break;
        case 'P':
            if (!push(&c->plugin_paths, &c->plugin_path_count, optarg))
                return usage_error("%s", "out of memory");
            break;
        case OPT_TABLE_SLOTS:
        case OPT_KEY_BYTES:
        case OPT_PAIR_SLOTS: {
            uint64_t *dst = opt == OPT_TABLE_SLOTS ? &c->run.gpu.table_slots
                          : opt == OPT_KEY_BYTES   ? &c->run.gpu.key_bytes
                                                   : &c->run.gpu.pair_slots;
            if (!parse_size(optarg, dst))
                return usage_error("%s: expected a size such as 65536, 64K, 512M or 2G, "
                                   "got \"%s\"", opt == OPT_TABLE_SLOTS ? "--table-slots"
                                                  : opt == OPT_KEY_BYTES ? "--key-bytes"
                                                                          : "--pair-slots",
                                   optarg);
            break;
        }
        case OPT_SAMPLE:
            if (!parse_fraction(optarg, &c->run.sample))
                return usage_error("--sample: expected a fraction from 0 to 1 (0 turns "
                                   "monitoring off), got \"%s\"", optarg);
            break;
        case OPT_SMALL_KEYS:
            if (!parse_count(optarg, &c->run.small_keys))
                return usage_error("--small-keys: expected a number of distinct keys such as "
                                   "1000, got \"%s\"", optarg);
            break;
        case OPT_EXPLAIN: c->run.explain = 1; break;
        case OPT_ALLOW_INSECURE: c->trust = SOREN_TRUST_ANY; break;
        case 'v': c->run.verbose = 1; break;
        case 'h': fputs(usage_text, stdout); return 0;
        case 'V':
            printf("soren-host %s (plugin ABI %d.%d)\n", PACKAGE_VERSION, SOREN_ABI_MAJOR,
                   SOREN_ABI_MINOR);
            return 0;
        case ':': return usage_error("%s needs a value", argv[optind - 1]);
        default: return usage_error("unknown option %s", argv[optind - 1]);
        }
    }
    if (optind >= argc)
        return usage_error("%s", "no command given (list, info, check, run, new or devices)");
    c->command = argv[optind];
    if ((c->new_from || c->new_dir) && strcmp(c->command, "new") != 0)
        return usage_error("%s applies to the new command only",
                           c->new_from ? "--from" : "--dir");
    c->args = argv + optind + 1;
    c->arg_count = argc - optind - 1;
    c->run.params = c->params;
    c->run.param_count = c->param_count;
    return -1;
}

static void print_entry(void *ctx, const soren_plugin_entry *e)
{
    int verbose = *(const int *)ctx;
    if (!e->m) {
        printf("%-16s %-8s %s\n", "?", "BROKEN", e->error->text);
        return;
    }
    if (e->shadowed_by) {
        if (verbose)
            printf("%-16s %-8s shadowed by %s\n", e->m->name, e->m->version, e->shadowed_by);
        return;
    }
    printf("%-16s %-8s %s", e->m->name, e->m->version, e->m->summary);
    if (verbose)
        printf("  (%s)", e->manifest_path);
    putchar('\n');
}

static int cmd_list(cli *c, const soren_search_path *sp)
{
    if (c->arg_count)
        return usage_error("list takes no arguments, got \"%s\"", c->args[0]);
    soren_error err;
    soren_error_clear(&err);
    if (soren_plugin_list(sp, c->trust, print_entry, &c->run.verbose, &err) != SOREN_OK)
        return report(&err);
    return 0;
}

static const char *input_name(soren_input_format f)
{
    switch (f) {
    case SOREN_INPUT_LINES: return "lines";
    case SOREN_INPUT_FIXED: return "fixed";
    case SOREN_INPUT_INDEX: return "index";
    case SOREN_INPUT_PAIRS: return "pairs";
    }
    return "?";
}

static const char *order_name(soren_order o)
{
    static const char *const names[] = {"key", "value_desc", "value_asc", "none"};
    return names[o];
}

/* "rows x cols": the parameters whose product a count_from says. */
static void print_product(const soren_count_from *cf)
{
    for (size_t i = 0; i < cf->count; i++)
        printf("%s%s", i ? " x " : "", cf->names[i]);
}

static void print_info(const soren_manifest *m)
{
    static const char *const combines[] = {"none", "sum", "min", "max", "count", "function"};
    static const char *const reduces[] = {"none", "combine", "function"};
    static const char *const params[] = {"", "string", "u32", "u64", "i64", "f32", "f64",
                                         "regex"};
    printf("name:      %s\nversion:   %s\nsummary:   %s\nmanifest:  %s\nlibrary:   %s/%s\n",
           m->name, m->version, m->summary, m->path, m->dir, m->library);
    printf("input:     %s", input_name(m->input.format));
    if (m->input.format == SOREN_INPUT_FIXED)
        printf(" (records of %llu bytes)", (unsigned long long)m->input.record_size);
    if (m->input.format == SOREN_INPUT_INDEX && m->input.count)
        printf(" (%llu tasks)", (unsigned long long)m->input.count);
    if (m->input.count_from.count) {
        printf(" (tasks: ");
        print_product(&m->input.count_from);
        putchar(')');
    }
    if (m->input.format == SOREN_INPUT_INDEX && !m->input.count && !m->input.count_from.count)
        printf(" (tasks: --tasks N)");
    size_t stages = soren_manifest_stages(m);
    for (size_t i = 0; i < stages; i++) {
        soren_manifest_stage st = soren_manifest_stage_at(m, i);
        if (stages > 1)
            printf("\nstage %zu:   %s", i + 1, i ? "reads the pairs of the stage before"
                                                  : "reads the input");
        printf("\nkey:       %s", soren_type_name(st.key.type));
        if (st.key.type == SOREN_TYPE_STRING)
            printf(" (at most %u bytes)", st.key.max_size);
        if (st.key.type == SOREN_TYPE_INDEX && st.key.count)
            printf(" (0 to %llu)", (unsigned long long)st.key.count - 1);
        if (st.key.count_from.count) {
            printf(" (0 to ");
            print_product(&st.key.count_from);
            printf(" - 1)");
        }
        printf("\nvalue:     %s\ncombine:   %s\nreduce:    %s", soren_type_name(st.value.type),
               combines[st.combine], reduces[st.reduce]);
    }
    printf("\noutput:    order %s", order_name(m->output.order));
    if (m->output.limit)
        printf(", first %llu", (unsigned long long)m->output.limit);
    putchar('\n');
    if (m->iterate_param)
        printf("iterate:   run --iterate N feeds each run's output into parameter %s\n",
               m->iterate_param);
    for (size_t i = 0; i < m->param_count; i++) {
        const soren_manifest_param *p = &m->params[i];
        printf("param:     %s (%s%s", p->name, params[p->type], p->required ? ", required" : "");
        if (p->default_value)
            printf(", default %s", p->default_value);
        printf(")%s%s\n", p->help ? ": " : "", p->help ? p->help : "");
    }
}

/* Resolves the one NAME|PATH argument of info, check and run. */
static int resolve_job(cli *c, const soren_search_path *sp, char **path)
{
    soren_error err;
    soren_error_clear(&err);
    if (soren_plugin_resolve(sp, c->args[0], path, &err) != SOREN_OK)
        return report(&err);
    return -1;
}

static int cmd_info(cli *c, const soren_search_path *sp)
{
    if (c->arg_count != 1)
        return usage_error("%s", "info takes one NAME or PATH");
    char *path = NULL;
    int rc = resolve_job(c, sp, &path);
    if (rc >= 0)
        return rc;
    soren_error err;
    soren_error_clear(&err);
    soren_manifest *m = NULL;
    if (soren_manifest_load(path, &m, &err) != SOREN_OK) {
        free(path);
        return report(&err);
    }
    print_info(m);
    soren_manifest_free(m);
    free(path);
    return 0;
}

static int cmd_check(cli *c, const soren_search_path *sp)
{
    if (c->arg_count != 1)
        return usage_error("%s", "check takes one NAME or PATH");
    char *path = NULL;
    int rc = resolve_job(c, sp, &path);
    if (rc >= 0)
        return rc;
    soren_error err;
    soren_error_clear(&err);
    soren_plugin *p = NULL;
    if (soren_plugin_open(path, c->trust, &p, &err) != SOREN_OK) {
        free(path);
        return report(&err);
    }
    printf("%s: ok (%s %s, library %s, plugin ABI %u.%u)\n", path, p->manifest->name,
           p->manifest->version, p->library_path, p->table->abi_major, p->table->abi_minor);
    soren_plugin_close(p);
    free(path);
    return 0;
}

/* The progress line: as --progress or --no-progress say, else drawn where
 * standard error is a terminal (a log file or a pipe gets none). */
static int want_progress(const cli *c)
{
    return c->progress >= 0 ? c->progress : isatty(STDERR_FILENO);
}

/* The ranks of a distributed run, when mpirun started two or more of us
 * (one rank runs as a plain run does); *comm stays NULL otherwise.
 * *started says whether MPI is to be finalised. */
static soren_status start_ranks(soren_comm *storage, const soren_comm **comm, int *started,
                                soren_error *err)
{
    *comm = NULL;
    *started = 0;
#ifdef HAVE_MPI
    if (soren__mpi_launched() == 0)
        return SOREN_OK;
    soren_status rc = soren__mpi_start(storage, err);
    *started = 1;
    if (rc == SOREN_OK && storage->size > 1)
        *comm = storage;
    return rc;
#else
    (void)storage;
    const char *size = getenv("OMPI_COMM_WORLD_SIZE");
    if (size && atoi(size) > 1)
        return soren_error_set(err, SOREN_EUSAGE, "mpirun started %s copies of soren-host, which "
                               "was built without MPI, so each would run the whole job: "
                               "rebuild it with MPI ('sudo apt-get install libopenmpi-dev "
                               "openmpi-bin', then ./configure --with-mpi) or run it without "
                               "mpirun", size);
    return SOREN_OK;
#endif
}

/* MPI ends where it started. */
static void end_ranks(int started)
{
#ifdef HAVE_MPI
    if (started)
        soren__mpi_end();
#else
    (void)started;
#endif
}

static int cmd_run(cli *c, const soren_search_path *sp)
{
    if (c->arg_count < 1)
        return usage_error("%s", "run needs a job: soren-host run NAME|PATH [INPUT...]");
    soren_error err;
    soren_error_clear(&err);
    soren_comm storage;
    const soren_comm *comm = NULL;
    int started = 0;
    if (start_ranks(&storage, &comm, &started, &err) != SOREN_OK) {
        end_ranks(started);
        return report(&err);
    }
    /* Only rank 0 speaks: the others fail with it, silently. */
    int speaks = !comm || comm->rank == 0;
    char *path = NULL;
    soren_plugin *p = NULL;
    if (soren_plugin_resolve(sp, c->args[0], &path, &err) == SOREN_OK)
        soren_plugin_open(path, c->trust, &p, &err);
    /* A rank that could not load the job fails every rank. */
    if (comm)
        soren_dist_agree(comm, err.code, &err);
    if (err.code == SOREN_OK) {
        c->run.inputs = (const char *const *)c->args + 1;
        c->run.input_count = (size_t)c->arg_count - 1;
        c->run.comm = comm;
        /* Without its thread the run goes on, only without the line. */
        if (speaks && want_progress(c))
            c->run.progress = soren_progress_new(stderr, NULL);
        soren_run(p, &c->run, &err);
        soren_progress_free(c->run.progress);
        c->run.progress = NULL;
    }
    soren_plugin_close(p);
    free(path);
    /* Rank 0 speaks before MPI ends: finalising waits for every rank, so
     * none exits (and has mpirun end the job) before the message is out. */
    int rc = err.code == SOREN_OK ? 0
             : speaks            ? report(&err)
                                 : soren_status_exit_code(err.code);
    end_ranks(started);
    return rc;
}

static int cmd_new(cli *c)
{
    if (c->arg_count != 1)
        return usage_error("%s", "new takes one NAME: soren-host new NAME [--from EXAMPLE] "
                                 "[--dir DIR]");
    return soren__cli_new(c->args[0], c->new_from, c->new_dir);
}

static int cmd_devices(cli *c)
{
    if (c->arg_count)
        return usage_error("devices takes no arguments, got \"%s\"", c->args[0]);
    return soren__cli_devices();
}

int main(int argc, char **argv)
{
    cli c = {0};
    int rc = parse_args(&c, argc, argv);
    if (rc >= 0) {
        free(c.params);
        free(c.plugin_paths);
        return rc;
    }
    signal(SIGINT, on_signal);
    signal(SIGTERM, on_signal);

    soren_search_path sp;
    soren_error err;
    soren_error_clear(&err);
    if (soren_search_path_init(&sp, c.plugin_paths, c.plugin_path_count, &err) != SOREN_OK) {
        rc = report(&err);
    } else {
        if (strcmp(c.command, "list") == 0)
            rc = cmd_list(&c, &sp);
        else if (strcmp(c.command, "info") == 0)
            rc = cmd_info(&c, &sp);
        else if (strcmp(c.command, "check") == 0)
            rc = cmd_check(&c, &sp);
        else if (strcmp(c.command, "run") == 0)
            rc = cmd_run(&c, &sp);
        else if (strcmp(c.command, "new") == 0)
            rc = cmd_new(&c);
        else if (strcmp(c.command, "devices") == 0)
            rc = cmd_devices(&c);
        else
            rc = usage_error("unknown command \"%s\" (list, info, check, run, new or devices)",
                             c.command);
        soren_search_path_destroy(&sp);
    }
    free(c.params);
    free(c.plugin_paths);
    return rc;
}
