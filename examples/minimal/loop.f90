! SPDX-License-Identifier: BSD-3-Clause
!
! The shortest SciMQ consumer in Fortran (loop.c with the scimq module):
! every rank takes messages from the queue named by SCIMQ_QUEUE on the
! gateway at SCIMQ_URL until the queue is closed and drained; each rank
! prints what it got and rank 0 the totals.
program loop
    use, intrinsic :: iso_fortran_env, only: int8, int64, error_unit
    use mpi
    use scimq
    implicit none
    type(scimq_msg) :: msg
    integer(int8), pointer :: bytes(:)
    integer(int64) :: mine(2), total(2)    ! messages, bytes
    integer :: rank, ierr, rc

    call MPI_Init(ierr)
    call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
    ! Blank URL and queue: from SCIMQ_URL and SCIMQ_QUEUE.
    call scimq_mpi_init(MPI_COMM_WORLD, '', '', rc)
    if (rc /= SCIMQ_OK) then
        if (rank == 0) write (error_unit, '(2a)') 'loop_f: ', scimq_strerror(rc)
        call MPI_Finalize(ierr)
        error stop 1
    end if

    mine = 0
    do
        call scimq_mpi_next(msg, rc)
        if (rc /= SCIMQ_OK) exit
        ! The payload as bytes, in place (no copy).
        call scimq_msg_view(msg, bytes)
        mine(1) = mine(1) + 1
        if (associated(bytes)) mine(2) = mine(2) + size(bytes, kind=int64)
    end do
    ! SCIMQ_ESTOPPED: a stop signal (SIGUSR1 from the job script).
    if (rc /= SCIMQ_EOS .and. rc /= SCIMQ_ESTOPPED) &
        write (error_unit, '(a, i0, 2a)') 'loop_f: rank ', rank, ': ', scimq_strerror(rc)

    write (*, '(a, i0, a, i0, a, i0, a)') 'rank ', rank, ': ', mine(1), &
        ' messages, ', mine(2), ' bytes'
    call MPI_Reduce(mine, total, 2, MPI_INTEGER8, MPI_SUM, 0, MPI_COMM_WORLD, ierr)
    if (rank == 0) write (*, '(a, i0, a, i0, a)') 'total: ', total(1), &
        ' messages, ', total(2), ' bytes'
    call scimq_mpi_finalize(ierr)
    call MPI_Finalize(ierr)
    if (rc /= SCIMQ_EOS .and. rc /= SCIMQ_ESTOPPED) error stop 1
end program loop
