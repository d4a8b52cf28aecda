/*
 * Internal to cpu_packed*.c: the packed layouts and the micro-kernel table.
 *
 * Packed weights: rows in groups of PK_ROWS = 4 (the last group padded with
 * zero rows), group g at data + g * group_bytes. A group holds its nb blocks
 * in chunks of pk_chunk_blocks(hdr_bytes) blocks (the last one may hold
 * fewer): first the chunk's block headers (scales; hdr_bytes each, whole
 * lines for a full chunk), then their quants (q_bytes each, a multiple of
 * 64), so that
 * a matrix-vector product reads each group as one stream (pk_block). The
 * quants
 * put the 4 rows side by side, 16 bytes each, so that a 512-bit load holds
 * the same 16 elements of the 4 rows and dword lane 4 r + k holds 4
 * consecutive elements of row r, b1892's lane k (elements 0..15 of a 32) or
 * 4 + k (16..31). Halves are the rows' in order (row r at 2 r).
 *
 *   (Q4_0, Q8_0: in groups of 16 in both modes, below.)
 *   Q5_0  hdr 24: d, then the fifth bits of elements 0..15 of rows 0..3 (16
 *         bits a row), then of elements 16..31.  q 64: row r's 16 quant
 *         bytes at 16 r (low nibble element j, high nibble element 16 + j,
 *         as in the file).
 *   Q4_1  hdr 16: d, then the mins m.  q 64: as Q5_0's.
 *   Q5_1  hdr 32: d, m, then the fifth bits as Q5_0's.  q 64: as Q5_0's.
 *   Q2_K  hdr 80: d[4], the file's scale bytes (4-bit scale | 4-bit min
 *         << 4) as sc[16-group][row] (16 x 4 bytes, where Q6_K has its
 *         scales), dmin[4].  q 256: as Q3_K's first 256. (The file's size.)
 *   Q3_K  hdr 72: as Q6_K's, the scales less their bias 32.  q 384: for
 *         n = 0..1, h = 0..1 the file's qs[32 n + 16 h ..+15] of each row
 *         (bits 2 k: chunk 4 n + k), then for h = 0..1 its hmask[16 h ..+15]
 *         (bit 4 n + k: chunk 4 n + k).
 *   Q4_K  hdr 80: d[4], dmin[4], then the 6-bit scales as sc[chunk][row]
 *         (8 x 4 bytes), then the 6-bit mins as mn[row][j] (4 x 8 bytes).
 *         q 512: for j = 0..3, h = 0..1: the file's qs[32 j + 16 h ..+15] of
 *         each row (low nibbles: chunk 2 j, high: chunk 2 j + 1; elements
 *         16 h..16 h + 15 of each).
 *   Q5_K  hdr 80: as Q4_K.  q 640: the nibbles as Q4_K's (512), then for
 *         h = 0..1 the file's qh[16 h ..+15] of each row (bit 2 j: chunk
 *         2 j, bit 2 j + 1: chunk 2 j + 1).
 *   Q6_K  hdr 72: d[4], then the scales as sc[16-group][row] (16 x 4 bytes).
 *         q 768: for n = 0..1, h = 0..1, 192 bytes: the file's
 *         ql[64 n + 16 h ..+15] (chunks 4n, 4n+2), ql[64 n + 32 + 16 h ..]
 *         (chunks 4n+1, 4n+3) and qh[32 n + 16 h ..] of each row.
 *
 * Q4_0 and Q8_0 in both modes, and in fast mode (LLAMAC_MATMUL=fast,
 * cpu_packed.h) Q4_K and Q6_K, are packed in groups of PK_FAST_ROWS = 16 rows
 * instead (in fast mode the other types keep their exact layouts and
 * kernels), for kernels whose 512-bit
 * registers hold one dword lane per row (dword lane r = 4 consecutive quants of row r), so
 * that one vpdpbusd with 4 activation bytes broadcast to all lanes adds 4
 * products to each of the 16 rows:
 *
 *   Q4_0  hdr 32: d of rows 0..15.
 *         q 256: for j = 0..3, 64 bytes: row r's file bytes qs[4 j ..4 j + 3]
 *         at 4 r (low nibbles: elements 4 j..4 j + 3, high: 16 + 4 j..).
 *   Q8_0  hdr 32: d.  q 512: for s = 0..7, 64 bytes: row r's elements
 *         4 s..4 s + 3 at 4 r, each quant + 128 (the unsigned operand of
 *         vpdpbusd; the activations' sums take the 128 back out).
 *   Q4_K  hdr 320: d[16], dmin[16], the 6-bit scales as sc[j][row] (8 x 16
 *         bytes), the mins as mn[p][row][2] = the row's mins 2 p, 2 p + 1
 *         (4 x 32 bytes). q 2048: for s = 0..31, 64 bytes: row r's file
 *         bytes qs[4 s..4 s + 3] at 4 r (low nibbles: elements 4 s % 32 ..
 *         of sub-block 2 (s / 8), high nibbles: of sub-block 2 (s / 8) + 1).
 *   Q6_K  hdr 288: d[16], then the int8 scales as sc[j][row] (16 x 16
 *         bytes). q 3072 (with the header the file's 16 x 210 bytes): for
 *         each sub-block j of 16 elements, 192 bytes: two of low nibbles,
 *         h = 0..1, 64 bytes each: row r's bytes at 4 r, byte e's low
 *         nibble element 16 j + 8 h + e's low 4 bits, its high nibble
 *         element 16 j + 8 h + 4 + e's; then 64 bytes of high bits: row r's
 *         byte e at 4 r + e holds in bits 2 k, 2 k + 1 the high 2 bits of
 *         element 16 j + 4 k + e. (Masked with 0x33 the bits of k = 0, 2 sit
 *         at 0 and 4, with 0xCC those of k = 1, 3 at 2 and 6: one shift of
 *         each moves k's bits to 4 with zeros at 6 and 7.)
 *
 * The AVX2 kernels (PK_ISA_AVX2) read the 4-row layouts above as two row
 * pairs: a 256-bit load of the 32 bytes at 32 p of a 64-byte piece holds the
 * same 16 elements of rows 2 p and 2 p + 1, dword k of each 128-bit half
 * b1892's lane k (or 4 + k) of its row. Q4_0 and Q8_0 (exact) have 4-row
 * layouts of their own:
 *   Q4_0  in groups of 4: hdr 8: d.  q 64: row r's file bytes qs at 16 r
 *         (as Q4_1's).
 *   Q8_0  hdr 8: d.  q 128: elements 0..15 of rows 0..3, then 16..31, the
 *         quants as they are (signed):
 *         without vpdpbusd the products go through vpmaddubsw, whose pair
 *         sums of (q + 128) x a could saturate, so it takes |q| and a with
 *         q's sign, as b1892 does.
 * In the fast mode they read the PK_FAST_ROWS layouts above as two halves
 * of 8 rows: the 32 bytes at 32 hh of each 64-byte piece, the 8 bytes at
 * 8 hh of each 16 of the k-quants' scales, the 16 at 16 hh of each 32 of
 * their d, dmin and mins.
 *
 * Activations: each column quantized to the weight type's vec_dot_type by
 * the trait table's from_float, exactly as the reference path does, then
 * laid out in tiles of the kernel's column count TC (the last tile partly
 * filled): for block i, the records of the tile's columns one after the
 * other, so a micro-kernel reads (block i, column c) at tile + (i TC + c) *
 * record size.
 *   Q4_0, Q5_0, Q8_0, Q4_1, Q5_1: struct pk_act_q8 (80 bytes; its 16-byte
 *     pieces never cross a cache line); for the AVX2 kernels struct
 *     pk_act_q8x.
 *   Q2_K, Q3_K, Q4_K, Q5_K, Q6_K: struct pk_act_q8k; for the AVX2 kernels
 *     struct pk_act_q8kx.
 *   Q4_0, Q8_0 in fast mode: struct pk_act_q8f, or with AMX and many
 *     columns (pk_amx_kernel) struct pk_act_amx, a whole block of a tile;
 *     Q4_K in fast mode: struct pk_act_q8k (its qs, bpairs and d); Q6_K in
 *     fast mode: struct pk_act_q8k6f; both with AMX and many columns struct
 *     pk_act_amx_k, a whole super-block of a tile.
 *   F16 weights: no tiles; the column rounded through F16 (what the
 *     reference dot product reads), as floats.
 */
