/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Where an agent's messages come from (source.c): the gateway, through
 * libscimq.  The agent sees only these operations, so a benchmark can put
 * a synthetic source in front of the very agent and runtime code
 * (bench/scimq-rma-bench: the hop measured without a gateway).
 */
#ifndef SCIMQ_MPI_SOURCE_H
#define SCIMQ_MPI_SOURCE_H

#include <stdint.h>

#include <scimq/client.h>

/* What the agent asks of the gateway, once it has sized its pool. */
struct scimq_mpi_source_credit {
    uint64_t bytes;       /* payload bytes in flight at most */
    uint32_t messages;    /* messages in flight at most */
    uint64_t max_payload; /* the largest message taken */
};

struct scimq_mpi_source_cfg {
    const char *url, *queue, *token_file;
    uint32_t streams;
    uint64_t max_hold_ms; /* lease extension bound (libscimq auto_extend) */
    /* Called by open() once the gateway said its largest message
     * (gateway_max, 0 if unknown), before anything is received: the agent
     * builds its pool and fills in the credit.  Returns 0 or an error,
     * which open() returns. */
    int (*sized)(void *arg, uint64_t gateway_max,
                 struct scimq_mpi_source_credit *cr);
    /* The agent's slot allocator: every payload goes into a pool slot. */
    int (*alloc)(void *arg, uint64_t len, void **buf_p, void **ctx_p);
    void (*release)(void *arg, void *buf, void *ctx);
    void *alloc_arg;
};

enum { SCIMQ_SRC_ACK, SCIMQ_SRC_REQUEUE, SCIMQ_SRC_DEADLETTER };

struct scimq_mpi_source_ops {
    int (*open)(const struct scimq_mpi_source_cfg *cfg, void **src_p);
    /* Never waits: 0 and *m_p, SCIMQ_EAGAIN, SCIMQ_EOS, or an error. */
    int (*get)(void *src, scimq_message_t **m_p);
    /* A descriptor that becomes readable when get() may return something
     * other than SCIMQ_EAGAIN (the agent sleeps on it with poll()), or -1
     * (the agent then looks again every millisecond).  The agent empties
     * it with read() before it calls get(); NULL: -1. */
    int (*wait_fd)(void *src);
    /* how: SCIMQ_SRC_*; the message stays to be freed. */
    int (*settle)(void *src, scimq_message_t *m, int how);
    int (*extend)(void *src, scimq_message_t *m, uint32_t lease_ms);
    void (*free)(void *src, scimq_message_t *m); /* releases its slot */
    void (*close)(void *src);
    /* The gateway session, which the agent's REPORT goes on (report.c);
     * NULL (or no op): a source without one sends no reports. */
    scimq_client_t *(*session)(void *src);
};

extern const struct scimq_mpi_source_ops scimq__mpi_gateway_source;

/* Set before scimq_mpi_init() (a benchmark's own build of the runtime
 * only): agents take their messages from it instead of the gateway. */
extern const struct scimq_mpi_source_ops *scimq__mpi_source_hook;

#endif /* SCIMQ_MPI_SOURCE_H */
