/*
 * channel.h - the resident host's socket: where it is, who may use it, and
 * messages with descriptors over it.
 *
 * The socket is $SOREN_HOST, else $XDG_RUNTIME_DIR/soren/host.sock, else
 * soren-UID/host.sock in $TMPDIR (or /tmp); --socket PATH overrides all.
 * Its folder must be a real folder owned by this user that nobody else can
 * enter (0700; made so where missing, refused otherwise, with the fix),
 * and the socket itself this user's and 0600: a host serves its own user
 * only, and a client talks only to a host of its own user.  Each side also
 * checks the other's credentials (SO_PEERCRED).
 */
#ifndef SOREN_HOST_CHANNEL_H
#define SOREN_HOST_CHANNEL_H

#include <stddef.h>
#include <stdint.h>

#include "../error.h"
#include "protocol.h"

/* The socket's path (given, or as above) in buf. */
soren_status soren_channel_path(const char *given, char *buf, size_t size, soren_error *err);

/* The folder that holds the socket at path, made 0700 where missing and
 * checked as above; *dir (buf) is its path. */
soren_status soren_channel_folder(const char *path, char *dir, size_t size, soren_error *err);

/* Listens at path: a socket file left by a host that no longer answers is
 * removed first (one that answers is an error: a host serves there).
 * Returns the listening descriptor, or -1 with err set. */
int soren_channel_listen(const char *path, soren_error *err);

/* Connects to the host at path after checking its folder and socket.
 * Returns the descriptor, -1 with err set, or -2 where no host serves there
 * (no socket, or nobody listening): *err then says so. */
int soren_channel_connect(const char *path, soren_error *err);

/* 0 where the peer of a connected socket runs as this user. */
int soren_channel_peer_is_me(int fd, soren_error *err);

/* Encodes and sends a message. */
soren_status soren_channel_send_msg(int fd, soren_msg_kind kind, const char *const *fields,
                                    size_t count, const int *fds, size_t nfds,
                                    soren_error *err);

/* Receives one message and the descriptors beside it (at most max; more is
 * an error, and every one received is closed on any error).  SOREN_EIO
 * with *closed 1 where the peer closed the connection before a message. */
soren_status soren_channel_recv(int fd, soren_msg *msg, int *fds, size_t max, size_t *nfds,
                                int *closed, soren_error *err);

#endif /* SOREN_HOST_CHANNEL_H */
