/* channel.c - the resident host's socket and the messages over it. */
#include "channel.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

soren_status soren_channel_path(const char *given, char *buf, size_t size, soren_error *err)
{
    const char *env = getenv("SOREN_HOST");
    const char *runtime = getenv("XDG_RUNTIME_DIR");
    const char *tmp = getenv("TMPDIR");
    int n;
    if (given && *given)
        n = snprintf(buf, size, "%s", given);
    else if (env && *env)
        n = snprintf(buf, size, "%s", env);
    else if (runtime && *runtime == '/')
        n = snprintf(buf, size, "%s/soren/host.sock", runtime);
    else
        n = snprintf(buf, size, "%s/soren-%ld/host.sock", tmp && *tmp == '/' ? tmp : "/tmp",
                     (long)getuid());
    /* sun_path's limit, which is smaller than a path's */
    if (n < 0 || (size_t)n >= size || (size_t)n >= sizeof ((struct sockaddr_un *)0)->sun_path)
        return soren_error_set(err, SOREN_EUSAGE, "the host's socket path %s is over the %zu "
                               "bytes a Unix socket's name may have: choose a shorter one "
                               "with --socket or $SOREN_HOST",
                               given && *given ? given : env && *env ? env : "(default)",
                               sizeof ((struct sockaddr_un *)0)->sun_path - 1);
    return SOREN_OK;
}

soren_status soren_channel_folder(const char *path, char *dir, size_t size, soren_error *err)
{
    const char *slash = strrchr(path, '/');
    int n = !slash ? snprintf(dir, size, ".")
            : slash == path ? snprintf(dir, size, "/")
                            : snprintf(dir, size, "%.*s", (int)(slash - path), path);
    if (n < 0 || (size_t)n >= size)
        return soren_error_set(err, SOREN_EUSAGE, "the host's socket path %s is too long", path);
    if (mkdir(dir, 0700) != 0 && errno != EEXIST)
        return soren_error_errno(err, SOREN_EIO, errno, "cannot make the host's folder %s",
                                 dir);
    struct stat st;
    if (lstat(dir, &st) != 0)
        return soren_error_errno(err, SOREN_EIO, errno, "cannot use the host's folder %s", dir);
    if (!S_ISDIR(st.st_mode))
        return soren_error_set(err, SOREN_EIO, "the host's folder %s is not a folder (a "
                               "symbolic link or a file): remove it, or choose another socket "
                               "with --socket", dir);
    if (st.st_uid != getuid())
        return soren_error_set(err, SOREN_EIO, "the host's folder %s belongs to user %ld, not "
                               "to you (%ld): another user could plant a socket there; "
                               "choose another with --socket", dir, (long)st.st_uid,
                               (long)getuid());
    if (st.st_mode & 077)
        return soren_error_set(err, SOREN_EIO, "the host's folder %s has mode %03o: others "
                               "could reach the socket; run 'chmod 700 %s'", dir,
                               (unsigned)(st.st_mode & 0777), dir);
    return SOREN_OK;
}

/* Checks the socket file at path: this user's, 0600 or narrower. */
static soren_status check_socket_file(const char *path, const struct stat *st,
                                      soren_error *err)
{
    if (!S_ISSOCK(st->st_mode))
        return soren_error_set(err, SOREN_EIO, "%s is not a socket: remove it, or choose "
                               "another path with --socket", path);
    if (st->st_uid != getuid())
        return soren_error_set(err, SOREN_EIO, "the host's socket %s belongs to user %ld, not "
                               "to you (%ld): refused", path, (long)st->st_uid, (long)getuid());
    if (st->st_mode & 0177)
        return soren_error_set(err, SOREN_EIO, "the host's socket %s has mode %03o, not 0600: "
                               "refused; stop that host and start it again", path,
                               (unsigned)(st->st_mode & 0777));
    return SOREN_OK;
}

/* A new Unix stream socket, and in *a the address of path for bind or
 * connect; -1 with errno set (ENAMETOOLONG: path is longer than sun_path
 * holds). */
static int socket_at(const char *path, struct sockaddr_un *a)
{
    memset(a, 0, sizeof *a);
    a->sun_family = AF_UNIX;
    if (strlen(path) >= sizeof a->sun_path) {
        errno = ENAMETOOLONG;
        return -1;
    }
    strcpy(a->sun_path, path);
    return socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
}