#ifndef LLAMAC_BACKEND_CPU_CPU_PACKED_IMPL_H
#define LLAMAC_BACKEND_CPU_CPU_PACKED_IMPL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ggml.h"

/* Rows per group of the exact layouts and of the fast mode's. Work chunks
 * of rows are cut at multiples of CPU_CHUNK_ROW_ALIGN (cpu_ops.h), which
 * both divide. */
#define PK_ROWS 4
#define PK_FAST_ROWS 16

static inline size_t pk_pad64(size_t n) { return (n + 63) & ~(size_t)63; }

/* Blocks per chunk of a group: the fewest whose headers fill whole lines
 * (Q4_0's 32 bytes: 2, Q4_K's 80: 4, Q6_K's 72: 8, 320: 1), so that every
 * chunk's quants start on a line. Headers all in front of the quants made
 * two streams of a group (and four of a two-group call) that one thread
 * read at 25-27 GB/s where one stream reads at 33-37 (Zen 5). */
static inline int64_t pk_chunk_blocks(size_t hbytes) {
    const size_t low = hbytes & (~hbytes + 1); /* the largest power of 2 dividing hbytes */
    return low >= 64 || low == 0 ? 1 : (int64_t)(64 / low);
}

/* Block i of a group at `group`: its quants (returned) and header (*hdr).
 * A chunk's headers take the room of a full chunk's even in the last one,
 * so that with hbytes a constant the address is a few shifts and adds. */
