/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Payload memory: one arena of --memory-limit bytes, mapped once, split in
 * chunks and reused for the life of the gateway.  A payload never costs a
 * mapping, an unmapping or a page fault once its pages have been touched;
 * the pages are pre-faulted in the background at start (huge pages where
 * the kernel gives them), so RSS is the limit plus a small constant, and
 * the limit cannot be exceeded because there is nothing else to allocate
 * payloads from.
 *
 * Large payloads take a run of contiguous chunks (the protocol reads a
 * payload straight into one buffer); small ones (up to half a chunk) take a
 * slot of a power-of-two size class carved from a chunk.  Even an empty
 * payload takes the smallest slot, so the number of resident messages, and
 * with it their bookkeeping, is bounded by the limit too.
 *
 * Not thread-safe: the store calls it under the hub lock.  No system call
 * is made by gw_pool_alloc() or gw_pool_free().
 */
#ifndef SCIMQ_GATEWAY_POOL_H
#define SCIMQ_GATEWAY_POOL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

/* Smallest slot: 512 B; classes double up to half a chunk. */
#define GW_POOL_MIN_SLOT_SHIFT 9
#define GW_POOL_MAX_CLASSES 24

struct gw_slab; /* per-chunk slot state (pool.c) */

struct gw_pool {
    uint8_t *base;
    uint64_t size;  /* nchunks * chunk */
    uint64_t chunk; /* bytes per chunk, a power of two */
    uint32_t nchunks;
    uint64_t *used; /* bitmap: chunk in use (run or slab) */
    uint32_t used_chunks;
    uint32_t nclasses;     /* slot classes: 512 B << i, i < nclasses */
    struct gw_slab *slabs; /* one per chunk */
    struct gw_slab *partial[GW_POOL_MAX_CLASSES]; /* slabs with free slots */
    uint64_t slot_bytes; /* bytes handed out in slots (for stats) */

    pthread_t prefault;
    bool prefaulting;
    atomic_bool stop;
    atomic_uint_fast64_t prefaulted; /* bytes pre-faulted so far */
    atomic_bool prefault_done;       /* the thread has finished */
};

/*
 * Maps an arena of `bytes` (rounded down to whole chunks, at least one) of
 * `chunk` bytes each (a power of two, >= 4 KiB).  Returns 0 or SCIMQ_ENOMEM
 * / SCIMQ_EINVAL.
 */
int gw_pool_init(struct gw_pool *p, uint64_t bytes, uint64_t chunk);
/* Stops the pre-fault thread and unmaps the arena. */
void gw_pool_fini(struct gw_pool *p);
/* Starts touching every page of the arena in a thread of its own
 * (MADV_POPULATE_WRITE: allocates without writing, so it may run while
 * payloads are being received).  Returns 0 or a SCIMQ_E* code. */
int gw_pool_prefault_start(struct gw_pool *p);

/* Largest payload the arena can ever hold. */
static inline uint64_t
gw_pool_capacity(const struct gw_pool *p)
{
    return p->size;
}

/* Bytes of the arena in use (whole chunks, slabs included). */
static inline uint64_t
gw_pool_used(const struct gw_pool *p)
{
    return (uint64_t) p->used_chunks * p->chunk;
}

/* Bytes the allocation of a len-byte payload takes from the arena. */
uint64_t gw_pool_cost(const struct gw_pool *p, uint64_t len);

/* A buffer of len bytes, or NULL when no room is free now. */
void *gw_pool_alloc(struct gw_pool *p, uint64_t len);
/* Gives back a buffer of gw_pool_alloc(p, len). */
void gw_pool_free(struct gw_pool *p, void *buf, uint64_t len);

#endif /* SCIMQ_GATEWAY_POOL_H */
