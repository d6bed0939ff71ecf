/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A plain MPI hello world with nothing of SciMQ in it: the shim's smoke
 * test runs it with and without LD_PRELOAD and expects the same output.
 */
#include "config.h"

#include <stdio.h>

#include <mpi.h>

int
main(int argc, char **argv)
{
    int rank, size;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    printf("hello from rank %d of %d\n", rank, size);
    MPI_Finalize();
    return 0;
}
