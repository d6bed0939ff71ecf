dnl SPDX-License-Identifier: BSD-3-Clause
dnl
dnl SCIMQ_CHECK_FORTRAN
dnl
dnl The Fortran bindings (module scimq, src/fortran) and the Fortran
dnl examples are optional: built when a Fortran compiler works and MPI's
dnl Fortran flags are found.  Call after SCIMQ_CHECK_MPI (it reuses
dnl --with-mpi=DIR).  Like the C flags, the MPI Fortran flags are applied per
dnl target, never to FCFLAGS.  Search order:
dnl   --with-mpi=DIR        DIR/bin/mpifort --showme:compile / --showme:link
dnl   mpifort, mpif90       --showme (Open MPI) or -compile-info (MPICH)
dnl   pkg-config ompi-fort  (Open MPI; lacks the module directory on Debian,
dnl                          hence last)
dnl Sets FC, MPI_FCFLAGS, MPI_FCLIBS, FC_MODOUT (module output flag),
dnl FC_MODINC (module search flag), FC_MODEXT and the AM_CONDITIONAL
dnl HAVE_MPI_FORTRAN.  --disable-fortran skips it all.
AC_DEFUN([SCIMQ_CHECK_FORTRAN], [
    AC_ARG_ENABLE([fortran],
        [AS_HELP_STRING([--disable-fortran],
            [do not build the Fortran bindings and examples])],
        [], [enable_fortran=auto])
    MPI_FCFLAGS=
    MPI_FCLIBS=
    scimq_have_mpi_fortran=no

    dnl AC_PROG_FC leaves FC empty when no compiler is found.  LT_INIT
    dnl came first, so libtool appended LT_LANG(FC) to AC_PROG_FC, and
    dnl LT_LANG requires AC_PROG_FC again from inside that expansion
    dnl ("expanded before it was required").  Hence: AC_PROG_FC alone, as a
    dnl requirement, then libtool's Fortran tag.
    m4_pushdef([LT_LANG], [])
    AC_REQUIRE([AC_PROG_FC])
    m4_popdef([LT_LANG])
    LT_LANG([Fortran])
    scimq_fc_works=no
    AS_IF([test "$enable_fortran" != no && test -n "$FC"], [
        AC_LANG_PUSH([Fortran])
        AC_MSG_CHECKING([whether $FC compiles ISO_C_BINDING code])
        AC_COMPILE_IFELSE([AC_LANG_SOURCE([[
      program t
      use, intrinsic :: iso_c_binding
      type(c_ptr) :: p
      p = c_null_ptr
      end program t
]])], [scimq_fc_works=yes])
        AC_MSG_RESULT([$scimq_fc_works])
        AC_LANG_POP([Fortran])
    ])
    AS_IF([test "$scimq_fc_works" = yes], [
        AC_FC_SRCEXT([f90], [], [scimq_fc_works=no])
    ])
    AS_IF([test "$scimq_fc_works" = yes], [
        AC_FC_MODULE_EXTENSION
        AC_FC_MODULE_FLAG([], [scimq_fc_works=no])
        AC_FC_MODULE_OUTPUT_FLAG([], [scimq_fc_works=no])
    ])

    AS_IF([test "$scimq_fc_works" = yes && test "$scimq_have_mpi" = yes], [
        scimq_mpifort=
        AS_IF([test -n "$with_mpi" && test "$with_mpi" != yes],
            [AC_PATH_PROGS([scimq_mpifort], [mpifort mpif90], [],
                           [$with_mpi/bin])],
            [AC_PATH_PROGS([scimq_mpifort], [mpifort mpif90])])
        AS_IF([test -n "$scimq_mpifort"], [
            AS_IF([MPI_FCFLAGS=`$scimq_mpifort --showme:compile 2>/dev/null`],
                [MPI_FCLIBS=`$scimq_mpifort --showme:link`],
                [MPI_FCFLAGS=`$scimq_mpifort -compile-info | cut -d' ' -f2-`
                 MPI_FCLIBS=`$scimq_mpifort -link-info | cut -d' ' -f2-`])
        ], [
            PKG_CHECK_MODULES([SCIMQ_PC_MPIFORT], [ompi-fort],
                [MPI_FCFLAGS="$SCIMQ_PC_MPIFORT_CFLAGS"
                 MPI_FCLIBS="$SCIMQ_PC_MPIFORT_LIBS"], [:])
        ])

        AC_LANG_PUSH([Fortran])
        scimq_save_FCFLAGS="$FCFLAGS"
        scimq_save_LIBS="$LIBS"
        FCFLAGS="$FCFLAGS $MPI_FCFLAGS"
        LIBS="$MPI_FCLIBS $LIBS"
        AC_MSG_CHECKING([whether MPI Fortran programs (use mpi) link])
        AC_LINK_IFELSE([AC_LANG_SOURCE([[
      program t
      use mpi
      integer :: ierr
      call MPI_Init(ierr)
      call MPI_Finalize(ierr)
      end program t
]])], [scimq_have_mpi_fortran=yes])
        AC_MSG_RESULT([$scimq_have_mpi_fortran])
        FCFLAGS="$scimq_save_FCFLAGS"
        LIBS="$scimq_save_LIBS"
        AC_LANG_POP([Fortran])
    ])
    AS_IF([test "$scimq_have_mpi_fortran" != yes], [
        MPI_FCFLAGS=
        MPI_FCLIBS=
        AS_IF([test "$enable_fortran" = yes],
            [AC_MSG_ERROR([--enable-fortran: no working Fortran compiler with MPI's Fortran bindings.
Install gfortran (and openmpi-bin for mpifort) or use --disable-fortran.])])
    ])
    AC_SUBST([MPI_FCFLAGS])
    AC_SUBST([MPI_FCLIBS])
    AM_CONDITIONAL([HAVE_MPI_FORTRAN],
        [test "$scimq_have_mpi_fortran" = yes])
])
