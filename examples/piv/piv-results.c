/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * piv-results: the receiving end of the PIV example, next to the camera.
 * Consumes the results queue, recomputes the true displacement at every
 * vector position from the flow parameters in the echoed meta block, and
 * reports per frame the RMS displacement error (pixels) over the windows
 * away from the border (windows within one window of the image edge are
 * left out) and the end-to-end latency (now - capture time).
 *
 *   piv-results [--url URL] [--queue piv.results] [--frames N]
 *               [--timeout S] [--max-rms PX] [--verbose]
 *
 * Stops after N distinct frames (or at end of stream, or after S seconds
 * without a result); ends with one JSON line: frames, rms_px (mean, max),
 * latency_ms (min, median, max), and exits 1 if a frame is missing or the
 * worst RMS error exceeds --max-rms (0.1 px).
 */
#include "config.h"

#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <scimq/client.h>
#include <scimq/error.h>

#include "piv.h"

static int
cmp_double(const void *a, const void *b)
{
    double x = *(const double *) a, y = *(const double *) b;
    return x < y ? -1 : x > y;
}

static float
get_f32(const scimq_block_t *b, size_t i)
{
    float f;
    memcpy(&f, (const unsigned char *) b->data + 4 * i, 4);
    return f;
}

int
main(int argc, char **argv)
{
    const char *url = getenv("SCIMQ_URL"), *queue = "piv.results";
    long expect = 0;
    int timeout_s = 60, verbose = 0;
    double max_rms = 0.1;
    static const struct option opts[] = {
        {"url", required_argument, NULL, 'u'},
        {"queue", required_argument, NULL, 'q'},
        {"frames", required_argument, NULL, 'n'},
        {"timeout", required_argument, NULL, 't'},
        {"max-rms", required_argument, NULL, 'm'},
        {"verbose", no_argument, NULL, 'v'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0}};
    int o;

    while ((o = getopt_long(argc, argv, "hv", opts, NULL)) != -1) {
        switch (o) {
        case 'u':
            url = optarg;
            break;
        case 'q':
            queue = optarg;
            break;
        case 'n':
            expect = strtol(optarg, NULL, 10);
            break;
        case 't':
            timeout_s = atoi(optarg);
            break;
        case 'm':
            max_rms = strtod(optarg, NULL);
            break;
        case 'v':
            verbose = 1;
            break;
        default:
            fprintf(o == 'h' ? stdout : stderr,
                    "usage: piv-results [--url URL] [--queue Q] [--frames N] "
                    "[--timeout S] [--max-rms PX] [--verbose]\n");
            return o == 'h' ? 0 : 2;
        }
    }
    if (url == NULL) {
        fprintf(stderr, "piv-results: no --url and no SCIMQ_URL\n");
        return 2;
    }
    scimq_client_options_t copts;
    scimq_client_options_default(&copts);
    copts.client_name = "piv-results";
    scimq_client_t *c;
    int rc = scimq_client_open(url, &copts, &c);
    if (rc != 0) {
        fprintf(stderr, "piv-results: %s: %s\n", url, scimq_strerror(rc));
        return 1;
    }
    rc = scimq_client_subscribe(c, queue, 16, 0);
    if (rc != 0) {
        fprintf(stderr, "piv-results: subscribe %s: %s\n", queue,
                scimq_strerror(rc));
        scimq_client_close(c);
        return 1;
    }

    size_t cap = 1024, nres = 0, dups = 0, bad = 0;
    double *rms = malloc(cap * sizeof(double)),
           *lat = malloc(cap * sizeof(double));
    uint64_t *seen = malloc(cap * sizeof(uint64_t));
    uint64_t total_vectors = 0, outliers = 0, npix_max = 0;
    uint32_t nx_last = 0, ny_last = 0;
    double compute_ms_sum = 0;
    const char *end = "count";
    if (!rms || !lat || !seen) {
        fprintf(stderr, "piv-results: out of memory\n");
        return 1;
    }
    while (expect == 0 || (long) nres < expect) {
        scimq_message_t *msg;
        rc = scimq_client_get(c, &msg, timeout_s * 1000);
        if (rc == SCIMQ_EOS) {
            end = "eos";
            break;
        }
        if (rc == SCIMQ_ETIMEDOUT) {
            end = "timeout";
            break;
        }
        if (rc != 0) {
            fprintf(stderr, "piv-results: get: %s\n", scimq_strerror(rc));
            end = "error";
            break;
        }
        uint64_t now = piv_now_ns();
        const scimq_block_t *bm =
            piv_block(msg->blocks, msg->block_count, "meta");
        const scimq_block_t *bf =
            piv_block(msg->blocks, msg->block_count, "field");
        const scimq_block_t *bx = piv_block(msg->blocks, msg->block_count, "x");
        const scimq_block_t *by = piv_block(msg->blocks, msg->block_count, "y");
        const scimq_block_t *bu = piv_block(msg->blocks, msg->block_count, "u");
        const scimq_block_t *bv = piv_block(msg->blocks, msg->block_count, "v");
        struct piv_meta m;
        struct piv_field f;
        if (!bm || !bf || !bx || !by || !bu || !bv || bm->len != sizeof m ||
            bf->len != sizeof f) {
            fprintf(stderr,
                    "piv-results: message %" PRIu64 " is not a PIV result\n",
                    msg->msg_id);
            bad++;
            scimq_client_ack(c, msg);
            scimq_message_free(c, msg);
            continue;
        }
        memcpy(&m, bm->data, sizeof m);
        memcpy(&f, bf->data, sizeof f);
        size_t nv = (size_t) f.nx * f.ny;
        if (bx->len != 4 * nv || by->len != 4 * nv || bu->len != 4 * nv ||
            bv->len != 4 * nv) {
            fprintf(stderr, "piv-results: frame %" PRIu64 ": bad field\n",
                    m.frame);
            bad++;
            scimq_client_ack(c, msg);
            scimq_message_free(c, msg);
            continue;
        }
        int dup = 0;
        for (size_t i = 0; i < nres; i++)
            if (seen[i] == m.frame)
                dup = 1;
        if (dup) { /* a redelivered frame computed twice */
            dups++;
            scimq_client_ack(c, msg);
            scimq_message_free(c, msg);
            continue;
        }
        /* Error against the truth, away from the border. */
        double se = 0, border = f.window;
        uint64_t counted = 0;
        for (size_t k = 0; k < nv; k++) {
            double x = get_f32(bx, k), y = get_f32(by, k);
            double half = f.window / 2.0;
            if (x - half < border || y - half < border ||
                x + half > m.width - border || y + half > m.height - border)
                continue;
            double tu, tv;
            piv_flow_eval(&m.flow, x, y, &tu, &tv);
            double eu = get_f32(bu, k) - tu, ev = get_f32(bv, k) - tv;
            double e2 = eu * eu + ev * ev;
            if (e2 > 1.0)
                outliers++;
            se += e2;
            counted++;
        }
        if (nres == cap) {
            cap *= 2;
            rms = realloc(rms, cap * sizeof(double));
            lat = realloc(lat, cap * sizeof(double));
            seen = realloc(seen, cap * sizeof(uint64_t));
            if (!rms || !lat || !seen) {
                fprintf(stderr, "piv-results: out of memory\n");
                return 1;
            }
        }
        seen[nres] = m.frame;
        rms[nres] = counted ? sqrt(se / (double) counted) : NAN;
        lat[nres] = (now - m.capture_ns) / 1e6;
        total_vectors += counted;
        compute_ms_sum += f.compute_ns / 1e6;
        nx_last = f.nx;
        ny_last = f.ny;
        if ((uint64_t) m.width * m.height > npix_max)
            npix_max = (uint64_t) m.width * m.height;
        if (verbose)
            fprintf(
                stderr,
                "frame %" PRIu64 ": rank %u, %ux%u vectors (%" PRIu64
                " checked), rms %.4f px, latency %.1f ms, compute %.1f ms\n",
                m.frame, f.rank, f.nx, f.ny, counted, rms[nres], lat[nres],
                f.compute_ns / 1e6);
        nres++;
        scimq_client_ack(c, msg);
        scimq_message_free(c, msg);
    }
    scimq_client_close(c);

    double rms_mean = 0, rms_max = 0;
    int rms_bad = 0;
    for (size_t i = 0; i < nres; i++) {
        if (isnan(rms[i])) {
            rms_bad = 1;
            continue;
        }
        rms_mean += rms[i];
        if (rms[i] > rms_max)
            rms_max = rms[i];
    }
    if (nres)
        rms_mean /= (double) nres;
    qsort(lat, nres, sizeof(double), cmp_double);
    double lmin = nres ? lat[0] : 0, lmax = nres ? lat[nres - 1] : 0;
    double lmed = nres == 0  ? 0
                  : nres % 2 ? lat[nres / 2]
                             : 0.5 * (lat[nres / 2 - 1] + lat[nres / 2]);
    long missing = expect > (long) nres ? expect - (long) nres : 0;
    int pass = missing == 0 && nres > 0 && !rms_bad && rms_max <= max_rms;
    printf("{\"frames\": %zu, \"expected\": %ld, \"missing\": %ld, "
           "\"duplicates\": %zu, \"bad\": %zu, \"end\": \"%s\", "
           "\"vectors\": [%u, %u], \"vectors_checked\": %" PRIu64
           ", \"outliers\": %" PRIu64 ", "
           "\"rms_px\": {\"mean\": %.4f, \"max\": %.4f}, "
           "\"latency_ms\": {\"min\": %.2f, \"median\": %.2f, \"max\": %.2f}, "
           "\"compute_ms_mean\": %.2f, \"pass\": %s}\n",
           nres, expect, missing, dups, bad, end, nx_last, ny_last,
           total_vectors, outliers, rms_mean, rms_max, lmin, lmed, lmax,
           nres ? compute_ms_sum / (double) nres : 0.0,
           pass ? "true" : "false");
    (void) npix_max;
    free(rms);
    free(lat);
    free(seen);
    return pass ? 0 : 1;
}
