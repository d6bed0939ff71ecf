/* SPDX-License-Identifier: BSD-3-Clause */
#include "config.h"

#include <dirent.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <scimq/error.h>

#include "common/log.h"
#include "fabric.h"

int
scimq__err_from_fi(int rc)
{
    switch (rc) {
    case 0:
        return 0;
    case -FI_EAGAIN:
        return SCIMQ_EAGAIN;
    case -FI_ENOMEM:
        return SCIMQ_ENOMEM;
    case -FI_EINVAL:
        return SCIMQ_EINVAL;
    case -FI_ETIMEDOUT:
        return SCIMQ_ETIMEDOUT;
    case -FI_ECANCELED:
        return SCIMQ_ECANCELED;
    case -FI_ECONNREFUSED:
        return SCIMQ_ECONNREFUSED;
    default:
        return SCIMQ_EFABRIC;
    }
}

/*
 * libfabric's shm provider names its regions /dev/shm/<pid>:<n>:<m> and
 * leaves them behind when a process is killed.  PIDs are reused (often
 * within minutes on a busy node), and a leftover with our PID makes our
 * own endpoint fail with EBUSY.  Any such file is stale before this
 * process opens its first shm endpoint: remove them once.
 */
static void
shm_remove_stale(void)
{
    char prefix[32];
    struct dirent *de;
    DIR *dir = opendir("/dev/shm");
    int n = snprintf(prefix, sizeof(prefix), "%ld:", (long) getpid());

    if (dir == NULL)
        return;
    while ((de = readdir(dir)) != NULL) {
        char path[300];

        if (strncmp(de->d_name, prefix, (size_t) n) != 0)
            continue;
        snprintf(path, sizeof(path), "/dev/shm/%s", de->d_name);
        if (unlink(path) == 0)
            SCIMQ_LOG_WARN(FABRIC, "removed stale shm region %s", path);
    }
    closedir(dir);
}

static pthread_once_t shm_once = PTHREAD_ONCE_INIT;

static int
fabric_open(struct scimq_fabric *f, const char *provider, bool waitable)
{
    struct fi_info *hints = fi_allocinfo();
    struct fi_cq_attr cq_attr = {.format = FI_CQ_FORMAT_MSG,
                                 .wait_obj =
                                     waitable ? FI_WAIT_FD : FI_WAIT_NONE,
                                 .size = 1024};
    struct fi_av_attr av_attr = {.type = FI_AV_TABLE};
    int rc;

    memset(f, 0, sizeof(*f));
    f->wait_fd = -1;
    if (hints == NULL)
        return SCIMQ_ENOMEM;
    if (strcmp(provider, "shm") == 0)
        (void) pthread_once(&shm_once, shm_remove_stale);
    hints->caps = FI_MSG | FI_RMA | FI_READ | FI_REMOTE_READ;
    hints->ep_attr->type = FI_EP_RDM;
    /* Control messages from one peer are handled in the order they were
     * sent (a DONE before the WANT or BYE that follows it). */
    hints->tx_attr->msg_order = FI_ORDER_SAS;
    hints->rx_attr->msg_order = FI_ORDER_SAS;
    /* Offer every registration mode; obey what comes back. */
    hints->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_VIRT_ADDR |
                                  FI_MR_ALLOCATED | FI_MR_PROV_KEY |
                                  FI_MR_ENDPOINT;
    hints->domain_attr->threading = FI_THREAD_DOMAIN;
    /* Every operation context starts with a struct fi_context2. */
    hints->mode = FI_CONTEXT | FI_CONTEXT2;
    hints->fabric_attr->prov_name = strdup(provider);
    rc = fi_getinfo(FI_VERSION(1, 9), NULL, NULL, 0, hints, &f->info);
    fi_freeinfo(hints);
    if (rc != 0) {
        SCIMQ_LOG_ERROR(FABRIC, "libfabric provider '%s' not available: %s",
                        provider, fi_strerror(-rc));
        return SCIMQ_EFABRIC;
    }
    f->mr_mode = f->info->domain_attr->mr_mode;

#define FI_TRY(call, what)                                                     \
    do {                                                                       \
        rc = (call);                                                           \
        if (rc != 0) {                                                         \
            SCIMQ_LOG_ERROR(FABRIC, "%s (%s): %s", what, provider,             \
                            fi_strerror(-rc));                                 \
            goto fail;                                                         \
        }                                                                      \
    } while (0)
    FI_TRY(fi_fabric(f->info->fabric_attr, &f->fabric, NULL), "fi_fabric");
    FI_TRY(fi_domain(f->fabric, f->info, &f->domain, NULL), "fi_domain");
    FI_TRY(fi_endpoint(f->domain, f->info, &f->ep, NULL), "fi_endpoint");
    rc = fi_cq_open(f->domain, &cq_attr, &f->cq, NULL);
    if (rc != 0 && waitable) {
        /* No wait object here (shm): a queue that is only polled. */
        SCIMQ_LOG_DEBUG(FABRIC, "%s: no FI_WAIT_FD completion queue (%s)",
                        provider, fi_strerror(-rc));
        waitable = false;
        cq_attr.wait_obj = FI_WAIT_NONE;
        rc = fi_cq_open(f->domain, &cq_attr, &f->cq, NULL);
    }
    FI_TRY(rc, "fi_cq_open");
    FI_TRY(fi_av_open(f->domain, &av_attr, &f->av, NULL), "fi_av_open");
    FI_TRY(fi_ep_bind(f->ep, &f->cq->fid, FI_TRANSMIT | FI_RECV), "bind cq");
    FI_TRY(fi_ep_bind(f->ep, &f->av->fid, 0), "bind av");
    FI_TRY(fi_enable(f->ep), "fi_enable");
    f->addr_len = sizeof(f->addr);
    FI_TRY(fi_getname(&f->ep->fid, f->addr, &f->addr_len), "fi_getname");
    if (waitable && fi_control(&f->cq->fid, FI_GETWAIT, &f->wait_fd) != 0)
        f->wait_fd = -1; /* polled only */
#undef FI_TRY
    return 0;
fail:
    scimq__fabric_close(f);
    return SCIMQ_EFABRIC;
}

