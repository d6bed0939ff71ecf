/* SPDX-License-Identifier: BSD-3-Clause */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include <scimq/error.h>

#include "common/log.h"
#include "pool.h"

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23 /* Linux 5.14 */
#endif

/*
 * Pre-faulting goes one huge page per call.  MADV_POPULATE_WRITE holds the
 * process's mmap lock for the whole call, and every other thread's mmap,
 * munmap or brk (malloc's arenas) waits behind it: with 64 MiB per call a
 * just-started gateway answered HELLO after 2-6 s on a loaded machine (a
 * 2 MiB huge page takes up to ~50 ms to fault in on this VM, 64 MiB up to
 * 1.2 s); with 2 MiB the longest wait measured was 0.2 s.
 */
#define PREFAULT_STEP (2ull << 20)

/*
 * A chunk cut into equal slots.  Free slots hold the index of the next
 * free slot in their first four bytes (the memory is ours and unused).
 */
struct gw_slab {
    int8_t cls; /* -1: not a slab */
    uint32_t nfree;
    uint32_t free_head;          /* slot index; UINT32_MAX: none */
    struct gw_slab *prev, *next; /* partial list of its class */
};

static uint32_t
slots_per_chunk(const struct gw_pool *p, unsigned int cls)
{
    return (uint32_t) (p->chunk >> (GW_POOL_MIN_SLOT_SHIFT + cls));
}

/* The slot class of a small payload, or -1 for a run of chunks. */
static int
class_of(const struct gw_pool *p, uint64_t len)
{
    for (unsigned int c = 0; c < p->nclasses; c++)
        if (len <= (1ull << (GW_POOL_MIN_SLOT_SHIFT + c)))
            return (int) c;
    return -1;
}

static uint32_t
chunks_for(const struct gw_pool *p, uint64_t len)
{
    return (uint32_t) ((len + p->chunk - 1) / p->chunk);
}

uint64_t
gw_pool_cost(const struct gw_pool *p, uint64_t len)
{
    int c = class_of(p, len);

    return c >= 0 ? 1ull << (GW_POOL_MIN_SLOT_SHIFT + c)
                  : (uint64_t) chunks_for(p, len) * p->chunk;
}

static bool
bit_get(const struct gw_pool *p, uint32_t i)
{
    return (p->used[i / 64] >> (i % 64)) & 1u;
}

static void
bits_set(struct gw_pool *p, uint32_t first, uint32_t n, bool on)
{
    for (uint32_t i = first; i < first + n; i++) {
        if (on)
            p->used[i / 64] |= 1ull << (i % 64);
        else
            p->used[i / 64] &= ~(1ull << (i % 64));
    }
    if (on)
        p->used_chunks += n;
    else
        p->used_chunks -= n;
}

/*
 * First fit: the lowest free run of n chunks.  Low addresses are reused
 * first, so the hot part of the arena stays small and pre-faulted.  The
 * scan skips full 64-chunk words, so it costs nchunks / 64 steps at most.
 */
static int64_t
run_find(const struct gw_pool *p, uint32_t n)
{
    uint32_t i = 0, start = 0, len = 0;

    while (i < p->nchunks) {
        if (len == 0 && i % 64 == 0 && p->used[i / 64] == UINT64_MAX) {
            i += 64;
            continue;
        }
        if (bit_get(p, i)) {
            len = 0;
        } else {
            if (len++ == 0)
                start = i;
            if (len == n)
                return start;
        }
        i++;
    }
    return -1;
}

int
gw_pool_init(struct gw_pool *p, uint64_t bytes, uint64_t chunk)
{
    memset(p, 0, sizeof(*p));
    if (chunk < 4096 || (chunk & (chunk - 1)) != 0)
        return SCIMQ_EINVAL;
    p->chunk = chunk;
    p->nchunks = (uint32_t) (bytes / chunk > 0 ? bytes / chunk : 1);
    if ((uint64_t) p->nchunks * chunk / chunk != p->nchunks)
        return SCIMQ_EINVAL;
    p->size = (uint64_t) p->nchunks * chunk;
    /* Slots: 512 B up to half a chunk. */
    for (uint64_t s = 1ull << GW_POOL_MIN_SLOT_SHIFT;
         s <= chunk / 2 && p->nclasses < GW_POOL_MAX_CLASSES; s <<= 1)
        p->nclasses++;
    p->base = mmap(NULL, p->size, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p->base == MAP_FAILED) {
        p->base = NULL;
        return SCIMQ_ENOMEM;
    }
    /* Transparent huge pages where the kernel has them (advice only). */
    (void) madvise(p->base, p->size, MADV_HUGEPAGE);
    p->used = calloc((p->nchunks + 63) / 64, sizeof(*p->used));
    p->slabs = calloc(p->nchunks, sizeof(*p->slabs));
    if (p->used == NULL || p->slabs == NULL) {
        gw_pool_fini(p);
        return SCIMQ_ENOMEM;
    }
    for (uint32_t i = 0; i < p->nchunks; i++)
        p->slabs[i].cls = -1;
    return 0;
}

