/* soren-host's output as a user meets it when runs go wrong: a signal,
 * SIGKILL's leftovers, the file size limit, a plugin that faults, an input
 * that shrinks, and what replacing an output keeps (mode, symbolic links,
 * the refusal of a read-only file, a missing folder seen before the job). */
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "testutil.h"

static char *dir;

static void setup(void) { dir = tu_mkdtemp(); }
static void teardown(void)
{
    tu_rmtree(dir);
    free(dir);
}

TestSuite(output, .init = setup, .fini = teardown);

static char *in_dir(const char *name)
{
    char *p = NULL;
    cr_assert(asprintf(&p, "%s/%s", dir, name) > 0);
    return p;
}

static int exists(const char *name)
{
    char *p = in_dir(name);
    struct stat st;
    int yes = lstat(p, &st) == 0;
    free(p);
    return yes;
}

/* Runs `cd dir && ENV soren-host ARGS`; returns the exit code (128+N for
 * signal N) and stderr in *err. */
static int host(char **err, const char *env, const char *args)
{
    return tu_runf(NULL, err, "cd '%s' && %s '%s' %s", dir, env, tu_host(), args);
}

static void put_file(const char *name, const char *text)
{
    char *p = in_dir(name);
    tu_write(p, text, strlen(text));
    free(p);
}

/* Writes name with lines PREFIX0, PREFIX1, ... PREFIX(count - 1) (the
 * numbers 7 digits wide); returns its size. */
static long put_lines(const char *name, const char *prefix, int count)
{
    char *p = in_dir(name);
    FILE *f = fopen(p, "w");
    cr_assert_not_null(f);
    for (int i = 0; i < count; i++)
        fprintf(f, "%s%07d\n", prefix, i);
    long size = ftell(f);
    cr_assert_eq(fclose(f), 0);
    free(p);
    return size;
}

/* host() on the test job faulty (tests/plugins/faulty.c): run it ARGS. */
static int run_faulty(char **err, const char *env, const char *args)
{
    char *full = NULL;
    cr_assert(asprintf(&full, "run '%s/stage/test-plugins/faulty.json' %s", tu_builddir(),
                       args) > 0);
    int rc = host(err, env, full);
    free(full);
    return rc;
}

/* Every name in dir that starts with prefix, besides keep (NULL: none),
 * fails the test. */
static void expect_none(const char *prefix, const char *keep)
{
    DIR *d = opendir(dir);
    cr_assert_not_null(d);
    struct dirent *de;
    while ((de = readdir(d)))
        cr_expect(strncmp(de->d_name, prefix, strlen(prefix)) != 0 ||
                      (keep && strcmp(de->d_name, keep) == 0),
                  "left behind: %s", de->d_name);
    closedir(d);
}

/* No out.tsv, and no temporary file of it. */
static void expect_no_output(void)
{
    expect_none("out.tsv", NULL);
    expect_none(".out.tsv", NULL);
}

/* soren-host run wordcount -o out.tsv reading standard input from a pipe
 * that stays open, so it waits there, its temporary output made (the
 * output is opened before the inputs).  Returns its pid; *feed is the
 * pipe's end to close. */