static inline const uint8_t *pk_block(const uint8_t *group, int64_t i, size_t hbytes, size_t qbytes,
                                      const uint8_t **hdr) {
    const int64_t m = pk_chunk_blocks(hbytes), j = i & (m - 1); /* m is a power of 2 */
    const uint8_t *chunk = group + (size_t)(i - j) * (hbytes + qbytes);
    *hdr = chunk + (size_t)j * hbytes;
    return chunk + (size_t)m * hbytes + (size_t)j * qbytes;
}

/* Bytes of a group of nb blocks. */
static inline size_t pk_group_size(int64_t nb, size_t hbytes, size_t qbytes) {
    const int64_t m = pk_chunk_blocks(hbytes), last = nb % m;
    return (size_t)(nb - last) * (hbytes + qbytes) + (last ? (size_t)m * hbytes + (size_t)last * qbytes : 0);
}

/* One Q8_0 block of a column (Q8_1 for Q4_1 and Q5_1) for the legacy
 * kernels: corr[k] = -bias * (qs[4k] + .. + qs[4k+3]), bias 8 for Q4_0, 16
 * for Q5_0, 128 for Q8_0 and 0 for Q4_1/Q5_1, so the integer lanes start
 * from it; d as a float; s the Q8_1 block's d x (the sum of qs). */
struct pk_act_q8 {
    int8_t qs[32];
    int32_t corr[8];
    float d, s;
    uint8_t pad[8];
};
_Static_assert(sizeof(struct pk_act_q8) == 80, "pk_act_q8 record");

/* One Q8_0 block of a column for the AVX2 legacy kernels: pk_act_q8's
 * fields with each 16-byte half of the quants, and of the corrections,
 * twice (once for each row of a register's pair) and d 8 times, so that
 * every operand is a plain 256-bit load the instruction takes from memory
 * (its own broadcast would take a vector pipe); the 32-byte pieces never
 * cross a cache line. */
struct pk_act_q8x {
    int8_t qs[2][32];      /* [h]: elements 16 h ..16 h + 15, twice */
    int32_t corr[2][8];    /* [h]: pk_act_q8's corr[4 h ..4 h + 3], twice */
    float d[8];
    float s[8];            /* Q8_1's s */
};
_Static_assert(sizeof(struct pk_act_q8x) == 192, "pk_act_q8x record");

/* One Q8_0 block of a column for the fast-mode kernels: corr = -bias *
 * (qs[0] + .. + qs[31]), bias 8 for Q4_0 and 128 for Q8_0 (what the
 * unsigned weights carry too much), where a block's integer sums start. */
struct pk_act_q8f {
    int8_t qs[32];
    int32_t corr;
    float d;
};
_Static_assert(sizeof(struct pk_act_q8f) == 40, "pk_act_q8f record");

/* Fast mode on AMX tiles (products of many columns, Q4_0 and Q8_0):
 * tdpbusd multiplies 16 columns' unsigned bytes (a tile of 16 rows x 32:
 * one block of each column) by the weights' signed bytes (8 rows x 64: the
 * fast layout's 8 steps of 16 rows, Q4_0 nibbles less 8, Q8_0 less 128),
 * giving each column's block sums for the 16 rows. One block of a tile of
 * PK_COLS_AMX columns: column c's quants + 128 (the -128 comes back out
 * through the weights' sums, pk_amx_block) and its scale; 640 bytes,
 * PK_COLS_AMX x sizeof(struct pk_act_q8f). */
