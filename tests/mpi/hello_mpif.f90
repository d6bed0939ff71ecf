! SPDX-License-Identifier: BSD-3-Clause
!
! A plain Fortran MPI hello through mpif.h (entry points mpi_init_,
! mpi_finalize_ in Open MPI's libmpi_mpifh), for the shim's tests.
program hello_mpif
    implicit none
    include 'mpif.h'
    integer :: rank, nranks, ierr

    call MPI_Init(ierr)
    call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
    call MPI_Comm_size(MPI_COMM_WORLD, nranks, ierr)
    write (*, '(a, i0, a, i0)') 'hello from Fortran (mpif.h) rank ', rank, &
        ' of ', nranks
    call MPI_Finalize(ierr)
end program hello_mpif
