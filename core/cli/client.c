/*
 * client.c - soren-host's side of the resident host: run through it, and
 * the commands that talk to it (load, unload, ps, stop).
 *
 * A run goes to the host when one answers at the socket, unless --local
 * says otherwise or the run is one a host does not take (under mpirun,
 * --output-parts, more inputs than one message carries descriptors for).
 * The client does everything a path or a permission decides: it resolves
 * the job through its own plugin path, opens the inputs and the output's
 * temporary file, and hands the host the descriptors with its working
 * folder, standard input and standard error; the host maps and writes
 * what it was handed.  Whatever the client cannot prepare (a missing
 * input, an output that cannot be made) it leaves to a local run, which
 * says why in the words a run always uses.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/args.h"
#include "cli/commands.h"
#include "host/channel.h"
#include "io/output.h"
#include "plugin/search.h"

static int say(const soren_error *err)
{
    fprintf(stderr, "soren-host: %s\n", err->text);
    return soren_status_exit_code(err->code);
}

/* Waits for the host's REPLY: its exit code, with its text said on stream
 * (standard error for a failure).  *stopped is 1 where the host went away
 * first. */
static int await_reply(int fd, FILE *stream, int *stopped)
{
    soren_msg msg;
    soren_error err;
    soren_error_clear(&err);
    int fds[1];
    size_t nfds = 0;
    int closed = 0;
    *stopped = 0;
    if (soren_channel_recv(fd, &msg, fds, 0, &nfds, &closed, &err) != SOREN_OK) {
        *stopped = 1;
        return 1;
    }
    int code = 1;
    if (msg.kind != SOREN_MSG_REPLY || msg.count != 2) {
        fprintf(stderr, "soren-host: the host answered with a message of kind %d\n",
                (int)msg.kind);
    } else {
        code = atoi(msg.fields[0]);
        if (*msg.fields[1])
            fprintf(code ? stderr : stream, code ? "soren-host: %s\n" : "%s",
                    msg.fields[1]);
    }
    soren_msg_destroy(&msg);
    return code;
}

/* Connects to the host; -1 where none answers (a stale socket is said
 * with --verbose; no socket at all is the usual case, and says nothing), or
 * where the socket is not safe to use (always said). */
static int reach_host(const soren__cli_args *c, char *path, size_t size)
{
    soren_error err;
    soren_error_clear(&err);
    if (soren_channel_path(c->socket, path, size, &err) != SOREN_OK) {
        say(&err);
        return -1;
    }
    int fd = soren_channel_connect(path, &err);
    if (fd == -1)
        fprintf(stderr, "soren-host: not using the host: %s; running here\n", err.text);
    else if (fd < 0 && c->run.verbose && access(path, F_OK) == 0)
        fprintf(stderr, "soren-host: %s (a stale socket); running here\n", err.text);
    return fd < 0 ? -1 : fd;
}

/* The descriptors of a run: working folder, standard input, the output,
 * standard error, then the inputs (-1 where one could not be opened). */
