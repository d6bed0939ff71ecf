/* SPDX-License-Identifier: BSD-3-Clause */
/* The tunables table: defaults, config file (libinih), environment. */
#include "config.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <ini.h>

#include <scimq/error.h>
#include <scimq/proto.h>

#include "param.h"

struct param_def {
    const char *name;
    const char *env;
    enum scimq_param_type type;
    const char *def;
    const char *help;
};

struct param_val {
    enum scimq_param_source src;
    union {
        int64_t i;
        uint64_t u;
        bool b;
    } v;
    char *str; /* the text as given (all types), for printing */
};

static const struct param_def defs[SCIMQ_PARAM_COUNT] = {
#define PARAM_DEF(id, name, type, def, help)                                   \
    [SCIMQ_PARAM_##id] = {name, "SCIMQ_" #id, SCIMQ_PARAM_T_##type, def, help},
    SCIMQ_PARAM_MAP(PARAM_DEF)
#undef PARAM_DEF
};

static struct param_val vals[SCIMQ_PARAM_COUNT];
static pthread_once_t init_once = PTHREAD_ONCE_INIT;

static const char *const type_names[] = {
    [SCIMQ_PARAM_T_INT] = "int",
    [SCIMQ_PARAM_T_SIZE] = "size",
    [SCIMQ_PARAM_T_BOOL] = "bool",
    [SCIMQ_PARAM_T_STR] = "string",
};

static const char *const source_names[] = {
    [SCIMQ_PARAM_SRC_DEFAULT] = "default",
    [SCIMQ_PARAM_SRC_FILE] = "file",
    [SCIMQ_PARAM_SRC_ENV] = "env",
    [SCIMQ_PARAM_SRC_SET] = "set",
};

/* ------------------------------------------------------------------------ */
/* Parsing                                                                   */
/* ------------------------------------------------------------------------ */

int
scimq__parse_size(const char *s, uint64_t *v_p)
{
    static const struct {
        const char *unit;
        uint64_t mult;
    } units[] = {
        {"", 1},
        {"b", 1},
        {"k", 1ull << 10},
        {"kib", 1ull << 10},
        {"kb", 1000ull},
        {"m", 1ull << 20},
        {"mib", 1ull << 20},
        {"mb", 1000000ull},
        {"g", 1ull << 30},
        {"gib", 1ull << 30},
        {"gb", 1000000000ull},
        {"t", 1ull << 40},
        {"tib", 1ull << 40},
        {"tb", 1000000000000ull},
    };
    unsigned long long n;
    char *end;

    if (s == NULL || !isdigit((unsigned char) *s))
        return SCIMQ_EINVAL;
    errno = 0;
    n = strtoull(s, &end, 10);
    if (errno == ERANGE)
        return SCIMQ_ERANGE;
    while (*end == ' ')
        end++;
    for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
        if (strcasecmp(end, units[i].unit) != 0)
            continue;
        if (n > UINT64_MAX / units[i].mult)
            return SCIMQ_ERANGE;
        *v_p = (uint64_t) n * units[i].mult;
        return 0;
    }
    return SCIMQ_EINVAL;
}

static int
parse_bool(const char *s, bool *b_p)
{
    static const char *const yes[] = {"1", "true", "yes", "on"};
    static const char *const no[] = {"0", "false", "no", "off"};

    for (size_t i = 0; i < 4; i++) {
        if (strcasecmp(s, yes[i]) == 0) {
            *b_p = true;
            return 0;
        }
        if (strcasecmp(s, no[i]) == 0) {
            *b_p = false;
            return 0;
        }
    }
    return SCIMQ_EINVAL;
}

static int
parse_int(const char *s, int64_t *i_p)
{
    long long n;
    char *end;

    errno = 0;
    n = strtoll(s, &end, 0);
    if (end == s || *end != '\0')
        return SCIMQ_EINVAL;
    if (errno == ERANGE)
        return SCIMQ_ERANGE;
    *i_p = n;
    return 0;
}

