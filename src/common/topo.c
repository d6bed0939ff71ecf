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
    /* Network interfaces tell where the agent and its buffers belong. */
    hwloc_topology_set_io_types_filter(topo, HWLOC_TYPE_FILTER_KEEP_IMPORTANT);
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

/* The first network OS device's nearest non-I/O ancestor, or NULL. */
static hwloc_obj_t
nic_locality(void)
{
    hwloc_obj_t os = NULL;

    while ((os = hwloc_get_next_osdev(topo, os)) != NULL) {
        if (os->attr->osdev.type == HWLOC_OBJ_OSDEV_NETWORK ||
            os->attr->osdev.type == HWLOC_OBJ_OSDEV_OPENFABRICS)
            return hwloc_get_non_io_ancestor_obj(topo, os);
    }
    return NULL;
}

int
scimq__topo_bind_near_nic(void)
{
    static atomic_bool warned;
    hwloc_cpuset_t set = NULL;
    hwloc_obj_t near;
    int core = -1;

    pthread_once(&topo_once, topo_load);
    if (!topo_ok)
        goto fail;
    near = nic_locality();
    set = hwloc_bitmap_dup(
        near != NULL ? near->cpuset : hwloc_topology_get_allowed_cpuset(topo));
    if (set == NULL)
        goto fail;
    /* The last PU of the set: ranks are usually placed from the first. */
    core = hwloc_bitmap_last(set);
    if (core < 0) {
        hwloc_bitmap_free(set);
        goto fail;
    }
    hwloc_bitmap_only(set, (unsigned) core);
    if (hwloc_set_cpubind(topo, set, HWLOC_CPUBIND_THREAD) != 0) {
        hwloc_bitmap_free(set);
        goto fail;
    }
    hwloc_bitmap_free(set);
    return core;
fail:
    if (!atomic_exchange(&warned, true))
        SCIMQ_LOG_WARN(TOPO, "cannot bind the agent near the network "
                             "interface; running unbound");
    return -1;
}

void
scimq__topo_membind_near_nic(void *addr, size_t len)
{
    hwloc_obj_t near;

    pthread_once(&topo_once, topo_load);
    if (!topo_ok || hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_NUMANODE) < 2)
        return;
    near = nic_locality();
    if (near != NULL && near->nodeset != NULL)
        (void) hwloc_set_area_membind(topo, addr, len, near->nodeset,
                                      HWLOC_MEMBIND_BIND,
                                      HWLOC_MEMBIND_BYNODESET);
}
