/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The administration socket's file: a Unix-domain socket whose file
 * permissions decide who may administer the gateway (delete, bind,
 * unbind, move).  The kernel checks them at connect(2): only who may write
 * the socket file, and search its directory, can connect.  These helpers
 * make the path safe to bind and give the bound socket its permissions;
 * the listening itself is the worker's (worker.c).
 */
#ifndef SCIMQ_GATEWAY_ADMINSOCK_H
#define SCIMQ_GATEWAY_ADMINSOCK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/*
 * Picks the path: setting "off" gives "" (no admin socket), "" the default
 * for port (scimq__admin_socket_default), anything else itself.  *is_default
 * tells which.  Returns 0 or SCIMQ_EINVAL (too long for sun_path).
 */
int gw_adminsock_path(const char *setting, uint16_t port, char *buf, size_t len,
                      bool *is_default);

/*
 * Makes path ready to bind: the default directory is created mode 700, and
 * refused unless it is a directory of this user that nobody else may
 * enter or write; a socket left by a gateway that died is removed, one a
 * live gateway answers on is not (SCIMQ_EBUSY), nor anything that is not a
 * socket (SCIMQ_EEXIST).  err gets a sentence on failure.
 */
int gw_adminsock_prepare(const char *path, bool is_default, char *err,
                         size_t errlen);

/*
 * Gives the bound socket its permissions: mode 600 (the gateway's user;
 * root passes any check anyway), or 660 and the group when group is not
 * empty.  0 or a SCIMQ_E* code, err set.
 */
int gw_adminsock_secure(const char *path, const char *group, char *err,
                        size_t errlen);

#endif /* SCIMQ_GATEWAY_ADMINSOCK_H */
