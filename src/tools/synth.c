/* SPDX-License-Identifier: BSD-3-Clause */
#include "config.h"

#include <endian.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#endif

#include <scimq/error.h>
#include <scimq/proto.h>

#include "iofd.h"
#include "protocol/wire.h"
#include "seqset.h"
#include "synth.h"

static const char synth_magic[8] = {'S', 'C', 'I', 'M', 'Q', 'S', 'Y', 'N'};

/* splitmix64: fast, and distinct streams for distinct seeds. */
static inline uint64_t
splitmix64(uint64_t *state)
{
    uint64_t z = (*state += 0x9E3779B97F4A7C15ull);

    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

#define SPLITMIX_GAMMA 0x9E3779B97F4A7C15ull

/*
 * The body is splitmix64's output words from state0, each stored
 * big-endian.  Word k depends only on state0 + (k + 1) * gamma, not on the
 * word before it, so the words are computed independently: the loop has
 * no carried dependence and several words are in flight at once (twice
 * as fast as calling splitmix64() in turn, measured).
 */
static void
synth_body_scalar(uint8_t *p, size_t nwords, uint64_t state0)
{
    for (size_t k = 0; k < nwords; k++) {
        uint64_t z = state0 + (k + 1) * SPLITMIX_GAMMA;

        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
        z = htobe64(z ^ (z >> 31));
        memcpy(p + 8 * k, &z, sizeof(z));
    }
}

#if defined(__x86_64__) && defined(__GNUC__)
#define SYNTH_HAVE_AVX512 1
/*
 * The same words, eight at a time with AVX-512 (vpmullq is AVX512DQ, the
 * byte swap vpshufb on 512 bits AVX512BW): about 3x the scalar loop on a
 * Xeon, since the two 64-bit multiplications per word are what bounds it.
 * Chosen at run time (synth_body), so the binary still runs on any
 * x86-64.
 */
__attribute__((target("avx512f,avx512dq,avx512bw"))) static void
synth_body_avx512(uint8_t *p, size_t nwords, uint64_t state0)
{
    const __m512i step = _mm512_set1_epi64((long long) (8 * SPLITMIX_GAMMA));
    const __m512i m1 = _mm512_set1_epi64((long long) 0xBF58476D1CE4E5B9ull);
    const __m512i m2 = _mm512_set1_epi64((long long) 0x94D049BB133111EBull);
    /* Reverses the bytes of every 64-bit lane (within 128-bit halves). */
    const __m512i bswap =
        _mm512_set4_epi32(0x08090a0b, 0x0c0d0e0f, 0x00010203, 0x04050607);
    __m512i st = _mm512_add_epi64(
        _mm512_set1_epi64((long long) state0),
        _mm512_mullo_epi64(_mm512_set_epi64(8, 7, 6, 5, 4, 3, 2, 1),
                           _mm512_set1_epi64((long long) SPLITMIX_GAMMA)));
    size_t k = 0;

    for (; k + 8 <= nwords; k += 8) {
        __m512i z = st;

        st = _mm512_add_epi64(st, step);
        z = _mm512_mullo_epi64(_mm512_xor_si512(z, _mm512_srli_epi64(z, 30)),
                               m1);
        z = _mm512_mullo_epi64(_mm512_xor_si512(z, _mm512_srli_epi64(z, 27)),
                               m2);
        z = _mm512_xor_si512(z, _mm512_srli_epi64(z, 31));
        _mm512_storeu_si512((void *) (p + 8 * k),
                            _mm512_shuffle_epi8(z, bswap));
    }
    synth_body_scalar(p + 8 * k, nwords - k, state0 + k * SPLITMIX_GAMMA);
}
#endif

static void
synth_body(uint8_t *p, size_t nwords, uint64_t state0)
{
#ifdef SYNTH_HAVE_AVX512
    /* A read of what libgcc found at start-up: cheap enough per call. */
    if (__builtin_cpu_supports("avx512dq") &&
        __builtin_cpu_supports("avx512bw")) {
        synth_body_avx512(p, nwords, state0);
        return;
    }
#endif
    synth_body_scalar(p, nwords, state0);
}

/*
 * Bytes generated, then checksummed, at a time: the chunk is still in the
 * cache when the CRC reads it, so a large payload crosses memory once
 * instead of twice.  A multiple of 8 (whole words).
 */
#define SYNTH_CHUNK ((size_t) 32 << 10)

int
scimq__synth_fill(void *buf, size_t len, uint64_t seq)
{
    uint8_t *p = buf;
    uint64_t state = seq ^ 0x5343494D51ull;
    size_t i = SCIMQ_SYNTH_HEADER_LEN;
    uint32_t crc = 0;

    if (buf == NULL || len < SCIMQ_SYNTH_HEADER_LEN)
        return SCIMQ_EINVAL;
    /* Big-endian like every other SciMQ byte, so the filler is portable.
     * The CRC chains over the chunks (scimq_proto_crc32c). */
    while (len - i >= 8) {
        size_t n = (len - i) & ~(size_t) 7;

        n = n < SYNTH_CHUNK ? n : SYNTH_CHUNK;
        synth_body(p + i, n / 8, state);
        state += (n / 8) * SPLITMIX_GAMMA;
        crc = scimq_proto_crc32c(crc, p + i, n);
        i += n;
    }
    if (i < len) {
        uint8_t last[8];

        wire_put64(last, splitmix64(&state));
        memcpy(p + i, last, len - i);
        crc = scimq_proto_crc32c(crc, p + i, len - i);
    }
    memcpy(p, synth_magic, sizeof(synth_magic));
    wire_put64(p + 8, seq);
    wire_put64(p + 16, len);
    wire_put32(p + 24, crc);
    wire_put32(p + 28, scimq_proto_crc32c(0, p, 28));
    return 0;
}

int
scimq__synth_verify(const void *buf, size_t len, uint64_t *seq_p)
{
    const uint8_t *p = buf;

    if (buf == NULL || len < SCIMQ_SYNTH_HEADER_LEN ||
        memcmp(p, synth_magic, sizeof(synth_magic)) != 0)
        return SCIMQ_EINVAL;
    if (wire_get32(p + 28) != scimq_proto_crc32c(0, p, 28))
        return SCIMQ_EPROTO_DATASUM;
    if (wire_get64(p + 16) != len)
        return SCIMQ_EPROTO_DATASUM; /* cut short or padded on the way */
    if (wire_get32(p + 24) != scimq_proto_crc32c(0, p + SCIMQ_SYNTH_HEADER_LEN,
                                                 len - SCIMQ_SYNTH_HEADER_LEN))
        return SCIMQ_EPROTO_DATASUM;
    *seq_p = wire_get64(p + 8);
    return 0;
}

uint64_t
scimq__synth_size(uint64_t seq, uint64_t min, uint64_t max)
{
    uint64_t state = seq ^ 0x53495a45ull; /* "SIZE" */
    double u, size;

    if (min >= max)
        return min;
    u = (double) (splitmix64(&state) >> 11) * 0x1.0p-53;
    size = (double) min * pow((double) max / (double) min, u * u * u * u);
    if (size < (double) min)
        return min;
    if (size > (double) max)
        return max;
    return (uint64_t) size;
}

const scimq_block_t *
scimq__synth_block(const scimq_block_t *blocks, uint32_t count)
{
    for (uint32_t i = 0; i < count; i++)
        if (blocks[i].name != NULL && strcmp(blocks[i].name, "data") == 0)
            return &blocks[i];
    return count > 0 ? &blocks[0] : NULL;
}

int
scimq__synth_record(const scimq_block_t *b, struct scimq_seqset *seqs,
                    int log_fd, uint64_t *seq_p)
{
    char line[32];
    int n, rc = scimq__synth_verify(b->data, (size_t) b->len, seq_p);

    if (rc != 0)
        return rc;
    (void) scimq__seqset_add(seqs, *seq_p);
    if (log_fd >= 0) {
        n = snprintf(line, sizeof(line), "%" PRIu64 "\n", *seq_p);
        (void) scimq__write_all(log_fd, line, (size_t) n);
    }
    return 0;
}
