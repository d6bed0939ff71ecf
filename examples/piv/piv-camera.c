/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * piv-camera: a synthetic PIV camera.  Each message is one image pair: image
 * "a" holds Gaussian particle images at random positions, image "b" the same
 * particles moved by a known flow (a Lamb-Oseen vortex or a linear shear),
 * plus a "meta" block with the frame number, the capture time and the flow
 * parameters, so that the results can be checked against the truth.
 *
 *   piv-camera [--url scimq://HOST:PORT] [--queue piv.frames] [--frames N]
 *              [--size WxH] [--format u16|f32] [--rate FPS] [--seed S]
 *              [--flow vortex|shear] [--max-disp PX] [--core FRACTION]
 *              [--density PPP] [--diameter PX] [--noise COUNTS]
 *              [--window N] [--overlap PERCENT] [--streams K] [--close]
 *
 * Default: 2048x2048 uint16 pixels, two images: 16 MiB per message.
 * The pairs are framed by a run header (image size and format, and the
 * interrogation window and overlap the run is to be processed with,
 * --window 32 --overlap 50) and an end of series (the number of pairs),
 * sent as control messages, which every rank of piv-process gets.
 * The displacement of a particle is evaluated at its mid-path position
 * (xb = xa + U((xa + xb) / 2), solved by fixed-point iteration): the
 * convention of central-difference PIV, which measures U at the window
 * centre.  Ends with one JSON line on stdout.
 */
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <scimq/client.h>
#include <scimq/error.h>

#include "piv.h"

static uint64_t rng_state;

static uint64_t
rng_next(void)
{
    /* splitmix64 */
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static double
rng_uniform(void) /* [0, 1) */
{
    return (double) (rng_next() >> 11) * (1.0 / 9007199254740992.0);
}

/* Approximately normal (sum of 4 uniforms, unit variance): cheap enough
 * for millions of pixels per frame. */
static float
rng_noise(void)
{
    uint64_t z = rng_next();
    int s = (int) (z & 0xffff) + (int) ((z >> 16) & 0xffff) +
            (int) ((z >> 32) & 0xffff) + (int) (z >> 48);
    return (float) ((s - 131070) * (1.0 / 37837.0)); /* sd 65536/sqrt(3) */
}

/* Adds a Gaussian particle image (peak i0, e^-2 diameter d) at (x, y);
 * the Gaussian is separable: one exp per row and per column. */
static void
splat(float *img, int w, int h, double x, double y, double i0, double d)
{
    enum { RMAX = 16 };
    int r = (int) ceil(0.75 * d); /* e^-2 at d/2, e^-4.5 at 0.75 d */
    int ix = (int) floor(x + 0.5), iy = (int) floor(y + 0.5);
    double k = 8.0 / (d * d), ex[2 * RMAX + 1], ey[2 * RMAX + 1];
    if (r > RMAX)
        r = RMAX;
    for (int t = -r; t <= r; t++) {
        ex[t + r] = exp(-k * (ix + t - x) * (ix + t - x));
        ey[t + r] = i0 * exp(-k * (iy + t - y) * (iy + t - y));
    }
    for (int j = iy - r; j <= iy + r; j++) {
        if (j < 0 || j >= h)
            continue;
        for (int i = ix - r; i <= ix + r; i++) {
            if (i < 0 || i >= w)
                continue;
            img[(size_t) j * w + i] +=
                (float) (ey[j - iy + r] * ex[i - ix + r]);
        }
    }
}

static void
usage(FILE *f)
{
    fprintf(f, "usage: piv-camera [--url URL] [--queue Q] [--frames N] "
               "[--size WxH]\n"
               "       [--format u16|f32] [--rate FPS] [--seed S] "
               "[--flow vortex|shear]\n"
               "       [--max-disp PX] [--core FRACTION] [--density PPP] "
               "[--diameter PX]\n"
               "       [--noise COUNTS] [--window N] [--overlap PERCENT]\n"
               "       [--streams K] [--close]\n");
}

/* Sends a run header or end as a control message; 1 when sent, 0 when the
 * gateway cannot take control messages (older than SciMP 1.2: the run
 * goes without them, piv-process then uses its own settings). */
static int
send_run(scimq_client_t *c, const char *queue, const struct piv_run *run)
{
    scimq_block_t block = {"run", run, sizeof *run};
    int rc = scimq_client_put_flags(c, queue, &block, 1, SCIMQ_PUT_CONTROL,
                                    NULL, NULL);

    if (rc != 0)
        fprintf(stderr,
                "piv-camera: %s of the run not sent (%s): piv-process "
                "uses its own window settings\n",
                run->kind == PIV_RUN_HEADER ? "header" : "end",
                scimq_strerror(rc));
    return rc == 0;
}

int
main(int argc, char **argv)
{
    const char *url = getenv("SCIMQ_URL"), *queue = "piv.frames";
    long frames = 10;
    int w = 2048, h = 2048, pixfmt = PIV_U16, flow = PIV_FLOW_VORTEX;
    int streams = 1, do_close = 0, window = 32, overlap_pct = 50;
    double rate = 0, max_disp = 4.0, core = 0.2, density = 0.02;
    double diameter = 3.0, noise = 10.0, peak = 1000.0;
    uint64_t seed = 1;
    static const struct option opts[] = {
        {"url", required_argument, NULL, 'u'},
        {"queue", required_argument, NULL, 'q'},
        {"frames", required_argument, NULL, 'n'},
        {"size", required_argument, NULL, 's'},
        {"format", required_argument, NULL, 'f'},
        {"rate", required_argument, NULL, 'r'},
        {"seed", required_argument, NULL, 'S'},
        {"flow", required_argument, NULL, 'F'},
        {"max-disp", required_argument, NULL, 'D'},
        {"core", required_argument, NULL, 'c'},
        {"density", required_argument, NULL, 'p'},
        {"diameter", required_argument, NULL, 'd'},
        {"noise", required_argument, NULL, 'N'},
        {"window", required_argument, NULL, 'w'},
        {"overlap", required_argument, NULL, 'o'},
        {"streams", required_argument, NULL, 'k'},
        {"close", no_argument, NULL, 'C'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0}};
    int o;

    while ((o = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (o) {
        case 'u':
            url = optarg;
            break;
        case 'q':
            queue = optarg;
            break;
        case 'n':
            frames = strtol(optarg, NULL, 10);
            break;
        case 's':
            if (sscanf(optarg, "%dx%d", &w, &h) != 2 || w < 64 || h < 64) {
                fprintf(stderr, "piv-camera: bad --size %s (WxH, >= 64)\n",
                        optarg);
                return 2;
            }
            break;
        case 'f':
            if (strcmp(optarg, "u16") == 0)
                pixfmt = PIV_U16;
            else if (strcmp(optarg, "f32") == 0)
                pixfmt = PIV_F32;
            else {
                fprintf(stderr, "piv-camera: --format u16 or f32\n");
                return 2;
            }
            break;
        case 'r':
            rate = strtod(optarg, NULL);
            break;
        case 'S':
            seed = strtoull(optarg, NULL, 10);
            break;
        case 'F':
            if (strcmp(optarg, "vortex") == 0)
                flow = PIV_FLOW_VORTEX;
            else if (strcmp(optarg, "shear") == 0)
                flow = PIV_FLOW_SHEAR;
            else {
                fprintf(stderr, "piv-camera: --flow vortex or shear\n");
                return 2;
            }
            break;
        case 'D':
            max_disp = strtod(optarg, NULL);
            break;
        case 'c':
            core = strtod(optarg, NULL);
            break;
        case 'p':
            density = strtod(optarg, NULL);
            break;
        case 'd':
            diameter = strtod(optarg, NULL);
            break;
        case 'N':
            noise = strtod(optarg, NULL);
            break;
        case 'w':
            window = atoi(optarg);
            break;
        case 'o':
            overlap_pct = atoi(optarg);
            break;
        case 'k':
            streams = atoi(optarg);
            break;
        case 'C':
            do_close = 1;
            break;
        case 'h':
            usage(stdout);
            return 0;
        default:
            usage(stderr);
            return 2;
        }
    }
    if (url == NULL) {
        fprintf(stderr, "piv-camera: no --url and no SCIMQ_URL\n");
        return 2;
    }
    if (frames < 1 || streams < 1 || core <= 0 || diameter <= 0) {
        usage(stderr);
        return 2;
    }
    if (!piv_window_ok(window, overlap_pct) || window > w || window > h) {
        fprintf(stderr, "piv-camera: --window a power of two >= 8 and at "
                        "most the image side, --overlap 0..90\n");
        return 2;
    }

    scimq_client_options_t copts;
    scimq_client_options_default(&copts);
    copts.streams = (uint32_t) streams;
    copts.client_name = "piv-camera";
    scimq_client_t *c;
    int rc = scimq_client_open(url, &copts, &c);
    if (rc != 0) {
        fprintf(stderr, "piv-camera: %s: %s\n", url, scimq_strerror(rc));
        return 1;
    }

    size_t npix = (size_t) w * h;
    size_t psize = pixfmt == PIV_U16 ? 2 : 4;
    float *fa = malloc(npix * sizeof(float)),
          *fb = malloc(npix * sizeof(float));
    void *pa = malloc(npix * psize), *pb = malloc(npix * psize);
    if (!fa || !fb || !pa || !pb) {
        fprintf(stderr, "piv-camera: out of memory\n");
        return 1;
    }
    /* Particles may enter or leave the field of view. */
    double margin = max_disp + 2 * diameter + 2;
    long nparticles = lround(density * (w + 2 * margin) * (h + 2 * margin));
    rng_state = seed;

    struct piv_run run = {.magic = PIV_RUN_MAGIC,
                          .kind = PIV_RUN_HEADER,
                          .seed = seed,
                          .width = (uint32_t) w,
                          .height = (uint32_t) h,
                          .pixfmt = (uint32_t) pixfmt,
                          .window = (uint32_t) window,
                          .overlap_pct = (uint32_t) overlap_pct};
    int control = send_run(c, queue, &run);
    uint64_t t0 = piv_now_ns(), bytes = 0;
    long sent = 0;
    for (long f = 0; f < frames; f++) {
        if (rate > 0) {
            /* Frame f is due at t0 + f / rate. */
            uint64_t due = t0 + (uint64_t) (f * 1e9 / rate), now = piv_now_ns();
            if (due > now) {
                struct timespec ts = {(time_t) ((due - now) / 1000000000u),
                                      (long) ((due - now) % 1000000000u)};
                while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
                    ;
            }
        }
        struct piv_meta m;
        memset(&m, 0, sizeof m);
        m.magic = PIV_META_MAGIC;
        m.version = 1;
        m.frame = (uint64_t) f;
        m.width = (uint32_t) w;
        m.height = (uint32_t) h;
        m.pixfmt = (uint32_t) pixfmt;
        m.flow.kind = (uint32_t) flow;
        m.flow.dmax = max_disp;
        m.flow.rc = core * (w < h ? w : h);
        /* The vortex wanders a little from frame to frame. */
        m.flow.xc = w / 2.0 + (rng_uniform() - 0.5) * w / 10.0;
        m.flow.yc = h / 2.0 + (rng_uniform() - 0.5) * h / 10.0;
        if (flow == PIV_FLOW_SHEAR)
            m.flow.rc = h / 2.0; /* u = dmax at the top and bottom edges */

        memset(fa, 0, npix * sizeof(float));
        memset(fb, 0, npix * sizeof(float));
        for (long p = 0; p < nparticles; p++) {
            double xa = -margin + rng_uniform() * (w + 2 * margin);
            double ya = -margin + rng_uniform() * (h + 2 * margin);
            double i0 = peak * (0.5 + 0.5 * rng_uniform());
            double u, v, xb, yb;
            piv_flow_eval(&m.flow, xa, ya, &u, &v);
            xb = xa + u;
            yb = ya + v;
            for (int it = 0; it < 4; it++) { /* mid-path displacement */
                piv_flow_eval(&m.flow, 0.5 * (xa + xb), 0.5 * (ya + yb), &u,
                              &v);
                xb = xa + u;
                yb = ya + v;
            }
            splat(fa, w, h, xa, ya, i0, diameter);
            splat(fb, w, h, xb, yb, i0, diameter);
        }
        float fnoise = (float) noise;
        for (size_t i = 0; i < npix; i++) {
            float va = fa[i], vb = fb[i];
            if (noise > 0) { /* background plus noise, sd = --noise */
                va += fnoise * (1.0f + rng_noise());
                vb += fnoise * (1.0f + rng_noise());
            }
            if (pixfmt == PIV_U16) {
                va = va < 0 ? 0 : va > 65535 ? 65535 : va;
                vb = vb < 0 ? 0 : vb > 65535 ? 65535 : vb;
                ((uint16_t *) pa)[i] = (uint16_t) lrintf(va);
                ((uint16_t *) pb)[i] = (uint16_t) lrintf(vb);
            } else {
                ((float *) pa)[i] = va;
                ((float *) pb)[i] = vb;
            }
        }
        m.capture_ns = piv_now_ns(); /* the pair is "exposed" now */
        scimq_block_t blocks[3] = {{"meta", &m, sizeof m},
                                   {"a", pa, npix * psize},
                                   {"b", pb, npix * psize}};
        rc = scimq_client_put(c, queue, blocks, 3, NULL, NULL);
        if (rc != 0) {
            fprintf(stderr, "piv-camera: put frame %ld to %s: %s\n", f, queue,
                    scimq_strerror(rc));
            break;
        }
        sent++;
        bytes += sizeof m + 2 * npix * psize;
    }
    double secs = (piv_now_ns() - t0) / 1e9;
    if (rc == 0 && control > 0) {
        run.kind = PIV_RUN_END;
        run.frames = (uint64_t) sent;
        control += send_run(c, queue, &run);
    }
    if (rc == 0 && do_close) {
        rc = scimq_client_queue_close(c, queue);
        if (rc != 0)
            fprintf(stderr, "piv-camera: close %s: %s\n", queue,
                    scimq_strerror(rc));
    }
    int crc = scimq_client_close(c);
    if (rc == 0)
        rc = crc;
    printf("{\"frames\": %ld, \"bytes\": %" PRIu64
           ", \"message_bytes\": %zu, \"width\": %d, \"height\": %d, "
           "\"particles\": %ld, \"seconds\": %.3f, \"fps\": %.2f, "
           "\"MiB_per_s\": %.1f, \"control\": %d}\n",
           sent, bytes, sizeof(struct piv_meta) + 2 * npix * psize, w, h,
           nparticles, secs, secs > 0 ? sent / secs : 0.0,
           secs > 0 ? bytes / secs / 1048576.0 : 0.0, control);
    free(fa);
    free(fb);
    free(pa);
    free(pb);
    return rc == 0 ? 0 : 1;
}
