/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * libscimq-shim: a PMPI layer that starts the SciMQ runtime inside MPI_Init
 * and stops it inside MPI_Finalize, so that an existing MPI code only adds
 * its scimq_mpi_next() loop.  The gateway and the queue come from the
 * environment (SCIMQ_URL, SCIMQ_QUEUE, and the SCIMQ_MPI_* tunables read by
 * the runtime itself).
 *
 * One source, two flavours (Darshan's rule):
 *   - SCIMQ_SHIM_PRELOAD defined: libscimq-shim.so for LD_PRELOAD (or an
 *     ordinary link).  The wrappers are named MPI_Init etc. and take
 *     precedence over the MPI library's own (weak) MPI_Init; they call
 *     PMPI_Init, which the MPI library provides under that name for tools
 *     like this one.
 *   - otherwise: libscimq-shim.a for static links.  The wrappers are named
 *     __wrap_MPI_Init etc. and the application is linked with
 *     scimq-shim.ld-opts (--wrap=MPI_Init ...), which sends its calls here.
 *
 * Fortran: Open MPI's Fortran bindings (mpif.h, "use mpi" in
 * libmpi_mpifh.so, "use mpi_f08" in libmpi_usempif08.so) call PMPI_Init
 * directly, never the C MPI_Init, so a C-only shim would miss every
 * Fortran program.  The Fortran entry points are therefore wrapped as well
 * (mpi_init_ ... for mpif.h and "use mpi", mpi_init_f08_ ... for
 * "use mpi_f08") and run the same logic around the C PMPI calls, as Open
 * MPI's own bindings do.
 *
 * The shim must leave every program it does not serve exactly as it was:
 * no output and no side effect unless SCIMQ_QUEUE is set, and none at all
 * with SCIMQ_SHIM_DISABLE=1.  The results of the PMPI calls are returned
 * unchanged; a runtime that cannot start is reported on one line (rank 0)
 * and the program runs on (its scimq_mpi_next() then returns SCIMQ_ESTATE).
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mpi.h>

#include <scimq/mpi.h>

/* ------------------------------------------------------------------------ */
/* Naming: the same wrapper under its preload or its --wrap name             */
/* ------------------------------------------------------------------------ */

#ifdef SCIMQ_SHIM_PRELOAD
#define SHIM_DECL(name) name
#else
#define SHIM_DECL(name) __wrap_##name
#endif

/* The library is built with -fvisibility=hidden: every entry point the
 * application or the dynamic linker must see is marked. */
#define SHIM_API __attribute__((visibility("default")))

/* Further spellings of a Fortran entry point (compilers mangle external
 * names differently: g77's second underscore, no underscore, upper case),
 * all the same function.  Open MPI exports the same set. */
