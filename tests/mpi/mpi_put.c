/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * mpi_put QUEUE COUNT SIZE [HOLD]: every rank publishes COUNT
 * self-verifying messages of SIZE bytes (sequence numbers rank * COUNT ..)
 * to QUEUE with scimq_mpi_put(), through its agent.  With HOLD, once every
 * rank is done, rank 0 creates HOLD.ready and all wait (60 s at most) for
 * HOLD.go before they finalize, so that a test can look at the gateway
 * while the job's sessions are open.  Prints "puts N errors E" (rank 0);
 * exits 0 when every put succeeded.  The agents consume $SCIMQ_QUEUE.
 */
#include "config.h"

#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include <scimq/mpi.h>

#include "tools/synth.h"

static int
exists(const char *path)
{
    return access(path, F_OK) == 0;
}

int
main(int argc, char **argv)
{
    int rank, provided, rc, errors = 0, all_errors = 0, go = 0;
    long count, done = 0, all_done = 0;
    size_t size;
    void *buf;
    char path[4096];

    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (argc < 4) {
        if (rank == 0)
            fprintf(stderr, "usage: mpi_put QUEUE COUNT SIZE [HOLD]\n");
        MPI_Finalize();
        return 2;
    }
    count = atol(argv[2]);
    size = (size_t) atol(argv[3]);
    buf = malloc(size);
    rc = scimq_mpi_init(MPI_COMM_WORLD, NULL, NULL, NULL, NULL);
    if (rc != 0 || buf == NULL) {
        fprintf(stderr, "mpi_put: rank %d: init: %s\n", rank,
                scimq_strerror(rc));
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    for (long i = 0; i < count; i++) {
        scimq_block_t b = {.name = "data", .data = buf, .len = size};

        (void) scimq__synth_fill(buf, size, (uint64_t) (rank * count + i));
        rc = scimq_mpi_put(NULL, argv[1], &b, 1);
        if (rc != 0) {
            if (errors++ == 0)
                fprintf(stderr, "mpi_put: rank %d: put: %s\n", rank,
                        scimq_strerror(rc));
        } else {
            done++;
        }
    }
    MPI_Reduce(&errors, &all_errors, 1, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD);
    MPI_Reduce(&done, &all_done, 1, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
    if (argc > 4) {
        if (rank == 0) {
            FILE *f;

            snprintf(path, sizeof(path), "%s.ready", argv[4]);
            f = fopen(path, "w");
            if (f != NULL)
                fclose(f);
            snprintf(path, sizeof(path), "%s.go", argv[4]);
            for (int i = 0; i < 6000 && !exists(path); i++) {
                struct timespec ts = {0, 10000000};

                nanosleep(&ts, NULL);
            }
            go = 1;
        }
        MPI_Bcast(&go, 1, MPI_INT, 0, MPI_COMM_WORLD);
    }
    if (rank == 0)
        printf("puts %ld errors %d\n", all_done, all_errors);
    scimq_mpi_finalize(NULL);
    free(buf);
    MPI_Finalize();
    return rank == 0 && all_errors != 0 ? 1 : 0;
}
