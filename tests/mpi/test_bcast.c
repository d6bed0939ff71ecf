/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The per-rank copies of a control message (src/mpi/bcast.c): what the
 * agent tells the gateway once every copy is settled, for each way a rank
 * can settle its copy or leave.
 */
#include "config.h"

#include <stdbool.h>

#include "mpi/bcast.h"
#include "cunit_main.h"

/* Every rank processes its copy: acknowledged after the last, not
 * before. */
static void
test_all_done(void)
{
    struct scimq_mpi_bcast *b = scimq__bcast_create(3, NULL);

    CU_ASSERT_PTR_NOT_NULL_FATAL(b);
    for (int r = 0; r < 3; r++) {
        CU_ASSERT_TRUE(scimq__bcast_to_send(b, r));
        CU_ASSERT_EQUAL(scimq__bcast_sent(b, r), 0);
        CU_ASSERT_FALSE(scimq__bcast_to_send(b, r));
        CU_ASSERT_TRUE(scimq__bcast_held(b, r));
    }
    CU_ASSERT_EQUAL(scimq__bcast_settle(b, 0, SCIMQ_BCAST_DONE),
                    SCIMQ_BCAST_PENDING);
    /* A second DONE of the same rank changes nothing. */
    CU_ASSERT_EQUAL(scimq__bcast_settle(b, 0, SCIMQ_BCAST_DONE),
                    SCIMQ_BCAST_PENDING);
    CU_ASSERT_EQUAL(scimq__bcast_settle(b, 2, SCIMQ_BCAST_DONE),
                    SCIMQ_BCAST_PENDING);
    CU_ASSERT_EQUAL(scimq__bcast_settle(b, 1, SCIMQ_BCAST_DONE),
                    SCIMQ_BCAST_ACK);
    scimq__bcast_destroy(b);
}

/* A copy given back goes to the same rank again, as a later attempt; a
 * copy not held cannot be settled. */
static void
test_requeue(void)
{
    struct scimq_mpi_bcast *b = scimq__bcast_create(2, NULL);

    CU_ASSERT_PTR_NOT_NULL_FATAL(b);
    CU_ASSERT_EQUAL(scimq__bcast_settle(b, 0, SCIMQ_BCAST_DONE),
                    SCIMQ_BCAST_PENDING); /* not handed out yet */
    CU_ASSERT_EQUAL(scimq__bcast_sent(b, 0), 0);
    CU_ASSERT_EQUAL(scimq__bcast_sent(b, 1), 0);
    CU_ASSERT_EQUAL(scimq__bcast_settle(b, 1, SCIMQ_BCAST_DONE),
                    SCIMQ_BCAST_PENDING);
    CU_ASSERT_EQUAL(scimq__bcast_settle(b, 0, SCIMQ_BCAST_REQUEUE),
                    SCIMQ_BCAST_PENDING);
    CU_ASSERT_TRUE(scimq__bcast_to_send(b, 0));
    CU_ASSERT_FALSE(scimq__bcast_to_send(b, 1));
    CU_ASSERT_EQUAL(scimq__bcast_sent(b, 0), 1);
    /* A send that failed: to send again, the attempt not counted. */
    scimq__bcast_unsent(b, 0);
    CU_ASSERT_TRUE(scimq__bcast_to_send(b, 0));
    CU_ASSERT_EQUAL(scimq__bcast_sent(b, 0), 1);
    CU_ASSERT_EQUAL(scimq__bcast_settle(b, 0, SCIMQ_BCAST_DONE),
                    SCIMQ_BCAST_ACK);
    scimq__bcast_destroy(b);
}

/* Rejections: settled for the rank; the message is acknowledged if any
 * rank processed it, else rejected. */
