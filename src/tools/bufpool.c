/* SPDX-License-Identifier: BSD-3-Clause */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "bufpool.h"

int
tool_bufpool_init(struct tool_bufpool *p, int n, size_t size)
{
    memset(p, 0, sizeof(*p));
    pthread_mutex_init(&p->lock, NULL);
    pthread_cond_init(&p->cond, NULL);
    if (n < 1)
        return -1;
    p->bufs = calloc((size_t) n, sizeof(*p->bufs));
    p->refs = calloc((size_t) n, sizeof(*p->refs));
    p->free_idx = calloc((size_t) n, sizeof(*p->free_idx));
    if (p->bufs == NULL || p->refs == NULL || p->free_idx == NULL)
        return -1;
    for (int i = 0; i < n; i++) {
        p->bufs[i] = malloc(size > 0 ? size : 1);
        if (p->bufs[i] == NULL)
            return -1;
        p->refs[i] = (struct tool_bufref){p, i};
        p->free_idx[p->nfree++] = i;
        p->n = i + 1;
    }
    return 0;
}

int
tool_bufpool_take(struct tool_bufpool *p)
{
    int idx;

    pthread_mutex_lock(&p->lock);
    while (p->nfree == 0)
        pthread_cond_wait(&p->cond, &p->lock);
    idx = p->free_idx[--p->nfree];
    pthread_mutex_unlock(&p->lock);
    return idx;
}

void
tool_bufpool_release(void *arg)
{
    struct tool_bufref *ref = arg;
    struct tool_bufpool *p = ref->pool;

    pthread_mutex_lock(&p->lock);
    p->free_idx[p->nfree++] = ref->idx;
    pthread_cond_signal(&p->cond);
    pthread_mutex_unlock(&p->lock);
}

void
tool_bufpool_fini(struct tool_bufpool *p)
{
    for (int i = 0; i < p->n; i++)
        free(p->bufs[i]);
    free(p->bufs);
    free(p->refs);
    free(p->free_idx);
    pthread_mutex_destroy(&p->lock);
    pthread_cond_destroy(&p->cond);
    memset(p, 0, sizeof(*p));
}
