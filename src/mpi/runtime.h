/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The rank side's state (struct scimq_mpi, scimq_mpi_t of scimq/mpi.h):
 * runtime.c's, with its prefetch endpoint (prefetch.h) and, on a node's
 * first rank, its agent (agent.h).  The agent-to-rank protocol is in
 * ctrl.h.
 */
#ifndef SCIMQ_MPI_RUNTIME_H
#define SCIMQ_MPI_RUNTIME_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <scimq/mpi.h>

#include "agent.h"
#include "ctrl.h"

struct scimq_mpi {
    MPI_Comm comm, node_comm; /* node_comm: the ranks sharing an agent */
    int rank, size, node_rank, node_size;
    int node_index, nodes;      /* this agent's number, how many */
    int host_id, agent_host_id; /* lowest rank of the host */
    char *url, *queue, *provider, *token_file;
    char *agent_core; /* auto, nic, none, or a CPU number */
    scimq_mpi_options_t opt;

    int prefetch; /* P, or -1: auto */
    uint64_t inline_max;
    struct scimq_mpi_prefetch *pf; /* this rank's endpoint and buffers */
    struct scimq_mpi_agent_info ai;

    bool holding, eos;
    bool stopped; /* a stop was handled: DONE and BYE sent */
    int error;
    uint32_t slot;
    uint64_t gen;
    scimq_block_t blocks[SCIMQ_MPI_MAX_BLOCKS];
    char names[SCIMQ_MPI_SLOT_META];

    uint64_t messages, bytes;

    struct scimq_mpi_agent *agent; /* node rank 0 only */
};

#endif /* SCIMQ_MPI_RUNTIME_H */
