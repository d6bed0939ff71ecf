! SPDX-License-Identifier: BSD-3-Clause
!
! The rest of module scimq, beyond the loop of the examples: next before
! init (SCIMQ_ESTATE), init with an explicit URL, next with a timeout,
! views of the payload as bytes and doubles, explicit ack, nack with
! requeue (rank 0 gives its first message back once: the control message
! at the head of the queue, which then comes to rank 0 again), the flags of
! a control message (every rank gets one) and of data, put of one block
! per rank to the queue in SCIMQ_TEST_OUT_QUEUE, strerror, finalize.
! Prints the lines test_examples.sh checks: per-rank and total counts of
! settled data messages, the number of redeliveries seen and of control
! messages.
program fortran_api
    use, intrinsic :: iso_c_binding
    use, intrinsic :: iso_fortran_env, only: int64, error_unit
    use mpi
    use scimq
    implicit none
    type(scimq_msg) :: msg
    integer(c_int8_t), pointer :: bytes(:)
    real(c_double), pointer :: dbl(:)
    integer(int64) :: mine(4), total(4)   ! messages, bytes, redeliveries,
                                          ! control messages
    integer :: rank, ierr, rc, n
    logical :: gave_back
    character(len=256) :: url, outq

    call MPI_Init(ierr)
    call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)

    call scimq_mpi_next(msg, rc)
    call check(rc == SCIMQ_ESTATE, 'next before init: SCIMQ_ESTATE')
    call check(scimq_strerror(SCIMQ_EOS) == 'end of stream', 'strerror')

    call get_environment_variable('SCIMQ_URL', url)
    call get_environment_variable('SCIMQ_TEST_OUT_QUEUE', outq)
    call scimq_mpi_init(MPI_COMM_WORLD, url=trim(url), ierr=rc)
    call check(rc == SCIMQ_OK, 'init: ' // scimq_strerror(rc))

    mine = 0
    gave_back = rank /= 0
    n = 0
    do
        call scimq_mpi_next(msg, rc, timeout_ms=60000)
        if (rc /= SCIMQ_OK) exit
        n = n + 1
        if (msg%attempt > 1) mine(3) = mine(3) + 1
        if (.not. gave_back) then
            gave_back = .true.
            call scimq_mpi_nack(msg, .true., rc)
            call check(rc == SCIMQ_OK, 'nack: ' // scimq_strerror(rc))
            call check(msg%len == 0, 'nack empties msg')
            cycle
        end if
        if (iand(scimq_msg_flags(msg), SCIMQ_MPI_MSG_CONTROL) /= 0) then
            mine(4) = mine(4) + 1
            cycle
        end if
        call check(scimq_msg_flags(msg) == 0, 'data: no flags')
        call scimq_msg_view(msg, bytes)
        call scimq_msg_view(msg, dbl)
        call check(associated(bytes) .and. associated(dbl), 'views')
        call check(size(bytes, kind=int64) == msg%len, 'byte view size')
        call check(size(dbl, kind=int64) == msg%len / 8, 'double view size')
        mine(1) = mine(1) + 1
        mine(2) = mine(2) + msg%len
        ! Every other message acknowledged explicitly, the rest by next.
        if (mod(n, 2) == 0) then
            call scimq_mpi_ack(msg, rc)
            call check(rc == SCIMQ_OK, 'ack: ' // scimq_strerror(rc))
            call check(msg%len == 0 .and. .not. c_associated(msg%data), &
                       'ack empties msg')
        end if
    end do
    call check(rc == SCIMQ_EOS, 'end of stream: ' // scimq_strerror(rc))

    ! One result block per rank: its counters, as 8-byte integers.
    call scimq_mpi_put(trim(outq), mine(1:3), 24, rc, name='counts')
    call check(rc == SCIMQ_OK, 'put: ' // scimq_strerror(rc))

    write (*, '(a, i0, a, i0, a, i0, a)') 'rank ', rank, ': ', mine(1), &
        ' messages, ', mine(2), ' bytes'
    call MPI_Reduce(mine, total, 4, MPI_INTEGER8, MPI_SUM, 0, &
                    MPI_COMM_WORLD, ierr)
    if (rank == 0) then
        write (*, '(a, i0, a, i0, a)') 'total: ', total(1), ' messages, ', &
            total(2), ' bytes'
        write (*, '(a, i0)') 'redelivered: ', total(3)
        write (*, '(a, i0)') 'control: ', total(4)
    end if
    call scimq_mpi_finalize(rc)
    call check(rc == SCIMQ_OK, 'finalize: ' // scimq_strerror(rc))
    call MPI_Finalize(ierr)

contains

    subroutine check(cond, what)
        logical, intent(in) :: cond
        character(len=*), intent(in) :: what

        if (.not. cond) then
            write (error_unit, '(a, i0, 2a)') 'fortran_api: rank ', rank, &
                ': failed: ', what
            call MPI_Abort(MPI_COMM_WORLD, 1, ierr)
        end if
    end subroutine check
end program fortran_api
