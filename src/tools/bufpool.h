/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A fixed pool of equal payload buffers for asynchronous PUTs: a producer
 * takes a free buffer, fills it, puts it, and the library's release
 * callback (scimq_client_put's, called once the gateway confirmed the
 * message) gives it back.  The pool is the producer's confirm window in
 * memory: taking waits while every buffer is in flight.  Thread-safe (the
 * release comes from the library's I/O thread).
 */
#ifndef SCIMQ_TOOLS_BUFPOOL_H
#define SCIMQ_TOOLS_BUFPOOL_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

struct tool_bufpool;

/* What scimq_client_put() is given as release argument for buffer idx. */
struct tool_bufref {
    struct tool_bufpool *pool;
    int idx;
};

struct tool_bufpool {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    uint8_t **bufs;
    struct tool_bufref *refs;
    int *free_idx;
    int nfree, n;
};

/* n buffers of size bytes.  Returns 0, or -1 (out of memory; the pool is
 * then empty and tool_bufpool_fini() still to be called). */
int tool_bufpool_init(struct tool_bufpool *p, int n, size_t size);

/* Index of a free buffer, waiting for one while all are in flight. */
int tool_bufpool_take(struct tool_bufpool *p);

/* The release callback: arg is &p->refs[idx]. */
void tool_bufpool_release(void *arg);

/* Frees the buffers; none may be in flight (the client is closed). */
void tool_bufpool_fini(struct tool_bufpool *p);

#endif /* SCIMQ_TOOLS_BUFPOOL_H */
