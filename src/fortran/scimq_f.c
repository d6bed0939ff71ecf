/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * C side of the Fortran bindings (module scimq, scimq.f90).
 *
 * The module calls these functions through ISO_C_BINDING interfaces.  They
 * exist for what Fortran cannot express portably: an MPI communicator
 * arrives as a Fortran integer handle (MPI_Comm is not interoperable; it is
 * a pointer in Open MPI and an int in MPICH) and is converted with
 * MPI_Comm_f2c; and the layout of scimq_mpi_msg_t stays known to C alone:
 * Fortran keeps the whole struct as opaque words inside type(scimq_msg)
 * and sees only the fields copied out for it.  Strings arrive
 * NUL-terminated, built by the module.
 *
 * The functions are internal to libscimq-fortran (hidden, scimq__ names):
 * the module is the interface.
 */
#include "config.h"

#include <stdint.h>
#include <string.h>

#include <mpi.h>

#include <scimq/mpi.h>

/* Opaque storage for one scimq_mpi_msg_t inside type(scimq_msg): must
 * match STATE_WORDS in scimq.f90. */
#define F_STATE_WORDS 16

_Static_assert(sizeof(scimq_mpi_msg_t) <= F_STATE_WORDS * sizeof(int64_t),
               "scimq_mpi_msg_t outgrew type(scimq_msg): raise STATE_WORDS "
               "in scimq.f90 and F_STATE_WORDS here");

#define F_API __attribute__((visibility("hidden")))

F_API int scimq__f_init(int fcomm, const char *url, int has_url,
                        const char *queue, int has_queue);
F_API int scimq__f_next(int64_t *state, void **data_p, int64_t *len_p,
                        int64_t *msg_id_p, int32_t *attempt_p,
                        int32_t *block_count_p, int timed, int timeout_ms);
F_API int32_t scimq__f_flags(const int64_t *state);
F_API int scimq__f_ack(int64_t *state);
F_API int scimq__f_nack(int64_t *state, int requeue);
F_API int scimq__f_put(const char *queue, const void *data, int64_t nbytes,
                       const char *name, int has_name);
F_API int scimq__f_finalize(void);
F_API int scimq__f_strerror(int err, char *buf, int buflen);

int
scimq__f_init(int fcomm, const char *url, int has_url, const char *queue,
              int has_queue)
{
    MPI_Comm comm = MPI_Comm_f2c((MPI_Fint) fcomm);

    if (comm == MPI_COMM_NULL)
        return SCIMQ_EINVAL;
    /* A missing or blank string means "from the environment". */
    return scimq_mpi_init(comm, has_url ? url : NULL, has_queue ? queue : NULL,
                          NULL, NULL);
}

int
scimq__f_next(int64_t *state, void **data_p, int64_t *len_p, int64_t *msg_id_p,
              int32_t *attempt_p, int32_t *block_count_p, int timed,
              int timeout_ms)
{
    scimq_mpi_msg_t msg;
    int rc;

    memset(&msg, 0, sizeof(msg));
    if (timed) {
        scimq_mpi_t *ctx = scimq_mpi_default();

        rc = ctx == NULL ? SCIMQ_ESTATE
                         : scimq_mpi_next_timed(ctx, &msg, timeout_ms);
    } else {
        rc = scimq_mpi_next(&msg);
    }
    if (rc != 0)
        memset(&msg, 0, sizeof(msg));
    memset(state, 0, F_STATE_WORDS * sizeof(int64_t));
    memcpy(state, &msg, sizeof(msg));
    *data_p = msg.data;
    /* A message is far below 2^63 bytes: the signed copy is exact. */
    *len_p = (int64_t) msg.len;
    *msg_id_p = (int64_t) msg.msg_id;
    *attempt_p = (int32_t) msg.attempt;
    *block_count_p = (int32_t) msg.block_count;
    return rc;
}

int32_t
scimq__f_flags(const int64_t *state)
{
    scimq_mpi_msg_t msg;

    memcpy(&msg, state, sizeof(msg));
    return (int32_t) msg.flags;
}

int
scimq__f_ack(int64_t *state)
{
    scimq_mpi_t *ctx = scimq_mpi_default();
    scimq_mpi_msg_t msg;
    int rc;

    if (ctx == NULL)
        return SCIMQ_ESTATE;
    memcpy(&msg, state, sizeof(msg));
    rc = scimq_mpi_ack(ctx, &msg);
    memset(state, 0, F_STATE_WORDS * sizeof(int64_t));
    return rc;
}

int
scimq__f_nack(int64_t *state, int requeue)
{
    scimq_mpi_t *ctx = scimq_mpi_default();
    scimq_mpi_msg_t msg;
    int rc;

    if (ctx == NULL)
        return SCIMQ_ESTATE;
    memcpy(&msg, state, sizeof(msg));
    rc = scimq_mpi_nack(ctx, &msg, requeue);
    memset(state, 0, F_STATE_WORDS * sizeof(int64_t));
    return rc;
}

int
scimq__f_put(const char *queue, const void *data, int64_t nbytes,
             const char *name, int has_name)
{
    scimq_block_t block;

    if (nbytes < 0)
        return SCIMQ_EINVAL;
    block.name = has_name ? name : NULL;
    block.data = data;
    block.len = (uint64_t) nbytes;
    return scimq_mpi_put(NULL, queue, &block, 1);
}

int
scimq__f_finalize(void)
{
    return scimq_mpi_finalize(NULL);
}

/* Copies the message into a Fortran character buffer (blank-padded, as
 * Fortran strings are) and returns its length. */
int
scimq__f_strerror(int err, char *buf, int buflen)
{
    const char *text = scimq_strerror(err);
    size_t n = strlen(text);

    if (buflen <= 0)
        return 0;
    if (n > (size_t) buflen)
        n = (size_t) buflen;
    memcpy(buf, text, n);
    memset(buf + n, ' ', (size_t) buflen - n);
    return (int) n;
}