/* Parses text for param id and stores it; the table is unchanged on error. */
static int
param_store(enum scimq_param_id id, const char *text,
            enum scimq_param_source src)
{
    struct param_val nv = {.src = src};
    int rc = 0;

    switch (defs[id].type) {
    case SCIMQ_PARAM_T_INT:
        rc = parse_int(text, &nv.v.i);
        break;
    case SCIMQ_PARAM_T_SIZE:
        rc = scimq__parse_size(text, &nv.v.u);
        break;
    case SCIMQ_PARAM_T_BOOL:
        rc = parse_bool(text, &nv.v.b);
        break;
    case SCIMQ_PARAM_T_STR:
        break;
    }
    if (rc != 0)
        return rc;
    nv.str = strdup(text);
    if (nv.str == NULL)
        return SCIMQ_ENOMEM;
    free(vals[id].str);
    vals[id] = nv;
    return 0;
}

/* ------------------------------------------------------------------------ */
/* Table                                                                     */
/* ------------------------------------------------------------------------ */

static void
params_load_defaults_and_env(void)
{
    for (int id = 0; id < SCIMQ_PARAM_COUNT; id++) {
        const char *env = getenv(defs[id].env);

        /* Defaults are literals from the table and always parse. */
        if (param_store(id, defs[id].def, SCIMQ_PARAM_SRC_DEFAULT) != 0)
            abort(); /* BUG: a default in SCIMQ_PARAM_MAP does not parse */
        /*
         * A malformed environment value keeps the default; the error is
         * visible in --list-params (source stays "default") and tools
         * validate their own inputs with scimq__param_set().
         */
        if (env != NULL)
            (void) param_store(id, env, SCIMQ_PARAM_SRC_ENV);
    }
}

static void
params_init(void)
{
    (void) pthread_once(&init_once, params_load_defaults_and_env);
}

void
scimq__param_reset(void)
{
    params_init();
    params_load_defaults_and_env();
}

static int
param_lookup(const char *name)
{
    for (int id = 0; id < SCIMQ_PARAM_COUNT; id++)
        if (strcmp(defs[id].name, name) == 0)
            return id;
    return -1;
}

int
scimq__param_set_from(const char *name, const char *value,
                      enum scimq_param_source src)
{
    int id;

    params_init();
    if (name == NULL || value == NULL)
        return SCIMQ_EINVAL;
    id = param_lookup(name);
    if (id < 0)
        return SCIMQ_ENOENT;
    if (vals[id].src > src)
        return 0; /* a stronger source already set it */
    return param_store(id, value, src);
}

int64_t
scimq__param_int(enum scimq_param_id id)
{
    params_init();
    return vals[id].v.i;
}

uint8_t
scimq__param_proto_version_max(void)
{
    int64_t v = scimq__param_int(SCIMQ_PARAM_PROTO_MAX_VERSION);

    if (v < SCIMQ_PROTO_SESSION_VERSION_MIN)
        v = SCIMQ_PROTO_SESSION_VERSION_MIN;
    if (v > SCIMQ_PROTO_SESSION_VERSION_MAX)
        v = SCIMQ_PROTO_SESSION_VERSION_MAX;
    return (uint8_t) v;
}

uint64_t
scimq__param_size(enum scimq_param_id id)
{
    params_init();
    return vals[id].v.u;
}

int
scimq__param_bool(enum scimq_param_id id)
{
    params_init();
    return vals[id].v.b;
}

const char *
scimq__param_str(enum scimq_param_id id)
{
    params_init();
    return vals[id].str;
}

enum scimq_param_source
scimq__param_source(enum scimq_param_id id)
{
    params_init();
    return vals[id].src;
}