static void *
prefault_main(void *arg)
{
    struct gw_pool *p = arg;
    uint64_t off = 0;

    while (off < p->size && !atomic_load(&p->stop)) {
        uint64_t n =
            p->size - off < PREFAULT_STEP ? p->size - off : PREFAULT_STEP;

        if (madvise(p->base + off, n, MADV_POPULATE_WRITE) != 0) {
            /* Older kernels: pages fault in on first use instead. */
            SCIMQ_LOG_INFO(GATEWAY, "payload memory not pre-faulted: %s",
                           strerror(errno));
            break;
        }
        off += n;
        atomic_store(&p->prefaulted, off);
    }
    atomic_store(&p->prefault_done, true);
    return NULL;
}

int
gw_pool_prefault_start(struct gw_pool *p)
{
    if (pthread_create(&p->prefault, NULL, prefault_main, p) != 0)
        return SCIMQ_ENOMEM;
    p->prefaulting = true;
    return 0;
}

void
gw_pool_fini(struct gw_pool *p)
{
    if (p->prefaulting) {
        atomic_store(&p->stop, true);
        pthread_join(p->prefault, NULL);
        p->prefaulting = false;
    }
    if (p->base != NULL)
        munmap(p->base, p->size);
    free(p->used);
    free(p->slabs);
    p->base = NULL;
    p->used = NULL;
    p->slabs = NULL;
}

static uint8_t *
slot_addr(const struct gw_pool *p, uint32_t chunk, unsigned int cls,
          uint32_t slot)
{
    return p->base + (uint64_t) chunk * p->chunk +
           ((uint64_t) slot << (GW_POOL_MIN_SLOT_SHIFT + cls));
}

static void
partial_remove(struct gw_pool *p, struct gw_slab *s)
{
    if (s->prev)
        s->prev->next = s->next;
    else
        p->partial[s->cls] = s->next;
    if (s->next)
        s->next->prev = s->prev;
    s->prev = s->next = NULL;
}

static void
partial_push(struct gw_pool *p, struct gw_slab *s)
{
    s->prev = NULL;
    s->next = p->partial[s->cls];
    if (s->next)
        s->next->prev = s;
    p->partial[s->cls] = s;
}

static void *
slot_alloc(struct gw_pool *p, unsigned int cls)
{
    struct gw_slab *s = p->partial[cls];
    uint32_t chunk, slot;
    uint8_t *at;

    if (s == NULL) {
        int64_t c = run_find(p, 1);
        uint32_t n = slots_per_chunk(p, cls);

        if (c < 0)
            return NULL;
        bits_set(p, (uint32_t) c, 1, true);
        s = &p->slabs[c];
        s->cls = (int8_t) cls;
        s->nfree = n;
        s->free_head = 0;
        /* Thread the free list through the slots. */
        for (uint32_t i = 0; i < n; i++) {
            uint32_t next = i + 1 < n ? i + 1 : UINT32_MAX;

            memcpy(slot_addr(p, (uint32_t) c, cls, i), &next, sizeof(next));
        }
        partial_push(p, s);
    }
    chunk = (uint32_t) (s - p->slabs);
    slot = s->free_head;
    at = slot_addr(p, chunk, cls, slot);
    memcpy(&s->free_head, at, sizeof(s->free_head));
    if (--s->nfree == 0)
        partial_remove(p, s);
    p->slot_bytes += 1ull << (GW_POOL_MIN_SLOT_SHIFT + cls);
    return at;
}

static void
slot_free(struct gw_pool *p, uint8_t *at, unsigned int cls)
{
    uint32_t chunk = (uint32_t) ((uint64_t) (at - p->base) / p->chunk);
    struct gw_slab *s = &p->slabs[chunk];
    uint32_t slot = (uint32_t) (((uint64_t) (at - p->base) % p->chunk) >>
                                (GW_POOL_MIN_SLOT_SHIFT + cls));

    memcpy(at, &s->free_head, sizeof(s->free_head));
    s->free_head = slot;
    p->slot_bytes -= 1ull << (GW_POOL_MIN_SLOT_SHIFT + cls);
    if (s->nfree++ == 0)
        partial_push(p, s);
    if (s->nfree == slots_per_chunk(p, cls)) {
        /* Empty: the chunk goes back for runs and other classes. */
        partial_remove(p, s);
        s->cls = -1;
        bits_set(p, chunk, 1, false);
    }
}

void *
gw_pool_alloc(struct gw_pool *p, uint64_t len)
{
    int cls = class_of(p, len);
    int64_t first;
    uint32_t n;

    if (cls >= 0)
        return slot_alloc(p, (unsigned int) cls);
    if (len > p->size)
        return NULL;
    n = chunks_for(p, len);
    first = run_find(p, n);
    if (first < 0)
        return NULL;
    bits_set(p, (uint32_t) first, n, true);
    return p->base + (uint64_t) first * p->chunk;
}

void
gw_pool_free(struct gw_pool *p, void *buf, uint64_t len)
{
    int cls = class_of(p, len);
    uint8_t *at = buf;

    if (buf == NULL)
        return;
    if (cls >= 0) {
        slot_free(p, at, (unsigned int) cls);
        return;
    }
    bits_set(p, (uint32_t) ((uint64_t) (at - p->base) / p->chunk),
             chunks_for(p, len), false);
}
