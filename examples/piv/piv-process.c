/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * piv-process: PIV on MPI ranks fed by SciMQ.  Every rank loops on
 * scimq_mpi_next(); for each image pair it computes the displacement field
 * by FFT cross-correlation (FFTW, single precision) over interrogation
 * windows with 50 % overlap, a 3-point Gaussian sub-pixel peak fit in x and
 * y, and (default) a second pass with the windows offset symmetrically by
 * the first-pass integer displacement (central difference); --passes 3
 * adds a window-deformation pass (images resampled along the interpolated
 * pass-2 field).  The field goes back upstream with scimq_mpi_put() to the
 * results queue, with the frame's meta block (its capture time).
 *
 * A run header (a control message from piv-camera, which every rank gets
 * before the run's first pair) sets the window and overlap for the run and
 * the image size its pairs must have; --window and --overlap serve for
 * pairs without one.  The end of series (after the run's last pair) says
 * how many pairs the run had.
 *
 *   SCIMQ_URL=scimq://gw:7470 SCIMQ_QUEUE=piv.frames \
 *   SCIMQ_MPI_MAX_MESSAGE=17MiB mpirun -n 8 piv-process \
 *       [--results-queue piv.results] [--window 32] [--overlap 50]
 *       [--passes 1|2|3]
 *
 * Rank 0 ends with one JSON line: frames per rank, compute time, run
 * headers and ends seen (over all ranks), the pairs the run had.
 */
#include "config.h"

#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <fftw3.h>
#include <mpi.h>

#include <scimq/mpi.h>

#include "piv.h"

struct piv {
    int n;                  /* window size */
    float *wa, *wb;         /* n x n real windows (FFTW buffers) */
    fftwf_complex *fa, *fb; /* n x (n/2+1) spectra */
    float *corr;            /* n x n correlation */
    fftwf_plan pa, pb, pc;
};

static int
piv_setup(struct piv *p, int n)
{
    size_t nc = (size_t) n * (n / 2 + 1);
    p->n = n;
    p->wa = fftwf_alloc_real((size_t) n * n);
    p->wb = fftwf_alloc_real((size_t) n * n);
    p->corr = fftwf_alloc_real((size_t) n * n);
    p->fa = fftwf_alloc_complex(nc);
    p->fb = fftwf_alloc_complex(nc);
    if (!p->wa || !p->wb || !p->corr || !p->fa || !p->fb)
        return -1;
    /* Plans once per rank; FFTW_MEASURE overwrites the buffers. */
    p->pa = fftwf_plan_dft_r2c_2d(n, n, p->wa, p->fa, FFTW_MEASURE);
    p->pb = fftwf_plan_dft_r2c_2d(n, n, p->wb, p->fb, FFTW_MEASURE);
    p->pc = fftwf_plan_dft_c2r_2d(n, n, p->fa, p->corr, FFTW_MEASURE);
    return p->pa && p->pb && p->pc ? 0 : -1;
}

static void
piv_teardown(struct piv *p)
{
    fftwf_destroy_plan(p->pa);
    fftwf_destroy_plan(p->pb);
    fftwf_destroy_plan(p->pc);
    fftwf_free(p->wa);
    fftwf_free(p->wb);
    fftwf_free(p->corr);
    fftwf_free(p->fa);
    fftwf_free(p->fb);
}

/* What the current run's header said (or the command line). */
struct run_settings {
    int window, overlap_pct;
    bool header; /* a header came: width, height and pixfmt hold */
    uint32_t width, height, pixfmt;
};

/*
 * A control message of the camera: a run header (new settings, FFTW plans
 * for a new window size) or its end (*frames_p: the pairs it had).
 * Returns 0, or -1 for a message that is neither (the caller rejects it).
 */
static int
run_message(const scimq_mpi_msg_t *msg, int rank, struct piv *p,
            struct run_settings *rs, uint64_t *headers_p, uint64_t *ends_p,
            uint64_t *frames_p)
{
    const scimq_block_t *b = piv_block(msg->blocks, msg->block_count, "run");
    struct piv_run run;

    if (b == NULL || b->len != sizeof run)
        return -1;
    memcpy(&run, b->data, sizeof run);
    if (run.magic != PIV_RUN_MAGIC)
        return -1;
    if (run.kind == PIV_RUN_END) {
        (*ends_p)++;
        *frames_p = run.frames;
        return 0;
    }
    if (run.kind != PIV_RUN_HEADER ||
        !piv_window_ok(run.window, run.overlap_pct) || run.window > run.width ||
        run.window > run.height)
        return -1;
    if ((int) run.window != p->n) {
        piv_teardown(p);
        if (piv_setup(p, (int) run.window) != 0) {
            fprintf(stderr, "piv-process: rank %d: FFTW setup failed\n", rank);
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
    }
    rs->window = (int) run.window;
    rs->overlap_pct = (int) run.overlap_pct;
    rs->header = true;
    rs->width = run.width;
    rs->height = run.height;
    rs->pixfmt = run.pixfmt;
    (*headers_p)++;
    return 0;
}

/* Copies the n x n window at (x0, y0) of img (width w), minus its mean. */
static void
take_window(float *dst, const float *img, int w, int x0, int y0, int n)
{
    double sum = 0;
    for (int j = 0; j < n; j++) {
        const float *row = img + (size_t) (y0 + j) * w + x0;
        for (int i = 0; i < n; i++) {
            dst[j * n + i] = row[i];
            sum += row[i];
        }
    }
    float mean = (float) (sum / ((double) n * n));
    for (int k = 0; k < n * n; k++)
        dst[k] -= mean;
}

/* Sub-pixel offset of a peak from its neighbours: 3-point Gaussian fit,
 * parabolic when a value is not positive. */
static double
subpixel(double lo, double c, double hi)
{
    if (lo > 0 && c > 0 && hi > 0) {
        double l = log(lo), m = log(c), h = log(hi);
        double den = 2.0 * l - 4.0 * m + 2.0 * h;
        if (den < 0)
            return (l - h) / den;
    }
    double den = 2.0 * lo - 4.0 * c + 2.0 * hi;
    return den < 0 ? (lo - hi) / den : 0.0;
}

/* Correlates window a at (xa, ya) with window b at (xb, yb): the
 * displacement of b relative to a, in pixels, in *dx, *dy.  Returns the
 * peak height over the window energy (a quality figure). */
static double
correlate_filled(struct piv *p, double *dx, double *dy)
{
    int n = p->n, nh = n / 2 + 1;
    fftwf_execute(p->pa);
    fftwf_execute(p->pb);
    /* R(s) = sum_x a(x) b(x + s)  <=>  conj(A) B */
    for (int k = 0; k < n * nh; k++) {
        float ar = p->fa[k][0], ai = p->fa[k][1];
        float br = p->fb[k][0], bi = p->fb[k][1];
        p->fa[k][0] = ar * br + ai * bi;
        p->fa[k][1] = ar * bi - ai * br;
    }
    fftwf_execute(p->pc);
    const float *r = p->corr;
    int best = 0;
    for (int k = 1; k < n * n; k++)
        if (r[k] > r[best])
            best = k;
    int py = best / n, px = best % n;
#define R(j, i) ((double) r[(((j) + n) % n) * n + (((i) + n) % n)])
    double ox = subpixel(R(py, px - 1), R(py, px), R(py, px + 1));
    double oy = subpixel(R(py - 1, px), R(py, px), R(py + 1, px));
    double peak = R(py, px);
#undef R
    /* Circular lags: n - k is -k. */
    *dx = (px > n / 2 ? px - n : px) + ox;
    *dy = (py > n / 2 ? py - n : py) + oy;
    return peak;
}

static double
correlate(struct piv *p, const float *ia, const float *ib, int w, int xa,
          int ya, int xb, int yb, double *dx, double *dy)
{
    take_window(p->wa, ia, w, xa, ya, p->n);
    take_window(p->wb, ib, w, xb, yb, p->n);
    return correlate_filled(p, dx, dy);
}

/* Bilinear sample of img (w x h) at (x, y), clamped to the image. */
static float
sample(const float *img, int w, int h, double x, double y)
{
    if (x < 0)
        x = 0;
    if (y < 0)
        y = 0;
    if (x > w - 1)
        x = w - 1;
    if (y > h - 1)
        y = h - 1;
    int i = (int) x, j = (int) y;
    if (i > w - 2)
        i = w - 2;
    if (j > h - 2)
        j = h - 2;
    float fx = (float) (x - i), fy = (float) (y - j);
    const float *r0 = img + (size_t) j * w + i, *r1 = r0 + w;
    return (1 - fy) * ((1 - fx) * r0[0] + fx * r0[1]) +
           fy * ((1 - fx) * r1[0] + fx * r1[1]);
}

/* Bilinear interpolation of a grid field g (nx x ny, nodes at
 * i * step + off) at pixel (x, y), clamped to the grid. */
static double
grid_at(const float *g, int nx, int ny, int step, double off, double x,
        double y)
{
    double gx = (x - off) / step, gy = (y - off) / step;
    if (gx < 0)
        gx = 0;
    if (gy < 0)
        gy = 0;
    if (gx > nx - 1)
        gx = nx - 1;
    if (gy > ny - 1)
        gy = ny - 1;
    int i = (int) gx, j = (int) gy;
    if (i > nx - 2)
        i = nx - 2;
    if (j > ny - 2)
        j = ny - 2;
    if (i < 0)
        i = 0;
    if (j < 0)
        j = 0;
    double fx = gx - i, fy = gy - j;
    const float *r0 = g + (size_t) j * nx + i;
    const float *r1 = ny > 1 ? r0 + nx : r0;
    double a = nx > 1 ? r0[1] : r0[0], b = nx > 1 ? r1[1] : r1[0];
    return (1 - fy) * ((1 - fx) * r0[0] + fx * a) +
           fy * ((1 - fx) * r1[0] + fx * b);
}

/* Window deformation pass: samples a at x - d(x)/2 and b at x + d(x)/2,
 * d the predictor field interpolated at every pixel, and correlates: the
 * residual corrects the predictor at the window centre. */
static void
deform_pass(struct piv *p, const float *ia, const float *ib, int w, int h,
            int nx, int ny, int step, const float *pu, const float *pv,
            float *vx, float *vy, float *vu, float *vv)
{
    int n = p->n;
    double off = (n - 1) / 2.0;
    for (int j = 0; j < ny; j++) {
        for (int i = 0; i < nx; i++) {
            size_t k = (size_t) j * nx + i;
            int x0 = i * step, y0 = j * step;
            double sa = 0, sb = 0;
            for (int jj = 0; jj < n; jj++) {
                for (int ii = 0; ii < n; ii++) {
                    double x = x0 + ii, y = y0 + jj;
                    double du = grid_at(pu, nx, ny, step, off, x, y);
                    double dv = grid_at(pv, nx, ny, step, off, x, y);
                    float a = sample(ia, w, h, x - du / 2, y - dv / 2);
                    float b = sample(ib, w, h, x + du / 2, y + dv / 2);
                    p->wa[jj * n + ii] = a;
                    p->wb[jj * n + ii] = b;
                    sa += a;
                    sb += b;
                }
            }
            float ma = (float) (sa / (n * n)), mb = (float) (sb / (n * n));
            for (int q = 0; q < n * n; q++) {
                p->wa[q] -= ma;
                p->wb[q] -= mb;
            }
            double rx, ry;
            correlate_filled(p, &rx, &ry);
            vx[k] = (float) (x0 + off);
            vy[k] = (float) (y0 + off);
            vu[k] = (float) (pu[k] + rx);
            vv[k] = (float) (pv[k] + ry);
        }
    }
}

/* Integer part of the first-pass displacement, split between the two
 * windows: a moves back by lo, b forward by d - lo. */
static int
split_lo(int d)
{
    return d >= 0 ? d / 2 : -((-d + 1) / 2);
}

int
main(int argc, char **argv)
{
    const char *results_queue = "piv.results";
    int window = 32, passes = 2, overlap_pct = 50;
    static const struct option opts[] = {
        {"results-queue", required_argument, NULL, 'r'},
        {"window", required_argument, NULL, 'w'},
        {"overlap", required_argument, NULL, 'o'},
        {"passes", required_argument, NULL, 'p'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0}};
    int o, rank, size, rc;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    while ((o = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (o) {
        case 'r':
            results_queue = optarg;
            break;
        case 'w':
            window = atoi(optarg);
            break;
        case 'o':
            overlap_pct = atoi(optarg);
            break;
        case 'p':
            passes = atoi(optarg);
            break;
        default:
            if (rank == 0)
                fprintf(stderr,
                        "usage: piv-process [--results-queue Q] [--window N] "
                        "[--overlap PERCENT] [--passes 1|2|3]\n");
            MPI_Finalize();
            return o == 'h' ? 0 : 2;
        }
    }
    if (!piv_window_ok(window, overlap_pct) || passes < 1 || passes > 3) {
        if (rank == 0)
            fprintf(stderr, "piv-process: --window a power of two >= 8, "
                            "--passes 1..3, --overlap 0..90\n");
        MPI_Finalize();
        return 2;
    }
    struct run_settings rs = {.window = window, .overlap_pct = overlap_pct};

    struct piv p;
    if (piv_setup(&p, window) != 0) {
        fprintf(stderr, "piv-process: rank %d: FFTW setup failed\n", rank);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    rc = scimq_mpi_init(MPI_COMM_WORLD, NULL, NULL, NULL, NULL);
    if (rc != 0) {
        if (rank == 0)
            fprintf(stderr, "piv-process: %s\n", scimq_strerror(rc));
        piv_teardown(&p);
        MPI_Finalize();
        return 1;
    }

    float *ia = NULL, *ib = NULL, *out = NULL;
    size_t img_cap = 0, out_cap = 0;
    /* frames, compute ns, errors, run headers, run ends, pairs of the run */
    uint64_t mine[6] = {0, 0, 0, 0, 0, 0};
    scimq_mpi_msg_t msg;
    while ((rc = scimq_mpi_next(&msg)) == 0) {
        uint64_t t_recv = piv_now_ns();
        if (msg.flags & SCIMQ_MPI_MSG_CONTROL) {
            if (run_message(&msg, rank, &p, &rs, &mine[3], &mine[4],
                            &mine[5]) != 0) {
                fprintf(stderr,
                        "piv-process: rank %d: control message %" PRIu64
                        " is not a PIV run header or end: rejected\n",
                        rank, msg.msg_id);
                (void) scimq_mpi_nack(NULL, &msg, 0);
                mine[2]++;
            }
            continue;
        }
        int window = rs.window, step = piv_step(rs.window, rs.overlap_pct);
        const scimq_block_t *bm =
            piv_block(msg.blocks, msg.block_count, "meta");
        const scimq_block_t *ba = piv_block(msg.blocks, msg.block_count, "a");
        const scimq_block_t *bb = piv_block(msg.blocks, msg.block_count, "b");
        struct piv_meta m;
        if (bm == NULL || ba == NULL || bb == NULL || bm->len != sizeof m) {
            fprintf(stderr,
                    "piv-process: rank %d: message %" PRIu64
                    " is not a PIV frame pair: dead-lettered\n",
                    rank, msg.msg_id);
            (void) scimq_mpi_nack(NULL, &msg, 0);
            mine[2]++;
            continue;
        }
        memcpy(&m, bm->data, sizeof m);
        size_t npix = (size_t) m.width * m.height;
        size_t psize = m.pixfmt == PIV_U16 ? 2 : 4;
        if (m.magic != PIV_META_MAGIC || ba->len != npix * psize ||
            bb->len != npix * psize || m.width < (uint32_t) window ||
            m.height < (uint32_t) window ||
            (rs.header && (m.width != rs.width || m.height != rs.height ||
                           m.pixfmt != rs.pixfmt))) {
            fprintf(stderr,
                    "piv-process: rank %d: frame %" PRIu64
                    ": bad sizes: dead-lettered\n",
                    rank, m.frame);
            (void) scimq_mpi_nack(NULL, &msg, 0);
            mine[2]++;
            continue;
        }
        if (npix > img_cap) {
            free(ia);
            free(ib);
            ia = malloc(npix * sizeof(float));
            ib = malloc(npix * sizeof(float));
            img_cap = npix;
            if (!ia || !ib) {
                fprintf(stderr, "piv-process: out of memory\n");
                MPI_Abort(MPI_COMM_WORLD, 1);
            }
        }
        /* Pixels to float (blocks need not be aligned: memcpy per row). */
        if (m.pixfmt == PIV_U16) {
            const unsigned char *sa = ba->data, *sb = bb->data;
            for (size_t i = 0; i < npix; i++) {
                uint16_t a, b;
                memcpy(&a, sa + 2 * i, 2);
                memcpy(&b, sb + 2 * i, 2);
                ia[i] = a;
                ib[i] = b;
            }
        } else {
            memcpy(ia, ba->data, npix * 4);
            memcpy(ib, bb->data, npix * 4);
        }
        int w = (int) m.width, h = (int) m.height;
        int nx = (w - window) / step + 1, ny = (h - window) / step + 1;
        size_t nv = (size_t) nx * ny;
        if (6 * nv > out_cap) {
            free(out);
            out = malloc(6 * nv * sizeof(float));
            out_cap = 6 * nv;
            if (!out) {
                fprintf(stderr, "piv-process: out of memory\n");
                MPI_Abort(MPI_COMM_WORLD, 1);
            }
        }
        float *vx = out, *vy = out + nv, *vu = out + 2 * nv, *vv = out + 3 * nv;
        for (int j = 0; j < ny; j++) {
            for (int i = 0; i < nx; i++) {
                size_t k = (size_t) j * nx + i;
                int x0 = i * step, y0 = j * step;
                double dx, dy, cx = x0 + (window - 1) / 2.0,
                               cy = y0 + (window - 1) / 2.0;
                correlate(&p, ia, ib, w, x0, y0, x0, y0, &dx, &dy);
                if (passes >= 2) {
                    int ddx = (int) lround(dx), ddy = (int) lround(dy);
                    int lx = split_lo(ddx), ly = split_lo(ddy);
                    int xa = x0 - lx, ya = y0 - ly;
                    int xb = x0 + ddx - lx, yb = y0 + ddy - ly;
                    if (xa >= 0 && ya >= 0 && xb >= 0 && yb >= 0 &&
                        xa + window <= w && xb + window <= w &&
                        ya + window <= h && yb + window <= h) {
                        double rx, ry;
                        correlate(&p, ia, ib, w, xa, ya, xb, yb, &rx, &ry);
                        dx = ddx + rx;
                        dy = ddy + ry;
                        /* The vector belongs half-way between the windows. */
                        cx += (ddx - 2 * lx) / 2.0;
                        cy += (ddy - 2 * ly) / 2.0;
                    }
                }
                vx[k] = (float) cx;
                vy[k] = (float) cy;
                vu[k] = (float) dx;
                vv[k] = (float) dy;
            }
        }
        if (passes == 3) {
            float *pu = out + 4 * nv, *pv = out + 5 * nv;
            memcpy(pu, vu, nv * sizeof(float));
            memcpy(pv, vv, nv * sizeof(float));
            deform_pass(&p, ia, ib, w, h, nx, ny, step, pu, pv, vx, vy, vu, vv);
        }
        struct piv_field fld;
        memset(&fld, 0, sizeof fld);
        fld.magic = PIV_FIELD_MAGIC;
        fld.nx = (uint32_t) nx;
        fld.ny = (uint32_t) ny;
        fld.window = (uint32_t) window;
        fld.step = (uint32_t) step;
        fld.passes = (uint32_t) passes;
        fld.rank = (uint32_t) rank;
        fld.received_ns = t_recv;
        fld.compute_ns = piv_now_ns() - t_recv;
        scimq_block_t out_blocks[6] = {
            {"meta", &m, sizeof m},        {"field", &fld, sizeof fld},
            {"x", vx, nv * sizeof(float)}, {"y", vy, nv * sizeof(float)},
            {"u", vu, nv * sizeof(float)}, {"v", vv, nv * sizeof(float)}};
        int prc = scimq_mpi_put(NULL, results_queue, out_blocks, 6);
        if (prc != 0) {
            /* Give the frame back: another rank (or run) may succeed. */
            fprintf(stderr, "piv-process: rank %d: put to %s: %s\n", rank,
                    results_queue, scimq_strerror(prc));
            (void) scimq_mpi_nack(NULL, &msg, 1);
            mine[2]++;
            rc = prc;
            break;
        }
        mine[0]++;
        mine[1] += fld.compute_ns;
    }
    if (rc != SCIMQ_EOS)
        fprintf(stderr, "piv-process: rank %d: %s\n", rank, scimq_strerror(rc));

    uint64_t *all =
        rank == 0 ? malloc(6 * sizeof(uint64_t) * (size_t) size) : NULL;
    MPI_Gather(mine, 6, MPI_UINT64_T, all, 6, MPI_UINT64_T, 0, MPI_COMM_WORLD);
    if (rank == 0 && all != NULL) {
        uint64_t frames = 0, ns = 0, errors = 0, headers = 0, ends = 0;
        uint64_t run_frames = 0;
        printf("{\"ranks\": %d, \"frames_per_rank\": [", size);
        for (int r = 0; r < size; r++) {
            printf("%s%" PRIu64, r ? ", " : "", all[6 * r]);
            frames += all[6 * r];
            ns += all[6 * r + 1];
            errors += all[6 * r + 2];
            headers += all[6 * r + 3];
            ends += all[6 * r + 4];
            if (all[6 * r + 5] > run_frames)
                run_frames = all[6 * r + 5];
        }
        printf("], \"frames\": %" PRIu64 ", \"errors\": %" PRIu64
               ", \"window\": %d, \"step\": %d, \"passes\": %d, "
               "\"compute_ms_mean\": %.2f, \"run_headers\": %" PRIu64
               ", \"run_ends\": %" PRIu64 ", \"run_frames\": %" PRIu64 "}\n",
               frames, errors, rs.window, piv_step(rs.window, rs.overlap_pct),
               passes, frames ? ns / 1e6 / (double) frames : 0.0, headers, ends,
               run_frames);
        fflush(stdout);
    }
    free(all);
    scimq_mpi_finalize(NULL);
    free(ia);
    free(ib);
    free(out);
    piv_teardown(&p);
    MPI_Finalize();
    return rc == SCIMQ_EOS ? 0 : 1;
}
