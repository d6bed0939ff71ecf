dnl SPDX-License-Identifier: BSD-3-Clause
dnl
dnl SCIMQ_CHECK_MPI
dnl
dnl Finds an MPI implementation (Open MPI first) without touching CC: the
dnl gateway and the client library must never link against MPI.  The flags
dnl land in MPI_CPPFLAGS / MPI_LDFLAGS / MPI_LIBS and are applied per target
dnl (src/mpi, mpi-shim, MPI tests and examples).  Search order:
dnl   --with-mpi=DIR     DIR/bin/mpicc --showme:compile / --showme:link
dnl   pkg-config ompi-c  (Open MPI's own .pc)
dnl   mpicc on PATH      --showme (Open MPI) or -compile-info (MPICH)
dnl Also finds the launcher (MPIEXEC) used by the MPI tests.
AC_DEFUN([SCIMQ_CHECK_MPI], [
    AC_ARG_WITH([mpi],
        [AS_HELP_STRING([--with-mpi@<:@=DIR@:>@],
            [build the MPI runtime, shim and MPI tests against the MPI
             installed under DIR; default: if found])])
    MPI_CPPFLAGS=
    MPI_LDFLAGS=
    MPI_LIBS=
    scimq_have_mpi=no
    scimq_want_mpi=optional
    scimq_mpicc=
    AS_CASE(["$with_mpi"],
        [no], [scimq_want_mpi=no],
        [yes|""], [AS_IF([test "$with_mpi" = yes],
                         [scimq_want_mpi=requested])],
        [scimq_want_mpi=requested
         scimq_mpicc="$with_mpi/bin/mpicc"])

    AS_IF([test "$scimq_want_mpi" != "no"], [
        AS_IF([test -z "$scimq_mpicc"], [
            PKG_CHECK_MODULES([SCIMQ_PC_MPI], [ompi-c],
                [MPI_CPPFLAGS="$SCIMQ_PC_MPI_CFLAGS"
                 MPI_LIBS="$SCIMQ_PC_MPI_LIBS"],
                [AC_PATH_PROG([scimq_mpicc], [mpicc])])
        ])
        AS_IF([test -n "$scimq_mpicc" && test -x "$scimq_mpicc"], [
            AS_IF([MPI_CPPFLAGS=`$scimq_mpicc --showme:compile 2>/dev/null`],
                [MPI_LIBS=`$scimq_mpicc --showme:link`],
                [MPI_CPPFLAGS=`$scimq_mpicc -compile-info | cut -d' ' -f2-`
                 MPI_LIBS=`$scimq_mpicc -link-info | cut -d' ' -f2-`])
        ])

        scimq_save_CPPFLAGS="$CPPFLAGS"
        scimq_save_LIBS="$LIBS"
        CPPFLAGS="$CPPFLAGS $MPI_CPPFLAGS"
        LIBS="$MPI_LIBS $LIBS"
        AC_MSG_CHECKING([whether MPI programs link])
        AC_LINK_IFELSE([AC_LANG_PROGRAM([[#include <mpi.h>]],
                [[int p; MPI_Init(0, 0); PMPI_Comm_rank(MPI_COMM_WORLD, &p);
                  MPI_Finalize();]])],
            [scimq_have_mpi=yes], [scimq_have_mpi=no])
        AC_MSG_RESULT([$scimq_have_mpi])
        CPPFLAGS="$scimq_save_CPPFLAGS"
        LIBS="$scimq_save_LIBS"

        AS_IF([test "$scimq_have_mpi" = "no"], [
            MPI_CPPFLAGS=
            MPI_LIBS=
            AS_IF([test "$scimq_want_mpi" = "requested"],
                [AC_MSG_ERROR([MPI was requested but no working MPI was found.
Install Open MPI (Debian: openmpi-bin libopenmpi-dev) or use --with-mpi=DIR.])])
        ])
    ])

    AS_IF([test "$scimq_have_mpi" = "yes"], [
        AS_IF([test -n "$with_mpi" && test "$with_mpi" != yes],
            [AC_PATH_PROGS([MPIEXEC], [mpirun mpiexec], [], [$with_mpi/bin])],
            [AC_PATH_PROGS([MPIEXEC], [mpirun mpiexec])])
        AC_DEFINE([HAVE_MPI], [1], [Define to 1 if MPI is available.])
    ])
    AM_CONDITIONAL([HAVE_MPI], [test "$scimq_have_mpi" = "yes"])
    AC_SUBST([MPI_CPPFLAGS])
    AC_SUBST([MPI_LDFLAGS])
    AC_SUBST([MPI_LIBS])
    AC_SUBST([MPIEXEC])
])
