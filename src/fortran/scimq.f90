! SPDX-License-Identifier: BSD-3-Clause
!
! module scimq: the SciMQ MPI runtime (libscimq-mpi) from Fortran.
!
!     use mpi
!     use scimq
!     type(scimq_msg) :: msg
!     integer(int8), pointer :: bytes(:)
!     call MPI_Init(ierr)
!     call scimq_mpi_init(MPI_COMM_WORLD, '', '', ierr)  ! SCIMQ_URL, SCIMQ_QUEUE
!     do
!         call scimq_mpi_next(msg, ierr)
!         if (ierr /= SCIMQ_OK) exit                      ! SCIMQ_EOS: drained
!         call scimq_msg_view(msg, bytes)
!         ...
!     end do
!     call scimq_mpi_finalize(ierr)
!     call MPI_Finalize(ierr)
!
! The communicator is a Fortran integer handle (from mpif.h or "use mpi";
! with "use mpi_f08" pass comm%MPI_VAL).  Every procedure returns its
! status in ierr: SCIMQ_OK (0) or a negative SCIMQ_E* code, the same codes
! as the C API (scimq/error.h); scimq_strerror(ierr) describes it.
! Messages belong to the runtime: msg%data is valid until the next call of
! scimq_mpi_next, scimq_mpi_ack/nack or scimq_mpi_finalize.
!
! Link with -lscimq-fortran -lscimq-mpi (scimq-config
! --fortran-libs); find the module with scimq-config --fcflags.
module scimq
    use, intrinsic :: iso_c_binding
    implicit none
    private

    ! Result codes (scimq/error.h: SCIMQ_E<NAME> = -<errno> or -(4000 + n)).
    integer, parameter, public :: SCIMQ_OK = 0
    integer, parameter, public :: SCIMQ_EAGAIN = -11
    integer, parameter, public :: SCIMQ_EINVAL = -22
    integer, parameter, public :: SCIMQ_ETIMEDOUT = -110
    integer, parameter, public :: SCIMQ_EOS = -4001
    integer, parameter, public :: SCIMQ_ESTATE = -4020
    integer, parameter, public :: SCIMQ_ESTOPPED = -4022

    ! scimq_msg_flags(msg): a control message (scimq/mpi.h
    ! SCIMQ_MPI_MSG_CONTROL), which every rank gets.
    integer, parameter, public :: SCIMQ_MPI_MSG_CONTROL = 1

    ! Words of opaque storage for the C message (F_STATE_WORDS in scimq_f.c,
    ! which checks at compile time that the C struct fits).
    integer, parameter :: STATE_WORDS = 16

    !> A message in this rank's memory.
    type, public :: scimq_msg
        type(c_ptr) :: data = c_null_ptr         ! payload: blocks back to back
        integer(c_int64_t) :: len = 0            ! payload bytes
        integer(c_int64_t) :: msg_id = 0         ! the gateway's message id
        integer(c_int32_t) :: attempt = 0        ! 1 on first delivery
        integer(c_int32_t) :: block_count = 0    ! blocks of the message
        integer(c_int64_t), private :: state(STATE_WORDS) = 0
    end type scimq_msg

    public :: scimq_mpi_init, scimq_mpi_next, scimq_mpi_ack, scimq_mpi_nack
    public :: scimq_mpi_put, scimq_mpi_finalize, scimq_mpi_stop, scimq_msg_view
    public :: scimq_strerror, scimq_msg_flags

    !> Points a Fortran array at the payload of a message (no copy):
    !> integer(c_int8_t) bytes, integer(c_int32_t), real(c_float) or
    !> real(c_double) elements (a partial trailing element is left out).
    !> The pointer is disassociated when the message has no payload.
    interface scimq_msg_view
        module procedure view_int8, view_int32, view_float, view_double
    end interface scimq_msg_view

    !> Publishes nbytes of data as a one-block message (name: optional
    !> block name) to a queue of the same gateway; returns once the gateway
    !> confirmed it.  nbytes may be a default or an 8-byte integer.
    interface scimq_mpi_put
        module procedure put_int32, put_int64
    end interface scimq_mpi_put

    interface
        function c_init(fcomm, url, has_url, queue, has_queue) &
                bind(c, name='scimq__f_init') result(rc)
            import :: c_int, c_char
            integer(c_int), value :: fcomm, has_url, has_queue
            character(kind=c_char), dimension(*), intent(in) :: url, queue
            integer(c_int) :: rc
        end function c_init

        function c_next(state, data, len, msg_id, attempt, block_count, &
                timed, timeout_ms) bind(c, name='scimq__f_next') result(rc)
            import :: c_int, c_int32_t, c_int64_t, c_ptr
            integer(c_int64_t), dimension(*), intent(inout) :: state
            type(c_ptr), intent(out) :: data
            integer(c_int64_t), intent(out) :: len, msg_id
            integer(c_int32_t), intent(out) :: attempt, block_count
            integer(c_int), value :: timed, timeout_ms
            integer(c_int) :: rc
        end function c_next

        function c_flags(state) bind(c, name='scimq__f_flags') result(flags)
            import :: c_int32_t, c_int64_t
            integer(c_int64_t), dimension(*), intent(in) :: state
            integer(c_int32_t) :: flags
        end function c_flags

        function c_ack(state) bind(c, name='scimq__f_ack') result(rc)
            import :: c_int, c_int64_t
            integer(c_int64_t), dimension(*), intent(inout) :: state
            integer(c_int) :: rc
        end function c_ack

        function c_nack(state, requeue) bind(c, name='scimq__f_nack') &
                result(rc)
            import :: c_int, c_int64_t
            integer(c_int64_t), dimension(*), intent(inout) :: state
            integer(c_int), value :: requeue
            integer(c_int) :: rc
        end function c_nack

        function c_put(queue, data, nbytes, name, has_name) &
                bind(c, name='scimq__f_put') result(rc)
            import :: c_int, c_int64_t, c_char
            character(kind=c_char), dimension(*), intent(in) :: queue, name
            type(*), dimension(*), intent(in) :: data
            integer(c_int64_t), value :: nbytes
            integer(c_int), value :: has_name
            integer(c_int) :: rc
        end function c_put

        function c_finalize() bind(c, name='scimq__f_finalize') result(rc)
            import :: c_int
            integer(c_int) :: rc
        end function c_finalize

        ! Async-signal-safe; no arguments, so bound to the C call itself.
        subroutine c_stop() bind(c, name='scimq_mpi_stop')
        end subroutine c_stop

        function c_strerror(err, buf, buflen) &
                bind(c, name='scimq__f_strerror') result(n)
            import :: c_int, c_char
            integer(c_int), value :: err, buflen
            character(kind=c_char), dimension(*), intent(out) :: buf
            integer(c_int) :: n
        end function c_strerror
    end interface

