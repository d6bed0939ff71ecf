/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A small libfabric endpoint for the agent-to-rank hop: one RDM endpoint
 * with messages (control) and RMA reads (payloads), its completion queue,
 * address vector and memory registrations.
 *
 * Facts this module is built on (measured, see PLATFORM.md):
 * - the provider is chosen by name through the hints (never FI_PROVIDER,
 *   which is process-global and would leak into MPI's own choice);
 * - every mr_mode bit is offered and the returned ones obeyed: shm wants
 *   virtual addresses, tcp offsets; no provider here picks keys, so keys
 *   are chosen by the caller, unique within the domain;
 * - a bad RMA is destructive, so the caller validates every (key, address,
 *   length) before a read;
 * - messages from one peer arrive in the order sent (FI_ORDER_SAS asked).
 * One thread drives an endpoint.
 */
#ifndef SCIMQ_MPI_FABRIC_H
#define SCIMQ_MPI_FABRIC_H

#include <stddef.h>
#include <stdint.h>

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>

/* Longest endpoint address handled (tcp and shm names are far shorter). */
#define SCIMQ_FABRIC_ADDR_MAX 128

struct scimq_fabric {
    struct fi_info *info;
    struct fid_fabric *fabric;
    struct fid_domain *domain;
    struct fid_ep *ep;
    struct fid_cq *cq;
    struct fid_av *av;
    uint64_t mr_mode;
    uint8_t addr[SCIMQ_FABRIC_ADDR_MAX];
    size_t addr_len;
    int wait_fd; /* readable when the CQ may have completions, or -1 */
};

/* A registered region. */
struct scimq_fabric_mr {
    struct fid_mr *mr;
    void *desc;
    uint64_t key;
    void *base;
    size_t len;
};

/* One completion. */
struct scimq_fabric_cqe {
    void *context;
    uint64_t flags; /* FI_SEND, FI_RECV, FI_READ ... */
    size_t len;
};

/* Translates a libfabric return code (negative FI_E*) into SCIMQ_E*. */
int scimq__err_from_fi(int fi_rc);

/* Opens an endpoint on the named provider.  Returns 0, SCIMQ_EFABRIC
 * (provider not available or failing) or SCIMQ_ENOMEM. */
int scimq__fabric_open(struct scimq_fabric *f, const char *provider);

/*
 * The same, with a completion queue that can be waited on in the kernel:
 * FI_WAIT_FD and its file descriptor (fi_control FI_GETWAIT) in
 * f->wait_fd.  A provider without it (shm in libfabric 1.17: -FI_ENOSYS)
 * gets a queue without wait object and wait_fd -1: the caller must find
 * another way to learn that a peer sent something.
 */
int scimq__fabric_open_waitable(struct scimq_fabric *f, const char *provider);

/* Before sleeping on f->wait_fd: 0 when the fd will say that something
 * arrived, SCIMQ_EAGAIN when completions may be there already (read the
 * CQ first), the way fi_trywait() says it. */
int scimq__fabric_trywait(struct scimq_fabric *f);
void scimq__fabric_close(struct scimq_fabric *f);

/* Registers [base, base+len) for local use and remote reads, with key
 * (ignored when the provider picks keys). */
int scimq__fabric_mr_reg(struct scimq_fabric *f, void *base, size_t len,
                         uint64_t key, struct scimq_fabric_mr *mr);
void scimq__fabric_mr_dereg(struct scimq_fabric_mr *mr);

/* The remote address of ptr inside mr, as a peer must name it. */
uint64_t scimq__fabric_remote_addr(const struct scimq_fabric *f,
                                   const struct scimq_fabric_mr *mr,
                                   const void *ptr);

/* Inserts a peer address; returns its fi_addr_t in *fa. */
int scimq__fabric_av_insert(struct scimq_fabric *f, const void *addr,
                            fi_addr_t *fa);

/* Posting; SCIMQ_EAGAIN means "progress and retry". */
int scimq__fabric_recv(struct scimq_fabric *f, void *buf, size_t len,
                       void *desc, void *ctx);
int scimq__fabric_send(struct scimq_fabric *f, const void *buf, size_t len,
                       void *desc, fi_addr_t dest, void *ctx);
int scimq__fabric_read(struct scimq_fabric *f, void *buf, size_t len,
                       void *desc, fi_addr_t src, uint64_t raddr, uint64_t key,
                       void *ctx);

/* Reads up to max completions; returns how many (0 if none) or an error
 * (with the failed operation's context in cqe[0].context). */
int scimq__fabric_poll(struct scimq_fabric *f, struct scimq_fabric_cqe *cqe,
                       int max);

#endif /* SCIMQ_MPI_FABRIC_H */
