/* SPDX-License-Identifier: BSD-3-Clause */
/* Machine topology (hwloc): core counts and thread pinning. */
#ifndef SCIMQ_COMMON_TOPO_H
#define SCIMQ_COMMON_TOPO_H

#include <stddef.h>

/* Cores in the process's allowed cpuset (at least 1). */
int scimq__topo_ncores(void);

/*
 * Binds the calling thread to core (index mod cores) of the allowed
 * cpuset, spreading count threads one per core.  A failure is a one-time
 * warning, never an error: an unpinned thread still works.
 */
void scimq__topo_bind_thread(int index, int count);

/*
 * Binds the calling thread near the first network interface (the cores of
 * the NUMA node or package it hangs off); without one, to the last core.
 * Returns the OS index of one core bound to, or -1 (a warning, once).
 */
int scimq__topo_bind_near_nic(void);

/* Binds the memory of [addr, addr+len) to the NUMA node nearest the first
 * network interface (no-op on one NUMA node or without hwloc support). */
void scimq__topo_membind_near_nic(void *addr, size_t len);

#endif /* SCIMQ_COMMON_TOPO_H */
