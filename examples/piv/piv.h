/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Shared by the PIV example programs: the message layout and the known flow.
 *
 * A frame message (piv-camera -> piv-process) has three blocks:
 *   "meta"  struct piv_meta (frame number, capture time, size, flow)
 *   "a"     W x H pixels of the first exposure  (uint16 or float32)
 *   "b"     W x H pixels of the second exposure
 * A run is framed by two control messages (SCIMQ_PUT_CONTROL: every rank
 * of piv-process gets each, the header before the run's first pair, the
 * end after its last), one block each:
 *   "run"   struct piv_run: kind (header or end), the image size and pixel
 *           format, the interrogation window and overlap for the run; the
 *           end also says how many pairs the run had
 * A result message (piv-process -> piv-results) has:
 *   "meta"  the frame's struct piv_meta, echoed (carries the capture time)
 *   "field" struct piv_field (grid, rank, timings)
 *   "x", "y", "u", "v"   n = nx * ny float32 each: vector positions (pixel
 *           coordinates, pixel (i, j) centred at (i, j)) and displacements
 *           (pixels, b relative to a)
 * Every multi-byte value is in host byte order (the example runs on one
 * architecture) and is read with memcpy (blocks need not be aligned).
 */
#ifndef SCIMQ_EXAMPLES_PIV_H
#define SCIMQ_EXAMPLES_PIV_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#include <scimq/client.h>

#define PIV_META_MAGIC 0x56495031u  /* "1PIV" */
#define PIV_FIELD_MAGIC 0x44464950u /* "PIFD" */
#define PIV_RUN_MAGIC 0x4e555250u   /* "PRUN" */

enum piv_pixfmt { PIV_U16 = 0, PIV_F32 = 1 };
enum piv_flow { PIV_FLOW_VORTEX = 0, PIV_FLOW_SHEAR = 1 };

/* The flow: displacement (pixels between exposures) at (x, y).
 *   vortex: Lamb-Oseen vortex centred at (xc, yc) with core radius rc,
 *           tangential displacement dmax * g(r / rc) / g_max, where
 *           g(s) = (1 - exp(-s^2)) / s peaks at s = 1.1209 (g = 0.6382),
 *           so dmax is the largest displacement, reached at r = 1.12 rc.
 *   shear:  u = dmax * (y - yc) / rc (linear shear), v = 0. */
struct piv_flow_params {
    uint32_t kind; /* enum piv_flow */
    uint32_t pad;
    double xc, yc, rc, dmax;
};

struct piv_meta {
    uint32_t magic, version;
    uint64_t frame;
    uint64_t capture_ns; /* CLOCK_REALTIME when the pair was captured */
    uint32_t width, height;
    uint32_t pixfmt; /* enum piv_pixfmt */
    uint32_t pad;
    struct piv_flow_params flow;
};

enum piv_run_kind { PIV_RUN_HEADER = 1, PIV_RUN_END = 2 };

struct piv_run {
    uint32_t magic;
    uint32_t kind; /* enum piv_run_kind */
    uint64_t seed; /* names the run */
    uint32_t width, height;
    uint32_t pixfmt;      /* enum piv_pixfmt */
    uint32_t window;      /* interrogation window (pixels, square) */
    uint32_t overlap_pct; /* window overlap, percent */
    uint32_t pad;
    uint64_t frames; /* PIV_RUN_END: pairs the run had */
};

struct piv_field {
    uint32_t magic;
    uint32_t nx, ny; /* vectors: n = nx * ny */
    uint32_t window; /* interrogation window (pixels, square) */
    uint32_t step;   /* window spacing (window - overlap) */
    uint32_t passes; /* 1, or 2 with the symmetric window offset */
    uint32_t rank;   /* the MPI rank that computed it */
    uint32_t pad;
    uint64_t received_ns; /* CLOCK_REALTIME when the rank had the frame */
    uint64_t compute_ns;  /* time spent computing the field */
};

/* Interrogation windows: n x n pixels, n a power of two >= 8, overlapping
 * by 0..90 % (the caller checks n against the image size). */
static inline bool
piv_window_ok(int64_t n, int64_t overlap_pct)
{
    return n >= 8 && (n & (n - 1)) == 0 && overlap_pct >= 0 &&
           overlap_pct <= 90;
}

/* The spacing of such windows. */
static inline int
piv_step(int n, int overlap_pct)
{
    return n - n * overlap_pct / 100;
}

#define PIV_GMAX 0.63817320 /* max of (1 - exp(-s^2)) / s */

static inline void
piv_flow_eval(const struct piv_flow_params *f, double x, double y, double *u,
              double *v)
{
    double dx = x - f->xc, dy = y - f->yc;
    if (f->kind == PIV_FLOW_SHEAR) {
        *u = f->dmax * dy / f->rc;
        *v = 0.0;
        return;
    }
    double r2 = dx * dx + dy * dy, s2 = r2 / (f->rc * f->rc);
    /* (1 - exp(-s^2)) / s / r = the tangential displacement / r */
    double k;
    if (s2 < 1e-8)
        k = 1.0 / (f->rc * f->rc); /* limit r -> 0: (1 - e^-s2)/(s r) */
    else
        k = -expm1(-s2) / r2;
    k *= f->dmax * f->rc / PIV_GMAX;
    *u = -k * dy;
    *v = k * dx;
}

static inline uint64_t
piv_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t) ts.tv_sec * 1000000000u + (uint64_t) ts.tv_nsec;
}

/* The block named name of a message, or NULL. */
static inline const scimq_block_t *
piv_block(const scimq_block_t *blocks, uint32_t count, const char *name)
{
    for (uint32_t i = 0; i < count; i++)
        if (blocks[i].name != NULL && strcmp(blocks[i].name, name) == 0)
            return &blocks[i];
    return NULL;
}

#endif /* SCIMQ_EXAMPLES_PIV_H */
