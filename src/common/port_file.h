/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Port files: where a server started on port 0 tells scripts the address
 * it listens on (the gateway's data port, its HTTP port).
 */
#ifndef SCIMQ_COMMON_PORT_FILE_H
#define SCIMQ_COMMON_PORT_FILE_H

#include <stdint.h>

/*
 * Writes "HOST:PORT\n" ("[HOST]:PORT" for IPv6) to path atomically: a
 * temporary file renamed over it, so a reader polling for the file never
 * sees half a line.  A wildcard host (empty, 0.0.0.0, ::) is written as
 * this machine's host name, which other nodes can reach.  Returns 0 or a
 * SCIMQ_E* code.
 */
int scimq__port_file_write(const char *path, const char *host, uint16_t port);

#endif
