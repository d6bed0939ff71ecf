/* SPDX-License-Identifier: BSD-3-Clause */
#ifndef SCIMQ_GATEWAY_FSDIR_H
#define SCIMQ_GATEWAY_FSDIR_H

/*
 * A directory of the gateway's own (what: "spill", "journal"): created
 * (mode 0700) when missing, and it must be writable.  Logs the reason and
 * returns a SCIMQ_E* code when it cannot be used; 0 otherwise.
 */
int gw_dir_ready(const char *dir, const char *what);

/* Syncs directory dir (the names created, renamed or deleted in it).
 * 0 or a SCIMQ_E* code. */
int gw_fsync_dir(const char *dir);

#endif /* SCIMQ_GATEWAY_FSDIR_H */
