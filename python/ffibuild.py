# SPDX-License-Identifier: BSD-3-Clause
"""Generates the C source of scimq._scimq_ffi, the binding's extension.

    python3 ffibuild.py OUT.c

cffi in API mode ("out of line"): the declarations below are checked
against <scimq/client.h> by the C compiler when OUT.c is built (a field or
a prototype that drifts from the header is a compile error, not a silent
misread as in ABI mode), and the release callback of asynchronous PUTs can
be C.  That callback runs on libscimq's I/O thread, which must never block:
a Python callback would have to take the GIL there and stall all K streams
behind whatever Python code runs.  So a confirmation only links a record
onto a list under a mutex, and Python collects the list when it next puts,
flushes or closes.  The build (python/Makefile.include) compiles OUT.c with
libtool against the client library, like the command-line tools; only
cffi's generator runs here, no distutils.
"""

import sys

import cffi

CDEF = r"""
typedef struct scimq_client scimq_client_t;

typedef struct scimq_client_options {
    uint32_t streams;
    const char *token_file;
    const char *client_name;
    uint32_t confirm_window;
    uint32_t connect_timeout_ms;
    uint32_t reconnect_ms;
    uint32_t request_timeout_ms;
    int auto_extend;
    uint64_t max_hold_ms;
    ...;
} scimq_client_options_t;

typedef struct scimq_block {
    const char *name;
    const void *data;
    uint64_t len;
} scimq_block_t;

enum scimq_queue_kind { SCIMQ_QUEUE_GUARANTEED, SCIMQ_QUEUE_BEST_EFFORT };

enum scimq_durability {
    SCIMQ_DURABILITY_DEFAULT, SCIMQ_DURABILITY_MEMORY,
    SCIMQ_DURABILITY_BATCH, SCIMQ_DURABILITY_SYNC, ...
};

/* "...;": fields added to the header later stay zero (the defaults). */
typedef struct scimq_queue_options {
    enum scimq_queue_kind kind;
    uint32_t ack_timeout_ms;
    uint32_t max_attempts;
    uint64_t max_bytes;
    const char *dead_letter;
    enum scimq_durability durability;
    ...;
} scimq_queue_options_t;

typedef struct scimq_message {
    uint64_t delivery_id;
    uint64_t msg_id;
    uint32_t attempt;
    const char *queue;
    uint32_t block_count;
    const scimq_block_t *blocks;
    void *payload;
    uint64_t payload_len;
    uint64_t flags;
    ...;
} scimq_message_t;

#define SCIMQ_PUT_CONTROL ...
#define SCIMQ_MESSAGE_CONTROL ...

#define SCIMQ_EAGAIN ...
#define SCIMQ_ETIMEDOUT ...
#define SCIMQ_EOS ...
#define SCIMQ_ENOMEM ...
#define SCIMQ_EINVAL ...
#define SCIMQ_SYNTH_HEADER_LEN ...

const char *scimq_strerror(int err);
const char *scimq_err_name(int err);

void scimq_client_options_default(scimq_client_options_t *opts);
int scimq_client_open(const char *url, const scimq_client_options_t *opts,
                      scimq_client_t **c_p);
int scimq_client_close(scimq_client_t *c);
int scimq_client_put(scimq_client_t *c, const char *queue,
                     const scimq_block_t *blocks, uint32_t block_count,
                     void (*free_fn)(void *), void *free_arg);
int scimq_client_put_flags(scimq_client_t *c, const char *queue,
                           const scimq_block_t *blocks, uint32_t block_count,
                           uint64_t flags, void (*free_fn)(void *),
                           void *free_arg);
int scimq_client_flush(scimq_client_t *c, int timeout_ms);
int scimq_client_subscribe(scimq_client_t *c, const char *queue,
                           uint32_t credit_msgs, uint64_t credit_bytes);
int scimq_client_limit(scimq_client_t *c, const char *queue,
                       uint64_t max_message);
unsigned int scimq_client_session_version(scimq_client_t *c);
int scimq_client_get(scimq_client_t *c, scimq_message_t **msg_p,
                     int timeout_ms);
int scimq_client_ack(scimq_client_t *c, const scimq_message_t *msg);
int scimq_client_nack(scimq_client_t *c, const scimq_message_t *msg,
                      int requeue, uint32_t delay_ms);
int scimq_client_extend(scimq_client_t *c, const scimq_message_t *msg,
                        uint32_t lease_ms);
void scimq_message_free(scimq_client_t *c, scimq_message_t *msg);
int scimq_client_queue_declare(scimq_client_t *c, const char *queue,
                               const scimq_queue_options_t *opts);
int scimq_client_queue_delete(scimq_client_t *c, const char *queue,
                              uint64_t *discarded_p);
int scimq_client_queue_bind(scimq_client_t *c, const char *queue,
                            const char *target);
int scimq_client_queue_unbind(scimq_client_t *c, const char *queue,
                              const char *target);
int scimq_client_queue_close(scimq_client_t *c, const char *queue);
int scimq_client_queue_move(scimq_client_t *c, const char *queue,
                            const char *target, uint64_t max_msgs,
                            uint64_t *moved_p);
int scimq_client_queue_list(scimq_client_t *c, const char *prefix,
                            char **json_p);
int scimq_client_stats(scimq_client_t *c, const char *queue, char **json_p);
int scimq_client_ping(scimq_client_t *c, uint64_t *rtt_ns_p);
void free(void *p);

int scimq__synth_fill(void *buf, size_t len, uint64_t seq);
int scimq__synth_verify(const void *buf, size_t len, uint64_t *seq_p);

struct pyscimq_tracker;
struct pyscimq_tracker *pyscimq_tracker_new(void);
void pyscimq_tracker_free(struct pyscimq_tracker *t);
int pyscimq_put_async(scimq_client_t *c, struct pyscimq_tracker *t,
                      const char *queue, const scimq_block_t *blocks,
                      uint32_t block_count, uint64_t flags, uint64_t token);
size_t pyscimq_collect(struct pyscimq_tracker *t, uint64_t *tokens,
                       size_t max);
int pyscimq_wait(struct pyscimq_tracker *t, int timeout_ms);
"""