#define PK_COLS_AMX 16
struct pk_act_amx {
    uint8_t qs[PK_COLS_AMX][32];
    float d[PK_COLS_AMX];
    uint8_t pad[64];
};
_Static_assert(sizeof(struct pk_act_amx) == PK_COLS_AMX * sizeof(struct pk_act_q8f), "a tile's block of records");

/* One block of a group of 16 rows as the AMX kernels read it, made by the
 * thread from the packed group before its first tile: the weights signed,
 * -128 x each row's sum of them (where a column's integer sums start) and
 * the rows' scales as floats. */
struct pk_amx_block {
    int8_t w[8][64];
    int32_t corr[16];
    float d[16];
};

/* K-quants on AMX tiles (Q4_K, Q6_K; cpu_packed_x86.c, pk_amx_planes): per
 * super-block, chunk c of 64 elements, one tdpbusd of the columns' quants
 * + 128 with each of two byte planes of the weights' quants times their
 * scales. One super-block of a tile of PK_COLS_AMX columns: chunk c of
 * column n at qs[c][n], the column's scale and (Q4_K's mins) its sub-block
 * pair sums as pk_act_q8k's bpairs. */
struct pk_act_amx_k {
    uint8_t qs[4][PK_COLS_AMX][64];
    float d[PK_COLS_AMX];
    int16_t bpairs[PK_COLS_AMX][8];
    uint8_t pad[64];
};
_Static_assert(sizeof(struct pk_act_amx_k) % PK_COLS_AMX == 0 && sizeof(struct pk_act_amx_k) % 64 == 0,
               "a column's share of the records is whole, the blocks cache-line aligned");

/* One super-block of a group of 16 rows for the K-quant AMX kernels (as
 * pk_amx_block): for chunk c the two planes' B tiles (row r: elements 64 c
 * + 4 r ..+3 of the 16 rows), -128 x each row's sum of its quants times
 * their scales, d and dmin as floats, Q4_K's mins 2 p, 2 p + 1 of each row
 * as words. */
struct pk_amx_kblock {
    int8_t hi[4][16][64];
    int8_t lo[4][16][64];
    int32_t corr[16];
    float d[16], dmin[16];
    int16_t mins[4][32];
};

/* One Q8_K block of a column for the k-quant kernels. */
struct pk_act_q8k {
    int8_t qs[256];
    /* Q4_K mins: bsums[2j] + bsums[2j+1], j = 0..7 */
    int16_t bpairs[8];
    /* Q2_K mins: the sums of 16 */
    int16_t bsums[16];
    /* Q6_K's -32 offset: for n, h, pair p, lane k: -32 times the sums of
     * elements 16 h + 4 k ..+3 of chunks 4 n + 2 p and 4 n + 2 p + 1 */
    int16_t corr6[2][2][2][4][2];
    float d;
    uint8_t pad[12];
};
_Static_assert(sizeof(struct pk_act_q8k) % 64 == 0, "pk_act_q8k records are cache-line sized");

/* One Q8_K block of a column for the AVX2 k-quant kernels:
 * every operand a plain 256-bit load, as pk_act_q8x's. */
struct pk_act_q8kx {
    int8_t qs[8][2][32];       /* [c][h]: elements 32 c + 16 h ..+15, twice */
    int16_t m32[8][2][16];     /* Q6_K, Q3_K: 32 (q[2 e] + q[2 e + 1]) of the same elements as words,
                                * twice: what comes off the unsigned quants' pair sums (their -32) */
    int16_t bpairs[16];        /* Q4_K, Q5_K mins: pk_act_q8k's bpairs, twice */
    int16_t bsums[2][16];      /* Q2_K mins: [h]: the 16-sums 8 h ..8 h + 7, twice */
    float d[8];
};
_Static_assert(sizeof(struct pk_act_q8kx) % 64 == 0, "pk_act_q8kx records are cache-line sized");

/* One Q8_K block of a column for the fast-mode Q6_K kernels: corr[2 j + h] =
 * -32 x (the sum of qs[16 j + 8 h ..+7]) - 1, where the exact sum of each
 * half sub-block's 8 products (q - 32) x a starts: the -32 brings the
 * unsigned quants q back to q - 32, and the -1 keeps every such sum in
 * [-32768, 32767] (|a| <= 128) for the word products that scale it (the
 * kernel adds 2 x the rows' scale sums back). The AVX2 kernel's sums of 8
 * are the vpmaddubsw words instead, word w of a dword: qs[16 j + 4 m + 2 w
 * ..+1], m = 0..3; corr_words[j][w] the same correction of those. */
