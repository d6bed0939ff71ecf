/* SPDX-License-Identifier: BSD-3-Clause */
#include "config.h"

#include <stdlib.h>

#include "dist.h"

static int
cmp_double(const void *a, const void *b)
{
    double x = *(const double *) a, y = *(const double *) b;

    return (x > y) - (x < y);
}

/* Quartiles by linear interpolation between order statistics. */
static double
quantile(const double *v, int n, double q)
{
    double pos = q * (n - 1);
    int lo = (int) pos;
    double frac = pos - lo;

    return lo + 1 < n ? v[lo] * (1 - frac) + v[lo + 1] * frac : v[lo];
}

double
scimq__dist_quantile(const double *v, int n, double q)
{
    if (n <= 0)
        return 0;
    q = q < 0 ? 0 : q > 1 ? 1 : q;
    return quantile(v, n, q);
}

struct scimq_dist
scimq__dist_of(double *v, int n)
{
    struct scimq_dist d = {0, 0, 0, 0, 0};

    if (n <= 0)
        return d;
    qsort(v, (size_t) n, sizeof(*v), cmp_double);
    d.min = v[0];
    d.q1 = quantile(v, n, 0.25);
    d.median = quantile(v, n, 0.5);
    d.q3 = quantile(v, n, 0.75);
    d.max = v[n - 1];
    return d;
}

json_t *
scimq__dist_json(const struct scimq_dist *d)
{
    return json_pack("{s:f, s:f, s:f, s:f, s:f}", "min", d->min, "q1", d->q1,
                     "median", d->median, "q3", d->q3, "max", d->max);
}