# The C side of asynchronous PUTs: confirmations handed from the I/O thread
# to Python (see the module docstring).
SOURCE = r"""
#include <pthread.h>
#include <stdlib.h>
#include <time.h>

#include <scimq/client.h>
#include <scimq/error.h>

#include "tools/synth.h"

/* One PUT handed to the library; linked onto its tracker once confirmed. */
struct pyscimq_done {
    struct pyscimq_done *next;
    struct pyscimq_tracker *tracker;
    uint64_t token; /* names the Python objects the PUT borrowed */
};

/* Per client: confirmed PUTs that Python has not collected yet. */
struct pyscimq_tracker {
    pthread_mutex_t lock;
    pthread_cond_t cond; /* signalled when done becomes non-empty */
    struct pyscimq_done *done;
};

static struct pyscimq_tracker *
pyscimq_tracker_new(void)
{
    struct pyscimq_tracker *t = calloc(1, sizeof(*t));
    pthread_condattr_t attr;

    if (t == NULL)
        return NULL;
    pthread_mutex_init(&t->lock, NULL);
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(&t->cond, &attr);
    pthread_condattr_destroy(&attr);
    return t;
}

/* Only once the client is closed: no confirmation can come any more. */
static void
pyscimq_tracker_free(struct pyscimq_tracker *t)
{
    struct pyscimq_done *d, *next;

    if (t == NULL)
        return;
    for (d = t->done; d != NULL; d = next) {
        next = d->next;
        free(d);
    }
    pthread_cond_destroy(&t->cond);
    pthread_mutex_destroy(&t->lock);
    free(t);
}

/* The library's free_fn, on its I/O thread: no allocation, no GIL. */
static void
pyscimq_confirmed(void *arg)
{
    struct pyscimq_done *d = arg;
    struct pyscimq_tracker *t = d->tracker;

    pthread_mutex_lock(&t->lock);
    d->next = t->done;
    t->done = d;
    pthread_cond_broadcast(&t->cond);
    pthread_mutex_unlock(&t->lock);
}

static int
pyscimq_put_async(scimq_client_t *c, struct pyscimq_tracker *t,
                  const char *queue, const scimq_block_t *blocks,
                  uint32_t block_count, uint64_t flags, uint64_t token)
{
    struct pyscimq_done *d = malloc(sizeof(*d));
    int rc;

    if (d == NULL)
        return SCIMQ_ENOMEM;
    d->next = NULL;
    d->tracker = t;
    d->token = token;
    rc = scimq_client_put_flags(c, queue, blocks, block_count, flags,
                                pyscimq_confirmed, d);
    if (rc != 0)
        free(d); /* not handed over: the caller still owns everything */
    return rc;
}

/* Takes up to max confirmed tokens; returns how many. */
static size_t
pyscimq_collect(struct pyscimq_tracker *t, uint64_t *tokens, size_t max)
{
    struct pyscimq_done *d;
    size_t n = 0;

    pthread_mutex_lock(&t->lock);
    while (n < max && (d = t->done) != NULL) {
        t->done = d->next;
        tokens[n++] = d->token;
        free(d);
    }
    pthread_mutex_unlock(&t->lock);
    return n;
}

/* Waits up to timeout_ms for a confirmation to collect; 1 if there is one. */
static int
pyscimq_wait(struct pyscimq_tracker *t, int timeout_ms)
{
    struct timespec ts;
    int ready;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    ts.tv_sec += timeout_ms / 1000;
    ts.tv_nsec += (long) (timeout_ms % 1000) * 1000000L;
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&t->lock);
    while (t->done == NULL &&
           pthread_cond_timedwait(&t->cond, &t->lock, &ts) == 0)
        ;
    ready = t->done != NULL;
    pthread_mutex_unlock(&t->lock);
    return ready;
}
"""


def builder():
    ffi = cffi.FFI()
    ffi.cdef(CDEF)
    ffi.set_source("scimq._scimq_ffi", SOURCE)
    return ffi


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: ffibuild.py OUT.c")
    builder().emit_c_code(sys.argv[1])
