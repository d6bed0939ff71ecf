/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Unit tests of the common layer (errors, tunables, logging) and of the
 * synthetic self-verifying payloads used by the tools.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <scimq/proto.h>
#include <scimq/scimq.h>

#include "common/error_internal.h"
#include "common/log.h"
#include "common/param.h"
#include "cunit_main.h"
#include "tools/synth.h"

/* ======================================================================== */
/* Errors and version                                                        */
/* ======================================================================== */

static void
test_error_table(void)
{
    static const int codes[] = {
#define CODE(name, num, msg) SCIMQ_##name,
        SCIMQ_ERROR_MAP(CODE)
#undef CODE
    };
    size_t n = sizeof(codes) / sizeof(codes[0]);

    for (size_t i = 0; i < n; i++) {
        CU_ASSERT(codes[i] < 0);
        CU_ASSERT(scimq_err_is_known(codes[i]));
        CU_ASSERT_STRING_NOT_EQUAL(scimq_strerror(codes[i]), "unknown error");
        CU_ASSERT_NSTRING_EQUAL(scimq_err_name(codes[i]), "SCIMQ_E", 7);
        /* Numbers and names are unique: they travel on the wire. */
        for (size_t j = i + 1; j < n; j++) {
            CU_ASSERT(codes[i] != codes[j]);
            CU_ASSERT_STRING_NOT_EQUAL(scimq_err_name(codes[i]),
                                       scimq_err_name(codes[j]));
        }
    }
    CU_ASSERT_STRING_EQUAL(scimq_err_name(SCIMQ_EINVAL), "SCIMQ_EINVAL");
    CU_ASSERT_STRING_EQUAL(scimq_err_name(SCIMQ_EOS), "SCIMQ_EOS");
    CU_ASSERT_EQUAL(SCIMQ_EOS, -(SCIMQ_ERRNO_OFFSET + 1));
    CU_ASSERT_STRING_EQUAL(scimq_strerror(0), "success");
    CU_ASSERT_STRING_EQUAL(scimq_strerror(-99999), "unknown error");
    CU_ASSERT_STRING_EQUAL(scimq_err_name(12345), "SCIMQ_EUNKNOWN");
    CU_ASSERT_FALSE(scimq_err_is_known(-3999));
}

static void
test_error_from_errno(void)
{
    CU_ASSERT_EQUAL(scimq__err_from_errno(EINVAL), SCIMQ_EINVAL);
    CU_ASSERT_EQUAL(scimq__err_from_errno(-ECONNRESET), SCIMQ_ECONNRESET);
    CU_ASSERT_EQUAL(scimq__err_from_errno(EWOULDBLOCK), SCIMQ_EAGAIN);
    /* errno values without a SciMQ code, and 0, become EIO. */
    CU_ASSERT_EQUAL(scimq__err_from_errno(ENOTTY), SCIMQ_EIO);
    CU_ASSERT_EQUAL(scimq__err_from_errno(0), SCIMQ_EIO);
    CU_ASSERT_EQUAL(scimq__err_from_errno(SCIMQ_ERRNO_OFFSET + 1), SCIMQ_EIO);
}

static void
test_version(void)
{
    char buf[32];

    CU_ASSERT_EQUAL(scimq_version(), SCIMQ_VERSION_CURRENT);
    CU_ASSERT_EQUAL(scimq_version(),
                    SCIMQ_VERSION(SCIMQ_VERSION_MAJOR, SCIMQ_VERSION_MINOR));
    CU_ASSERT(SCIMQ_VERSION(0, 9) < SCIMQ_VERSION(1, 0));
    snprintf(buf, sizeof(buf), "%d.%d.%d", SCIMQ_VERSION_MAJOR,
             SCIMQ_VERSION_MINOR, SCIMQ_VERSION_PATCH);
    CU_ASSERT_STRING_EQUAL(scimq_version_string(), buf);
}

/* ======================================================================== */
/* Tunables                                                                  */
/* ======================================================================== */

