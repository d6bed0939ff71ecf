/* SPDX-License-Identifier: BSD-3-Clause */
/** \file export.h Symbol visibility and function attributes. */
#ifndef SCIMQ_EXPORT_H
#define SCIMQ_EXPORT_H

/* The libraries are built with -fvisibility=hidden; only functions marked
 * SCIMQ_EXPORT (and listed in the version script) are visible. */
#if defined(__GNUC__)
#define SCIMQ_EXPORT __attribute__((visibility("default")))
#define SCIMQ_WARN_UNUSED_RESULT __attribute__((warn_unused_result))
#define SCIMQ_PRINTF(fmt, args) __attribute__((format(printf, fmt, args)))
#else
#define SCIMQ_EXPORT
#define SCIMQ_WARN_UNUSED_RESULT
#define SCIMQ_PRINTF(fmt, args)
#endif

#endif /* SCIMQ_EXPORT_H */
