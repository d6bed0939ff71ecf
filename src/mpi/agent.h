/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The agent of a (pseudo-)node (agent.c): one gateway session for the
 * node's ranks, a registered pool they read their messages from, and the
 * agent-to-rank protocol (ctrl.h).  Run by the node's first rank, in a
 * thread of its own.
 */
#ifndef SCIMQ_MPI_AGENT_H
#define SCIMQ_MPI_AGENT_H

#include <stdint.h>

#include <scimq/mpi.h>

#include "ctrl.h"
#include "doorbell.h"
#include "fabric.h"

/* What every rank learns about its node's agent at init. */
struct scimq_mpi_agent_info {
    uint8_t addr[SCIMQ_FABRIC_ADDR_MAX];
    uint64_t addr_len;
    /* The endpoint to read the pool from (agent.c, "Two endpoints"). */
    uint8_t target_addr[SCIMQ_FABRIC_ADDR_MAX];
    uint64_t target_addr_len;
    uint64_t pool_raddr; /* remote address of the pool's first byte */
    uint64_t pool_len;
    uint64_t pool_key;
    uint64_t slot_size;
    uint64_t inline_max; /* MSG carries payloads up to this (+ meta) */
    int32_t credits_max; /* credits + messages a rank may hold: P_max + 1 */
    int32_t pid;         /* the agent's process (liveness) */
    int32_t rc;          /* the agent's start-up result */
    /* The agent's doorbell (doorbell.h), for ranks of its host to ring
     * after control messages; empty when its completion queue wakes it. */
    char doorbell[SCIMQ_DOORBELL_NAME_MAX];
    /* Its shared "asleep" word: a descriptor of process pid, or -1. */
    int32_t doorbell_word;
};

/* What the agent is to do: the job's settings, as runtime.c resolved them.
 * The strings are borrowed until scimq__agent_destroy(). */
struct scimq_mpi_agent_config {
    const char *url, *queue, *provider, *token_file;
    const char *agent_core; /* auto, nic, none, or a CPU number */
    scimq_mpi_options_t opt;
    int node_size;         /* ranks that share this agent */
    int node_index, nodes; /* this agent's number, how many */
    int prefetch;          /* the ranks' P, or -1: auto */
    uint64_t inline_max;   /* MSG carries payloads up to this */
};

struct scimq_mpi_agent;

/* Agent life cycle (node rank 0). */
int scimq__agent_create(const struct scimq_mpi_agent_config *cfg,
                        struct scimq_mpi_agent **a_p,
                        struct scimq_mpi_agent_info *info);
/* Learns the ranks' addresses, process ids (for the liveness check) and
 * CPU bindings (rank_cpus: nranks cpu_set_t, for the agent's placement)
 * and starts the agent thread. */
int scimq__agent_start(struct scimq_mpi_agent *a, const uint8_t *addrs,
                       size_t addr_stride, const int32_t *pids,
                       const void *rank_cpus, int nranks);
/* Waits for every rank's BYE (or stop), returns unassigned messages to the
 * gateway and frees the agent. */
void scimq__agent_destroy(struct scimq_mpi_agent *a);

#endif /* SCIMQ_MPI_AGENT_H */