static void
test_parse_size(void)
{
    static const struct {
        const char *text;
        int rc;
        uint64_t value;
    } cases[] = {
        {"0", 0, 0},
        {"4096", 0, 4096},
        {"4096B", 0, 4096},
        {"64KiB", 0, 64u << 10},
        {"64k", 0, 64u << 10},
        {"16MiB", 0, 16u << 20},
        {"16 MiB", 0, 16u << 20},
        {"16mib", 0, 16u << 20},
        {"1GiB", 0, 1ull << 30},
        {"5G", 0, 5ull << 30},
        {"2TB", 0, 2000000000000ull},
        {"3kB", 0, 3000},
        {"1TiB", 0, 1ull << 40},
        {"", SCIMQ_EINVAL, 0},
        {"MiB", SCIMQ_EINVAL, 0},
        {"-1", SCIMQ_EINVAL, 0},
        {"12XB", SCIMQ_EINVAL, 0},
        {"1.5GiB", SCIMQ_EINVAL, 0},
        {"20000000TiB", SCIMQ_ERANGE, 0},
        {"99999999999999999999999", SCIMQ_ERANGE, 0},
    };

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        uint64_t v = 12345;
        int rc = scimq__parse_size(cases[i].text, &v);

        CU_ASSERT_EQUAL(rc, cases[i].rc);
        /* CUnit's assertion macros are blocks: brace every branch. */
        if (rc == 0) {
            CU_ASSERT_EQUAL(v, cases[i].value);
        } else {
            CU_ASSERT_EQUAL(v, 12345); /* untouched on error */
        }
    }
    CU_ASSERT_EQUAL(scimq__parse_size(NULL, NULL), SCIMQ_EINVAL);
}

static void
test_param_defaults_and_env(void)
{
    unsetenv("SCIMQ_PROTO_MAX_PAYLOAD");
    unsetenv("SCIMQ_PROTO_MAX_BLOCKS");
    scimq__param_reset();
    CU_ASSERT_EQUAL(scimq__param_size(SCIMQ_PARAM_PROTO_MAX_PAYLOAD),
                    1ull << 30);
    CU_ASSERT_EQUAL(scimq__param_int(SCIMQ_PARAM_PROTO_MAX_BLOCKS), 256);
    CU_ASSERT_EQUAL(scimq__param_source(SCIMQ_PARAM_PROTO_MAX_BLOCKS),
                    SCIMQ_PARAM_SRC_DEFAULT);

    setenv("SCIMQ_PROTO_MAX_PAYLOAD", "32MiB", 1);
    setenv("SCIMQ_PROTO_MAX_BLOCKS", "not-a-number", 1);
    scimq__param_reset();
    CU_ASSERT_EQUAL(scimq__param_size(SCIMQ_PARAM_PROTO_MAX_PAYLOAD),
                    32u << 20);
    CU_ASSERT_EQUAL(scimq__param_source(SCIMQ_PARAM_PROTO_MAX_PAYLOAD),
                    SCIMQ_PARAM_SRC_ENV);
    /* A malformed environment value leaves the default in place. */
    CU_ASSERT_EQUAL(scimq__param_int(SCIMQ_PARAM_PROTO_MAX_BLOCKS), 256);
    CU_ASSERT_EQUAL(scimq__param_source(SCIMQ_PARAM_PROTO_MAX_BLOCKS),
                    SCIMQ_PARAM_SRC_DEFAULT);

    /* Files rank below the environment, explicit settings above it. */
    CU_ASSERT_EQUAL(scimq__param_set_from("proto_max_payload", "1MiB",
                                          SCIMQ_PARAM_SRC_FILE),
                    0);
    CU_ASSERT_EQUAL(scimq__param_size(SCIMQ_PARAM_PROTO_MAX_PAYLOAD),
                    32u << 20);
    CU_ASSERT_EQUAL(scimq__param_set("proto_max_payload", "2MiB"), 0);
    CU_ASSERT_EQUAL(scimq__param_size(SCIMQ_PARAM_PROTO_MAX_PAYLOAD), 2u << 20);
    CU_ASSERT_EQUAL(scimq__param_set("proto_max_payload", "lots"),
                    SCIMQ_EINVAL);
    CU_ASSERT_EQUAL(scimq__param_size(SCIMQ_PARAM_PROTO_MAX_PAYLOAD), 2u << 20);
    CU_ASSERT_EQUAL(scimq__param_set("no_such_param", "1"), SCIMQ_ENOENT);
    CU_ASSERT_EQUAL(scimq__param_set("proto_datasum", "yes"), 0);
    CU_ASSERT_TRUE(scimq__param_bool(SCIMQ_PARAM_PROTO_DATASUM));
    CU_ASSERT_EQUAL(scimq__param_set("proto_datasum", "maybe"), SCIMQ_EINVAL);

    unsetenv("SCIMQ_PROTO_MAX_PAYLOAD");
    unsetenv("SCIMQ_PROTO_MAX_BLOCKS");
    scimq__param_reset();
}