void
scimq__param_proto_limits(struct scimq_proto_limits *lim)
{
    uint64_t hdr = scimq__param_size(SCIMQ_PARAM_PROTO_MAX_HEADER);
    int64_t blocks = scimq__param_int(SCIMQ_PARAM_PROTO_MAX_BLOCKS);
    int64_t name = scimq__param_int(SCIMQ_PARAM_PROTO_MAX_NAME);

    scimq_proto_limits_default(lim);
    /* Out-of-range values fall back to the ceilings of the wire format. */
    lim->max_header_len = hdr < SCIMQ_PROTO_FIXED_LEN ? SCIMQ_PROTO_FIXED_LEN
                          : hdr > SCIMQ_PROTO_MAX_HEADER_CAP
                              ? SCIMQ_PROTO_MAX_HEADER_CAP
                              : (uint32_t) hdr;
    lim->max_blocks = blocks < 0            ? 0
                      : blocks > UINT32_MAX ? UINT32_MAX
                                            : (uint32_t) blocks;
    lim->max_name_len = name < 0            ? 0
                        : name > UINT32_MAX ? UINT32_MAX
                                            : (uint32_t) name;
    lim->max_payload_len = scimq__param_size(SCIMQ_PARAM_PROTO_MAX_PAYLOAD);
}

/* ------------------------------------------------------------------------ */
/* Config file                                                               */
/* ------------------------------------------------------------------------ */

struct ini_ctx {
    char *err;
    size_t errlen;
};

/* inih calls this per key; returning 0 makes ini_parse() report the line. */
static int
param_ini_handler(void *user, const char *section, const char *name,
                  const char *value)
{
    struct ini_ctx *ctx = user;
    char key[128];
    int rc;

    if (section[0] == '\0' || strcmp(section, "scimq") == 0)
        rc = snprintf(key, sizeof(key), "%s", name);
    else
        rc = snprintf(key, sizeof(key), "%s_%s", section, name);
    if (rc < 0 || (size_t) rc >= sizeof(key))
        rc = SCIMQ_ENOENT;
    else
        rc = scimq__param_set_from(key, value, SCIMQ_PARAM_SRC_FILE);
    if (rc != 0 && ctx->err != NULL && ctx->err[0] == '\0')
        snprintf(ctx->err, ctx->errlen, "%s '%s'%s%s",
                 rc == SCIMQ_ENOENT ? "unknown setting" : "bad value for", key,
                 rc == SCIMQ_ENOENT ? " (see --list-params)" : ": ",
                 rc == SCIMQ_ENOENT ? "" : value);
    return rc == 0;
}

int
scimq__param_load_file(const char *path, char *err, size_t errlen)
{
    char why[256] = "";
    struct ini_ctx ctx = {why, sizeof(why)};
    int line;

    params_init();
    line = ini_parse(path, param_ini_handler, &ctx);
    if (line == -1) {
        if (err != NULL && errlen > 0)
            snprintf(err, errlen, "%s: cannot open: %s", path, strerror(errno));
        return SCIMQ_ENOENT;
    }
    if (line < 0)
        return SCIMQ_ENOMEM;
    if (line != 0) {
        if (err != NULL && errlen > 0)
            snprintf(err, errlen, "%s:%d: %s", path, line,
                     why[0] ? why : "syntax error");
        return SCIMQ_ECONFIG;
    }
    return 0;
}

void
scimq__param_print(FILE *out)
{
    params_init();
    fprintf(out, "%-20s %-26s %-7s %-10s %-8s %s\n", "NAME", "ENVIRONMENT",
            "TYPE", "VALUE", "SOURCE", "DESCRIPTION");
    for (int id = 0; id < SCIMQ_PARAM_COUNT; id++)
        fprintf(out, "%-20s %-26s %-7s %-10s %-8s %s (default: %s)\n",
                defs[id].name, defs[id].env, type_names[defs[id].type],
                vals[id].str[0] ? vals[id].str : "\"\"",
                source_names[vals[id].src], defs[id].help,
                defs[id].def[0] ? defs[id].def : "\"\"");
}
