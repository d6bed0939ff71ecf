/* SPDX-License-Identifier: BSD-3-Clause */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "common/log.h"

void *
gw_xcalloc(size_t n, size_t size)
{
    void *p = calloc(n, size);

    if (p == NULL) {
        SCIMQ_LOG_ERROR(GATEWAY, "out of memory for broker bookkeeping");
        abort();
    }
    return p;
}

void *
gw_xrealloc(void *p, size_t size)
{
    void *q = realloc(p, size);

    if (q == NULL) {
        SCIMQ_LOG_ERROR(GATEWAY, "out of memory for broker bookkeeping");
        abort();
    }
    return q;
}

char *
gw_xstrndup(const char *s, size_t n)
{
    char *p = gw_xcalloc(1, n + 1);

    memcpy(p, s, n);
    return p;
}

char *
gw_xstrdup(const char *s)
{
    return gw_xstrndup(s, strlen(s));
}