struct pk_act_q8k6f {
    int8_t qs[256];
    int32_t corr[32];
    int16_t corr_words[16][2];
    float d;
    uint8_t pad[60];
};
_Static_assert(sizeof(struct pk_act_q8k6f) % 64 == 0, "pk_act_q8k6f records are cache-line sized");

/* One call of a quantized micro-kernel: a group's rows x ncols columns. */
struct pk_tile {
    const uint8_t *w;          /* the group's blocks (pk_block) */
    int64_t nb;                /* blocks per row */
    size_t group_bytes;        /* the next group's blocks at w + group_bytes */
    const uint8_t *act;        /* the columns' activation tile */
    int ncols;                 /* 1..the kernel's columns per tile */
    int nrows;                 /* rows to store: 1..rows per group */
    int nrows2;                /* two-group kernels (pk_kernels.q8_0_pair): the next group's rows to store */
    float *dst;                /* output of the group's first row, first column */
    size_t dst_stride;         /* floats per column of dst */
    /* AMX kernels: the thread's pk_amx_block for each block of the group,
     * and whether they already hold this group's (made for an earlier tile) */
    struct pk_amx_block *amx;
    struct pk_amx_kblock *amx_k;   /* the same memory, for Q4_K and Q6_K */
    bool amx_ready;
};

/* ---- weight streams (the matrix-vector kernels of every instruction set) ---- */

/* Helpers every kernel file inlines, whatever its target attributes. */
#define PK_INLINE static inline __attribute__((always_inline))

/* Pins a running integer sum in a vector register at this point. Without
 * it GCC turns a tile's chains of integer adds into trees summed after the
 * last product, holding every product until then and spilling them to the
 * stack (the float chains it must keep in order). Zen 3, bench_matmul -t 1
 * --prompt-only, best of 60: fast Q4_0 130 -> 180 GOP/s, Q4_K 81 -> 88. */
#define PK_KEEP_IN_REGISTER(v) __asm__("" : "+v"(v))

/* How far ahead matrix-vector kernels prefetch their weights, at least. */
#define PK_PREFETCH_BYTES 16384

/* The distance `far` for pk_prefetch and pk_prefetch_hdr in a call that
 * streams call_bytes of weights in step (a group, or R F16 rows side by
 * side): a whole number of calls ahead, so that every line is asked for by
 * the same place in the call before. A distance inside the call's span
 * of several streams instead lands in the other streams' lines just read,
 * and leaves the next call's without: with two 18 KiB groups a call (Q4_0,
 * k = 2048) half the lines were never fetched ahead (bench_matmul -t 1
 * --gen-only q4_0: 25-26 -> 34-35 GB/s, Zen 5). */
PK_INLINE size_t pk_stream_ahead(size_t call_bytes) {
    return (PK_PREFETCH_BYTES + call_bytes - 1) / call_bytes * call_bytes;
}

/* Matrix-vector kernels stream their weights from memory once: each block
 * asks for the lines `far` bytes ahead of its own, and with `near` again 2
 * KiB ahead (for L1 if the first had gone to L2 only; both as T0: on Zen 5
 * a T1 hint for the first streamed up to 10% slower). The near ones pay
 * where a line takes much work (the fast k-quants; with AVX2 the exact
 * k-quants and the F16 rows: without them 2-9% slower) and in AVX-512's
 * F16 rows four at a time (+7% at k = 2048), not in the blocks of
 * pk_group_block (Zen 5, bench_matmul -t 1 --gen-only without them: exact
 * Q4_0 33 -> 35-36 GB/s, Q5_0 and Q4_1 +7-10%, Q6_K +10%, fast Q4_0 and
 * Q8_0 +2-20%, AVX2's fast Q4_0 and Q8_0 +1-18%; AVX-512's F16 rows, then
 * two at a time, +1-6%). */
PK_INLINE void pk_prefetch(const uint8_t *block, size_t bytes, size_t far, bool near) {
    for (size_t o = 0; o < bytes; o += 64) {
        __builtin_prefetch(block + o + far, 0, 3);
        if (near) __builtin_prefetch(block + o + 2048, 0, 3);
    }
}

