/*
 * soren-host - run Soren MapReduce jobs (plugins) on a GPU or the CPU.
 *
 * Exit codes: 0 success, 1 job or input error, 2 usage error,
 * 128+N killed by signal N (after removing a partial output).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/args.h"
#include "cli/commands.h"
#include "cli/mpi.h"
#include "config.h"
#include "engine/job.h"
#include "io/signals.h"
#include "nearest.h"
#include "plugin/loader.h"
#include "plugin/search.h"
#include <soren/soren.h>

typedef soren__cli_args cli;

static int report(const soren_error *err)
{
    fprintf(stderr, "soren-host: %s\n", err->text);
    return soren_status_exit_code(err->code);
}

static void print_entry(void *ctx, const soren_plugin_entry *e)
{
    int verbose = *(const int *)ctx;
    if (!e->m) {
        /* the name the file would be run by: NAME of NAME.json */
        const char *slash = strrchr(e->manifest_path, '/');
        const char *file = slash ? slash + 1 : e->manifest_path;
        printf("%-16.*s %-8s %s\n", (int)(strlen(file) - 5), file, "BROKEN", e->error->text);
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
        return soren__cli_usage_error("list takes no arguments, got \"%s\"", c->args[0]);
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

/* "rows x cols", "k x 4": the product a count_from says. */
static void print_product(const soren_count_from *cf)
{
    for (size_t i = 0; i < cf->count; i++) {
        if (cf->names[i])
            printf("%s%s", i ? " x " : "", cf->names[i]);
        else
            printf("%s%u", i ? " x " : "", (unsigned)cf->constants[i]);
    }
}

static void print_info(const soren_manifest *m)
{
    static const char *const combines[] = {"none", "sum", "min", "max", "count", "function"};
    static const char *const reduces[] = {"none", "combine", "function"};
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
        printf("param:     %s (%s%s", p->name, soren_param_type_name(p->type),
               p->required ? ", required" : "");
        if (p->default_value)
            printf(", default %s", p->default_value);
        printf(")%s%s\n", p->help ? ": " : "", p->help ? p->help : "");
    }
}

/* Resolves the one NAME|PATH argument of info and check: -1 with *path
 * set (free it), else the exit code of the failure. */
static int resolve_job(cli *c, const soren_search_path *sp, const char *command, char **path)
{
    if (c->arg_count != 1)
        return soren__cli_usage_error("%s takes one NAME or PATH", command);
    soren_error err;
    soren_error_clear(&err);
    if (soren_plugin_resolve(sp, c->args[0], path, &err) != SOREN_OK)
        return report(&err);
    return -1;
}

