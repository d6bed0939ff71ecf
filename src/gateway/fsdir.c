/* SPDX-License-Identifier: BSD-3-Clause */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <scimq/error.h>

#include "common/error_internal.h"
#include "common/log.h"
#include "fsdir.h"

int
gw_dir_ready(const char *dir, const char *what)
{
    if (mkdir(dir, 0700) != 0 && errno != EEXIST) {
        int rc = scimq__err_from_errno(errno);

        SCIMQ_LOG_ERROR(GATEWAY, "cannot create %s directory %s: %s", what, dir,
                        strerror(errno));
        return rc;
    }
    if (access(dir, W_OK | X_OK) != 0) {
        SCIMQ_LOG_ERROR(GATEWAY, "%s directory %s is not writable: %s", what,
                        dir, strerror(errno));
        return SCIMQ_EACCES;
    }
    return 0;
}

int
gw_fsync_dir(const char *dir)
{
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC), rc = 0;

    if (fd < 0)
        return scimq__err_from_errno(errno);
    if (fsync(fd) != 0)
        rc = scimq__err_from_errno(errno);
    close(fd);
    return rc;
}
