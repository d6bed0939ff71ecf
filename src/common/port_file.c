/* SPDX-License-Identifier: BSD-3-Clause */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <scimq/error.h>

#include "error_internal.h"
#include "port_file.h"

int
scimq__port_file_write(const char *path, const char *host, uint16_t port)
{
    char tmp[4096], name[256];
    FILE *fp;
    int rc;

    if (host[0] == '\0' || strcmp(host, "0.0.0.0") == 0 ||
        strcmp(host, "::") == 0) {
        if (gethostname(name, sizeof(name)) != 0)
            snprintf(name, sizeof(name), "localhost");
        name[sizeof(name) - 1] = '\0';
        host = name;
    }
    if (snprintf(tmp, sizeof(tmp), "%s.tmp.%ld", path, (long) getpid()) >=
        (int) sizeof(tmp))
        return SCIMQ_EINVAL;
    fp = fopen(tmp, "w");
    if (fp == NULL)
        return scimq__err_from_errno(errno);
    fprintf(fp, strchr(host, ':') ? "[%s]:%u\n" : "%s:%u\n", host, port);
    if (fclose(fp) != 0 || rename(tmp, path) != 0) {
        rc = scimq__err_from_errno(errno);
        unlink(tmp);
        return rc;
    }
    return 0;
}