/* A chunk's block headers (pk_block) are asked for too: each line where a
 * header starts in it, `far` bytes on. (When a group's headers were a
 * stream of their own, too short for the hardware prefetchers, this took
 * Q4_0 generation from 40 to 52 GB/s with 2 threads.) */
PK_INLINE void pk_prefetch_hdr(const uint8_t *hdr, size_t bytes, size_t far) {
    const uintptr_t end = (uintptr_t)hdr + bytes;
    for (uintptr_t p = ((uintptr_t)hdr + 63) & ~(uintptr_t)63; p < end; p += 64) {
        __builtin_prefetch((const void *)(p + far), 0, 3);
    }
}

/* The prefetch distance of a matrix-vector call: whole groups ahead. */
PK_INLINE size_t pk_vec_ahead(const struct pk_tile *t) { return pk_stream_ahead(t->group_bytes); }

/* Block i of the call's group: its quants (returned) and header (*hdr);
 * when the call streams the weights (one column) both are prefetched. */
PK_INLINE const uint8_t *pk_group_block(const struct pk_tile *t, int64_t i, size_t hbytes, size_t qbytes, bool stream,
                                        size_t ahead, const uint8_t **hdr) {
    const uint8_t *q = pk_block(t->w, i, hbytes, qbytes, hdr);
    if (stream) {
        pk_prefetch(q, qbytes, ahead, false);
        pk_prefetch_hdr(*hdr, hbytes, ahead);
    }
    return q;
}

/* Block i as pk_group_block, for kernels with much work per line (the
 * k-quants: the fast layouts' 2-3 KiB of quants a block, the exact ones'
 * 256-768 bytes) or that want the near prefetches: when streaming, only
 * the header is prefetched here and the kernel asks for each piece of the
 * quants as it reaches it (pk_prefetch). A block's lines asked for at once
 * stall the kernel at its first prefetch while the earlier ones hold the
 * line-fill buffers (perf put a third of exact Q4_K's generation there).
 * Zen 5: fast Q6_K 26 -> 29 GB/s, Q4_K 31 -> 34 (bench_matmul -t 1
 * --gen-only); exact Q4_K +3-4% (two threads) and +8% (one), exact Q6_K
 * +5-22% (2048 x 5632 and 2048 x 32000, old and new interleaved in one
 * process). */
PK_INLINE const uint8_t *pk_group_block_large(const struct pk_tile *t, int64_t i, size_t hbytes, size_t qbytes,
                                              bool stream, size_t ahead, const uint8_t **hdr) {
    const uint8_t *q = pk_block(t->w, i, hbytes, qbytes, hdr);
    if (stream) pk_prefetch_hdr(*hdr, hbytes, ahead);
    return q;
}

/* F16 work items: up to pk_f16_rows(k) rows x PK_F16_COL_BLOCK columns.
 * With many columns the rows are converted to floats once (at most
 * PK_F16_ROWS_BYTES, half of a 2 MiB L2 cache), then each tile column runs
 * k in blocks of PK_F16_KB over all row pairs, its accumulators waiting in
 * scratch between blocks, so that a tile's operands come from L1; with few
 * the halves are read in place, a pass per tile column. Few is fewer than
 * PK_F16_MIN_COLS for the AVX2 kernels, up to PK_F16_INPLACE_COLS for the
 * AVX-512 ones: converting pays only over many tile columns, and for two
 * it wrote scratch that had left the caches (generation's attention, the
 * values of a KV head for its 8 query heads, TinyLlama shape at 0-800 keys:
 * the node 55-64 -> 44-48 us a layer, Zen 5). (Both transpose the rows
 * instead at a short k with PK_F16_MIN_COLS columns or more.) An item reads
 * its columns from L3 once, so the more rows it holds the less that costs:
 * at k = 5632 32 rows instead of 16 made the product 12% faster. */
#define PK_F16_ROWS_BYTES ((size_t)1 << 20)
#define PK_F16_MAX_ROWS 128
#define PK_F16_COL_BLOCK 512
#define PK_F16_KB 1024
#define PK_F16_MIN_COLS 4
#define PK_F16_TILE_COLS 6
#define PK_F16_INPLACE_COLS (2 * PK_F16_TILE_COLS)
/* Floats between consecutive rows of F16 activations and converted weights:
 * k plus a cache line, so rows a power of two apart do not all fall in the
 * same L1 set. */