contains

    ! A Fortran string as a NUL-terminated C string (trailing blanks are
    ! padding, not content).
    pure function c_string(s) result(cs)
        character(len=*), intent(in) :: s
        character(kind=c_char, len=len_trim(s) + 1) :: cs

        cs = trim(s) // c_null_char
    end function c_string

    !> Starts consuming a queue with the ranks of comm (collective).
    !> url, queue: absent or blank for SCIMQ_URL, SCIMQ_QUEUE.
    subroutine scimq_mpi_init(comm, url, queue, ierr)
        integer, intent(in) :: comm
        character(len=*), intent(in), optional :: url, queue
        integer, intent(out) :: ierr
        integer(c_int) :: has_url, has_queue
        character(kind=c_char, len=:), allocatable :: curl, cqueue

        has_url = 0
        curl = c_null_char
        if (present(url)) then
            if (len_trim(url) > 0) then
                has_url = 1
                curl = c_string(url)
            end if
        end if
        has_queue = 0
        cqueue = c_null_char
        if (present(queue)) then
            if (len_trim(queue) > 0) then
                has_queue = 1
                cqueue = c_string(queue)
            end if
        end if
        ierr = c_init(int(comm, c_int), curl, has_url, cqueue, has_queue)
    end subroutine scimq_mpi_init

    !> Waits for the next message and acknowledges the previous one.
    !> ierr: SCIMQ_OK and msg; SCIMQ_EOS once the queue is closed and
    !> drained; with timeout_ms (-1: no limit, 0: do not wait) also
    !> SCIMQ_ETIMEDOUT or SCIMQ_EAGAIN; SCIMQ_ESTATE before scimq_mpi_init.
    subroutine scimq_mpi_next(msg, ierr, timeout_ms)
        type(scimq_msg), intent(out) :: msg
        integer, intent(out) :: ierr
        integer, intent(in), optional :: timeout_ms
        integer(c_int) :: timed, tmo

        timed = 0
        tmo = -1
        if (present(timeout_ms)) then
            timed = 1
            tmo = int(timeout_ms, c_int)
        end if
        ierr = c_next(msg%state, msg%data, msg%len, msg%msg_id, &
                      msg%attempt, msg%block_count, timed, tmo)
    end subroutine scimq_mpi_next

    !> The flags of msg (SCIMQ_MPI_MSG_*), e.g.
    !> iand(scimq_msg_flags(msg), SCIMQ_MPI_MSG_CONTROL) /= 0 for a control
    !> message: every rank gets each one, in order with the data.
    function scimq_msg_flags(msg) result(flags)
        type(scimq_msg), intent(in) :: msg
        integer :: flags

        flags = int(c_flags(msg%state))
    end function scimq_msg_flags

    !> Acknowledges msg now (scimq_mpi_next would); msg is empty afterwards.
    subroutine scimq_mpi_ack(msg, ierr)
        type(scimq_msg), intent(inout) :: msg
        integer, intent(out) :: ierr

        ierr = c_ack(msg%state)
        call forget(msg)
    end subroutine scimq_mpi_ack

    !> Gives msg back to the gateway (requeue) or dead-letters it
    !> (.not. requeue); msg is empty afterwards.
    subroutine scimq_mpi_nack(msg, requeue, ierr)
        type(scimq_msg), intent(inout) :: msg
        logical, intent(in) :: requeue
        integer, intent(out) :: ierr

        ierr = c_nack(msg%state, merge(1_c_int, 0_c_int, requeue))
        call forget(msg)
    end subroutine scimq_mpi_nack

    subroutine forget(msg)
        type(scimq_msg), intent(inout) :: msg

        msg%data = c_null_ptr
        msg%len = 0
        msg%block_count = 0
    end subroutine forget

    subroutine put_int64(queue, data, nbytes, ierr, name)
        character(len=*), intent(in) :: queue
        type(*), dimension(*), intent(in) :: data
        integer(c_int64_t), intent(in) :: nbytes
        integer, intent(out) :: ierr
        character(len=*), intent(in), optional :: name
        integer(c_int) :: has_name
        character(kind=c_char, len=:), allocatable :: cname

        has_name = 0
        cname = c_null_char
        if (present(name)) then
            has_name = 1
            cname = c_string(name)
        end if
        ierr = c_put(c_string(queue), data, nbytes, cname, has_name)
    end subroutine put_int64

    subroutine put_int32(queue, data, nbytes, ierr, name)
        character(len=*), intent(in) :: queue
        type(*), dimension(*), intent(in) :: data
        integer(c_int32_t), intent(in) :: nbytes
        integer, intent(out) :: ierr
        character(len=*), intent(in), optional :: name

        call put_int64(queue, data, int(nbytes, c_int64_t), ierr, name)
    end subroutine put_int32

    !> Asks the runtime to stop: the next scimq_mpi_next acknowledges the
    !> message in hand and returns SCIMQ_ESTOPPED (as a stop signal,
    !> SCIMQ_MPI_STOP_SIGNALS, default USR1, does).
    subroutine scimq_mpi_stop()
        call c_stop()
    end subroutine scimq_mpi_stop

    !> Leaves (collective): acknowledges the current message and stops the
    !> runtime.  Call before MPI_Finalize.
    subroutine scimq_mpi_finalize(ierr)
        integer, intent(out) :: ierr

        ierr = c_finalize()
    end subroutine scimq_mpi_finalize

    !> A description of a result code.
    function scimq_strerror(ierr) result(text)
        integer, intent(in) :: ierr
        character(len=:), allocatable :: text
        character(kind=c_char, len=128) :: buf
        integer(c_int) :: n

        n = c_strerror(int(ierr, c_int), buf, int(len(buf), c_int))
        text = buf(1:n)
    end function scimq_strerror

    subroutine view_int8(msg, array)
        type(scimq_msg), intent(in) :: msg
        integer(c_int8_t), pointer, intent(out) :: array(:)

        nullify(array)
        if (c_associated(msg%data)) &
            call c_f_pointer(msg%data, array, [msg%len])
    end subroutine view_int8

    subroutine view_int32(msg, array)
        type(scimq_msg), intent(in) :: msg
        integer(c_int32_t), pointer, intent(out) :: array(:)

        nullify(array)
        if (c_associated(msg%data)) &
            call c_f_pointer(msg%data, array, [msg%len / 4_c_int64_t])
    end subroutine view_int32

    subroutine view_float(msg, array)
        type(scimq_msg), intent(in) :: msg
        real(c_float), pointer, intent(out) :: array(:)

        nullify(array)
        if (c_associated(msg%data)) &
            call c_f_pointer(msg%data, array, [msg%len / 4_c_int64_t])
    end subroutine view_float

    subroutine view_double(msg, array)
        type(scimq_msg), intent(in) :: msg
        real(c_double), pointer, intent(out) :: array(:)

        nullify(array)
        if (c_associated(msg%data)) &
            call c_f_pointer(msg%data, array, [msg%len / 8_c_int64_t])
    end subroutine view_double

end module scimq