static void
test_reject(void)
{
    struct scimq_mpi_bcast *b = scimq__bcast_create(2, NULL);

    CU_ASSERT_PTR_NOT_NULL_FATAL(b);
    (void) scimq__bcast_sent(b, 0);
    (void) scimq__bcast_sent(b, 1);
    CU_ASSERT_EQUAL(scimq__bcast_settle(b, 0, SCIMQ_BCAST_REJECTED),
                    SCIMQ_BCAST_PENDING);
    CU_ASSERT_EQUAL(scimq__bcast_settle(b, 1, SCIMQ_BCAST_REJECTED),
                    SCIMQ_BCAST_REJECT);
    scimq__bcast_destroy(b);

    b = scimq__bcast_create(2, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(b);
    (void) scimq__bcast_sent(b, 0);
    (void) scimq__bcast_sent(b, 1);
    CU_ASSERT_EQUAL(scimq__bcast_settle(b, 0, SCIMQ_BCAST_REJECTED),
                    SCIMQ_BCAST_PENDING);
    CU_ASSERT_EQUAL(scimq__bcast_settle(b, 1, SCIMQ_BCAST_DONE),
                    SCIMQ_BCAST_ACK);
    scimq__bcast_destroy(b);
}

/* Ranks that leave or die are not waited for: holding, not yet sent, or
 * gone before the message came. */
static void
test_gone(void)
{
    bool gone[4] = {false, true, false, false}, held = true;
    struct scimq_mpi_bcast *b = scimq__bcast_create(4, gone);

    CU_ASSERT_PTR_NOT_NULL_FATAL(b);
    CU_ASSERT_FALSE(scimq__bcast_to_send(b, 1));
    (void) scimq__bcast_sent(b, 0);
    (void) scimq__bcast_sent(b, 2);
    CU_ASSERT_EQUAL(scimq__bcast_gone(b, 2, &held), SCIMQ_BCAST_PENDING);
    CU_ASSERT_TRUE(held);
    CU_ASSERT_EQUAL(scimq__bcast_gone(b, 3, &held), SCIMQ_BCAST_PENDING);
    CU_ASSERT_FALSE(held);
    CU_ASSERT_EQUAL(scimq__bcast_gone(b, 3, &held), SCIMQ_BCAST_PENDING);
    CU_ASSERT_EQUAL(scimq__bcast_settle(b, 0, SCIMQ_BCAST_DONE),
                    SCIMQ_BCAST_ACK);
    scimq__bcast_destroy(b);

    /* Nobody saw it: given back. */
    b = scimq__bcast_create(2, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(b);
    (void) scimq__bcast_sent(b, 0);
    CU_ASSERT_EQUAL(scimq__bcast_gone(b, 0, &held), SCIMQ_BCAST_PENDING);
    CU_ASSERT_EQUAL(scimq__bcast_gone(b, 1, &held), SCIMQ_BCAST_GIVE_BACK);
    scimq__bcast_destroy(b);

    /* Every rank gone already. */
    gone[0] = gone[2] = gone[3] = true;
    b = scimq__bcast_create(4, gone);
    CU_ASSERT_PTR_NOT_NULL_FATAL(b);
    CU_ASSERT_EQUAL(scimq__bcast_outcome(b), SCIMQ_BCAST_GIVE_BACK);
    scimq__bcast_destroy(b);
    CU_ASSERT_PTR_NULL(scimq__bcast_create(0, NULL));
    /* A finished message's copies are no longer anyone's. */
    CU_ASSERT_FALSE(scimq__bcast_to_send(NULL, 0));
    CU_ASSERT_FALSE(scimq__bcast_held(NULL, 0));
}

static const struct scimq_cunit_test bcast_tests[] = {
    {"every rank processes its copy", test_all_done, 1},
    {"a copy given back goes to its rank again", test_requeue, 1},
    {"rejected copies", test_reject, 1},
    {"ranks that leave are not waited for", test_gone, 1},
    {NULL, NULL, 0}};
static const struct scimq_cunit_suite suites[] = {
    {"bcast", NULL, NULL, bcast_tests}, {NULL, NULL, NULL, NULL}};
SCIMQ_CUNIT_MAIN(suites)