/* Writes text to a fresh temporary file; returns its path (static). */
static const char *
write_temp(const char *text)
{
    static char path[64];
    int fd;

    snprintf(path, sizeof(path), "/tmp/scimq-test-XXXXXX");
    fd = mkstemp(path);
    CU_ASSERT_FATAL(fd >= 0);
    CU_ASSERT_FATAL(write(fd, text, strlen(text)) == (ssize_t) strlen(text));
    close(fd);
    return path;
}

static void
test_param_config_file(void)
{
    scimq_proto_limits_t lim;
    const char *path;
    char err[256];

    scimq__param_reset();
    path = write_temp("# SciMQ settings\n"
                      "log_level = info\n"
                      "[proto]\n"
                      "max_payload = 64MiB\n"
                      "max_blocks = 16\n");
    CU_ASSERT_EQUAL(scimq__param_load_file(path, err, sizeof(err)), 0);
    unlink(path);
    CU_ASSERT_STRING_EQUAL(scimq__param_str(SCIMQ_PARAM_LOG_LEVEL), "info");
    CU_ASSERT_EQUAL(scimq__param_source(SCIMQ_PARAM_LOG_LEVEL),
                    SCIMQ_PARAM_SRC_FILE);
    scimq__param_proto_limits(&lim);
    CU_ASSERT_EQUAL(lim.max_payload_len, 64u << 20);
    CU_ASSERT_EQUAL(lim.max_blocks, 16);
    CU_ASSERT_EQUAL(lim.max_header_len, SCIMQ_PROTO_DEFAULT_MAX_HEADER_LEN);

    /* An unknown key names the file and the line. */
    path = write_temp("[proto]\nmax_payload = 1MiB\nmax_bananas = 3\n");
    CU_ASSERT_EQUAL(scimq__param_load_file(path, err, sizeof(err)),
                    SCIMQ_ECONFIG);
    CU_ASSERT_PTR_NOT_NULL(
        strstr(err, ":3: unknown setting 'proto_max_bananas'"));
    unlink(path);

    path = write_temp("[proto]\nmax_blocks = many\n");
    CU_ASSERT_EQUAL(scimq__param_load_file(path, err, sizeof(err)),
                    SCIMQ_ECONFIG);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, ":2: bad value for 'proto_max_blocks'"));
    unlink(path);

    CU_ASSERT_EQUAL(
        scimq__param_load_file("/nonexistent/scimq.ini", err, sizeof(err)),
        SCIMQ_ENOENT);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "cannot open"));
    scimq__param_reset();
}

static void
test_param_print(void)
{
    char *text = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&text, &len);

    CU_ASSERT_PTR_NOT_NULL_FATAL(out);
    scimq__param_print(out);
    fclose(out);
    CU_ASSERT_PTR_NOT_NULL(strstr(text, "proto_max_payload"));
    CU_ASSERT_PTR_NOT_NULL(strstr(text, "SCIMQ_PROTO_MAX_PAYLOAD"));
    CU_ASSERT_PTR_NOT_NULL(strstr(text, "SCIMQ_LOG_LEVEL"));
    free(text);
}

/* ======================================================================== */
/* Logging                                                                   */
/* ======================================================================== */

