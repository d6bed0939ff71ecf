/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * An agent's REPORT to the gateway (report.c): the per-rank counts and
 * service times it measures, the provider and pool it runs on, sent on its
 * own gateway session every SCIMQ_MPI_REPORT_MS and once more, final, when
 * it stops.  The agent calls these from its one thread (create before the
 * thread starts, destroy after it ended); every call takes NULL, which is
 * what create returns when reports are off.
 */
#ifndef SCIMQ_MPI_REPORT_H
#define SCIMQ_MPI_REPORT_H

#include <stdbool.h>
#include <stdint.h>

#include <scimq/client.h>

struct scimq_mpi_report;

/* Default period (SCIMQ_MPI_REPORT_MS); 0 turns reports off. */
#define SCIMQ_MPI_REPORT_MS_DEFAULT 2000u

/*
 * Starts the reports of agent node_index of nodes, serving node_size ranks:
 * client is its gateway
 * session (NULL for another message source: no reports), provider the
 * libfabric provider it opened, nslots x slot_size its pool.  Returns NULL
 * when reports are off or memory is short (they are an extra: the agent
 * runs without them).
 */
struct scimq_mpi_report *
scimq__report_create(int node_index, int nodes, int node_size,
                     scimq_client_t *client, const char *provider,
                     uint32_t nslots, uint64_t slot_size);

/* The message in slot went to node rank (the send succeeded). */
void scimq__report_assigned(struct scimq_mpi_report *r, int rank,
                            uint32_t slot);

/* Node rank settled the message in slot: done (acknowledged) or not. */
void scimq__report_settled(struct scimq_mpi_report *r, int rank, uint32_t slot,
                           bool done);

/*
 * Sends a report when the period has passed.  ready: slots holding a
 * message no rank has yet; assigned[nranks]: messages each rank holds
 * (together, the pool in use).
 */
void scimq__report_tick(struct scimq_mpi_report *r, uint32_t ready,
                        const int *assigned);

/* Sends the final report (on a session still open) and frees r. */
void scimq__report_destroy(struct scimq_mpi_report *r, uint32_t ready,
                           const int *assigned);

#endif /* SCIMQ_MPI_REPORT_H */
