/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Allocations of the broker's bookkeeping records.  The daemon exits when
 * one fails (STYLE D2: only the daemon may); payload memory fails softly
 * through the pool instead, so a PUT is refused or waits.
 */
#ifndef SCIMQ_GATEWAY_ALLOC_H
#define SCIMQ_GATEWAY_ALLOC_H

#include <stddef.h>

void *gw_xcalloc(size_t n, size_t size);
void *gw_xrealloc(void *p, size_t size);
char *gw_xstrndup(const char *s, size_t n);
char *gw_xstrdup(const char *s);

#endif /* SCIMQ_GATEWAY_ALLOC_H */
