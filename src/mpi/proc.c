/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Process liveness on one host: an agent watches the processes of its
 * ranks, and a rank its agent's, because the transport alone does not
 * always tell (a send to a dead shm peer may simply never complete).
 */
#include "config.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "proc.h"

bool
scimq__mpi_pid_dead(pid_t pid)
{
    char path[64], buf[256], *p;
    FILE *fp;
    bool dead = false;

    if (kill(pid, 0) != 0)
        return errno == ESRCH;
    snprintf(path, sizeof(path), "/proc/%ld/stat", (long) pid);
    fp = fopen(path, "re");
    if (fp == NULL)
        return errno == ENOENT;
    /* "pid (comm) S ...": the state follows the last ')'. */
    if (fgets(buf, sizeof(buf), fp) != NULL && (p = strrchr(buf, ')')) &&
        p[1] == ' ')
        dead = p[2] == 'Z' || p[2] == 'X';
    fclose(fp);
    return dead;
}
