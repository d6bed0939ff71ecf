/* SPDX-License-Identifier: BSD-3-Clause */
#include "config.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

#include <hwloc.h>

#include "log.h"
#include "topo.h"

static hwloc_topology_t topo;
static bool topo_ok;
static pthread_once_t topo_once = PTHREAD_ONCE_INIT;

static void
topo_load(void)
{
    if (hwloc_topology_init(&topo) != 0)
        return;
    if (hwloc_topology_load(topo) != 0) {
        hwloc_topology_destroy(topo);
        return;
    }
    topo_ok = true;
}

int
scimq__topo_ncores(void)
{
    int n;

    pthread_once(&topo_once, topo_load);
    if (!topo_ok)
        return 1;
    n = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_CORE);
    return n > 0 ? n : 1;
}

void
scimq__topo_bind_thread(int index, int count)
{
    static atomic_bool warned;
    hwloc_obj_t core;
    hwloc_cpuset_t set;
    int n = scimq__topo_ncores();

    (void) count;
    if (!topo_ok)
        goto fail;
    core = hwloc_get_obj_by_type(topo, HWLOC_OBJ_CORE, (unsigned) (index % n));
    if (core == NULL || core->cpuset == NULL)
        goto fail;
    set = hwloc_bitmap_dup(core->cpuset);
    if (set == NULL)
        goto fail;
    /* One PU of the core is enough; keeps the thread off SMT siblings. */
    hwloc_bitmap_singlify(set);
    if (hwloc_set_cpubind(topo, set, HWLOC_CPUBIND_THREAD) != 0) {
        hwloc_bitmap_free(set);
        goto fail;
    }
    hwloc_bitmap_free(set);
    return;
fail:
    if (!atomic_exchange(&warned, true))
        SCIMQ_LOG_WARN(TOPO, "cannot bind threads to cores; running unbound");
}
