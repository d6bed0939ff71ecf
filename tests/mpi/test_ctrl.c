/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The agent-to-rank control message checker (src/mpi/ctrl.c): a valid
 * message of each type passes in its direction only, and each way of
 * breaking one (magic, version, length, type, flags, a field the type does
 * not use, the MSG's lengths) is refused with its own code.
 */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include <scimq/error.h>

#include "mpi/ctrl.h"

static int failures, checks;

static void
expect(const char *what, int got, int want)
{
    checks++;
    if (got != want) {
        failures++;
        printf("not ok - %s: %s, expected %s\n", what, scimq_err_name(got),
               scimq_err_name(want));
    }
}

static struct scimq_mpi_ctrl
msg_ref(void)
{
    struct scimq_mpi_ctrl c;

    scimq__ctrl_init(&c, CTRL_MSG, 1);
    c.slot = 3;
    c.gen = 7;
    c.attempt = 1;
    c.raddr = 4096;
    c.key = 1;
    c.payload_len = 1 << 20;
    c.msg_id = 42;
    c.meta_len = 20;
    return c;
}

int
main(void)
{
    const size_t n = SCIMQ_MPI_CTRL_LEN;
    struct scimq_mpi_ctrl c, m;

    /* Each type, in its direction and not in the other. */
    for (uint16_t t = CTRL_WANT; t <= CTRL_PUT_DONE; t++) {
        bool to_agent = t <= CTRL_BYE || t == CTRL_PUT;

        scimq__ctrl_init(&c, t, 0);
        if (t == CTRL_EXTEND) {
            c.lease_ms = 1000;
            c.slot = 1;
        }
        if (t == CTRL_ERR)
            c.code = SCIMQ_EIO;
        if (t == CTRL_MSG)
            c = msg_ref();
        if (t == CTRL_PUT) {
            c.slot = 4;
            c.raddr = 8192;
            c.key = 5;
            c.meta_len = 40;
            c.payload_len = 100;
        }
        if (t == CTRL_PUT_DONE)
            c.slot = 4; /* code 0: published */
        expect("valid type", scimq__ctrl_check(&c, n, to_agent), 0);
        expect("wrong direction", scimq__ctrl_check(&c, n, !to_agent),
               SCIMQ_EPROTO_OPCODE);
    }
    scimq__ctrl_init(&c, CTRL_DONE, 2);
    c.slot = 5;
    c.gen = 9;
    c.flags = CTRL_F_WANT;
    expect("DONE+WANT", scimq__ctrl_check(&c, n, true), 0);

    m = c;
    m.magic ^= 1;
    expect("magic", scimq__ctrl_check(&m, n, true), SCIMQ_EPROTO_MAGIC);
    m = c;
    m.version = SCIMQ_MPI_CTRL_VERSION - 1;
    expect("older version", scimq__ctrl_check(&m, n, true),
           SCIMQ_EPROTO_VERSION);
    m.version = SCIMQ_MPI_CTRL_VERSION + 1;
    expect("newer version", scimq__ctrl_check(&m, n, true),
           SCIMQ_EPROTO_VERSION);
    m = c;
    m.hdr_len = (uint16_t) (n - 8);
    expect("header length", scimq__ctrl_check(&m, n, true),
           SCIMQ_EPROTO_HDRLEN);
    expect("short message", scimq__ctrl_check(&c, n - 1, true),
           SCIMQ_EPROTO_HDRLEN);
    expect("long message", scimq__ctrl_check(&c, n + 8, true),
           SCIMQ_EPROTO_LENGTHS);
    m = c;
    m.type = 0;
    expect("type 0", scimq__ctrl_check(&m, n, true), SCIMQ_EPROTO_OPCODE);
    m.type = CTRL_PUT_DONE + 1;
    expect("unknown type", scimq__ctrl_check(&m, n, true), SCIMQ_EPROTO_OPCODE);
    m = c;
    m.flags = CTRL_F_REQUEUE;
    expect("REQUEUE on DONE", scimq__ctrl_check(&m, n, true),
           SCIMQ_EPROTO_FLAGS);
    m.flags = 1u << 9;
    expect("unknown flag", scimq__ctrl_check(&m, n, true), SCIMQ_EPROTO_FLAGS);
    m = c;
    m.lease_ms = 5;
    expect("lease on DONE", scimq__ctrl_check(&m, n, true),
           SCIMQ_EPROTO_RESERVED);
    m = c;
    m.msg_id = 1;
    expect("msg_id on DONE", scimq__ctrl_check(&m, n, true),
           SCIMQ_EPROTO_RESERVED);
    scimq__ctrl_init(&m, CTRL_WANT, 0);
    m.slot = 1;
    expect("slot on WANT", scimq__ctrl_check(&m, n, true),
           SCIMQ_EPROTO_RESERVED);
    scimq__ctrl_init(&m, CTRL_BYE, 0);
    m.gen = 1;
    expect("slot on BYE without DONE", scimq__ctrl_check(&m, n, true),
           SCIMQ_EPROTO_RESERVED);
    m.flags = CTRL_F_DONE;
    expect("BYE+DONE with its slot", scimq__ctrl_check(&m, n, true), 0);
    scimq__ctrl_init(&m, CTRL_EXTEND, 0);
    expect("EXTEND without a lease", scimq__ctrl_check(&m, n, true),
           SCIMQ_EPROTO_ARGS);
    scimq__ctrl_init(&m, CTRL_ERR, 0);
    expect("ERR without a code", scimq__ctrl_check(&m, n, false),
           SCIMQ_EPROTO_ARGS);

    /* PUT and its answer. */
    scimq__ctrl_init(&m, CTRL_PUT, 0);
    m.raddr = 64;
    m.key = 5;
    m.meta_len = 8;
    expect("PUT block table too short", scimq__ctrl_check(&m, n, true),
           SCIMQ_EPROTO_ARGS);
    m.meta_len = SCIMQ_MPI_META_MAX + 1;
    expect("PUT block table too long", scimq__ctrl_check(&m, n, true),
           SCIMQ_EPROTO_ARGS);
    m.meta_len = 20;
    expect("PUT", scimq__ctrl_check(&m, n, true), 0);
    m.attempt = 1;
    expect("PUT with an attempt", scimq__ctrl_check(&m, n, true),
           SCIMQ_EPROTO_RESERVED);
    m.attempt = 0;
    m.gen = 1;
    expect("PUT with a generation", scimq__ctrl_check(&m, n, true),
           SCIMQ_EPROTO_RESERVED);
    scimq__ctrl_init(&m, CTRL_PUT_DONE, 0);
    m.code = SCIMQ_ENOENT;
    expect("PUT_DONE with an error", scimq__ctrl_check(&m, n, false), 0);
    m.lease_ms = 1;
    expect("lease on PUT_DONE", scimq__ctrl_check(&m, n, false),
           SCIMQ_EPROTO_RESERVED);

    /* MSG: by reference, inline, and broken lengths. */
    m = msg_ref();
    m.attempt = 0;
    expect("MSG attempt 0", scimq__ctrl_check(&m, n, false), SCIMQ_EPROTO_ARGS);
    m = msg_ref();
    m.meta_len = 2;
    expect("MSG block table too short", scimq__ctrl_check(&m, n, false),
           SCIMQ_EPROTO_ARGS);
    m.meta_len = SCIMQ_MPI_META_MAX + 1;
    expect("MSG block table too long", scimq__ctrl_check(&m, n, false),
           SCIMQ_EPROTO_ARGS);
    m = msg_ref();
    m.payload_len = 1000;
    m.raddr = m.key = 0;
    m.inline_len = 1020;
    expect("inline MSG", scimq__ctrl_check(&m, n + 1020, false), 0);
    expect("inline MSG cut short", scimq__ctrl_check(&m, n + 1000, false),
           SCIMQ_EPROTO_LENGTHS);
    m.inline_len = 1019;
    expect("inline length against meta + payload",
           scimq__ctrl_check(&m, n + 1019, false), SCIMQ_EPROTO_LENGTHS);
    m.inline_len = 1020;
    m.key = 1;
    expect("inline MSG with a key", scimq__ctrl_check(&m, n + 1020, false),
           SCIMQ_EPROTO_LENGTHS);
    m = msg_ref();
    m.code = 1;
    expect("code on MSG", scimq__ctrl_check(&m, n, false),
           SCIMQ_EPROTO_RESERVED);

    /* A copy of a control message: BROADCAST on MSG only, by reference. */
    m = msg_ref();
    m.flags = CTRL_F_BROADCAST;
    expect("MSG+BROADCAST", scimq__ctrl_check(&m, n, false), 0);
    m.payload_len = 1000;
    m.raddr = m.key = 0;
    m.inline_len = 1020;
    expect("inline MSG+BROADCAST", scimq__ctrl_check(&m, n + 1020, false),
           SCIMQ_EPROTO_FLAGS);
    m = c; /* DONE */
    m.flags = CTRL_F_BROADCAST;
    expect("BROADCAST on DONE", scimq__ctrl_check(&m, n, true),
           SCIMQ_EPROTO_FLAGS);

    printf("%d checks, %d failed\n", checks, failures);
    return failures == 0 ? 0 : 1;
}
