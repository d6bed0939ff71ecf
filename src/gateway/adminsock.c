/* SPDX-License-Identifier: BSD-3-Clause */
#include "config.h"

#include <errno.h>
#include <grp.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <scimq/error.h>

#include "adminsock.h"
#include "common/error_internal.h"
#include "common/net.h"

int
gw_adminsock_path(const char *setting, uint16_t port, char *buf, size_t len,
                  bool *is_default)
{
    *is_default = false;
    if (strcmp(setting, "off") == 0) {
        buf[0] = '\0';
        return 0;
    }
    if (setting[0] == '\0') {
        *is_default = true;
        return scimq__admin_socket_default(port, buf, len);
    }
    if (strlen(setting) >= len || strlen(setting) >= SCIMQ_UNIX_PATH_MAX)
        return SCIMQ_EINVAL;
    memcpy(buf, setting, strlen(setting) + 1);
    return 0;
}

/* The default directory: this user's alone, or an attacker who made it
 * first could replace the socket with one of their own. */
static int
dir_check(char *err, size_t errlen)
{
    char dir[64];
    struct stat st;

    if (scimq__admin_socket_dir(dir, sizeof(dir)) != 0)
        return SCIMQ_EINVAL;
    if (mkdir(dir, 0700) != 0 && errno != EEXIST) {
        snprintf(err, errlen, "cannot create %s: %s", dir, strerror(errno));
        return scimq__err_from_errno(errno);
    }
    if (lstat(dir, &st) != 0) {
        snprintf(err, errlen, "%s: %s", dir, strerror(errno));
        return scimq__err_from_errno(errno);
    }
    if (!S_ISDIR(st.st_mode) || st.st_uid != geteuid() ||
        (st.st_mode & 077) != 0) {
        snprintf(err, errlen,
                 "%s is not a directory of this user only (mode 700): "
                 "refused (remove it, or set gateway_admin_socket)",
                 dir);
        return SCIMQ_EACCES;
    }
    return 0;
}

/* Whether a gateway answers on the socket at path. */
static bool
socket_live(const char *path)
{
    struct sockaddr_un sun = {.sun_family = AF_UNIX};
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    bool live;

    if (fd < 0)
        return false;
    memcpy(sun.sun_path, path, strlen(path) + 1);
    /* A local connect completes or fails at once (ECONNREFUSED: nobody
     * listens, the file is a leftover). */
    live = connect(fd, (struct sockaddr *) &sun, sizeof(sun)) == 0;
    close(fd);
    return live;
}

int
gw_adminsock_prepare(const char *path, bool is_default, char *err,
                     size_t errlen)
{
    struct stat st;
    int rc;

    if (is_default) {
        rc = dir_check(err, errlen);
        if (rc != 0)
            return rc;
    }
    if (lstat(path, &st) != 0) {
        if (errno == ENOENT)
            return 0;
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        return scimq__err_from_errno(errno);
    }
    if (!S_ISSOCK(st.st_mode)) {
        snprintf(err, errlen, "%s exists and is not a socket", path);
        return SCIMQ_EEXIST;
    }
    if (socket_live(path)) {
        snprintf(err, errlen, "%s: another gateway is using it", path);
        return SCIMQ_EBUSY;
    }
    if (unlink(path) != 0) {
        snprintf(err, errlen, "cannot remove the stale %s: %s", path,
                 strerror(errno));
        return scimq__err_from_errno(errno);
    }
    return 0;
}

int
gw_adminsock_secure(const char *path, const char *group, char *err,
                    size_t errlen)
{
    mode_t mode = 0600;

    if (group[0] != '\0') {
        struct group *g = getgrnam(group);

        if (g == NULL) {
            snprintf(err, errlen, "gateway_admin_group: no group '%s'", group);
            return SCIMQ_ENOENT;
        }
        if (chown(path, (uid_t) -1, g->gr_gid) != 0) {
            snprintf(err, errlen, "cannot give %s to group %s: %s", path, group,
                     strerror(errno));
            return scimq__err_from_errno(errno);
        }
        mode = 0660;
    }
    /* bind(2) made it with the umask (0755 at most: others may not write,
     * so may not connect, even in between). */
    if (chmod(path, mode) != 0) {
        snprintf(err, errlen, "cannot chmod %s: %s", path, strerror(errno));
        return scimq__err_from_errno(errno);
    }
    return 0;
}
