/* The resident host (soren-host serve) as its users meet it: the life
 * cycle, runs through it equal to runs in the process, many clients at
 * once, clients and hosts that die mid-job, stale and unsafe sockets, and
 * other users.  Runs on the CPU engine; the GPU host runs the same suite.
 * Test plugins are built here from C with the compiler (cc or $CC), a
 * second apiece, so a rebuilt plugin can be tried. */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "gpu/device.h"
#include "host/ledger.h"
#include "host/protocol.h"
#include "host/remote.h"
#include "testutil.h"
#include <soren/host.h>

static char *dir;
static char sock[4096], plugins[4096];

/* A C plugin NAME whose map emits each line with the value VALUE, after
 * sleeping a tenth of a second on a line that starts with "slow" where
 * SLOW, and dereferencing NULL on one that starts with "crash" where
 * CRASH. */
static const char plugin_source[] =
    "#include <soren/soren.h>\n"
    "#include <string.h>\n"
    "#include <unistd.h>\n"
    "static void m(soren_emitter *e, const soren_record *r, const soren_params *p)\n"
    "{\n"
    "    (void)p;\n"
    "    uint32_t v = VALUE;\n"
    "    if (SLOW && r->size >= 4 && memcmp(r->data, \"slow\", 4) == 0)\n"
    "        usleep(100000);\n"
    "    if (CRASH && r->size >= 5 && memcmp(r->data, \"crash\", 5) == 0)\n"
    "        *(volatile int *)0 = 1;\n"
    "    soren_emit(e, r->data, (uint32_t)r->size, &v);\n"
    "}\n"
    "SOREN_PLUGIN(NAME, SOREN_STAGE(.map = m, .combine = SOREN_SUM_U32))\n";

static const char manifest_text[] =
    "{\n  \"manifest_version\": 1,\n  \"name\": \"%s\",\n  \"version\": \"%s\",\n"
    "  \"summary\": \"A line counter for the resident host's tests\",\n"
    "  \"library\": \"%s.so\",\n  \"input\": { \"format\": \"lines\" },\n"
    "  \"key\": { \"type\": \"string\", \"max_size\": 4096 },\n"
    "  \"value\": { \"type\": \"u32\" },\n  \"combine\": \"sum\",\n"
    "  \"output\": { \"order\": \"key\" }\n}\n";

/* Builds plugin name into the plugin folder: a new library file each time,
 * as a linker makes one. */
static void build_plugin(const char *name, const char *version, int value, int slow, int crash)
{
    char path[8192], text[1024];
    snprintf(path, sizeof path, "%s/%s.json", plugins, name);
    snprintf(text, sizeof text, manifest_text, name, version, name);
    tu_write(path, text, strlen(text));
    snprintf(path, sizeof path, "%s/%s.c", dir, name);
    tu_write(path, plugin_source, sizeof plugin_source - 1);
    const char *cc = getenv("SOREN_CC") && *getenv("SOREN_CC") ? getenv("SOREN_CC") : "cc";
    char *err = NULL;
    int rc = tu_runf(NULL, &err,
                     "cd '%s' && sh '%s/build-aux/embed-manifest' '%s/%s.json' >%s-m.c && "
                     "%s -shared -fPIC -I'%s/sdk' -DNAME=%s -DVALUE=%d -DSLOW=%d -DCRASH=%d "
                     "-o %s.tmp.so %s.c %s-m.c && mv %s.tmp.so '%s/%s.so'",
                     dir, tu_srcdir(), plugins, name, name, cc, tu_srcdir(), name, value, slow,
                     crash, name, name, name, name, plugins, name);
    cr_assert_eq(rc, 0, "building plugin %s: %s", name, err);
    free(err);
}

static void setup(void)
{
    dir = tu_mkdtemp();
    snprintf(sock, sizeof sock, "%s/run/host.sock", dir);
    snprintf(plugins, sizeof plugins, "%s/plugins", dir);
    cr_assert_eq(mkdir(plugins, 0700), 0);
    build_plugin("lines", "1.0.0", 1, 0, 0);
    tu_write(strcat(strcpy((char[4200]){0}, dir), "/in.txt"), "b\na\nb\ncrash?\nb\n", 15);
}

/* Runs soren-host with the test's socket and plugin folder. */
static int host(char **out, char **err, const char *args)
{
    return tu_runf(out, err, "cd '%s' && '%s' --socket '%s' -P '%s' -P '%s/stage/plugins' %s",
                   dir, tu_host(), sock, plugins, tu_builddir(), args);
}

static void stop_host(void)
{
    host(NULL, NULL, "stop >/dev/null 2>&1");
    /* stop returns once the request is taken; the socket goes with the host */
    for (int i = 0; i < 100 && access(sock, F_OK) == 0; i++)
        usleep(50000);
}

static void teardown(void)
{
    stop_host();
    tu_rmtree(dir);
    free(dir);
}

TestSuite(host, .init = setup, .fini = teardown, .timeout = 120);

/* Starts a host in the background; returns its pid. */
static long start_host(const char *options)
{
    char *out = NULL, *err = NULL, args[512];
    snprintf(args, sizeof args, "%s serve --detach", options);
    int rc = host(&out, &err, args);
    cr_assert_eq(rc, 0, "serve: %s%s", out, err);
    const char *pid = strstr(out, "(pid ");
    cr_assert(pid, "serve said: %s", out);
    long n = atol(pid + 5);
    free(out);
    free(err);
    return n;
}

/* Runs args and checks the exit code and what standard output (0) or
 * error (otherwise) contains. */
static char *expect(int code, const char *fragment, const char *args)
{
    char *out = NULL, *err = NULL;
    int rc = host(&out, &err, args);
    cr_expect_eq(rc, code, "%s: exit %d, expected %d\nstdout: %s\nstderr: %s", args, rc, code,
                 out, err);
    if (fragment)
        cr_expect(strstr(code ? err : out, fragment), "%s: \"%s\" lacks \"%s\"", args,
                  code ? err : out, fragment);
    free(err);
    return out;
}

