/* SPDX-License-Identifier: BSD-3-Clause */
/* Translation of foreign error codes into SCIMQ_E* codes (done once, at the
 * boundary where a foreign call returns). */
#ifndef SCIMQ_COMMON_ERROR_INTERNAL_H
#define SCIMQ_COMMON_ERROR_INTERNAL_H

/*
 * errno (positive or negative) -> SCIMQ_E*.  errno values without a SciMQ
 * counterpart become SCIMQ_EIO; 0 also becomes SCIMQ_EIO because a caller
 * asking for a translation had a failure in hand.
 */
int scimq__err_from_errno(int e);

#endif /* SCIMQ_COMMON_ERROR_INTERNAL_H */