static int open_inputs(const soren__cli_args *c, int *fds)
{
    for (int i = 1; i < c->arg_count; i++) {
        fds[3 + i] = open(c->args[i], O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
        if (fds[3 + i] < 0)
            return -1;
    }
    return 0;
}

int soren__cli_run_in_host(const soren__cli_args *c, const soren_search_path *sp, int argc,
                           char **argv)
{
    if (c->local || c->run.output_parts || c->arg_count - 1 > (int)SOREN_MSG_MAX_FDS - 4 ||
        getenv("OMPI_COMM_WORLD_SIZE") || getenv("PMI_RANK"))
        return -1;
    soren_error err;
    soren_error_clear(&err);
    char *manifest = NULL, *absolute = NULL;
    if (soren_plugin_resolve(sp, c->args[0], &manifest, &err) != SOREN_OK ||
        !(absolute = realpath(manifest, NULL))) {
        free(manifest);
        return -1; /* a local run says why */
    }
    free(manifest);
    int fds[SOREN_MSG_MAX_FDS];
    size_t nfds = 3 + (size_t)c->arg_count;
    for (size_t i = 0; i < nfds; i++)
        fds[i] = -1;
    soren_output out = {0};
    int rc = -1, have_output = 0;
    fds[0] = open(".", O_PATH | O_DIRECTORY | O_CLOEXEC);
    fds[1] = STDIN_FILENO;
    fds[3] = STDERR_FILENO;
    if (fds[0] < 0 || open_inputs(c, fds) != 0)
        goto done;
    /* The host first: where none answers the run is local, and an output
     * opened here would show its temporary file, then remove it, before
     * the local run makes it again. */
    char path[4096];
    int host = reach_host(c, path, sizeof path);
    if (host < 0)
        goto done;
    if (soren_output_open(&out, c->run.output, &err) != SOREN_OK) {
        close(host);
        goto done;
    }
    have_output = 1;
    fds[2] = fileno(out.file);
    const char **fields = calloc((size_t)argc + 1, sizeof *fields);
    if (!fields) {
        close(host);
        goto done;
    }
    fields[0] = absolute;
    for (int i = 0; i < argc; i++)
        fields[i + 1] = argv[i];
    soren_status sent = soren_channel_send_msg(host, SOREN_MSG_RUN, fields, (size_t)argc + 1,
                                               fds, nfds, &err);
    free(fields);
    if (sent != SOREN_OK) {
        if (c->run.verbose)
            fprintf(stderr, "soren-host: %s; running here\n", err.text);
        close(host);
        goto done;
    }
    if (c->run.verbose)
        fprintf(stderr, "soren-host: running %s in the host at %s\n", c->args[0], path);
    int stopped = 0;
    rc = await_reply(host, stdout, &stopped);
    close(host);
    if (stopped) {
        fprintf(stderr, "soren-host: the host at %s stopped while running job %s (plugin %s): "
                "nothing was written; its log may say more (%s.log, where it was started with "
                "--detach), and the next run starts afresh (soren-host serve, or the service "
                "manager)\n", path, c->args[0], absolute, path);
        rc = 1;
    }
    if (rc == 0 && soren_output_commit(&out, &err) != SOREN_OK)
        rc = say(&err);
done:
    if (have_output)
        soren_output_abort(&out);
    if (fds[0] >= 0)
        close(fds[0]);
    for (int i = 1; i < c->arg_count; i++)
        if (fds[3 + i] >= 0)
            close(fds[3 + i]);
    free(absolute);
    return rc;
}

/* Sends one request to the host and relays its answer. */
static int request(const soren__cli_args *c, soren_msg_kind kind, const char *const *fields,
                   size_t count, const char *what)
{
    soren_error err;
    soren_error_clear(&err);
    char path[4096];
    if (soren_channel_path(c->socket, path, sizeof path, &err) != SOREN_OK)
        return say(&err);
    int fd = soren_channel_connect(path, &err);
    if (fd == -2) {
        fprintf(stderr, "soren-host: %s: no host is running at %s: start one with "
                "'soren-host serve --detach' (or 'systemctl --user start soren-host.socket')\n",
                what, path);
        return 1;
    }
    if (fd < 0)
        return say(&err);
    if (soren_channel_send_msg(fd, kind, fields, count, NULL, 0, &err) != SOREN_OK) {
        close(fd);
        return say(&err);
    }
    int stopped = 0;
    int rc = await_reply(fd, stdout, &stopped);
    close(fd);
    if (stopped) {
        fprintf(stderr, "soren-host: %s: the host at %s closed the connection without an "
                "answer\n", what, path);
        return 1;
    }
    return rc;
}

int soren__cli_load(const soren__cli_args *c, const soren_search_path *sp)
{
    if (c->arg_count != 1)
        return soren__cli_usage_error("%s", "load takes one NAME or PATH");
    soren_error err;
    soren_error_clear(&err);
    char *manifest = NULL, *absolute = NULL;
    if (soren_plugin_resolve(sp, c->args[0], &manifest, &err) != SOREN_OK) {
        free(manifest);
        return say(&err);
    }
    absolute = realpath(manifest, NULL);
    if (!absolute) {
        soren_error_errno(&err, SOREN_EPLUGIN, errno, "cannot resolve %s", manifest);
        free(manifest);
        return say(&err);
    }
    free(manifest);
    const char *fields[] = {absolute, c->trust == SOREN_TRUST_ANY ? "1" : "0"};
    int rc = request(c, SOREN_MSG_LOAD, fields, 2, "load");
    if (rc == 0)
        printf("soren-host: loaded %s into the host\n", absolute);
    free(absolute);
    return rc;
}

int soren__cli_unload(const soren__cli_args *c)
{
    if (c->arg_count != 1)
        return soren__cli_usage_error("%s", "unload takes one NAME (soren-host ps lists them)");
    const char *fields[] = {c->args[0]};
    return request(c, SOREN_MSG_UNLOAD, fields, 1, "unload");
}

int soren__cli_ps(const soren__cli_args *c)
{
    if (c->arg_count)
        return soren__cli_usage_error("ps takes no arguments, got \"%s\"", c->args[0]);
    return request(c, SOREN_MSG_PS, NULL, 0, "ps");
}

int soren__cli_stop(const soren__cli_args *c)
{
    if (c->arg_count)
        return soren__cli_usage_error("stop takes no arguments, got \"%s\"", c->args[0]);
    return request(c, SOREN_MSG_STOP, NULL, 0, "stop");
}
