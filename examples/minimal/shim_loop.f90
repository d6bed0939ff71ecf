! SPDX-License-Identifier: BSD-3-Clause
!
! shim_loop.c in Fortran: an MPI program that does not start the SciMQ
! runtime itself.  The PMPI shim does it inside MPI_Init (Fortran entry
! point mpi_init_) and stops it inside MPI_Finalize; this program only
! adds the scimq_mpi_next loop.
program shim_loop
    use, intrinsic :: iso_fortran_env, only: int64, error_unit
    use mpi
    use scimq, only: scimq_msg, scimq_mpi_next, scimq_strerror, SCIMQ_OK, &
                     SCIMQ_EOS, SCIMQ_ESTOPPED
    implicit none
    type(scimq_msg) :: msg
    integer(int64) :: mine(2), total(2)    ! messages, bytes
    integer :: rank, ierr, rc

    call MPI_Init(ierr)
    call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
    mine = 0
    do
        call scimq_mpi_next(msg, rc)
        if (rc /= SCIMQ_OK) exit
        mine(1) = mine(1) + 1
        mine(2) = mine(2) + msg%len
    end do
    ! SCIMQ_ESTATE: the shim is not there or could not start the runtime.
    ! SCIMQ_ESTOPPED: a stop signal (SIGUSR1 from the job script).
    if (rc /= SCIMQ_EOS .and. rc /= SCIMQ_ESTOPPED) &
        write (error_unit, '(a, i0, 2a)') 'shim_loop_f: rank ', rank, ': ', scimq_strerror(rc)

    write (*, '(a, i0, a, i0, a, i0, a)') 'rank ', rank, ': ', mine(1), &
        ' messages, ', mine(2), ' bytes'
    call MPI_Reduce(mine, total, 2, MPI_INTEGER8, MPI_SUM, 0, MPI_COMM_WORLD, ierr)
    if (rank == 0) write (*, '(a, i0, a, i0, a)') 'total: ', total(1), &
        ' messages, ', total(2), ' bytes'
    call MPI_Finalize(ierr)
    if (rc /= SCIMQ_EOS .and. rc /= SCIMQ_ESTOPPED) error stop 1
end program shim_loop