int
scimq__fabric_open(struct scimq_fabric *f, const char *provider)
{
    return fabric_open(f, provider, false);
}

int
scimq__fabric_open_waitable(struct scimq_fabric *f, const char *provider)
{
    return fabric_open(f, provider, true);
}

int
scimq__fabric_trywait(struct scimq_fabric *f)
{
    struct fid *fids[1] = {&f->cq->fid};

    if (f->wait_fd < 0)
        return SCIMQ_EAGAIN;
    return fi_trywait(f->fabric, fids, 1) == 0 ? 0 : SCIMQ_EAGAIN;
}

void
scimq__fabric_close(struct scimq_fabric *f)
{
    if (f->ep)
        fi_close(&f->ep->fid);
    if (f->av)
        fi_close(&f->av->fid);
    if (f->cq)
        fi_close(&f->cq->fid);
    if (f->domain)
        fi_close(&f->domain->fid);
    if (f->fabric)
        fi_close(&f->fabric->fid);
    if (f->info)
        fi_freeinfo(f->info);
    memset(f, 0, sizeof(*f));
    f->wait_fd = -1;
}

int
scimq__fabric_mr_reg(struct scimq_fabric *f, void *base, size_t len,
                     uint64_t key, struct scimq_fabric_mr *mr)
{
    int rc;

    memset(mr, 0, sizeof(*mr));
    rc = fi_mr_reg(f->domain, base, len,
                   FI_SEND | FI_RECV | FI_READ | FI_REMOTE_READ, 0, key, 0,
                   &mr->mr, NULL);
    if (rc != 0) {
        SCIMQ_LOG_ERROR(FABRIC, "fi_mr_reg of %zu bytes: %s", len,
                        fi_strerror(-rc));
        return scimq__err_from_fi(rc);
    }
    if (f->mr_mode & FI_MR_ENDPOINT) {
        rc = fi_mr_bind(mr->mr, &f->ep->fid, 0);
        if (rc == 0)
            rc = fi_mr_enable(mr->mr);
        if (rc != 0) {
            fi_close(&mr->mr->fid);
            mr->mr = NULL;
            return scimq__err_from_fi(rc);
        }
    }
    mr->desc = fi_mr_desc(mr->mr);
    mr->key = fi_mr_key(mr->mr);
    mr->base = base;
    mr->len = len;
    return 0;
}

void
scimq__fabric_mr_dereg(struct scimq_fabric_mr *mr)
{
    if (mr->mr != NULL)
        fi_close(&mr->mr->fid);
    memset(mr, 0, sizeof(*mr));
}

uint64_t
scimq__fabric_remote_addr(const struct scimq_fabric *f,
                          const struct scimq_fabric_mr *mr, const void *ptr)
{
    if (f->mr_mode & FI_MR_VIRT_ADDR)
        return (uint64_t) (uintptr_t) ptr;
    return (uint64_t) ((const char *) ptr - (const char *) mr->base);
}

int
scimq__fabric_av_insert(struct scimq_fabric *f, const void *addr, fi_addr_t *fa)
{
    int n = fi_av_insert(f->av, addr, 1, fa, 0, NULL);

    return n == 1 ? 0 : SCIMQ_EFABRIC;
}

int
scimq__fabric_recv(struct scimq_fabric *f, void *buf, size_t len, void *desc,
                   void *ctx)
{
    return scimq__err_from_fi(
        (int) fi_recv(f->ep, buf, len, desc, FI_ADDR_UNSPEC, ctx));
}

int
scimq__fabric_send(struct scimq_fabric *f, const void *buf, size_t len,
                   void *desc, fi_addr_t dest, void *ctx)
{
    return scimq__err_from_fi((int) fi_send(f->ep, buf, len, desc, dest, ctx));
}

int
scimq__fabric_read(struct scimq_fabric *f, void *buf, size_t len, void *desc,
                   fi_addr_t src, uint64_t raddr, uint64_t key, void *ctx)
{
    return scimq__err_from_fi(
        (int) fi_read(f->ep, buf, len, desc, src, raddr, key, ctx));
}

int
scimq__fabric_poll(struct scimq_fabric *f, struct scimq_fabric_cqe *cqe,
                   int max)
{
    struct fi_cq_msg_entry ent[16];
    ssize_t n;

    if (max > 16)
        max = 16;
    n = fi_cq_read(f->cq, ent, (size_t) max);
    if (n == -FI_EAGAIN)
        return 0;
    if (n == -FI_EAVAIL) {
        struct fi_cq_err_entry err = {0};

        if (fi_cq_readerr(f->cq, &err, 0) == 1) {
            SCIMQ_LOG_ERROR(
                FABRIC, "operation failed: %s",
                fi_cq_strerror(f->cq, err.prov_errno, err.err_data, NULL, 0));
            cqe[0].context = err.op_context;
            cqe[0].flags = err.flags;
            cqe[0].len = 0;
        }
        return SCIMQ_EFABRIC;
    }
    if (n < 0)
        return scimq__err_from_fi((int) n);
    for (ssize_t i = 0; i < n; i++) {
        cqe[i].context = ent[i].op_context;
        cqe[i].flags = ent[i].flags;
        cqe[i].len = ent[i].len;
    }
    return (int) n;
}
