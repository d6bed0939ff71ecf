/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A tiny table-driven front end for the CUnit binaries.  Each test file
 * defines its suites as tables and ends with SCIMQ_CUNIT_MAIN(suites):
 *
 *   static const struct scimq_cunit_test proto_tests[] = {
 *       {"round trip of every opcode", test_roundtrip_all, 1},
 *       {NULL, NULL, 0}};
 *   static const struct scimq_cunit_suite suites[] = {
 *       {"proto", NULL, NULL, proto_tests}, {NULL, NULL, NULL, NULL}};
 *   SCIMQ_CUNIT_MAIN(suites)
 *
 * A test whose "enabled" field is 0 is registered as inactive (reported,
 * not run).  The binary exits 0 when every test passed and 1 otherwise,
 * including when the registry cannot be set up (out of memory, a
 * duplicate name): a test that did not run has not passed, and must not
 * pass for a skip either.
 */
#ifndef SCIMQ_TESTS_CUNIT_MAIN_H
#define SCIMQ_TESTS_CUNIT_MAIN_H

#include <stdio.h>

#include <CUnit/Basic.h>

struct scimq_cunit_test {
    const char *name;
    void (*fn)(void);
    int enabled;
};

struct scimq_cunit_suite {
    const char *name;
    int (*init)(void);
    int (*fini)(void);
    const struct scimq_cunit_test *tests;
};

static inline int
scimq_cunit_run(const struct scimq_cunit_suite *suites)
{
    unsigned int failed;

    if (CU_initialize_registry() != CUE_SUCCESS) {
        fprintf(stderr, "CUnit: %s\n", CU_get_error_msg());
        return 1;
    }
    for (const struct scimq_cunit_suite *s = suites; s->name; s++) {
        CU_pSuite suite = CU_add_suite(s->name, s->init, s->fini);

        if (suite == NULL)
            goto fail;
        for (const struct scimq_cunit_test *t = s->tests; t->name; t++) {
            CU_pTest test = CU_add_test(suite, t->name, t->fn);

            if (test == NULL)
                goto fail;
            if (!t->enabled)
                CU_set_test_active(test, CU_FALSE);
        }
    }
    CU_basic_set_mode(CU_BRM_VERBOSE);
    CU_basic_run_tests();
    failed = CU_get_number_of_tests_failed() + CU_get_number_of_suites_failed();
    CU_cleanup_registry();
    return failed == 0 ? 0 : 1;
fail:
    fprintf(stderr, "CUnit: %s\n", CU_get_error_msg());
    CU_cleanup_registry();
    return 1;
}

#define SCIMQ_CUNIT_MAIN(suites)                                               \
    int main(void)                                                             \
    {                                                                          \
        return scimq_cunit_run(suites);                                        \
    }

#endif /* SCIMQ_TESTS_CUNIT_MAIN_H */