static void expect_same_as_local(const char *args)
{
    char through[600], local[600];
    snprintf(through, sizeof through, "-v run %s", args);
    snprintf(local, sizeof local, "run --local %s", args);
    char *out = NULL, *err = NULL;
    int rc = host(&out, &err, through);
    cr_expect_eq(rc, 0, "%s: %s", through, err);
    cr_expect(strstr(err, "in the host at"), "%s did not go through the host: %s", through, err);
    char *want = expect(0, NULL, local);
    cr_expect_str_eq(out, want, "%s through the host differs from a local run", args);
    free(out);
    free(err);
    free(want);
}

Test(host, life_cycle)
{
    free(expect(1, "no host is running", "ps"));
    free(expect(1, "no host is running", "load lines"));
    start_host("");
    free(expect(0, "(none)", "ps"));
    free(expect(0, "loaded", "load lines"));
    char *ps = expect(0, "lines ", "ps");
    cr_expect(strstr(ps, "1.0.0"), "ps: %s", ps);
    free(ps);
    expect_same_as_local("lines in.txt");
    expect_same_as_local("lines --format json in.txt");
    expect_same_as_local("wordcount --top 2 in.txt");
    char *out = expect(0, NULL, "run lines in.txt");
    cr_expect_str_eq(out, "a\t1\nb\t3\ncrash?\t1\n");
    free(out);

    /* A rebuilt library at the same path runs as the new code, both when
     * a run finds it changed and when it is loaded again. */
    build_plugin("lines", "2.0.0", 7, 0, 0);
    out = expect(0, NULL, "run lines in.txt");
    cr_expect_str_eq(out, "a\t7\nb\t21\ncrash?\t7\n");
    free(out);
    build_plugin("lines", "3.0.0", 100, 0, 0);
    free(expect(0, NULL, "load lines"));
    ps = expect(0, "3.0.0", "ps");
    free(ps);
    out = expect(0, NULL, "run lines in.txt");
    cr_expect_str_eq(out, "a\t100\nb\t300\ncrash?\t100\n");
    free(out);

    free(expect(0, NULL, "unload lines"));
    ps = expect(0, NULL, "ps");
    cr_expect(!strstr(ps, "lines "), "unloaded, yet listed: %s", ps);
    free(ps);
    free(expect(1, "no plugin called lines is loaded", "unload lines"));
    /* Errors of a job fail the job alone, in a run's own words. */
    free(expect(1, "cannot read input missing.txt", "run lines missing.txt"));
    free(expect(2, "takes no parameters", "run wordcount --param nope=1 in.txt"));
    free(expect(0, NULL, "ps"));
    /* The output appears only when the run succeeds. */
    free(expect(0, NULL, "run lines -o out.tsv in.txt"));
    char path[4300];
    snprintf(path, sizeof path, "%s/out.tsv", dir);
    char *text = tu_read(path, NULL);
    cr_expect_str_eq(text, "a\t100\nb\t300\ncrash?\t100\n");
    free(text);
    free(expect(0, NULL, "stop"));
    stop_host();
    free(expect(1, "no host is running", "ps"));
}

/* load takes what run takes: a name, NAME.json, NAME.so, or the plugin's
 * folder as `soren-host new` makes it. */
Test(host, load_by_name_manifest_library_or_folder)
{
    start_host("");
    char args[8500];
    free(expect(0, "loaded", "load lines"));
    snprintf(args, sizeof args, "load '%s/lines.json'", plugins);
    free(expect(0, "loaded", args));
    snprintf(args, sizeof args, "load '%s/lines.so'", plugins);
    free(expect(0, "loaded", args));
    char *out = NULL;
    int rc = tu_runf(&out, NULL, "cd '%s' && mkdir -m 700 lines && cp plugins/lines.json "
                     "plugins/lines.so lines/", dir);
    cr_assert_eq(rc, 0);
    free(out);
    free(expect(0, "lines/lines.json", "load ./lines"));
    free(expect(0, "lines/lines.json", "load ./lines/"));
    out = expect(0, NULL, "run ./lines in.txt");
    cr_expect_str_eq(out, "a\t1\nb\t3\ncrash?\t1\n");
    free(out);
    free(expect(1, "no plugin named \"nope\"", "load nope"));
}

Test(host, standard_input_and_fallback)
{
    /* No host: the run happens here, saying nothing about it. */
    char *out = NULL, *err = NULL;
    int rc = host(&out, &err, "-v run lines in.txt");
    cr_expect_eq(rc, 0);
    cr_expect(!strstr(err, "running here") && !strstr(err, "in the host"), "%s", err);
    cr_expect_str_eq(out, "a\t1\nb\t3\ncrash?\t1\n");
    free(out);
    free(err);
    start_host("");
    rc = host(&out, &err, "-v run lines < in.txt");
    cr_expect_eq(rc, 0, "%s", err);
    cr_expect(strstr(err, "in the host at"), "%s", err);
    cr_expect_str_eq(out, "a\t1\nb\t3\ncrash?\t1\n");
    free(out);
    free(err);
}

Test(host, many_clients_at_once)
{
    start_host("--jobs 3");
    /* 8 clients, 25 jobs each, of 4 kinds, every output kept */
    static const char *const kinds[] = {
        "lines in.txt", "wordcount in.txt", "wordcount --format jsonl --order value_desc in.txt",
        "lines --top 1 --order value_desc in.txt"};
    char script[20000];
    snprintf(script, sizeof script,
             "for c in 1 2 3 4 5 6 7 8; do (for j in $(seq 1 25); do k=$((j %% 4)); "
             "case $k in 0) a='%s';; 1) a='%s';; 2) a='%s';; 3) a='%s';; esac; "
             "'%s' --socket '%s' -P '%s' -P '%s/stage/plugins' run $a > out.$c.$j.$k "
             "2>err.$c.$j || echo fail $c $j; done) & done; wait",
             kinds[0], kinds[1], kinds[2], kinds[3], tu_host(), sock, plugins, tu_builddir());
    char *out = NULL, *err = NULL;
    int rc = tu_runf(&out, &err, "cd '%s' && %s", dir, script);
    cr_assert_eq(rc, 0);
    cr_expect_str_eq(out, "", "failed jobs: %s", out);
    free(out);
    free(err);
    for (int k = 0; k < 4; k++) {
        char args[256];
        snprintf(args, sizeof args, "run --local %s", kinds[k]);
        char *want = expect(0, NULL, args);
        for (int c = 1; c <= 8; c++)
            for (int j = 1; j <= 25; j++) {
                if (j % 4 != k)
                    continue;
                char path[4400];
                snprintf(path, sizeof path, "%s/out.%d.%d.%d", dir, c, j, k);
                char *got = tu_read(path, NULL);
                cr_expect_str_eq(got, want, "client %d job %d (%s)", c, j, kinds[k]);
                free(got);
            }
        free(want);
    }
    char *ps = expect(0, "200 done", "ps");
    free(ps);
}