#define SHIM_ALIAS(target, name)                                               \
    SHIM_API __typeof__(target) name __attribute__((alias(#target)))

/* C */
SHIM_API int SHIM_DECL(MPI_Init)(int *argc, char ***argv);
SHIM_API int SHIM_DECL(MPI_Init_thread)(int *argc, char ***argv, int required,
                                        int *provided);
SHIM_API int SHIM_DECL(MPI_Finalize)(void);

/* Fortran: mpif.h and "use mpi" (every argument by reference). */
SHIM_API void SHIM_DECL(mpi_init_)(MPI_Fint *ierr);
SHIM_API void SHIM_DECL(mpi_init_thread_)(MPI_Fint *required,
                                          MPI_Fint *provided, MPI_Fint *ierr);
SHIM_API void SHIM_DECL(mpi_finalize_)(MPI_Fint *ierr);

/* Fortran: "use mpi_f08".  ierror is OPTIONAL there: the compiler passes
 * NULL when the program leaves it out (call MPI_Init()). */
SHIM_API void SHIM_DECL(mpi_init_f08_)(MPI_Fint *ierr);
SHIM_API void SHIM_DECL(mpi_init_thread_f08_)(MPI_Fint *required,
                                              MPI_Fint *provided,
                                              MPI_Fint *ierr);
SHIM_API void SHIM_DECL(mpi_finalize_f08_)(MPI_Fint *ierr);

/* ------------------------------------------------------------------------ */
/* Starting and stopping the runtime                                          */
/* ------------------------------------------------------------------------ */

/* Set once the runtime is up.  MPI_Init and MPI_Finalize run once per
 * process, on the main thread, so no lock is needed; the flag also keeps
 * a second entry (C and Fortran wrappers both reached) from starting a
 * second context. */
static int shim_started;

/* SCIMQ_SHIM_DISABLE set to anything but "" or "0" turns the shim off. */
static int
shim_disabled(void)
{
    const char *v = getenv("SCIMQ_SHIM_DISABLE");

    return v != NULL && *v != '\0' && strcmp(v, "0") != 0;
}

static int
shim_wanted(void)
{
    const char *queue = getenv("SCIMQ_QUEUE");

    return !shim_disabled() && queue != NULL && *queue != '\0';
}

static int
shim_rank(void)
{
    int rank = 0;

    if (PMPI_Comm_rank(MPI_COMM_WORLD, &rank) != MPI_SUCCESS)
        return 0;
    return rank;
}

/* Called right after a successful PMPI_Init/PMPI_Init_thread. */
static void
shim_start(void)
{
    int rc;

    if (shim_started || !shim_wanted())
        return;
    /* NULL URL and queue: the runtime reads SCIMQ_URL and SCIMQ_QUEUE, so
     * the shim and a program that calls scimq_mpi_init() itself agree. */
    rc = scimq_mpi_init(MPI_COMM_WORLD, NULL, NULL, NULL, NULL);
    if (rc != 0) {
        /* scimq_mpi_init() is collective and fails the same way on every
         * rank: one line from rank 0 is enough. */
        if (shim_rank() == 0) {
            const char *url = getenv("SCIMQ_URL");
            const char *hint = "";

            if (url == NULL || *url == '\0')
                hint = " (SCIMQ_URL is not set)";
            fprintf(stderr,
                    "scimq-shim: cannot start the SciMQ runtime: %s%s\n",
                    scimq_strerror(rc), hint);
        }
        return;
    }
    shim_started = 1;
}

/* Called right before PMPI_Finalize. */
static void
shim_stop(void)
{
    int rc;

    if (!shim_started)
        return;
    shim_started = 0;
    /* The program may already have finalized the context itself. */
    if (scimq_mpi_default() == NULL)
        return;
    rc = scimq_mpi_finalize(NULL);
    if (rc != 0)
        fprintf(stderr,
                "scimq-shim: rank %d: the SciMQ runtime did not stop "
                "cleanly: %s\n",
                shim_rank(), scimq_strerror(rc));
}

/* ------------------------------------------------------------------------ */
/* C wrappers                                                                 */
/* ------------------------------------------------------------------------ */

int
SHIM_DECL(MPI_Init)(int *argc, char ***argv)
{
    int ret = PMPI_Init(argc, argv);

    if (ret == MPI_SUCCESS)
        shim_start();
    return ret;
}

int
SHIM_DECL(MPI_Init_thread)(int *argc, char ***argv, int required, int *provided)
{
    int ret = PMPI_Init_thread(argc, argv, required, provided);

    if (ret == MPI_SUCCESS)
        shim_start();
    return ret;
}

int
SHIM_DECL(MPI_Finalize)(void)
{
    shim_stop();
    return PMPI_Finalize();
}

/* ------------------------------------------------------------------------ */
/* Fortran wrappers                                                           */
/* ------------------------------------------------------------------------ */

/* Fortran programs have no argc/argv to hand over; MPI-2 allows NULL. */
static MPI_Fint
shim_f_init(void)
{
    int ret = PMPI_Init(NULL, NULL);

    if (ret == MPI_SUCCESS)
        shim_start();
    return (MPI_Fint) ret;
}

static MPI_Fint
shim_f_init_thread(const MPI_Fint *required, MPI_Fint *provided)
{
    int prov = MPI_THREAD_SINGLE;
    int ret = PMPI_Init_thread(NULL, NULL, (int) *required, &prov);

    /* MPI sets provided even when it fails; pass it on as it would. */
    *provided = (MPI_Fint) prov;
    if (ret == MPI_SUCCESS)
        shim_start();
    return (MPI_Fint) ret;
}

static MPI_Fint
shim_f_finalize(void)
{
    shim_stop();
    return (MPI_Fint) PMPI_Finalize();
}

void
SHIM_DECL(mpi_init_)(MPI_Fint *ierr)
{
    MPI_Fint ret = shim_f_init();

    if (ierr != NULL)
        *ierr = ret;
}

void
SHIM_DECL(mpi_init_thread_)(MPI_Fint *required, MPI_Fint *provided,
                            MPI_Fint *ierr)
{
    MPI_Fint ret = shim_f_init_thread(required, provided);

    if (ierr != NULL)
        *ierr = ret;
}

void
SHIM_DECL(mpi_finalize_)(MPI_Fint *ierr)
{
    MPI_Fint ret = shim_f_finalize();

    if (ierr != NULL)
        *ierr = ret;
}

void
SHIM_DECL(mpi_init_f08_)(MPI_Fint *ierr)
{
    MPI_Fint ret = shim_f_init();

    if (ierr != NULL)
        *ierr = ret;
}

void
SHIM_DECL(mpi_init_thread_f08_)(MPI_Fint *required, MPI_Fint *provided,
                                MPI_Fint *ierr)
{
    MPI_Fint ret = shim_f_init_thread(required, provided);

    if (ierr != NULL)
        *ierr = ret;
}

void
SHIM_DECL(mpi_finalize_f08_)(MPI_Fint *ierr)
{
    MPI_Fint ret = shim_f_finalize();

    if (ierr != NULL)
        *ierr = ret;
}

/* The other manglings of the mpif.h / "use mpi" names.  The static
 * flavour wraps only the underscored ones (listed in scimq-shim.ld-opts):
 * --wrap would also capture an application's own function that happens to
 * be called mpi_init, whereas the preloaded library never overrides a
 * definition in the program itself. */
#ifdef SCIMQ_SHIM_PRELOAD
SHIM_ALIAS(mpi_init_, mpi_init__);
SHIM_ALIAS(mpi_init_, mpi_init);
SHIM_ALIAS(mpi_init_, MPI_INIT);
SHIM_ALIAS(mpi_init_thread_, mpi_init_thread__);
SHIM_ALIAS(mpi_init_thread_, mpi_init_thread);
SHIM_ALIAS(mpi_init_thread_, MPI_INIT_THREAD);
SHIM_ALIAS(mpi_finalize_, mpi_finalize__);
SHIM_ALIAS(mpi_finalize_, mpi_finalize);
SHIM_ALIAS(mpi_finalize_, MPI_FINALIZE);
#else
SHIM_ALIAS(__wrap_mpi_init_, __wrap_mpi_init__);
SHIM_ALIAS(__wrap_mpi_init_thread_, __wrap_mpi_init_thread__);
SHIM_ALIAS(__wrap_mpi_finalize_, __wrap_mpi_finalize__);
#endif