static inline size_t pk_f16_stride(int64_t k) { return (size_t)k + 16; }
static inline int pk_f16_rows(int64_t k) {
    const size_t rows = PK_F16_ROWS_BYTES / (pk_f16_stride(k) * sizeof(float)) / 16 * 16;
    return rows < 16 ? 16 : rows > PK_F16_MAX_ROWS ? PK_F16_MAX_ROWS : (int)rows;
}
/* Scratch floats of one F16 item over k: the rows as floats, then one tile
 * column's accumulators. */
static inline size_t pk_f16_scratch_floats(int64_t k) {
    return (size_t)pk_f16_rows(k) * (pk_f16_stride(k) + PK_F16_TILE_COLS * 32);
}

/* One F16 work item: dst[c][r] = the reference F16 dot of row r and column c. */
struct pk_f16_item {
    const uint16_t *w;      /* first row (halves) */
    size_t w_stride;           /* halves per row */
    int nrows;                 /* 1..pk_f16_rows(k) */
    const float *act;          /* first column (floats) */
    size_t act_stride;         /* floats between columns (pk_f16_stride(k) in mul_mat) */
    int ncols;                 /* 1..PK_F16_COL_BLOCK */
    int64_t k;                 /* multiple of 32 */
    float *scratch;            /* pk_f16_scratch_floats(k), 64-byte aligned */
    float *dst;
    size_t dst_stride;         /* floats per column of dst */
};

/* IQ2_XXS and IQ2_XS products with more than one column keep no packed copy
 * (their grid lookups would make one 4x the file): a thread decodes
 * PK_IQ2_DECODE_ROWS rows at a time into scaled 16-bit values and runs them
 * against every column with vpdpwssd. The decoded rows, per group of
 * PK_IQ2_ROWS rows and super-block: for chunk j (32 elements) and half h,
 * per row pair p, 64 bytes: the pair's two rows (32 bytes each), lane k
 * holding elements 4 k + 2 h and 4 k + 2 h + 1 of the chunk as int16 times
 * their odd scale (2s + 1; b1892's lane k of the row gets both halves);
 * then per row pair the rows' d as 8 floats each. */
#define PK_IQ2_ROWS 4
#define PK_IQ2_DECODE_ROWS 32
#define PK_IQ2_SB_BYTES (8 * 2 * 2 * 64 + 2 * 64)
/* A column's Q8_K block in the same order: qs[16 (2 j + h) + 2 k + t] =
 * element 32 j + 4 k + 2 h + t, as int16. */
struct pk_act_iq2 {
    int16_t qs[256];
    float d;
    uint8_t pad[60];
};
_Static_assert(sizeof(struct pk_act_iq2) % 64 == 0, "pk_act_iq2 records are cache-line sized");

/* One call of the IQ2 kernel: a decoded group (w) x ncols columns. */
struct pk_iq2_tile {
    const uint8_t *w;          /* the group's first super-block */
    int64_t nb;                /* super-blocks per row */
    const uint8_t *act;        /* the columns' activation tile (records per block, then column) */
    int ncols;                 /* 1..PK_COLS_IQ2 */
    int nrows;                 /* rows to store: 1..PK_IQ2_ROWS */
    float *dst;                /* output of the group's first row, first column */
    size_t dst_stride;         /* floats per column of dst */
};

/* IQ2 matrix-vector products (generation; with AVX-512 VBMI and GFNI)
 * read the file's rows directly, two rows at a time, and look up the grid
 * for all groups at once instead of group by group: for a super-block of
 * the two rows, one register holds a byte for each of the 64 groups, group
 * j = 32 r + 8 g + s (row r, group g of sub-block s), and vpermi2b turns
 * the 64 grid indices into the level codes of positions 4 h..4 h + 3 (2
 * bits each). Those bytes are interleaved with themselves shifted by 2
 * (vpunpck{l,h}bw, part t = 0 or 1: groups with g even or odd), so that a
 * byte pair holds positions 2 m and 2 m + 1 at the same bits, and mapped to
 * magnitudes; vpmaddubsw against the signed activations then adds each
 * group's two products: word (lane L, u) of part t = group (r L / 2, g 2
 * (L % 2) + t, s u), and vpmaddwd with the scales adds sub-blocks 2 v and
 * 2 v + 1. The column's Q8_K block in that order, for both rows:
 * qs[h][m][t][16 L + 2 u + b] = element 32 u + 8 (2 (L % 2) + t) + 4 h + 2
 * m + b. */
