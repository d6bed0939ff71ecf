/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The shortest SciMQ consumer: every rank takes messages from the queue
 * named by SCIMQ_QUEUE on the gateway at SCIMQ_URL until the queue is
 * closed and drained; each rank prints what it got and rank 0 the totals.
 *
 *     SCIMQ_URL=scimq://gw:7470 SCIMQ_QUEUE=frames mpirun -n 4 ./loop
 */
#include "config.h"

#include <inttypes.h>
#include <stdio.h>

#include <mpi.h>

#include <scimq/mpi.h>

int
main(int argc, char **argv)
{
    uint64_t mine[2] = {0, 0}, total[2] = {0, 0}; /* messages, bytes */
    scimq_mpi_msg_t msg;
    int rank, rc, ok;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    rc = scimq_mpi_init(MPI_COMM_WORLD, NULL, NULL, NULL, NULL);
    if (rc != 0) {
        /* Every rank gets the same error: one message is enough. */
        if (rank == 0)
            fprintf(stderr, "loop: %s\n", scimq_strerror(rc));
        MPI_Finalize();
        return 1;
    }
    while ((rc = scimq_mpi_next(&msg)) == 0) {
        mine[0]++;
        mine[1] += msg.len;
    }
    /* SCIMQ_ESTOPPED: a stop signal (SIGUSR1 from the job script before
     * the walltime); the message in hand is acknowledged. */
    ok = rc == SCIMQ_EOS || rc == SCIMQ_ESTOPPED;
    if (!ok)
        fprintf(stderr, "loop: rank %d: %s\n", rank, scimq_strerror(rc));
    printf("rank %d: %" PRIu64 " messages, %" PRIu64 " bytes\n", rank, mine[0],
           mine[1]);
    MPI_Reduce(mine, total, 2, MPI_UINT64_T, MPI_SUM, 0, MPI_COMM_WORLD);
    if (rank == 0)
        printf("total: %" PRIu64 " messages, %" PRIu64 " bytes\n", total[0],
               total[1]);
    scimq_mpi_finalize(NULL);
    MPI_Finalize();
    return ok ? 0 : 1;
}