/* 1 where a host answers at path, 0 where none does (the socket is stale). */
static int answers(const char *path)
{
    struct sockaddr_un a;
    int fd = socket_at(path, &a);
    if (fd < 0)
        return 0;
    int ok = connect(fd, (struct sockaddr *)&a, sizeof a) == 0;
    close(fd);
    return ok;
}

int soren_channel_listen(const char *path, soren_error *err)
{
    char dir[4096];
    if (soren_channel_folder(path, dir, sizeof dir, err) != SOREN_OK)
        return -1;
    struct stat st;
    if (lstat(path, &st) == 0) {
        if (!S_ISSOCK(st.st_mode) || st.st_uid != getuid()) {
            check_socket_file(path, &st, err);
            return -1;
        }
        if (answers(path)) {
            soren_error_set(err, SOREN_EUSAGE, "a host already serves at %s: stop it first "
                            "(soren-host stop), or choose another socket with --socket", path);
            return -1;
        }
        /* A socket nobody listens on is what a host that died leaves. */
        if (unlink(path) != 0 && errno != ENOENT) {
            soren_error_errno(err, SOREN_EIO, errno, "cannot remove the stale socket %s", path);
            return -1;
        }
    }
    struct sockaddr_un a;
    int fd = socket_at(path, &a);
    if (fd < 0) {
        soren_error_errno(err, SOREN_EIO, errno, "cannot make the host's socket %s", path);
        return -1;
    }
    /* Made 0600 from the start: no moment where others could connect. */
    mode_t mask = umask(0177);
    int bound = bind(fd, (struct sockaddr *)&a, sizeof a);
    int e = errno;
    umask(mask);
    if (bound != 0 || listen(fd, 64) != 0) {
        soren_error_errno(err, SOREN_EIO, bound ? e : errno, "cannot listen at %s", path);
        close(fd);
        return -1;
    }
    return fd;
}

int soren_channel_connect(const char *path, soren_error *err)
{
    char dir[4096];
    struct stat st;
    if (lstat(path, &st) != 0) {
        soren_error_errno(err, SOREN_EIO, errno, "no host serves at %s", path);
        return -2;
    }
    if (soren_channel_folder(path, dir, sizeof dir, err) != SOREN_OK ||
        check_socket_file(path, &st, err) != SOREN_OK)
        return -1;
    struct sockaddr_un a;
    int fd = socket_at(path, &a);
    if (fd < 0) {
        soren_error_errno(err, SOREN_EIO, errno, "cannot reach the host at %s", path);
        return -1;
    }
    if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
        int e = errno;
        close(fd);
        soren_error_errno(err, SOREN_EIO, e, "no host serves at %s", path);
        return e == ECONNREFUSED || e == ENOENT ? -2 : -1;
    }
    if (soren_channel_peer_is_me(fd, err) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

int soren_channel_peer_is_me(int fd, soren_error *err)
{
    struct ucred cred;
    socklen_t len = sizeof cred;
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) {
        soren_error_errno(err, SOREN_EIO, errno, "cannot learn who is at the other end");
        return -1;
    }
    if (cred.uid != getuid()) {
        soren_error_set(err, SOREN_EUSAGE, "user %ld is at the other end of the host's socket, "
                        "not %ld: refused", (long)cred.uid, (long)getuid());
        return -1;
    }
    return 0;
}

/* Sends the encoded message bytes with descriptors fds beside them. */
static soren_status channel_send(int fd, const uint8_t *bytes, size_t size, const int *fds,
                                 size_t nfds, soren_error *err)
{
    if (nfds > SOREN_MSG_MAX_FDS)
        return soren_error_set(err, SOREN_EUSAGE, "%zu descriptors, over the %u one message "
                               "carries", nfds, SOREN_MSG_MAX_FDS);
    union {
        struct cmsghdr h;
        char buf[CMSG_SPACE(sizeof(int) * SOREN_MSG_MAX_FDS)];
    } control;
    size_t done = 0;
    while (done < size) {
        struct iovec iov = {(void *)(bytes + done), size - done};
        struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};
        if (done == 0 && nfds) {
            memset(&control, 0, sizeof control);
            mh.msg_control = control.buf;
            mh.msg_controllen = CMSG_SPACE(sizeof(int) * nfds);
            struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
            c->cmsg_level = SOL_SOCKET;
            c->cmsg_type = SCM_RIGHTS;
            c->cmsg_len = CMSG_LEN(sizeof(int) * nfds);
            memcpy(CMSG_DATA(c), fds, sizeof(int) * nfds);
        }
        ssize_t n = sendmsg(fd, &mh, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return soren_error_errno(err, SOREN_EIO, n < 0 ? errno : EPIPE,
                                     "cannot write to the host's socket");
        done += (size_t)n;
    }
    return SOREN_OK;
}