struct pk_act_iq2v {
    int8_t qs[2][2][2][64];
    float d;
    uint8_t pad[60];
};
_Static_assert(sizeof(struct pk_act_iq2v) == sizeof(struct pk_act_iq2), "one record size for both IQ2 layouts");

/* One call of the IQ2 matrix-vector kernel: nrows rows of the file times
 * 1..PK_IQ2_VEC_COLS columns, one tile of the activations (products of a
 * few columns take it too: the grid lookups are shared by the columns). */
#define PK_IQ2_VEC_COLS 6
struct pk_iq2_vec {
    const uint8_t *rows;       /* the first row's super-blocks */
    size_t row_bytes;
    int64_t nrows;
    int64_t nb;                /* super-blocks per row */
    bool xs;                   /* IQ2_XS (else IQ2_XXS) */
    const uint8_t *act;        /* super-block 0's records (struct pk_act_iq2v), one per column */
    size_t act_stride;         /* bytes from one super-block's records to the next */
    int ncols;
    float *dst;                /* the first row's output, first column */
    size_t dst_stride;         /* floats per column of dst */
};

typedef void (*pk_tile_fn)(const struct pk_tile *t);
/* Decodes rows [0, nrows) (nrows <= PK_IQ2_ROWS; the others zero) of an
 * IQ2_XXS (xs false) or IQ2_XS weight, nb super-blocks each, into one group. */
typedef void (*pk_iq2_decode_fn)(const uint8_t *rows, size_t row_bytes, int nrows, int64_t nb, bool xs,
                                 uint8_t *out);
typedef void (*pk_iq2_tile_fn)(const struct pk_iq2_tile *t);
typedef void (*pk_iq2_vec_fn)(const struct pk_iq2_vec *v);
typedef void (*pk_f16_item_fn)(const struct pk_f16_item *it);

/* Columns per call of each quantized kernel. */
#define PK_COLS_Q8 8
#define PK_COLS_K 8
#define PK_COLS_FAST 12
#define PK_COLS_FAST_K 8
#define PK_COLS_IQ2 6
_Static_assert(PK_IQ2_VEC_COLS == PK_COLS_IQ2, "the matrix-vector kernel takes the columns a tile at a time");

/* Which kernels a table holds, and so which packed layouts they read. */
enum pk_isa {
    PK_ISA_AVX512, /* cpu_packed_x86.c: the layouts above */
    PK_ISA_AVX2,   /* cpu_packed_avx2.c: the same with Q4_0 in groups of 4, Q8_0 signed (below) */
};

/* One table per mode: in fast mode q4_0, q8_0, q4_K and q6_K are the fast
 * kernels (the PK_FAST_ROWS layouts; pk_act_q8f / pk_act_q8k /
 * pk_act_q8k6f columns); the other types' are the exact kernels in both.
 * A NULL kernel leaves its type unpacked (the reference path). */
struct pk_kernels {
    enum pk_isa isa;
    bool fast;             /* the table has the fast mode's kernels (else LLAMAC_MATMUL=fast changes nothing) */
    pk_tile_fn q4_0, q8_0, q5_0, q4_1, q5_1, q2_K, q3_K, q4_K, q5_K, q6_K;
    /* Q4_0 and Q8_0 kernels that take two consecutive groups a call
     * (pk_tile.nrows2), any number of columns (NULL: none) */
    pk_tile_fn q4_0_pair, q8_0_pair;
    pk_f16_item_fn f16;
    pk_iq2_decode_fn iq2_decode;
    pk_iq2_tile_fn iq2;
    pk_iq2_vec_fn iq2_vec; /* NULL without AVX-512 VBMI: generation keeps the row kernels */
    /* fast mode with AMX (else NULL): Q4_0 and Q8_0 tiles of pk_act_amx
     * columns, Q4_K and Q6_K tiles of pk_act_amx_k columns */
    pk_tile_fn q4_0_amx, q8_0_amx, q4_K_amx, q6_K_amx;
};

/* The micro-kernels this CPU runs in the given mode, or NULL (cpu_packed_x86.c:
 * AVX-512 VNNI's, else AVX2's). */
const struct pk_kernels *pk_kernels_x86(bool fast);
/* The AVX2 (+ FMA, F16C) table in the given mode, or NULL without those (cpu_packed_avx2.c). */
const struct pk_kernels *pk_kernels_avx2(bool fast);
/* The AVX2 table's F16 work item (cpu_packed_avx2_f16.c). */
void pk_f16_item_avx2(const struct pk_f16_item *it);

#endif
