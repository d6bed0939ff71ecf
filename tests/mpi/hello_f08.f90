! SPDX-License-Identifier: BSD-3-Clause
!
! A plain Fortran MPI hello through "use mpi_f08" (entry points
! mpi_init_thread_f08_, mpi_finalize_f08_ in Open MPI's libmpi_usempif08,
! called without ierror), for the shim's tests.
program hello_f08
    use mpi_f08
    implicit none
    integer :: rank, nranks, provided

    call MPI_Init_thread(MPI_THREAD_FUNNELED, provided)
    call MPI_Comm_rank(MPI_COMM_WORLD, rank)
    call MPI_Comm_size(MPI_COMM_WORLD, nranks)
    write (*, '(a, i0, a, i0)') 'hello from Fortran (mpi_f08) rank ', rank, &
        ' of ', nranks
    call MPI_Finalize()
end program hello_f08
