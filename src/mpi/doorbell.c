/* SPDX-License-Identifier: BSD-3-Clause */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
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

/* The shared word's mapping: one page. */
#define WORD_LEN 4096u

static _Atomic uint32_t *
map_word(int fd)
{
    void *p = mmap(NULL, WORD_LEN, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);

    return p == MAP_FAILED ? NULL : p;
}

void
scimq__doorbell_init(struct scimq_doorbell *db)
{
    db->fd = -1;
    db->word_fd = -1;
    db->asleep = NULL;
    db->armed = false;
}

int
scimq__doorbell_open(struct scimq_doorbell *db,
                     char name[SCIMQ_DOORBELL_NAME_MAX])
{
    static atomic_uint serial;
    struct sockaddr_un sa;
    socklen_t len;
    int err;

    scimq__doorbell_init(db);
    db->fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (db->fd < 0)
        return -errno; /* SCIMQ_E* are negative errno values */
    /* Unique on the host: the process and a number within it. */
    snprintf(name, SCIMQ_DOORBELL_NAME_MAX, "scimq-mpi-agent.%ld.%u",
             (long) getpid(), atomic_fetch_add(&serial, 1));
    len = doorbell_addr(&sa, name);
    if (bind(db->fd, (struct sockaddr *) &sa, len) != 0) {
        err = errno;
        SCIMQ_LOG_ERROR(MPI, "agent: cannot bind its doorbell @%s: %s", name,
                        strerror(err));
        scimq__doorbell_close(db);
        return -err;
    }
    db->word_fd = memfd_create("scimq-mpi-doorbell", MFD_CLOEXEC);
    if (db->word_fd < 0 || ftruncate(db->word_fd, WORD_LEN) != 0 ||
        (db->asleep = map_word(db->word_fd)) == NULL) {
        err = errno;
        SCIMQ_LOG_ERROR(MPI,
                        "agent: cannot make its doorbell's shared word: %s",
                        strerror(err));
        scimq__doorbell_close(db);
        return -err;
    }
    /* Asleep until it says otherwise: a rank that comes first rings. */
    atomic_store(db->asleep, 1u);
    db->armed = true;
    return 0;
}

void
scimq__doorbell_arm(struct scimq_doorbell *db, bool asleep)
{
    if (db->asleep == NULL || db->armed == asleep)
        return;
    /* seq_cst: the store is ordered before the agent's next look at its
     * completion queue (see the header). */
    atomic_store(db->asleep, asleep ? 1u : 0u);
    db->armed = asleep;
}

void
scimq__doorbell_drain(const struct scimq_doorbell *db)
{
    char buf[64];

    /* Bounded: the ranks cannot ring faster than this empties it for
     * long, and a stale ring only costs one spurious wake-up. */
    for (int i = 0; i < 1024; i++)
        if (recv(db->fd, buf, sizeof(buf), MSG_DONTWAIT) < 0)
            break;
}

int
scimq__doorbell_connect(struct scimq_doorbell *db, const char *name,
                        int32_t agent_pid, int32_t word_fd)
{
    struct sockaddr_un sa;
    socklen_t len = doorbell_addr(&sa, name);
    char path[64];
    int err, fd;

    scimq__doorbell_init(db);
    db->fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (db->fd < 0)
        return -errno;
    if (connect(db->fd, (struct sockaddr *) &sa, len) != 0) {
        err = errno;
        SCIMQ_LOG_ERROR(MPI, "rank: cannot reach its agent's doorbell @%s: %s",
                        name, strerror(err));
        scimq__doorbell_close(db);
        return -err;
    }
    snprintf(path, sizeof(path), "/proc/%ld/fd/%ld", (long) agent_pid,
             (long) word_fd);
    fd = word_fd >= 0 ? open(path, O_RDWR | O_CLOEXEC) : -1;
    if (fd >= 0) {
        db->asleep = map_word(fd);
        close(fd);
    }
    if (db->asleep == NULL)
        SCIMQ_LOG_DEBUG(MPI,
                        "rank: cannot map its agent's doorbell word %s (%s): "
                        "it rings after every control message",
                        path, strerror(errno));
    return 0;
}

void
scimq__doorbell_ring(const struct scimq_doorbell *db)
{
    char b = 1;

    /* EAGAIN: the socket is full, so the agent is due to wake anyway. */
    (void) send(db->fd, &b, 1, MSG_DONTWAIT | MSG_NOSIGNAL);
}

void
scimq__doorbell_notify(const struct scimq_doorbell *db)
{
    /* The messages just posted are ordered before the load (see the
     * header). */
    atomic_thread_fence(memory_order_seq_cst);
    if (db->asleep == NULL || atomic_load(db->asleep) != 0)
        scimq__doorbell_ring(db);
}

void
scimq__doorbell_close(struct scimq_doorbell *db)
{
    if (db->asleep != NULL)
        munmap((void *) db->asleep, WORD_LEN);
    if (db->word_fd >= 0)
        close(db->word_fd);
    if (db->fd >= 0)
        close(db->fd);
    scimq__doorbell_init(db);
}