static void
log_reconfigure(const char *level, const char *subsys)
{
    if (level)
        setenv("SCIMQ_LOG_LEVEL", level, 1);
    else
        unsetenv("SCIMQ_LOG_LEVEL");
    if (subsys)
        setenv("SCIMQ_LOG_SUBSYS", subsys, 1);
    else
        unsetenv("SCIMQ_LOG_SUBSYS");
    scimq__param_reset();
    scimq__log_configure();
}

static void
test_log_levels(void)
{
    CU_ASSERT_EQUAL(scimq__log_level_parse("warn"), SCIMQ_LOG_WARN);
    CU_ASSERT_EQUAL(scimq__log_level_parse("WARNING"), SCIMQ_LOG_WARN);
    CU_ASSERT_EQUAL(scimq__log_level_parse("trace"), SCIMQ_LOG_TRACE);
    CU_ASSERT_EQUAL(scimq__log_level_parse("none"), SCIMQ_LOG_NONE);
    CU_ASSERT_EQUAL(scimq__log_level_parse("loud"), -1);

    log_reconfigure(NULL, NULL);
    CU_ASSERT_TRUE(scimq__log_enabled(SCIMQ_LOG_WARN, SCIMQ_SUBSYS_GATEWAY));
    CU_ASSERT_FALSE(scimq__log_enabled(SCIMQ_LOG_INFO, SCIMQ_SUBSYS_GATEWAY));

    log_reconfigure("error,gateway=debug,proto=info", NULL);
    CU_ASSERT_TRUE(scimq__log_enabled(SCIMQ_LOG_DEBUG, SCIMQ_SUBSYS_GATEWAY));
    CU_ASSERT_FALSE(scimq__log_enabled(SCIMQ_LOG_TRACE, SCIMQ_SUBSYS_GATEWAY));
    CU_ASSERT_TRUE(scimq__log_enabled(SCIMQ_LOG_INFO, SCIMQ_SUBSYS_PROTO));
    CU_ASSERT_FALSE(scimq__log_enabled(SCIMQ_LOG_WARN, SCIMQ_SUBSYS_CLIENT));
    CU_ASSERT_TRUE(scimq__log_enabled(SCIMQ_LOG_ERROR, SCIMQ_SUBSYS_CLIENT));

    /* The subsystem filter keeps the others at ERROR. */
    log_reconfigure("info", "gateway,mpi");
    CU_ASSERT_TRUE(scimq__log_enabled(SCIMQ_LOG_INFO, SCIMQ_SUBSYS_MPI));
    CU_ASSERT_FALSE(scimq__log_enabled(SCIMQ_LOG_WARN, SCIMQ_SUBSYS_PROTO));
    CU_ASSERT_TRUE(scimq__log_enabled(SCIMQ_LOG_ERROR, SCIMQ_SUBSYS_PROTO));
    log_reconfigure(NULL, NULL);
}

/* Reads a whole small file into a static buffer. */
static const char *
slurp(const char *path)
{
    static char buf[8192];
    FILE *fp = fopen(path, "r");
    size_t n;

    CU_ASSERT_PTR_NOT_NULL_FATAL(fp);
    n = fread(buf, 1, sizeof(buf) - 1, fp);
    buf[n] = '\0';
    fclose(fp);
    return buf;
}

