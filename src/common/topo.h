/* SPDX-License-Identifier: BSD-3-Clause */
/* Machine topology (hwloc): core counts and thread pinning. */
#ifndef SCIMQ_COMMON_TOPO_H
#define SCIMQ_COMMON_TOPO_H

/* Cores in the process's allowed cpuset (at least 1). */
int scimq__topo_ncores(void);

/*
 * Binds the calling thread to core (index mod cores) of the allowed
 * cpuset, spreading count threads one per core.  A failure is a one-time
 * warning, never an error: an unpinned thread still works.
 */
void scimq__topo_bind_thread(int index, int count);

#endif /* SCIMQ_COMMON_TOPO_H */
