/*
 * commands.h - the soren-host commands that live outside main.c.
 *
 * Each returns the process's exit code (0 done, 1 it could not be done,
 * 2 a usage error), having said on standard error what went wrong and what
 * to do about it.
 */
#ifndef SOREN_CLI_COMMANDS_H
#define SOREN_CLI_COMMANDS_H

/* soren-host new NAME [--from EXAMPLE] [--dir DIR] (new.c): from and dir
 * may be NULL (the skeleton; the current folder). */
int soren__cli_new(const char *name, const char *from, const char *dir);

/* soren-host devices (devices.c): 0 with the GPUs listed on standard
 * output, 1 with the reason on standard error when none is usable. */
int soren__cli_devices(void);

/* soren-host serve (serve.c): the resident host, until stop or a signal. */
struct soren__cli_args;
struct soren_search_path;
int soren__cli_serve(const struct soren__cli_args *c, const struct soren_search_path *sp);

/* soren-host run through the resident host (client.c): the run's exit code,
 * or -1 where it is to run in this process (--local, no host answering, or
 * a run a host does not take).  argv is the whole command line. */
int soren__cli_run_in_host(const struct soren__cli_args *c, const struct soren_search_path *sp,
                           int argc, char **argv);
/* soren-host load, unload, ps and stop (client.c). */
int soren__cli_load(const struct soren__cli_args *c, const struct soren_search_path *sp);
int soren__cli_unload(const struct soren__cli_args *c);
int soren__cli_ps(const struct soren__cli_args *c);
int soren__cli_stop(const struct soren__cli_args *c);

#endif /* SOREN_CLI_COMMANDS_H */
