/* SPDX-License-Identifier: BSD-3-Clause */
#include "config.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "action.h"
#include "common/log.h"

struct gw_action *
gw_action_new(enum gw_action_kind kind)
{
    struct gw_action *a = calloc(1, sizeof(*a));

    if (a == NULL) {
        SCIMQ_LOG_ERROR(GATEWAY, "out of memory for an action");
        abort();
    }
    a->kind = kind;
    a->worker = -1;
    return a;
}

void
gw_action_free(struct gw_action *a)
{
    free(a->text);
    /* An append owns its record header; every other buf is lent. */
    if (a->kind == GW_ACT_JOURNAL_APPEND)
        free(a->buf);
    free(a);
}

void
gw_actions_push(struct gw_actions *list, struct gw_action *a)
{
    a->next = NULL;
    if (list->tail)
        list->tail->next = a;
    else
        list->head = a;
    list->tail = a;
}

struct gw_action *
gw_actions_pop(struct gw_actions *list)
{
    struct gw_action *a = list->head;

    if (a != NULL) {
        list->head = a->next;
        if (list->head == NULL)
            list->tail = NULL;
        a->next = NULL;
    }
    return a;
}

void
gw_actions_splice(struct gw_actions *list, struct gw_actions *from)
{
    if (from->head == NULL)
        return;
    if (list->tail)
        list->tail->next = from->head;
    else
        list->head = from->head;
    list->tail = from->tail;
    from->head = from->tail = NULL;
}

void
gw_note(struct gw_actions *out, int level, int subsys, const char *fmt, ...)
{
    struct gw_action *a = gw_action_new(GW_ACT_LOG);
    va_list ap;
    int rc;

    va_start(ap, fmt);
    rc = vasprintf(&a->text, fmt, ap);
    va_end(ap);
    if (rc < 0) {
        a->text = NULL;
        gw_action_free(a);
        return;
    }
    a->code = level;
    a->attempt = (uint32_t) subsys;
    gw_actions_push(out, a);
}

void
gw_note_write(const struct gw_action *a)
{
    scimq__log_write(a->code, (int) a->attempt, "", 0, "%s", a->text);
}
