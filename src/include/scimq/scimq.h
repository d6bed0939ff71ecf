/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * \file scimq.h
 * Umbrella header of the SciMQ public API.
 *
 * Conventions of every scimq_ function (see doc/conventions.md):
 * - The return value is the status: 0 (or a documented non-negative count)
 *   on success, a negative SCIMQ_E* code on failure.  Results go through
 *   trailing out-parameters whose names end in _p.
 * - Lifecycle pairs: _init/_fini when the caller owns the object's memory,
 *   _create/_destroy when the library allocates it, _open/_close for
 *   objects that hold a file descriptor or a connection.
 * - Unless a function says otherwise, a buffer passed in is borrowed for
 *   the duration of the call and a buffer returned belongs to the caller.
 */
#ifndef SCIMQ_SCIMQ_H
#define SCIMQ_SCIMQ_H

#include <scimq/export.h>
#include <scimq/version.h>
#include <scimq/error.h>
#include <scimq/proto.h>
#include <scimq/client.h>

#ifdef __cplusplus
extern "C" {
#endif

/**
 * The version of the library loaded at run time.
 *
 * \return SCIMQ_VERSION(major, minor) of the library; compare with
 *         SCIMQ_VERSION_CURRENT to detect a header/library mismatch.
 */
SCIMQ_EXPORT unsigned int scimq_version(void);

/** The full version string of the library loaded at run time ("0.1.0"). */
SCIMQ_EXPORT const char *scimq_version_string(void);

#ifdef __cplusplus
}
#endif

#endif /* SCIMQ_SCIMQ_H */