static void
test_log_output(void)
{
    char path[] = "/tmp/scimq-log-XXXXXX";
    int fd = mkstemp(path), rc = 0;
    const char *text;

    CU_ASSERT_FATAL(fd >= 0);
    close(fd);
    log_reconfigure("info", NULL);
    CU_ASSERT_EQUAL_FATAL(scimq__log_open(path), 0);

    errno = ENOSPC;
    SCIMQ_LOG_WARN(GATEWAY, "queue %s is %d%% full", "piv.process", 93);
    CU_ASSERT_EQUAL(errno, ENOSPC); /* logging preserves errno */
    SCIMQ_LOG_INFO(PROTO, "decoded %u frames", 7u);
    SCIMQ_LOG(SCIMQ_LOG_DEBUG, CLIENT, "must not appear");
    for (int i = 0; i < 5; i++)
        SCIMQ_LOG_SPARSE(SCIMQ_LOG_WARN, NET, 60000, "slow peer %d", i);
    SCIMQ_CHECK_GOTO(QUEUE, 1 == 1, jumped, rc, SCIMQ_ENOSPC, "spill full");
    CU_FAIL("SCIMQ_CHECK_GOTO did not jump");
jumped:
    CU_ASSERT_EQUAL(rc, SCIMQ_ENOSPC);
    CU_ASSERT_EQUAL(scimq__log_open(NULL), 0);

    text = slurp(path);
    CU_ASSERT_PTR_NOT_NULL(strstr(text, " WARN gateway: queue piv.process is "
                                        "93% full\n"));
    CU_ASSERT_PTR_NOT_NULL(strstr(text, " INFO proto: decoded 7 frames\n"));
    CU_ASSERT_PTR_NULL(strstr(text, "must not appear"));
    /* Rate limited: one line out of five. */
    CU_ASSERT_PTR_NOT_NULL(strstr(text, "slow peer 0"));
    CU_ASSERT_PTR_NULL(strstr(text, "slow peer 1"));
    CU_ASSERT_PTR_NOT_NULL(strstr(text, " ERROR queue: spill full\n"));
    unlink(path);
    log_reconfigure(NULL, NULL);
}

static void
test_log_long_line(void)
{
    char path[] = "/tmp/scimq-log-XXXXXX";
    int fd = mkstemp(path);
    char big[3000];
    const char *text;

    CU_ASSERT_FATAL(fd >= 0);
    close(fd);
    memset(big, 'x', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';
    log_reconfigure("info", NULL);
    CU_ASSERT_EQUAL_FATAL(scimq__log_open(path), 0);
    SCIMQ_LOG_INFO(CORE, "%s", big);
    CU_ASSERT_EQUAL(scimq__log_open(NULL), 0);
    text = slurp(path);
    /* Cut to one line that ends in "...\n". */
    CU_ASSERT(strlen(text) <= 1024);
    CU_ASSERT_PTR_NOT_NULL(strstr(text, "xxx...\n"));
    unlink(path);
    log_reconfigure(NULL, NULL);
}

/* ======================================================================== */
/* Synthetic payloads                                                        */
/* ======================================================================== */

static void
test_synth_roundtrip(void)
{
    static const size_t sizes[] = {32, 33, 39, 40, 1000, 65536, 1u << 20};

    for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
        uint8_t *buf = malloc(sizes[i]);
        uint64_t seq = 0;

        CU_ASSERT_PTR_NOT_NULL_FATAL(buf);
        CU_ASSERT_EQUAL(scimq__synth_fill(buf, sizes[i], 1000 + i), 0);
        CU_ASSERT_EQUAL(scimq__synth_verify(buf, sizes[i], &seq), 0);
        CU_ASSERT_EQUAL(seq, 1000 + i);
        free(buf);
    }
}

static void
test_synth_detects_damage(void)
{
    uint8_t buf[4096], copy[4096];
    uint64_t seq;

    CU_ASSERT_EQUAL(scimq__synth_fill(buf, sizeof(buf), 7), 0);
    /* Any flipped bit anywhere is caught. */
    for (size_t at = 0; at < sizeof(buf); at += 97) {
        memcpy(copy, buf, sizeof(buf));
        copy[at] ^= 0x10;
        int rc = scimq__synth_verify(copy, sizeof(copy), &seq);

        if (at < 8) {
            CU_ASSERT_EQUAL(rc, SCIMQ_EINVAL); /* not synthetic at all */
        } else {
            CU_ASSERT_EQUAL(rc, SCIMQ_EPROTO_DATASUM);
        }
    }
    /* Cut short or padded. */
    CU_ASSERT_EQUAL(scimq__synth_verify(buf, sizeof(buf) - 1, &seq),
                    SCIMQ_EPROTO_DATASUM);
    CU_ASSERT_EQUAL(scimq__synth_verify(buf, 31, &seq), SCIMQ_EINVAL);
    CU_ASSERT_EQUAL(scimq__synth_fill(buf, 31, 1), SCIMQ_EINVAL);
    /* Different sequence numbers give different contents. */
    CU_ASSERT_EQUAL(scimq__synth_fill(copy, sizeof(copy), 8), 0);
    CU_ASSERT(memcmp(buf + 32, copy + 32, sizeof(buf) - 32) != 0);
}

