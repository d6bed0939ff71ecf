/* SPDX-License-Identifier: BSD-3-Clause */
#include "config.h"

#include <errno.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <scimq/error.h>

#include "common/log.h"
#include "doorbell.h"

/* Abstract address of name: sun_path starts with a NUL. */
static socklen_t
doorbell_addr(struct sockaddr_un *sa, const char *name)
{
    size_t n = strnlen(name, SCIMQ_DOORBELL_NAME_MAX - 1);

    memset(sa, 0, sizeof(*sa));
    sa->sun_family = AF_UNIX;
    memcpy(sa->sun_path + 1, name, n);
    return (socklen_t) (offsetof(struct sockaddr_un, sun_path) + 1 + n);
}

int
scimq__doorbell_open(char name[SCIMQ_DOORBELL_NAME_MAX])
{
    static atomic_uint serial;
    struct sockaddr_un sa;
    socklen_t len;
    int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);

    int err;

    if (fd < 0)
        return -errno; /* SCIMQ_E* are negative errno values */
    /* Unique on the host: the process and a number within it. */
    snprintf(name, SCIMQ_DOORBELL_NAME_MAX, "scimq-mpi-agent.%ld.%u",
             (long) getpid(), atomic_fetch_add(&serial, 1));
    len = doorbell_addr(&sa, name);
    if (bind(fd, (struct sockaddr *) &sa, len) != 0) {
        err = errno;
        SCIMQ_LOG_ERROR(MPI, "agent: cannot bind its doorbell @%s: %s", name,
                        strerror(err));
        close(fd);
        return -err;
    }
    return fd;
}

void
scimq__doorbell_drain(int fd)
{
    char buf[64];

    /* Bounded: the ranks cannot ring faster than this empties it for
     * long, and a stale ring only costs one spurious wake-up. */
    for (int i = 0; i < 1024; i++)
        if (recv(fd, buf, sizeof(buf), MSG_DONTWAIT) < 0)
            break;
}

int
scimq__doorbell_connect(const char *name)
{
    struct sockaddr_un sa;
    socklen_t len = doorbell_addr(&sa, name);
    int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    int err;

    if (fd < 0)
        return -errno;
    if (connect(fd, (struct sockaddr *) &sa, len) != 0) {
        err = errno;
        SCIMQ_LOG_ERROR(MPI, "rank: cannot reach its agent's doorbell @%s: %s",
                        name, strerror(err));
        close(fd);
        return -err;
    }
    return fd;
}

void
scimq__doorbell_ring(int fd)
{
    char b = 1;

    /* EAGAIN: the socket is full, so the agent is due to wake anyway. */
    (void) send(fd, &b, 1, MSG_DONTWAIT | MSG_NOSIGNAL);
}