static int cmd_info(cli *c, const soren_search_path *sp)
{
    char *path = NULL;
    int rc = resolve_job(c, sp, "info", &path);
    if (rc >= 0)
        return rc;
    soren_error err;
    soren_error_clear(&err);
    soren_manifest *m = NULL;
    if (soren_plugin_manifest_load(path, c->trust, &m, &err) != SOREN_OK) {
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
    char *path = NULL;
    int rc = resolve_job(c, sp, "check", &path);
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
 * *mpi is the module whose MPI is to be finalised, NULL where none started. */
static soren_status start_ranks(soren_comm *storage, const soren_comm **comm,
                                const soren_mpi_module **mpi, soren_error *err)
{
    *comm = NULL;
    *mpi = NULL;
    const int ranks = soren__mpi_launched();
    if (ranks == 0)
        return SOREN_OK;
#ifdef HAVE_MPI
    const soren_mpi_module *m;
    soren_status rc = soren__mpi_module_load(&m, err);
    if (rc != SOREN_OK)
        return rc;
    rc = m->start(storage, err);
    *mpi = m;
    if (rc == SOREN_OK && storage->size > 1)
        *comm = storage;
    return rc;
#else
    (void)storage;
    if (ranks > 1)
        return soren_error_set(err, SOREN_EUSAGE, "mpirun started %d copies of soren-host, which "
                               "was built without MPI, so each would run the whole job: "
                               "rebuild it with MPI ('sudo apt-get install libopenmpi-dev "
                               "openmpi-bin', then ./configure --with-mpi) or run it without "
                               "mpirun", ranks);
    return SOREN_OK;
#endif
}

/* MPI ends where it started. */
static void end_ranks(const soren_mpi_module *mpi)
{
    if (mpi)
        mpi->end();
}

static int cmd_run(cli *c, const soren_search_path *sp, int argc, char **argv)
{
    if (c->arg_count < 1)
        return soren__cli_usage_error("%s", "run needs a job: soren-host run NAME|PATH "
                                            "[INPUT...]");
    int hosted = soren__cli_run_in_host(c, sp, argc, argv);
    if (hosted >= 0)
        return hosted;
    soren_error err;
    soren_error_clear(&err);
    soren_comm storage;
    const soren_comm *comm = NULL;
    const soren_mpi_module *mpi = NULL;
    if (start_ranks(&storage, &comm, &mpi, &err) != SOREN_OK) {
        end_ranks(mpi);
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
        /* Without its thread the run goes on, only without the line;
         * --timeout cancels the run through it, drawn or not. */
        if (speaks && (want_progress(c) || c->run.timeout_ms))
            c->run.progress = soren_progress_new(stderr, want_progress(c), NULL);
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
    end_ranks(mpi);
    return rc;
}

static int cmd_new(cli *c)
{
    if (c->arg_count != 1)
        return soren__cli_usage_error("%s", "new takes one NAME: soren-host new NAME [--from EXAMPLE] "
                                 "[--dir DIR]");
    return soren__cli_new(c->args[0], c->new_from, c->new_dir);
}

static int cmd_devices(cli *c)
{
    if (c->arg_count)
        return soren__cli_usage_error("devices takes no arguments, got \"%s\"", c->args[0]);
    return soren__cli_devices();
}

/* The usage error of a command soren-host does not have, with the nearest
 * one where one is close (rnu: did you mean run?). */
static int unknown_command(const char *command)
{
    static const char *const commands[] = {"list", "info",   "check",  "run", "new", "devices",
                                           "serve", "load", "unload", "ps",  "stop"};
    const char *nearest =
        soren__nearest(command, commands, sizeof commands / sizeof commands[0]);
    if (nearest)
        return soren__cli_usage_error("unknown command \"%s\"; did you mean \"%s\"?", command,
                                      nearest);
    return soren__cli_usage_error("unknown command \"%s\" (list, info, check, run, new, devices, "
                                  "serve, load, unload, ps or stop)", command);
}

int main(int argc, char **argv)
{
    cli c = {0};
    int rc = soren__cli_parse_args(&c, argc, argv);
    if (rc >= 0) {
        soren__cli_args_destroy(&c);
        return rc;
    }
    /* A partial output must not survive an interrupted run (signals.h). */
    soren_signals_install();

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
            rc = cmd_run(&c, &sp, argc, argv);
        else if (strcmp(c.command, "serve") == 0)
            rc = soren__cli_serve(&c, &sp);
        else if (strcmp(c.command, "load") == 0)
            rc = soren__cli_load(&c, &sp);
        else if (strcmp(c.command, "unload") == 0)
            rc = soren__cli_unload(&c);
        else if (strcmp(c.command, "ps") == 0)
            rc = soren__cli_ps(&c);
        else if (strcmp(c.command, "stop") == 0)
            rc = soren__cli_stop(&c);
        else if (strcmp(c.command, "new") == 0)
            rc = cmd_new(&c);
        else if (strcmp(c.command, "devices") == 0)
            rc = cmd_devices(&c);
        else
            rc = unknown_command(c.command);
        soren_search_path_destroy(&sp);
    }
    soren__cli_args_destroy(&c);
    return rc;
}