/*
 * The format is fixed (doc/scimp.md, "Synthetic payloads"; the Python
 * binding and older receivers rely on it): the body is splitmix64's words
 * in turn, big-endian, from seq ^ 0x5343494D51.  The filler computes them
 * another way (independent words, eight at a time where the CPU can), so
 * it is checked byte for byte against this direct reading of the format,
 * at lengths that end inside a vector, a word and a chunk, and against the
 * CRC32C of whole payloads made by the original filler.
 */
static void
test_synth_format_fixed(void)
{
    static const struct {
        size_t len;
        uint64_t seq;
        uint32_t crc; /* of the whole payload */
    } golden[] = {{32, 12345, 0x60bda371},     {33, 12346, 0xf911c907},
                  {39, 12347, 0xd0ca50a7},     {40, 12348, 0x258331a3},
                  {101, 12349, 0x72391995},    {1029, 12350, 0x60b8eda2},
                  {65536, 12351, 0x03613b4b},  {100003, 12352, 0xd71f6e6b},
                  {1048589, 12353, 0x06a18370}};

    for (size_t i = 0; i < sizeof(golden) / sizeof(golden[0]); i++) {
        size_t len = golden[i].len;
        uint8_t *buf = malloc(len), *ref = malloc(len + 8);
        uint64_t state = golden[i].seq ^ 0x5343494D51ull;

        CU_ASSERT_PTR_NOT_NULL_FATAL(buf);
        CU_ASSERT_PTR_NOT_NULL_FATAL(ref);
        CU_ASSERT_EQUAL(scimq__synth_fill(buf, len, golden[i].seq), 0);
        for (size_t at = 32; at < len; at += 8) {
            uint64_t z = (state += 0x9E3779B97F4A7C15ull);

            z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
            z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
            z ^= z >> 31;
            for (int b = 0; b < 8; b++)
                ref[at + (size_t) b] = (uint8_t) (z >> (56 - 8 * b));
        }
        CU_ASSERT(memcmp(buf + 32, ref + 32, len - 32) == 0);
        CU_ASSERT_EQUAL(scimq_proto_crc32c(0, buf, len), golden[i].crc);
        free(buf);
        free(ref);
    }
}

static const struct scimq_cunit_test error_tests[] = {
    {"error table is complete and unique", test_error_table, 1},
    {"errno translation", test_error_from_errno, 1},
    {"version macros and run time", test_version, 1},
    {NULL, NULL, 0}};

static const struct scimq_cunit_test param_tests[] = {
    {"size parsing", test_parse_size, 1},
    {"defaults, environment and precedence", test_param_defaults_and_env, 1},
    {"INI config file", test_param_config_file, 1},
    {"--list-params output", test_param_print, 1},
    {NULL, NULL, 0}};

static const struct scimq_cunit_test log_tests[] = {
    {"levels and subsystem filter", test_log_levels, 1},
    {"output format, errno, rate limit, check macro", test_log_output, 1},
    {"long lines are cut", test_log_long_line, 1},
    {NULL, NULL, 0}};

static const struct scimq_cunit_test synth_tests[] = {
    {"fill and verify", test_synth_roundtrip, 1},
    {"damage is detected", test_synth_detects_damage, 1},
    {"the format is fixed", test_synth_format_fixed, 1},
    {NULL, NULL, 0}};

static const struct scimq_cunit_suite suites[] = {
    {"error", NULL, NULL, error_tests},
    {"param", NULL, NULL, param_tests},
    {"log", NULL, NULL, log_tests},
    {"synth", NULL, NULL, synth_tests},
    {NULL, NULL, NULL, NULL}};

SCIMQ_CUNIT_MAIN(suites)