static pid_t start_waiting(int *feed, char **tmp)
{
    int fds[2];
    cr_assert_eq(pipe(fds), 0);
    pid_t pid = fork();
    cr_assert_neq(pid, -1);
    if (pid == 0) {
        /* The test runner's dispositions are not soren-host's to inherit. */
        for (int s = 1; s < 32; s++)
            if (s != SIGKILL && s != SIGSTOP)
                signal(s, SIG_DFL);
        sigset_t none;
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
        dup2(fds[0], STDIN_FILENO);
        close(fds[0]);
        close(fds[1]);
        if (chdir(dir) != 0)
            _exit(126);
        execl(tu_host(), tu_host(), "run", "wordcount", "-o", "out.tsv", "--no-progress",
              (char *)NULL);
        _exit(127);
    }
    close(fds[0]);
    *feed = fds[1];
    cr_assert(asprintf(tmp, ".out.tsv.soren-tmp.%ld", (long)pid) > 0);
    /* Up to 10 s for it to start. */
    for (int i = 0; i < 1000 && !exists(*tmp); i++) {
        struct timespec ts = {0, 10 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    cr_assert(exists(*tmp), "soren-host made no temporary output %s", *tmp);
    return pid;
}

Test(output, every_terminating_signal_removes_the_temporary_output)
{
    static const int sigs[] = {SIGHUP,  SIGINT,    SIGQUIT, SIGTERM, SIGUSR1, SIGUSR2,
                               SIGALRM, SIGVTALRM, SIGPROF, SIGXCPU, SIGPIPE};
    for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++) {
        int feed;
        char *tmp = NULL;
        pid_t pid = start_waiting(&feed, &tmp);
        cr_assert_eq(kill(pid, sigs[i]), 0);
        int status;
        cr_assert_eq(waitpid(pid, &status, 0), pid);
        close(feed);
        cr_expect(WIFSIGNALED(status) && WTERMSIG(status) == sigs[i],
                  "signal %d: status 0x%x, expected death by the signal", sigs[i], status);
        cr_expect(!exists(tmp), "signal %d left %s", sigs[i], tmp);
        cr_expect(!exists("out.tsv"), "signal %d left out.tsv", sigs[i]);
        free(tmp);
    }
}

Test(output, a_killed_runs_leftover_goes_and_a_live_ones_stays)
{
    int feed;
    char *tmp = NULL;
    pid_t pid = start_waiting(&feed, &tmp);
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    close(feed);
    cr_assert(exists(tmp), "SIGKILL cannot be handled: %s should be left", tmp);
    /* This test's process is alive: its file is work in progress. */
    char live[64];
    snprintf(live, sizeof live, ".out.tsv.soren-tmp.%ld", (long)getpid());
    char *p = in_dir(live);
    tu_write(p, "", 0);
    free(p);
    put_file("in.txt", "b a b\n");
    cr_assert_eq(host(NULL, "", "run wordcount in.txt -o out.tsv"), 0);
    cr_expect(!exists(tmp), "the killed run's %s is still there", tmp);
    cr_expect(exists(live), "a live process's %s was removed", live);
    expect_none(".out.tsv", live);
    free(tmp);
}

Test(output, the_file_size_limit_is_a_write_error)
{
    put_lines("words.txt", "word", 20000);
    char *err = NULL;
    int rc = host(&err, "ulimit -f 8 &&", "run wordcount words.txt -o out.tsv");
    cr_expect_eq(rc, 1, "exit %d: %s", rc, err);
    cr_expect(strstr(err, "writing output out.tsv: it would pass the file size limit of") != NULL,
              "%s", err);
    expect_no_output();
    free(err);
}

Test(output, a_fault_in_plugin_code_names_the_plugin_the_job_and_the_record)
{
    put_file("in.txt", "aa\nbbb\ncccc\n");
    char *err = NULL;
    int rc = run_faulty(&err, "SOREN_TEST_CRASH_AT=7", "in.txt -o out.tsv --threads 1");
    cr_expect_eq(rc, 139, "exit %d: %s", rc, err);
    char want[8192];
    snprintf(want, sizeof want, "soren-host: plugin %s/stage/test-plugins/faulty.so crashed "
             "(SIGSEGV) while running job faulty, mapping in.txt at byte 7\n", tu_builddir());
    cr_expect(strstr(err, want) != NULL, "stderr: %s\nwanted: %s", err, want);
    expect_no_output();
    free(err);
}

/* The same from the CPU engine's dense host loop (bucketsum's tasks), which
 * maps a run of records inside the plugin. */
Test(output, a_fault_in_a_host_loop_names_the_task)
{
    char *err = NULL, args[8192];
    snprintf(args, sizeof args, "run '%s/stage/test-plugins/bucketsum.json' --param n=5000 "
             "--param buckets=10 --param groups=10 --device cpu -o out.tsv --threads 1",
             tu_builddir());
    int rc = host(&err, "SOREN_TEST_CRASH_AT=4321", args);
    cr_expect_eq(rc, 139, "exit %d: %s", rc, err);
    char want[8192];
    snprintf(want, sizeof want, "soren-host: plugin %s/stage/test-plugins/bucketsum.so crashed "
             "(SIGSEGV) while running job bucketsum, mapping task 4321\n", tu_builddir());
    cr_expect(strstr(err, want) != NULL, "stderr: %s\nwanted: %s", err, want);
    expect_no_output();
    free(err);
}

/* The same from a stage's run map, which maps records a run at a time:
 * the message names the run (record 10000 is in the third run of 4096). */
Test(output, a_fault_in_a_run_map_names_its_records)
{
    char *p = in_dir("in.bin");
    uint32_t v[20000];
    for (uint32_t i = 0; i < 20000; i++)
        v[i] = i * 2654435761u;
    tu_write(p, (const char *)v, sizeof v);
    free(p);
    char *err = NULL, args[8192];
    snprintf(args, sizeof args, "run '%s/stage/test-plugins/runmarks.json' in.bin --device cpu "
             "-o out.tsv --threads 1", tu_builddir());
    int rc = host(&err, "SOREN_TEST_CRASH_AT=40000", args);
    cr_expect_eq(rc, 139, "exit %d: %s", rc, err);
    char want[8192];
    snprintf(want, sizeof want, "soren-host: plugin %s/stage/test-plugins/runmarks.so crashed "
             "(SIGSEGV) while running job runmarks, mapping one of the records of in.bin at "
             "bytes 32768 to 49151\n", tu_builddir());
    cr_expect(strstr(err, want) != NULL, "stderr: %s\nwanted: %s", err, want);
    expect_no_output();
    free(err);
}

Test(output, a_plugin_that_overflows_a_threads_stack_is_reported_too)
{
    /* Four chunks of the CPU engine (1 MiB each), so a second thread maps. */
    put_lines("big.txt", "", 500000);
    char *err = NULL;
    int rc = run_faulty(&err, "SOREN_TEST_OVERFLOW=1", "big.txt -o out.tsv --threads 2");
    cr_expect_eq(rc, 139, "exit %d: %s", rc, err);
    cr_expect(strstr(err, "faulty.so crashed (SIGSEGV) while running job faulty, mapping "
                          "big.txt at byte ") != NULL, "stderr: %s", err);
    expect_no_output();
    free(err);
}

Test(output, a_run_past_its_timeout_stops_and_names_where_it_was)
{
    /* Four chunks of the CPU engine, each over a second at 10 us a line:
     * the run stops after the chunk it maps when the time runs out. */
    put_lines("big.txt", "", 500000);
    char *err = NULL;
    int rc = run_faulty(&err, "SOREN_TEST_SLOW_US=10", "big.txt -o out.tsv --threads 1 "
                        "--timeout 1");
    cr_expect_eq(rc, 1, "exit %d: %s", rc, err);
    /* monitoring's sample or the map: a second in, either may be running */
    cr_expect(strstr(err, "soren-host: faulty ran longer than --timeout 1 s and was stopped (in "
                          "phase m") != NULL, "stderr: %s", err);
    cr_expect(strstr(err, ", mapping big.txt at byte ") != NULL, "stderr: %s", err);
    cr_expect(strstr(err, "); nothing was written\n") != NULL, "stderr: %s", err);
    expect_no_output();
    free(err);
}

Test(output, a_run_that_hangs_past_its_timeout_ends_the_process)
{
    put_file("in.txt", "aa\nbbb\ncccc\n");
    char *err = NULL;
    int rc = run_faulty(&err, "SOREN_TEST_HANG_AT=3", "in.txt -o out.tsv --threads 1 "
                        "--timeout 1");
    cr_expect_eq(rc, 1, "exit %d: %s", rc, err);
    cr_expect(strstr(err, "soren-host: faulty ran longer than --timeout 1 s (in phase map, "
                          "mapping in.txt at byte 3) and did not stop when asked: ending the "
                          "process, nothing written\n") != NULL, "stderr: %s", err);
    expect_no_output();
    free(err);
}

Test(output, the_progress_line_names_a_record_that_takes_over_a_second)
{
    put_file("in.txt", "aa\nbbb\ncccc\n");
    char *err = NULL;
    int rc = run_faulty(&err, "SOREN_TEST_HANG_AT=3", "in.txt -o out.tsv --threads 1 "
                        "--progress --timeout 2");
    cr_expect_eq(rc, 1, "exit %d: %s", rc, err);
    cr_expect(strstr(err, "; mapping in.txt at byte 3 for 2 s") != NULL, "stderr: %s", err);
    expect_no_output();
    free(err);
}

Test(output, an_input_that_shrinks_is_an_input_error)
{
    long size = put_lines("big.txt", "", 100000);
    char *p = in_dir("big.txt");
    char *err = NULL, *env = NULL;
    cr_assert(asprintf(&env, "SOREN_TEST_SHRINK_AT=0 SOREN_TEST_SHRINK_FILE='%s'", p) > 0);
    int rc = run_faulty(&err, env, "big.txt -o out.tsv --progress");
    cr_expect_eq(rc, 1, "exit %d: %s", rc, err);
    char want[256];
    snprintf(want, sizeof want, "soren-host: faulty: input big.txt ended before byte %ld: it "
             "shrank during the run\n", size);
    const char *at = strstr(err, want);
    cr_expect(at != NULL, "stderr: %s\nwanted: %s", err, want);
    /* A progress line drawn was ended (a carriage return) before it. */
    cr_expect(!at || at == err || at[-1] == '\r' || at[-1] == '\n', "stderr: %s", err);
    expect_no_output();
    free(err);
    free(env);
    free(p);
}

Test(output, a_missing_folder_fails_before_the_job_runs)
{
    put_file("in.txt", "aa\n");
    /* The job would crash on its first record: it must not get there. */
    char *err = NULL;
    int rc = run_faulty(&err, "SOREN_TEST_CRASH_AT=0", "in.txt -o no-such-folder/out.tsv");
    cr_expect_eq(rc, 1, "exit %d: %s", rc, err);
    cr_expect(strstr(err, "cannot create output no-such-folder/out.tsv: folder no-such-folder "
                          "does not exist") != NULL, "%s", err);
    free(err);
}

Test(output, replacing_a_file_keeps_its_mode_and_a_new_one_gets_the_umasks)
{
    char *in = in_dir("in.txt"), *out = in_dir("out.tsv");
    tu_write(in, "a\n", 2);
    tu_write(out, "old", 3);
    cr_assert_eq(chmod(out, 0600), 0);
    cr_assert_eq(host(NULL, "umask 022 &&", "run wordcount in.txt -o out.tsv"), 0);
    struct stat st;
    cr_assert_eq(stat(out, &st), 0);
    cr_expect_eq(st.st_mode & 07777, 0600, "mode %04o, expected 0600", st.st_mode & 07777);
    cr_assert_eq(host(NULL, "umask 027 &&", "run wordcount in.txt -o new.tsv"), 0);
    char *made = in_dir("new.tsv");
    cr_assert_eq(stat(made, &st), 0);
    cr_expect_eq(st.st_mode & 07777, 0640, "mode %04o, expected 0640", st.st_mode & 07777);
    free(in);
    free(out);
    free(made);
}

Test(output, a_read_only_file_is_not_replaced)
{
    /* Root may write any file: it runs soren-host as nobody, in a folder
     * it may write, so only the file's own mode refuses. */
    const char *as = "";
    if (geteuid() == 0) {
        if (tu_runf(NULL, NULL, "setpriv --version") != 0)
            cr_skip_test("running as root without setpriv(1) to run as another user");
        as = "setpriv --reuid=65534 --regid=65534 --clear-groups";
        cr_assert_eq(chmod(dir, 0777), 0);
    }
    char *in = in_dir("in.txt"), *out = in_dir("out.tsv");
    tu_write(in, "a\n", 2);
    tu_write(out, "old", 3);
    cr_assert_eq(chmod(in, 0644), 0);
    cr_assert_eq(chmod(out, 0444), 0);
    char *err = NULL;
    int rc = host(&err, as, "run wordcount in.txt -o out.tsv");
    cr_expect_eq(rc, 1, "exit %d: %s", rc, err);
    cr_expect(strstr(err, "output out.tsv (mode 0444) is not writable: make it writable "
                          "(chmod u+w out.tsv)") != NULL, "%s", err);
    char *text = tu_read(out, NULL);
    cr_expect_str_eq(text, "old");
    free(text);
    free(err);
    free(in);
    free(out);
}

Test(output, symbolic_links_are_written_through)
{
    char *in = in_dir("in.txt");
    tu_write(in, "a\n", 2);
    cr_assert_eq(tu_runf(NULL, NULL, "cd '%s' && mkdir sub && ln -s sub/made.tsv dangling && "
                         "echo old > sub/kept.tsv && ln -s sub/kept.tsv link", dir), 0);
    cr_assert_eq(host(NULL, "", "run wordcount in.txt -o dangling"), 0);
    cr_assert_eq(host(NULL, "", "run wordcount in.txt -o link"), 0);
    const char *names[] = {"dangling", "link"};
    const char *targets[] = {"sub/made.tsv", "sub/kept.tsv"};
    for (int i = 0; i < 2; i++) {
        char *l = in_dir(names[i]), *t = in_dir(targets[i]);
        struct stat st;
        cr_expect(lstat(l, &st) == 0 && S_ISLNK(st.st_mode), "%s is no longer a link", names[i]);
        char *text = tu_read(t, NULL);
        cr_expect_str_eq(text, "a\t1\n", "%s", targets[i]);
        free(text);
        free(l);
        free(t);
    }
    free(in);
}