soren_status soren_channel_send_msg(int fd, soren_msg_kind kind, const char *const *fields,
                                    size_t count, const int *fds, size_t nfds,
                                    soren_error *err)
{
    uint8_t *bytes = NULL;
    size_t size = 0;
    soren_status rc = soren_msg_encode(kind, fields, count, &bytes, &size, err);
    if (rc == SOREN_OK)
        rc = channel_send(fd, bytes, size, fds, nfds, err);
    free(bytes);
    return rc;
}

/* Reads exactly n bytes; *got says how many came before an end or error. */
static int read_all(int fd, uint8_t *buf, size_t n, size_t *got)
{
    *got = 0;
    while (*got < n) {
        ssize_t r = recv(fd, buf + *got, n - *got, 0);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return r < 0 ? errno : EPIPE;
        *got += (size_t)r;
    }
    return 0;
}

static void close_all(int *fds, size_t n)
{
    for (size_t i = 0; i < n; i++)
        close(fds[i]);
}

soren_status soren_channel_recv(int fd, soren_msg *msg, int *fds, size_t max, size_t *nfds,
                                int *closed, soren_error *err)
{
    memset(msg, 0, sizeof *msg);
    *nfds = 0;
    *closed = 0;
    uint8_t head[4];
    union {
        struct cmsghdr h;
        char buf[CMSG_SPACE(sizeof(int) * SOREN_MSG_MAX_FDS)];
    } control;
    struct iovec iov = {head, 1};
    struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = control.buf,
                        .msg_controllen = sizeof control.buf};
    ssize_t n;
    do
        n = recvmsg(fd, &mh, MSG_CMSG_CLOEXEC);
    while (n < 0 && errno == EINTR);
    if (n <= 0) {
        *closed = n == 0;
        return soren_error_errno(err, SOREN_EIO, n < 0 ? errno : EPIPE,
                                 "cannot read from the host's socket");
    }
    for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c)) {
        if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
            continue;
        size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        int *got = (int *)CMSG_DATA(c);
        for (size_t i = 0; i < k; i++) {
            if (*nfds < max)
                fds[(*nfds)++] = got[i];
            else
                close(got[i]);
        }
        if (k > max) {
            close_all(fds, *nfds);
            *nfds = 0;
            return soren_error_set(err, SOREN_EINPUT, "a message with %zu descriptors, over "
                                   "the %zu it may carry", k, max);
        }
    }
    soren_status rc = SOREN_OK;
    size_t got = 0;
    int e = (mh.msg_flags & MSG_CTRUNC) ? EMSGSIZE : read_all(fd, head + 1, 3, &got);
    uint32_t size = e ? 0
                      : (uint32_t)head[0] | (uint32_t)head[1] << 8 | (uint32_t)head[2] << 16 |
                            (uint32_t)head[3] << 24;
    uint8_t *body = NULL;
    if (e)
        rc = soren_error_errno(err, SOREN_EIO, e, "cannot read a message's length");
    else if (size < 1 || size > SOREN_MSG_MAX_BYTES)
        rc = soren_error_set(err, SOREN_EINPUT, "a message of %u bytes (1 to %u)", size,
                             SOREN_MSG_MAX_BYTES);
    else if (!(body = malloc(size)))
        rc = soren_error_set(err, SOREN_ENOMEM, "out of memory reading a message");
    else if ((e = read_all(fd, body, size, &got)) != 0)
        rc = soren_error_errno(err, SOREN_EIO, e, "a message cut off after %zu of %u bytes",
                               got, size);
    else
        rc = soren_msg_decode(body, size, msg, err);
    free(body);
    if (rc != SOREN_OK) {
        close_all(fds, *nfds);
        *nfds = 0;
    }
    return rc;
}
