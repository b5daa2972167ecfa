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

/* The folder of soren-host's templates, examples and plugin.mk:
 * $SOREN_DATADIR where set (tests, a moved installation), else the
 * configured $(pkgdatadir). */
const char *soren__cli_datadir(void);

#endif /* SOREN_CLI_COMMANDS_H */
