/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Distributions over repeated benchmark trials: min, Q1, median, Q3, max.
 * Benchmarks report these (and ratios of medians), never a single number,
 * because one run on a shared machine says little.
 */
#ifndef SCIMQ_TOOLS_DIST_H
#define SCIMQ_TOOLS_DIST_H

#include <jansson.h>

struct scimq_dist {
    double min, q1, median, q3, max;
};

/* The distribution of v[0..n) (all zero when n is 0).  Sorts v in place. */
struct scimq_dist scimq__dist_of(double *v, int n);

/* The q-quantile (0 <= q <= 1) of v[0..n) sorted ascending, by the same
 * linear interpolation as the quartiles (0 when n is 0). */
double scimq__dist_quantile(const double *v, int n, double q);

/* {"min":..,"q1":..,"median":..,"q3":..,"max":..}; a new reference. */
json_t *scimq__dist_json(const struct scimq_dist *d);

#endif /* SCIMQ_TOOLS_DIST_H */
