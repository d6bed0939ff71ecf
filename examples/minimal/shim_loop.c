/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * An MPI program that consumes a SciMQ queue without starting the runtime
 * itself: the PMPI shim does it inside MPI_Init_thread and stops it inside
 * MPI_Finalize, from SCIMQ_URL and SCIMQ_QUEUE.  The only SciMQ code here
 * is the scimq_mpi_next() loop.
 *
 *     LD_PRELOAD=$(scimq-config --shim-ldflags) SCIMQ_URL=... \
 *         SCIMQ_QUEUE=frames mpirun -n 4 ./shim_loop
 * or linked with $(scimq-config --static-shim-ldflags).
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
    int rank, provided, rc, ok;

    MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    while ((rc = scimq_mpi_next(&msg)) == 0) {
        mine[0]++;
        mine[1] += msg.len;
    }
    /* SCIMQ_ESTATE: the shim is not there, or could not start the
     * runtime (it said why on stderr). */
    /* SCIMQ_ESTOPPED: a stop signal (SIGUSR1 from the job script before
     * the walltime); the message in hand is acknowledged. */
    ok = rc == SCIMQ_EOS || rc == SCIMQ_ESTOPPED;
    if (!ok)
        fprintf(stderr, "shim_loop: rank %d: %s\n", rank, scimq_strerror(rc));
    printf("rank %d: %" PRIu64 " messages, %" PRIu64 " bytes\n", rank, mine[0],
           mine[1]);
    MPI_Reduce(mine, total, 2, MPI_UINT64_T, MPI_SUM, 0, MPI_COMM_WORLD);
    if (rank == 0)
        printf("total: %" PRIu64 " messages, %" PRIu64 " bytes\n", total[0],
               total[1]);
    MPI_Finalize();
    return ok ? 0 : 1;
}