/* Starts `run ARGS` through the host in the background; returns its pid. */
static pid_t start_client(const char *args)
{
    pid_t pid = fork();
    cr_assert(pid >= 0);
    if (pid == 0) {
        char cmd[20000];
        snprintf(cmd, sizeof cmd, "cd '%s' && exec '%s' --socket '%s' -P '%s' run %s "
                 ">client.out 2>client.err", dir, tu_host(), sock, plugins, args);
        execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
        _exit(127);
    }
    return pid;
}

static int wait_status(pid_t pid)
{
    int status = 0;
    waitpid(pid, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

static char *client_err(void)
{
    char path[4300];
    snprintf(path, sizeof path, "%s/client.err", dir);
    return tu_read(path, NULL);
}

static int exists_in_dir(const char *name)
{
    char path[4300];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    return access(path, F_OK) == 0;
}

/* slow.txt: 8 MiB whose every MiB holds 40 lines that take the slow
 * plugin a tenth of a second each, so a run of it takes over 15 s. */
static void write_slow_input(void)
{
    size_t size = 8u << 20;
    char *text = malloc(size);
    cr_assert(text);
    for (size_t at = 0; at < size; at += 64) {
        int slow = (at / 64) % 409 == 0;
        memset(text + at, 'x', 63);
        if (slow)
            memcpy(text + at, "slow", 4);
        text[at + 63] = '\n';
    }
    char path[4300];
    snprintf(path, sizeof path, "%s/slow.txt", dir);
    tu_write(path, text, size);
    free(text);
}

/* Waits up to seconds for ps to say no job runs; 1 if it did. */
static int host_goes_idle(int seconds)
{
    for (int i = 0; i < seconds * 10; i++) {
        char *out = NULL;
        host(&out, NULL, "ps");
        int idle = out && strstr(out, "0 running, 0 queued");
        free(out);
        if (idle)
            return 1;
        usleep(100000);
    }
    return 0;
}

Test(host, client_that_dies_mid_job)
{
    build_plugin("slow", "1.0.0", 1, 1, 0);
    write_slow_input();
    start_host("--jobs 1");
    /* The running job is cancelled after its chunk: the host is idle
     * long before the job's 15 s. */
    pid_t client = start_client("slow --sample 0 -o out.tsv slow.txt");
    usleep(500000);
    kill(client, SIGKILL);
    wait_status(client);
    cr_expect(host_goes_idle(8), "the dead client's job went on running");
    /* the host goes on */
    char *out = expect(0, NULL, "run lines in.txt");
    cr_expect_str_eq(out, "a\t1\nb\t3\ncrash?\t1\n");
    free(out);
    cr_expect(!exists_in_dir("out.tsv"));

    /* Ctrl-C on the client: exit 130, no output, the job cancelled */
    client = start_client("slow --sample 0 -o out.tsv slow.txt");
    usleep(500000);
    kill(client, SIGINT);
    cr_expect_eq(wait_status(client), 130);
    cr_expect(!exists_in_dir("out.tsv"));
    cr_expect(host_goes_idle(8), "the interrupted client's job went on running");
    free(expect(0, "jobs:", "ps"));
}

Test(host, a_job_past_its_timeout_fails_alone)
{
    build_plugin("slow", "1.0.0", 1, 1, 0);
    write_slow_input();
    start_host("");
    /* Each 1 MiB chunk takes 4 s: the job is asked to stop at 3 s and
     * does after its chunks, naming where it was. */
    char *out = NULL, *err = NULL;
    int rc = host(&out, &err, "run slow --sample 0 --timeout 3 -o out.tsv slow.txt");
    cr_expect_eq(rc, 1, "%s", err);
    cr_expect(strstr(err, "slow ran longer than --timeout 3 s and was stopped (in phase map, "
                          "mapping slow.txt at byte "), "%s", err);
    cr_expect(!exists_in_dir("out.tsv"));
    free(out);
    free(err);
    out = expect(0, NULL, "run lines in.txt");
    cr_expect_str_eq(out, "a\t1\nb\t3\ncrash?\t1\n");
    free(out);
}

Test(host, host_that_dies_mid_job)
{
    build_plugin("slow", "1.0.0", 1, 1, 0);
    write_slow_input();
    long pid = start_host("");
    pid_t client = start_client("slow --sample 0 -o out.tsv slow.txt");
    usleep(300000);
    kill((pid_t)pid, SIGKILL);
    cr_expect_eq(wait_status(client), 1);
    char *err = client_err();
    cr_expect(strstr(err, "stopped while running job slow"), "%s", err);
    free(err);
    cr_expect(!exists_in_dir("out.tsv"));

    /* Its socket is stale: a run goes on here, saying so with --verbose,
     * and a new host replaces it. */
    char *out = NULL;
    int rc = host(&out, &err, "-v run lines in.txt");
    cr_expect_eq(rc, 0);
    cr_expect(strstr(err, "a stale socket"), "%s", err);
    free(out);
    free(err);
    start_host("");
    free(expect(0, "(none)", "ps"));
}

/* The progress line and --explain of a job that runs in the host reach the
 * client's standard error as a local run writes them. */
Test(host, progress_and_explain_relayed)
{
    build_plugin("slow", "1.0.0", 1, 1, 0);
    tu_write(strcat(strcpy((char[4200]){0}, dir), "/slow.txt"), "slow1\nslow2\nslow3\nslow4\n",
             24);
    start_host("");
    char *out = NULL, *err = NULL;
    int rc = host(&out, &err, "run slow slow.txt --device cpu -t 1 --progress --explain "
                              "-o out.tsv");
    cr_assert_eq(rc, 0, "%s", err);
    cr_expect(strstr(err, "\rsoren-host: map ") != NULL, "no map frame: %s", err);
    cr_expect(strstr(err, "\"variant\"") != NULL, "no explain report: %s", err);
    char *got = tu_read(strcat(strcpy((char[4200]){0}, dir), "/out.tsv"), NULL);
    cr_expect_str_eq(got, "slow1\t1\nslow2\t1\nslow3\t1\nslow4\t1\n");
    free(got);
    free(out);
    free(err);
}

Test(host, plugin_that_crashes_in_the_host)
{
    build_plugin("crashes", "1.0.0", 1, 0, 1);
    start_host("");
    char *out = NULL, *err = NULL;
    int rc = host(&out, &err, "run crashes -o out.tsv in.txt");
    cr_expect_eq(rc, 1);
    cr_expect(strstr(err, "stopped while running job crashes"), "%s", err);
    cr_expect(strstr(err, "crashes.json"), "the message names the plugin: %s", err);
    cr_expect(!exists_in_dir("out.tsv"));
    /* The host, started with --detach, wrote its own line to its log. */
    char log[4200];
    snprintf(log, sizeof log, "%s.log", sock);
    char *said = tu_read(log, NULL);
    cr_expect(strstr(said, "crashed (SIGSEGV) while running job crashes"), "the log: %s", said);
    struct stat st;
    cr_expect(stat(log, &st) == 0 && (st.st_mode & 0777) == 0600, "the log's mode");
    free(said);
    free(out);
    free(err);
}

/* A fault of a plugin's device code leaves the process's CUDA context
 * unusable: locally the run fails naming the job, through a host the host
 * stops and its client says why; no output either way, and the next run
 * starts afresh. */
Test(host, plugin_whose_device_code_faults)
{
    char why[256] = "";
    if (soren_device_count(why, sizeof why) == 0)
        cr_skip_test("no usable GPU (%s): the device fault runs on a GPU host", why);
    char job[8192];
    snprintf(job, sizeof job, "%s/stage/test-plugins/gpufault.json", tu_builddir());
    char args[9000];
    snprintf(args, sizeof args, "run --local '%s' --device gpu --param at=2 -o out.tsv in.txt",
             job);
    free(expect(1, "gpufault", args));
    cr_expect(!exists_in_dir("out.tsv"));

    start_host("");
    snprintf(args, sizeof args, "run '%s' --device gpu --param at=2 -o out.tsv in.txt", job);
    char *out = NULL, *err = NULL;
    int rc = host(&out, &err, args);
    cr_expect_eq(rc, 1, "%s", err);
    cr_expect(strstr(err, "while running job gpufault"), "%s", err);
    cr_expect(strstr(err, "gpufault.json"), "the message names the plugin: %s", err);
    cr_expect(!exists_in_dir("out.tsv"));
    free(out);
    free(err);
    /* The host is gone; the job without its fault runs, locally. */
    for (int i = 0; i < 100 && access(sock, F_OK) == 0; i++)
        usleep(50000);
    snprintf(args, sizeof args, "run '%s' --device gpu --param at=1 -o out.tsv in.txt", job);
    free(expect(0, NULL, args));
    cr_expect(exists_in_dir("out.tsv"));
}

/* The same over several GPUs, the fault on the last rank's GPU while the
 * others run: the run fails naming the job, without hanging on the ranks
 * that wait for it; through a host, the host sees the lost context of the
 * GPU that faulted and stops. */
Test(host, plugin_whose_device_code_faults_on_one_of_several_gpus)
{
    char why[256] = "";
    if (soren_device_count(why, sizeof why) < 2)
        cr_skip_test("fewer than two usable GPUs (%s): the fault is on one GPU of several", why);
    char lines[4300];
    snprintf(lines, sizeof lines, "%s/lines.txt", dir);
    FILE *f = fopen(lines, "w");
    cr_assert_not_null(f);
    for (int i = 0; i < 4000; i++)
        fprintf(f, "line %04d\n", i); /* 10 bytes: line 3900 starts at byte 39000 */
    fclose(f);
    char job[8192], args[9000];
    snprintf(job, sizeof job, "%s/stage/test-plugins/gpufault.json", tu_builddir());
    snprintf(args, sizeof args, "run --local '%s' --devices all --param at=39000 -o out.tsv "
             "lines.txt", job);
    free(expect(1, "gpufault", args));
    cr_expect(!exists_in_dir("out.tsv"));

    start_host("");
    snprintf(args, sizeof args, "run '%s' --devices all --param at=39000 -o out.tsv lines.txt",
             job);
    char *out = NULL, *err = NULL;
    int rc = host(&out, &err, args);
    cr_expect_eq(rc, 1, "%s", err);
    cr_expect(strstr(err, "while running job gpufault") && strstr(err, "GPU "),
              "the message names the job and the GPU: %s", err);
    cr_expect(!exists_in_dir("out.tsv"));
    free(out);
    free(err);
    for (int i = 0; i < 100 && access(sock, F_OK) == 0; i++)
        usleep(50000);
    cr_expect_neq(access(sock, F_OK), 0, "the host should have stopped");
    snprintf(args, sizeof args, "run '%s' --devices all --param at=1 -o out.tsv lines.txt", job);
    free(expect(0, NULL, args));
    cr_expect(exists_in_dir("out.tsv"));
}

Test(host, unsafe_socket_refused)
{
    start_host("");
    stop_host();
    char run[4300];
    snprintf(run, sizeof run, "%s/run", dir);
    /* a folder others can enter */
    cr_assert_eq(chmod(run, 0755), 0);
    free(expect(1, "chmod 700", "serve"));
    char *out = NULL, *err = NULL;
    int rc = host(&out, &err, "run lines in.txt");
    cr_expect_eq(rc, 0, "a run goes on here: %s", err);
    free(out);
    free(err);
    cr_assert_eq(chmod(run, 0700), 0);
    /* a socket others could connect to */
    start_host("");
    cr_assert_eq(chmod(sock, 0666), 0);
    rc = host(&out, &err, "run lines in.txt");
    cr_expect_eq(rc, 0);
    cr_expect(strstr(err, "not 0600"), "%s", err);
    free(out);
    free(err);
    free(expect(1, "not 0600", "ps"));
    cr_assert_eq(chmod(sock, 0600), 0);
    /* a file where the socket should be is never removed */
    stop_host();
    tu_write(sock, "x", 1);
    free(expect(1, "is not a socket", "serve"));
    unlink(sock);
}

Test(host, other_users_refused)
{
    if (geteuid() != 0 || system("command -v setpriv >/dev/null 2>&1") != 0)
        cr_skip_test("needs root and setpriv (util-linux) to act as another user");
    start_host("");
    /* The folder is 0700 and the user's: another cannot reach the socket,
     * and given a path to it, is refused. */
    char *out = NULL, *err = NULL;
    int rc = tu_runf(&out, &err, "setpriv --reuid=65534 --regid=65534 --clear-groups '%s' "
                     "--socket '%s' ps", tu_host(), sock);
    cr_expect_eq(rc, 1, "%s%s", out, err);
    free(out);
    free(err);
    /* A host's own check: even through an open folder, the host refuses a
     * peer of another user, and the client refuses a socket not its own. */
    char run[4300];
    snprintf(run, sizeof run, "%s/run", dir);
    cr_assert_eq(chmod(dir, 0711), 0);
    cr_assert_eq(chmod(run, 0711), 0);
    cr_assert_eq(chmod(sock, 0666), 0);
    rc = tu_runf(&out, &err, "setpriv --reuid=65534 --regid=65534 --clear-groups '%s' "
                 "--socket '%s' ps", tu_host(), sock);
    cr_expect_eq(rc, 1, "%s%s", out, err);
    cr_expect(strstr(err, "belongs to user 0"), "%s", err);
    free(out);
    free(err);
    chmod(sock, 0600);
    chmod(run, 0700);
    chmod(dir, 0700);
}

/* Socket activation as systemd does it: the listening socket as
 * descriptor 3, LISTEN_PID and LISTEN_FDS in the environment. */
Test(host, socket_activation)
{
    char run[4300];
    snprintf(run, sizeof run, "%s/run", dir);
    cr_assert_eq(mkdir(run, 0700), 0);
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    cr_assert(strlen(sock) < sizeof a.sun_path);
    strcpy(a.sun_path, sock);
    mode_t mask = umask(0177);
    cr_assert_eq(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
    umask(mask);
    cr_assert_eq(listen(fd, 8), 0);
    pid_t pid = fork();
    cr_assert(pid >= 0);
    if (pid == 0) {
        char n[32];
        snprintf(n, sizeof n, "%ld", (long)getpid());
        setenv("LISTEN_PID", n, 1);
        setenv("LISTEN_FDS", "1", 1);
        dup2(fd, 3);
        int null = open("/dev/null", O_WRONLY);
        dup2(null, 2);
        execl(tu_host(), tu_host(), "--socket", sock, "serve", (char *)NULL);
        _exit(127);
    }
    close(fd);
    char *out = expect(0, NULL, "run lines in.txt");
    cr_expect_str_eq(out, "a\t1\nb\t3\ncrash?\t1\n");
    free(out);
    free(expect(0, "lines ", "ps"));
    free(expect(0, NULL, "stop"));
    cr_expect_eq(wait_status(pid), 0);
    /* the socket is systemd's to remove */
    cr_expect_eq(access(sock, F_OK), 0);
    unlink(sock);
}

/* The library's jobs run in the host with the same calls: equal pairs, an
 * explain line, memory inputs and parameters given as bytes. */
static char *pairs_text(soren_job *job)
{
    soren_pairs p;
    soren_error err;
    soren_error_clear(&err);
    cr_assert_eq(soren_job_result(job, &p, &err), SOREN_OK, "%s", err.text);
    char *text = NULL;
    size_t size = 0;
    FILE *f = open_memstream(&text, &size);
    for (uint64_t i = 0; i < p.count; i++) {
        uint64_t n;
        const uint8_t *k = soren_pairs_key(&p, i, &n);
        fwrite(k, 1, n, f);
        fputc('\t', f);
        fwrite(soren_pairs_value(&p, i), 1, p.value_size, f);
        fputc('\n', f);
    }
    fclose(f);
    return text;
}

/* Opens the plugin name and a job of it that runs in the host at where
 * (NULL: in this process). */
static soren_job *new_job(const char *name, const char *where, soren_plugin **p)
{
    soren_error err;
    soren_error_clear(&err);
    soren_job *job = NULL;
    soren_job_options o;
    soren_job_options_init(&o);
    o.host = where;
    cr_assert_eq(soren_open(name, p, &err), SOREN_OK, "%s", err.text);
    cr_assert_eq(soren_job_new(*p, &o, &job, &err), SOREN_OK, "%s", err.text);
    return job;
}

static char *run_library_job(const char *where, const char *input, const void *memory,
                             size_t size, const char *pattern)
{
    soren_error err;
    soren_error_clear(&err);
    soren_plugin *p = NULL;
    soren_job *job = new_job(pattern ? "stringmatch" : "wordcount", where, &p);
    if (pattern)
        cr_assert_eq(soren_job_param_bytes(job, "pattern", pattern, strlen(pattern), &err),
                     SOREN_OK, "%s", err.text);
    if (input)
        cr_assert_eq(soren_job_input_file(job, input, &err), SOREN_OK, "%s", err.text);
    if (memory)
        cr_assert_eq(soren_job_input_memory(job, memory, size, &err), SOREN_OK, "%s", err.text);
    cr_assert_eq(soren_job_run(job, &err), SOREN_OK, "%s", err.text);
    /* a second run of the same job, as an iterative program makes */
    cr_assert_eq(soren_job_run(job, &err), SOREN_OK, "%s", err.text);
    char *text = pairs_text(job);
    const char *x = soren_job_explain(job);
    cr_expect(x && x[0] == '{', "explain: %s", x ? x : "(null)");
    soren_job_free(job);
    soren_close(p);
    return text;
}

/* k-means iterated by soren_job_iterate where the job runs (NULL: in this
 * process), from the centroids c0 (size bytes): how it ended, the fed
 * parameter as the last run read it (malloc'd) and the last run's pairs. */
static char *iterate_kmeans(const char *where, const char *points, const void *c0,
                            size_t size, soren_iteration *how, void **param)
{
    soren_error err;
    soren_error_clear(&err);
    soren_plugin *p = NULL;
    soren_job *job = new_job("kmeans", where, &p);
    uint32_t k = 6;
    cr_assert_eq(soren_job_input_file(job, points, &err), SOREN_OK, "%s", err.text);
    cr_assert_eq(soren_job_param_bytes(job, "k", &k, sizeof k, &err), SOREN_OK, "%s", err.text);
    cr_assert_eq(soren_job_param_bytes(job, "centroids", c0, size, &err), SOREN_OK, "%s",
                 err.text);
    cr_assert_eq(soren_job_iterate(job, 40, how, &err), SOREN_OK, "%s", err.text);
    cr_assert_eq(how->param_size, size, "the fed parameter came back as %zu bytes",
                 how->param_size);
    *param = malloc(size);
    cr_assert_not_null(*param);
    memcpy(*param, how->param, size);
    char *text = pairs_text(job);
    soren_job_free(job);
    soren_close(p);
    return text;
}

Test(host, library_jobs_in_the_host)
{
    char in[4300];
    snprintf(in, sizeof in, "%s/in.txt", dir);
    static const char memory[] = "the cat and the hat\nthe end\n";
    char *want = run_library_job(NULL, in, memory, sizeof memory - 1, NULL);
    char *want_match = run_library_job(NULL, in, memory, sizeof memory - 1, "he");

    /* No host: the run fails, saying so. */
    soren_error err;
    soren_error_clear(&err);
    soren_plugin *p = NULL;
    soren_job *job = new_job("wordcount", sock, &p);
    cr_assert_eq(soren_job_input_memory(job, memory, sizeof memory - 1, &err), SOREN_OK);
    cr_expect_eq(soren_job_run(job, &err), SOREN_EDEVICE);
    cr_expect(strstr(err.text, "no host to run the job in"), "%s", err.text);
    soren_job_free(job);
    soren_close(p);

    start_host("");
    char *got = run_library_job(sock, in, memory, sizeof memory - 1, NULL);
    cr_expect_str_eq(got, want, "wordcount in the host differs from the process's");
    char *got_match = run_library_job(sock, in, memory, sizeof memory - 1, "he");
    cr_expect_str_eq(got_match, want_match, "stringmatch in the host differs");
    free(got);
    free(got_match);
    free(want);
    free(want_match);
    free(expect(0, "stringmatch", "ps"));

    /* soren_job_iterate in the host: the same runs, output and fed
     * parameter as in the process. */
    char points[4300], c0[4300];
    snprintf(points, sizeof points, "%s/points.bin", dir);
    snprintf(c0, sizeof c0, "%s/c0.bin", dir);
    tu_gen(points, "points --count 20000 --dims 3 --clusters 6 --seed 41");
    tu_gen(c0, "points --dims 3 --centroids 6 --clusters 6 --seed 41");
    size_t size = 0;
    void *start = tu_read(c0, &size);
    soren_iteration here, there;
    void *fed_here = NULL, *fed_there = NULL;
    char *pairs_here = iterate_kmeans(NULL, points, start, size, &here, &fed_here);
    char *pairs_there = iterate_kmeans(sock, points, start, size, &there, &fed_there);
    cr_expect(here.runs > 1 && here.converged, "k-means took %llu runs, converged %d",
              (unsigned long long)here.runs, here.converged);
    cr_expect_eq(there.runs, here.runs, "%llu runs in the host, %llu in the process",
                 (unsigned long long)there.runs, (unsigned long long)here.runs);
    cr_expect_eq(there.converged, here.converged);
    cr_expect_eq(memcmp(fed_there, fed_here, size), 0, "the fed parameter differs");
    cr_expect_str_eq(pairs_there, pairs_here, "the last run's pairs differ");
    free(pairs_here);
    free(pairs_there);
    free(fed_here);
    free(fed_there);
    free(start);
}

/* slowmap over lines of keys lengths, in a job of its own where it runs
 * (NULL: this process's CPU engine, else the host at where, on its GPU,
 * every line sampled): the pairs, and in *grew whether the run outgrew its
 * table. */
static char *slowmap_job(const char *where, uint32_t keys, uint32_t reps, int *grew)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/stage/test-plugins/slowmap.json", tu_builddir());
    soren_error err;
    soren_error_clear(&err);
    soren_plugin *p = NULL;
    soren_job *job = NULL;
    soren_job_options o;
    soren_job_options_init(&o);
    o.host = where;
    o.device = where ? SOREN_DEVICE_GPU : SOREN_DEVICE_CPU;
    o.sample = 1;
    cr_assert_eq(soren_open(path, &p, &err), SOREN_OK, "%s", err.text);
    cr_assert_eq(soren_job_new(p, &o, &job, &err), SOREN_OK, "%s", err.text);
    size_t size = 0;
    char *text = tu_lines_of_lengths(keys, reps, &size);
    cr_assert_eq(soren_job_input_memory(job, text, size, &err), SOREN_OK, "%s", err.text);
    cr_assert_eq(soren_job_run(job, &err), SOREN_OK, "%s", err.text);
    char *pairs = pairs_text(job);
    json_t *x = json_loads(soren_job_explain(job), 0, NULL);
    cr_assert_not_null(x, "an explain report after the run");
    *grew = json_array_size(json_object_get(x, "overflows")) > 0;
    json_decref(x);
    soren_job_free(job);
    soren_close(p);
    free(text);
    return pairs;
}

/* A new library job takes the GPU sessions of one that ended, renewed:
 * its first run monitors and sizes for its own keys, where a run again of
 * the table the old job sized for 96 keys would outgrow it; its pairs are
 * the CPU engine's; and the plugin keeps one job's sessions, not two. */
Test(host, a_new_job_renews_the_sessions_of_one_that_ended)
{
    char why[256] = "";
    if (soren_device_count(why, sizeof why) == 0)
        cr_skip_test("no usable GPU (%s): sessions are the GPU engine's", why);
    start_host("");
    const uint32_t keys[2] = {96, 2800}, reps[2] = {2084, 2};
    for (int i = 0; i < 2; i++) {
        int grew = 0, cpu_grew = 0;
        char *got = slowmap_job(sock, keys[i], reps[i], &grew);
        char *want = slowmap_job(NULL, keys[i], reps[i], &cpu_grew);
        cr_expect_str_eq(got, want, "job %d, %u keys: the host's GPU and the CPU engine differ",
                         i + 1, keys[i]);
        cr_expect(!grew, "job %d, %u keys, outgrew its table: its first run sized none", i + 1,
                  keys[i]);
        free(got);
        free(want);
    }
    char *ps = expect(0, "slowmap", "ps");
    cr_expect(strstr(ps, "GPU sessions of 1 kept"), "%s", ps);
    free(ps);
}

/* Requests no soren-host client sends: each is refused with a reply or
 * dropped, and the host goes on serving. */
static void send_raw(const void *bytes, size_t size, int expect_reply)
{
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    strcpy(a.sun_path, sock);
    cr_assert_eq(connect(fd, (struct sockaddr *)&a, sizeof a), 0);
    cr_assert_eq(write(fd, bytes, size), (ssize_t)size);
    shutdown(fd, SHUT_WR);
    char buf[4096];
    ssize_t n = read(fd, buf, sizeof buf);
    if (expect_reply)
        cr_expect(n > 5 && buf[4] == SOREN_MSG_REPLY, "no reply (%zd bytes)", n);
    close(fd);
}

static void send_msg(soren_msg_kind kind, const char *const *fields, size_t count)
{
    uint8_t *bytes = NULL;
    size_t size = 0;
    soren_error err;
    soren_error_clear(&err);
    cr_assert_eq(soren_msg_encode(kind, fields, count, &bytes, &size, &err), SOREN_OK);
    send_raw(bytes, size, 1);
    free(bytes);
}

Test(host, requests_no_client_sends)
{
    start_host("");
    static const char *const help[] = {"/x.json", "soren-host", "--help"};
    static const char *const list[] = {"/x.json", "soren-host", "list"};
    static const char *const run[] = {"/x.json", "soren-host", "run", "lines", "a", "b"};
    static const char *const job[] = {"/x.json", "9", "nope", "0.2", "0", "0", "0", "1", "q",
                                      "0", "t"};
    send_msg(SOREN_MSG_RUN, help, 3);
    send_msg(SOREN_MSG_RUN, list, 3);
    send_msg(SOREN_MSG_RUN, run, 6);        /* inputs without descriptors */
    send_msg(SOREN_MSG_JOB, job, 11);       /* a bad device, engine and parameter */
    send_msg(SOREN_MSG_UNLOAD, NULL, 0);
    send_msg(SOREN_MSG_REPLY, NULL, 0);
    static const uint8_t huge[] = {0xff, 0xff, 0xff, 0x7f, 1};
    send_raw(huge, sizeof huge, 1);
    static const uint8_t cut[] = {9, 0, 0, 0, 1, 200, 0, 0, 0};
    send_raw(cut, sizeof cut, 1);
    send_raw("", 0, 0);
    char *out = expect(0, NULL, "run lines in.txt");
    cr_expect_str_eq(out, "a\t1\nb\t3\ncrash?\t1\n");
    free(out);
}

/* A parameter's bytes in a memory file: the host maps one sealed against
 * change (as soren_job_run's request makes them) and copies one that is
 * not, whose maker could shrink it under a mapping. */
static int bytes_file(const char *text, int seal)
{
    int fd = memfd_create("a parameter", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    cr_assert_geq(fd, 0);
    cr_assert_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    if (seal)
        cr_assert_eq(fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE |
                                                F_SEAL_SEAL), 0);
    return fd;
}

Test(host, parameter_bytes_mapped_only_when_sealed)
{
    char *fields[] = {"/x.json", "0", "auto", "0", "0", "0", "0", "3", "b", "b", "tten", "0",
                      "token"};
    const size_t count = sizeof fields / sizeof fields[0];
    int fds[] = {-1, -1, bytes_file("sealed bytes", 1), bytes_file("open bytes", 0)};
    soren_error err;
    soren_error_clear(&err);
    cr_assert_eq(soren_remote_request_check(fields, count, 4, &err), SOREN_OK, "%s", err.text);
    soren_remote_request r;
    cr_assert_eq(soren_remote_request_read(&r, "x", 3, fields, count, fds, &err), SOREN_OK,
                 "%s", err.text);
    cr_expect_not_null(r.bytes[0].mapped, "the sealed file is mapped");
    cr_expect_null(r.bytes[0].copy);
    cr_expect_null(r.bytes[1].mapped, "the unsealed file is not mapped");
    cr_expect_not_null(r.bytes[1].copy);
    cr_expect_eq(r.values[0].size, 12);
    cr_expect_eq(memcmp(r.values[0].bytes, "sealed bytes", 12), 0);
    cr_expect_eq(r.values[1].size, 10);
    cr_expect_eq(memcmp(r.values[1].bytes, "open bytes", 10), 0);
    cr_expect_str_eq(r.values[2].text, "ten");
    /* the maker cannot change what the host mapped */
    cr_expect_neq(ftruncate(fds[2], 0), 0);
    cr_expect_neq(write(fds[2], "x", 1), 1);
    soren_remote_request_destroy(&r);
    close(fds[2]);
    close(fds[3]);
}

/* ---- The device memory ledger -------------------------------------------- */

/* A job of the ledger test: reserves want, counts itself served, holds the
 * reservation until told, gives it back. */
typedef struct ledger_job {
    soren_ledger *ledger;
    uint64_t want, got;
    int *served;          /* the count of jobs served, under the ledger's lock */
    volatile int release; /* set by the test: give the reservation back */
} ledger_job;

static void *ledger_job_main(void *arg)
{
    ledger_job *j = arg;
    j->got = soren_ledger_reserve(j->ledger, j->want, NULL);
    pthread_mutex_lock(&j->ledger->lock);
    ++*j->served;
    pthread_mutex_unlock(&j->ledger->lock);
    while (!j->release)
        usleep(1000);
    soren_ledger_release(j->ledger, j->got);
    return NULL;
}

static int ledger_served(soren_ledger *l, const int *served)
{
    pthread_mutex_lock(&l->lock);
    int n = *served;
    pthread_mutex_unlock(&l->lock);
    return n;
}

/* Waits up to 5 s for n jobs to be served; the count then. */
static int ledger_wait_served(soren_ledger *l, const int *served, int n)
{
    for (int i = 0; i < 5000 && ledger_served(l, served) < n; i++)
        usleep(1000);
    return ledger_served(l, served);
}

/* Waits up to 5 s for n jobs to have asked the ledger (taken their turn);
 * 1 if they did. */
static int ledger_wait_asked(soren_ledger *l, uint64_t n)
{
    for (int i = 0; i < 5000; i++) {
        pthread_mutex_lock(&l->lock);
        uint64_t asked = l->next_ticket;
        pthread_mutex_unlock(&l->lock);
        if (asked >= n)
            return 1;
        usleep(1000);
    }
    return 0;
}

static void ledger_start(ledger_job *j, pthread_t *t, soren_ledger *l, int *served, uint64_t want)
{
    *j = (ledger_job){.ledger = l, .want = want, .served = served};
    cr_assert_eq(pthread_create(t, NULL, ledger_job_main, j), 0);
}

Test(ledger, jobs_that_fit_run_side_by_side_and_in_turn)
{
    soren_ledger l;
    soren_ledger_init(&l, 100);
    int served = 0;
    ledger_job a, b, c, d;
    pthread_t ta, tb, tc, td;
    ledger_start(&a, &ta, &l, &served, 40);
    cr_assert_eq(ledger_wait_served(&l, &served, 1), 1);
    ledger_start(&b, &tb, &l, &served, 50);
    cr_assert_eq(ledger_wait_served(&l, &served, 2), 2, "two jobs that fit run side by side");
    /* c does not fit beside a and b; d would, but asked after c */
    ledger_start(&c, &tc, &l, &served, 30);
    cr_assert(ledger_wait_asked(&l, 3), "c never asked");
    ledger_start(&d, &td, &l, &served, 5);
    cr_assert(ledger_wait_asked(&l, 4), "d never asked");
    usleep(50000);
    cr_assert_eq(ledger_served(&l, &served), 2, "a job that does not fit waits, and so do the "
                 "jobs that asked after it");
    uint64_t reserved = 0;
    unsigned holders = 0, waiting = 0;
    soren_ledger_usage(&l, &reserved, &holders, &waiting);
    cr_assert(reserved == 90 && holders == 2 && waiting == 2, "%llu reserved by %u, %u waiting",
              (unsigned long long)reserved, holders, waiting);
    a.release = 1;
    cr_assert_eq(ledger_wait_served(&l, &served, 4), 4, "c and d fit once a is done");
    b.release = c.release = d.release = 1;
    pthread_join(ta, NULL);
    pthread_join(tb, NULL);
    pthread_join(tc, NULL);
    pthread_join(td, NULL);
    soren_ledger_usage(&l, &reserved, &holders, &waiting);
    cr_assert(reserved == 0 && holders == 0 && waiting == 0, "every reservation went back");
}

/* A job goes to the GPU with the fewest jobs holding or waiting for its
 * memory, the lowest among equals: one at a time, jobs stay on GPU 0 (and
 * its sessions); side by side, they spread. */
Test(ledger, jobs_go_to_the_least_busy_gpu)
{
    soren_ledger gpus[3];
    for (int i = 0; i < 3; i++)
        soren_ledger_init(&gpus[i], 100);
    cr_assert_eq(soren_ledger_least_busy(gpus, 3), 0, "all idle: the first");
    soren_ledger_reserve(&gpus[0], 10, NULL);
    cr_assert_eq(soren_ledger_least_busy(gpus, 3), 1);
    soren_ledger_reserve(&gpus[1], 100, NULL);
    cr_assert_eq(soren_ledger_least_busy(gpus, 3), 2);
    soren_ledger_reserve(&gpus[2], 10, NULL);
    soren_ledger_reserve(&gpus[2], 10, NULL);
    cr_assert_eq(soren_ledger_least_busy(gpus, 3), 0, "one job each on 0 and 1, two on 2");

    /* a job waiting for room counts as much as one holding it */
    int served = 0;
    ledger_job w;
    pthread_t tw;
    ledger_start(&w, &tw, &gpus[1], &served, 50);
    cr_assert(ledger_wait_asked(&gpus[1], 2), "the job never asked");
    soren_ledger_release(&gpus[2], 10);
    soren_ledger_release(&gpus[2], 10);
    cr_assert_eq(soren_ledger_least_busy(gpus, 3), 2, "2 is idle, 1 has a job and one waiting");
    soren_ledger_release(&gpus[0], 10);
    cr_assert_eq(soren_ledger_least_busy(gpus, 3), 0, "0 and 2 are idle: the first");
    soren_ledger_release(&gpus[1], 100);
    cr_assert_eq(ledger_wait_served(&gpus[1], &served, 1), 1);
    w.release = 1;
    pthread_join(tw, NULL);
    cr_assert_eq(soren_ledger_least_busy(gpus, 3), 0);
}

Test(ledger, a_job_may_not_take_more_than_there_is)
{
    soren_ledger l;
    soren_ledger_init(&l, 64);
    uint64_t now = 0;
    cr_assert_eq(soren_ledger_reserve(&l, 1000, &now), 64);
    cr_assert_eq(now, 64);
    soren_ledger_release(&l, 64);
    cr_assert_eq(soren_ledger_reserve(&l, 10, &now), 10);
    cr_assert_eq(now, 10);
    soren_ledger_release(&l, 10);
}
