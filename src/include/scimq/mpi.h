/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * \file mpi.h
 * libscimq-mpi: messages from a SciMQ gateway straight into the memory of
 * the ranks of an MPI job.
 *
 * One agent per node (a thread in the node's first rank) pulls messages
 * from the gateway over S TCP streams into a pool of pre-faulted,
 * libfabric-registered buffers; each rank asks for work when it is ready
 * and copies its next message from the pool into its own registered buffer
 * with a one-sided libfabric read.  A busy rank asks less often, so load
 * balances itself; a rank that asks for the next message acknowledges the
 * previous one; end of stream is a return code.
 *
 * The shortest program:
 *
 *     MPI_Init(&argc, &argv);
 *     scimq_mpi_init(MPI_COMM_WORLD, NULL, NULL, NULL, NULL);
 *     scimq_mpi_msg_t msg;
 *     while (scimq_mpi_next(&msg) == 0)
 *         process(msg.data, msg.len);
 *     scimq_mpi_finalize(NULL);
 *     MPI_Finalize();
 *
 * with the gateway URL and queue in SCIMQ_URL and SCIMQ_QUEUE.
 */
#ifndef SCIMQ_MPI_H
#define SCIMQ_MPI_H

#include <stdint.h>

#include <mpi.h>

#include <scimq/client.h>
#include <scimq/error.h>
#include <scimq/export.h>

#ifdef __cplusplus
extern "C" {
#endif

/** A runtime context: one queue consumed by the ranks of a communicator. */
typedef struct scimq_mpi scimq_mpi_t;

/** Runtime options; fill with scimq_mpi_options_default(). */
typedef struct scimq_mpi_options {
    /** libfabric provider for the agent-to-rank hop ("shm", "tcp;ofi_rxm");
     *  NULL: $SCIMQ_MPI_PROVIDER, else "shm". */
    const char *provider;
    /** Agent TCP streams to the gateway; 0: $SCIMQ_MPI_STREAMS, else 2. */
    uint32_t streams;
    /** Largest message a rank can receive (pool slot and rank buffer);
     *  0: $SCIMQ_MPI_MAX_MESSAGE, else the gateway's largest
     *  (WELCOME max_payload) within the pool budget
     *  ($SCIMQ_MPI_POOL_BYTES, 256 MiB: P + 2 messages per rank). */
    uint64_t max_message;
    /** Pool slots per rank on the node; 0: $SCIMQ_MPI_SLOTS_PER_RANK, else
     *  the prefetch depth + 2 (what a rank may hold, and one ready). */
    uint32_t slots_per_rank;
    /** Token file; NULL: $SCIMQ_TOKEN_FILE. */
    const char *token_file;
    /** The agent keeps the lease of a message alive (EXTEND every half
     *  ack timeout) while its rank is alive, for this long at most, then
     *  lets it expire (a hung rank is bounded); 0: $SCIMQ_MPI_MAX_HOLD_MS,
     *  else 3600000 (one hour). */
    uint64_t max_hold_ms;
    /** Prefetch depth P: each rank keeps up to P messages ready in its own
     *  buffers (its progress thread reads them while the application
     *  computes), so a rank holds at most P + 1; "0" (read only when
     *  asked, the synchronous drain), "1".."8", or "auto" (P from the
     *  measured fetch and service times, 1..4); NULL: $SCIMQ_MPI_PREFETCH,
     *  else "1". */
    const char *prefetch;
    /** Messages of at most this many payload bytes travel inside the
     *  agent's control message, with their block table (no RMA read); 0:
     *  $SCIMQ_MPI_INLINE_MAX (0 there: never), else 4 KiB (measured:
     *  inline wins at 1 KiB, ties at 4 KiB, loses from 16 KiB on shm). */
    uint64_t inline_max;
    /** Pseudo-nodes: the ranks of each host are grouped by this many, each
     *  group with its own agent (several nodes on one machine, for tests
     *  and for hosts with several network interfaces); 0:
     *  $SCIMQ_MPI_RANKS_PER_NODE, else all ranks of a host. */
    uint32_t ranks_per_node;
    /** Ingest mode: one agent for every this many consecutive (pseudo-)
     *  nodes; the ranks of the others read its pool across the fabric
     *  (only the ingest nodes open streams to the gateway; use a provider
     *  that spans hosts, tcp;ofi_rxm); 0: $SCIMQ_MPI_INGEST, else 1. */
    uint32_t ingest;
    /** Where the agent thread runs: "auto" (a core that no rank of its
     *  node is bound to, when there is one, else its own rank's binding),
     *  "nic" (the last core near the first network device), "none" (its
     *  rank's binding, unchanged) or a CPU number; NULL:
     *  $SCIMQ_MPI_AGENT_CORE, else "auto". */
    const char *agent_core;
    /** Pool budget per agent in bytes: fewer slots than ranks x
     *  slots_per_rank when that would exceed it (at least one); 0:
     *  $SCIMQ_MPI_POOL_BYTES, else no budget. */
    uint64_t pool_bytes;
} scimq_mpi_options_t;

/** Fills opts with the defaults above. */
SCIMQ_EXPORT void scimq_mpi_options_default(scimq_mpi_options_t *opts);

/**
 * A message in this rank's memory.  Valid until the next call of
 * scimq_mpi_next()/try_next() on the same context (or an explicit
 * ack/nack, or finalize).
 */
typedef struct scimq_mpi_msg {
    void *data;                  /**< the payload: blocks back to back */
    uint64_t len;                /**< payload bytes */
    uint32_t block_count;        /**< blocks of the message */
    const scimq_block_t *blocks; /**< names and data of each block */
    uint64_t msg_id;             /**< the gateway's message id */
    uint32_t attempt;            /**< 1 on first delivery */
    uint32_t flags;              /**< SCIMQ_MPI_MSG_* */
    uint64_t handle;             /**< private: names the delivery */
} scimq_mpi_msg_t;

/**
 * scimq_mpi_msg_t.flags: a control message (put with SCIMQ_PUT_CONTROL:
 * a run header, an end of series).  Every rank of the job gets it, in
 * order with the data: after every message put before it has been
 * processed and acknowledged, and before any message put after it, which
 * the gateway holds until every rank has settled its copy.  It is
 * acknowledged to the gateway once, when every rank has acknowledged its
 * copy (next() or ack(), as for data).  nack() with requeue gives the
 * copy again to the same rank (a later attempt); without requeue the rank
 * refuses its copy.  A rank that stops, leaves or dies is not waited for.
 */
#define SCIMQ_MPI_MSG_CONTROL (1u << 0)

/**
 * Starts consuming a queue with the ranks of comm.  Collective over comm.
 * The first context created becomes the default one used by
 * scimq_mpi_next() and scimq_mpi_finalize(NULL).
 *
 * \param comm   the ranks that consume (MPI_COMM_WORLD or a subset).
 * \param url    gateway "scimq://HOST:PORT"; NULL: $SCIMQ_URL.
 * \param queue  queue name; NULL: $SCIMQ_QUEUE.
 * \param opts   options or NULL for the defaults.
 * \param ctx_p  the context (may be NULL when only the default is used).
 * \return 0 on every rank, or the same error on every rank:
 *         SCIMQ_EINVAL (no URL/queue), SCIMQ_ECONNREFUSED, SCIMQ_EAUTH,
 *         SCIMQ_ENOENT (no such queue), SCIMQ_EFABRIC (provider missing or
 *         failing), SCIMQ_EMPI, SCIMQ_ENOMEM.
 * \note MPI must be initialized (MPI_THREAD_MULTIPLE is not required).
 */
SCIMQ_EXPORT SCIMQ_WARN_UNUSED_RESULT int
scimq_mpi_init(MPI_Comm comm, const char *url, const char *queue,
               const scimq_mpi_options_t *opts, scimq_mpi_t **ctx_p);

/**
 * Waits for the next message of the default context; acknowledges the
 * previous one first.
 *
 * \return 0 and *msg; SCIMQ_EOS once the queue is closed and drained;
 *         SCIMQ_ESTOPPED once a stop was requested (scimq_mpi_stop() or a
 *         stop signal): the message in hand is acknowledged, this rank
 *         asks for nothing more and what its agent had chosen for it goes
 *         back to the gateway; SCIMQ_ESTATE without a default context;
 *         another SCIMQ_E* code on failure.
 */
SCIMQ_EXPORT SCIMQ_WARN_UNUSED_RESULT int scimq_mpi_next(scimq_mpi_msg_t *msg);

/**
 * Same on a given context, with a timeout.
 *
 * \param timeout_ms  -1: no limit; 0: do not wait (as try_next).
 * \return 0; SCIMQ_EOS; SCIMQ_ETIMEDOUT; SCIMQ_EAGAIN (timeout 0, nothing
 *         yet); an error.
 */
SCIMQ_EXPORT SCIMQ_WARN_UNUSED_RESULT int
scimq_mpi_next_timed(scimq_mpi_t *ctx, scimq_mpi_msg_t *msg, int timeout_ms);

/** Non-blocking: SCIMQ_EAGAIN when no message is ready yet. */
SCIMQ_EXPORT SCIMQ_WARN_UNUSED_RESULT int
scimq_mpi_try_next(scimq_mpi_t *ctx, scimq_mpi_msg_t *msg);

/** Acknowledges msg now (next() would do it); msg is invalid afterwards. */
SCIMQ_EXPORT int scimq_mpi_ack(scimq_mpi_t *ctx, scimq_mpi_msg_t *msg);

/** Gives msg back to the gateway (requeue != 0) or dead-letters it. */
SCIMQ_EXPORT int scimq_mpi_nack(scimq_mpi_t *ctx, scimq_mpi_msg_t *msg,
                                int requeue);

/** Extends the lease of msg by lease_ms (for long tasks). */
SCIMQ_EXPORT int scimq_mpi_extend(scimq_mpi_t *ctx, const scimq_mpi_msg_t *msg,
                                  uint32_t lease_ms);

/**
 * Publishes a message (e.g. results) to a queue of the same gateway,
 * through this rank's agent and its gateway session (one per agent, not
 * per rank): the blocks are copied into the rank's put buffer, which the
 * agent reads.  Returns once the gateway confirmed it: 0 or its error
 * (SCIMQ_ENOENT, SCIMQ_ECLOSED, ...); SCIMQ_EMSGSIZE for a message larger
 * than the job's largest message (SCIMQ_MPI_MAX_MESSAGE).  One put at a
 * time per rank (concurrent callers wait); allowed until
 * scimq_mpi_finalize(), also after a stop.  ctx NULL: the default
 * context.
 */
SCIMQ_EXPORT int scimq_mpi_put(scimq_mpi_t *ctx, const char *queue,
                               const scimq_block_t *blocks,
                               uint32_t block_count);

/**
 * Leaves: acknowledges the current message, tells the agent this rank is
 * done; the agent returns unassigned messages to the gateway and stops.
 * Collective over the context's communicator.  ctx NULL: the default.
 */
SCIMQ_EXPORT int scimq_mpi_finalize(scimq_mpi_t *ctx);

/**
 * Asks every context of this process to stop: the next (or current) call
 * of scimq_mpi_next()/next_timed()/try_next() acknowledges the message in
 * hand and returns SCIMQ_ESTOPPED, and so does every later one; then call
 * scimq_mpi_finalize() as usual.  Async-signal-safe (it sets a flag), so
 * a program's own signal handler may call it.
 *
 * scimq_mpi_init() (and so the PMPI shim) installs a handler that calls it
 * for the signals named in $SCIMQ_MPI_STOP_SIGNALS (comma-separated, e.g.
 * "USR1,TERM"; "none" for none; default "USR1", what the job scripts
 * forward before the walltime), for each signal whose disposition is
 * still the default one (a program's own handler is left alone); the last
 * scimq_mpi_finalize() restores the default.
 */
SCIMQ_EXPORT void scimq_mpi_stop(void);

/**
 * Where this rank stands: the number of its agent (its node, pseudo-node
 * or ingest group, 0 .. nodes-1), its rank among that agent's ranks (0
 * hosts the agent), and how many agents the context has.  ctx NULL: the
 * default.
 */
SCIMQ_EXPORT int scimq_mpi_node(const scimq_mpi_t *ctx, int *node_p,
                                int *node_rank_p, int *nodes_p);

/** The default context, or NULL. */
SCIMQ_EXPORT scimq_mpi_t *scimq_mpi_default(void);

/** Per-rank counters (messages, bytes) of a context. */
SCIMQ_EXPORT int scimq_mpi_counters(const scimq_mpi_t *ctx,
                                    uint64_t *messages_p, uint64_t *bytes_p);

#ifdef __cplusplus
}
#endif

#endif /* SCIMQ_MPI_H */
