/*
 * The bookkeeping half of the KV cache: one cell per context slot, each
 * holding the position of the token stored there and the set of sequences it
 * belongs to. The semantics (slot search, seq_rm/cp/keep/shift/div, the
 * attention mask) are b1892's; the K/V tensors themselves live in kv_cache.h.
 *
 * Sequence ids are 0 <= id < LLAMA_MAX_SEQ (b1892 allowed any id; we bound
 * them so a cell's set is a fixed bitset and a batch can be validated).
 */
#ifndef LLAMAC_CONTEXT_KV_CELLS_H
#define LLAMAC_CONTEXT_KV_CELLS_H

#include <stdbool.h>
#include <stdint.h>

#include "llama.h"

#define LLAMA_MAX_SEQ 256

struct kv_cell {
    llama_pos pos;   /* -1 when empty */
    llama_pos delta; /* accumulated shift not yet applied to the stored key */
    uint64_t seq[LLAMA_MAX_SEQ / 64];
};

struct kv_cells {
    uint32_t size;   /* number of cells (= n_ctx) */
    uint32_t head;   /* where the next slot search starts */
    uint32_t used;   /* cells holding at least one sequence */
    bool has_shift;  /* some cell has a pending delta (keys need re-rotation) */
    struct kv_cell *cells;
};

/* A batch as the cache sees it: per token a position and its sequence ids. */
struct kv_batch_view {
    uint32_t n_tokens;
    const llama_pos *pos;
    const int32_t *n_seq_id;
    llama_seq_id *const *seq_id;
};

bool kv_cells_init(struct kv_cells *kv, uint32_t size);
void kv_cells_free(struct kv_cells *kv);

static inline bool kv_cell_has_seq(const struct kv_cell *c, llama_seq_id s) {
    return (c->seq[s >> 6] >> (s & 63)) & 1;
}
static inline void kv_cell_add_seq(struct kv_cell *c, llama_seq_id s) { c->seq[s >> 6] |= 1ull << (s & 63); }
static inline void kv_cell_del_seq(struct kv_cell *c, llama_seq_id s) { c->seq[s >> 6] &= ~(1ull << (s & 63)); }
bool kv_cell_is_empty(const struct kv_cell *c); /* no sequence */
int kv_cell_seq_count(const struct kv_cell *c);

void kv_cells_clear(struct kv_cells *kv);
/* Finds n_tokens contiguous empty cells from head (wrapping) and claims them
 * for the batch; false when there is no such slot (the cache is unchanged). */
bool kv_cells_find_slot(struct kv_cells *kv, const struct kv_batch_view *batch);
/* The keys were re-rotated by their deltas: clear them. */
void kv_cells_shift_applied(struct kv_cells *kv);
/* After a successful decode: advance head past the batch. */
void kv_cells_commit(struct kv_cells *kv, uint32_t n_tokens);
/* One past the last non-empty cell. */
uint32_t kv_cells_max_used(const struct kv_cells *kv);

void kv_cells_seq_rm(struct kv_cells *kv, llama_seq_id seq, llama_pos p0, llama_pos p1);
void kv_cells_seq_cp(struct kv_cells *kv, llama_seq_id src, llama_seq_id dst, llama_pos p0, llama_pos p1);
void kv_cells_seq_keep(struct kv_cells *kv, llama_seq_id seq);
void kv_cells_seq_shift(struct kv_cells *kv, llama_seq_id seq, llama_pos p0, llama_pos p1, llama_pos delta);
void kv_cells_seq_div(struct kv_cells *kv, llama_seq_id seq, llama_pos p0, llama_pos p1, int d);

int32_t kv_cells_token_count(const struct kv_cells *kv);

/* Attention mask for a batch over the first n_kv cells: mask[j*n_kv + i] = 0
 * if token j may attend to cell i (same sequence as the token's first one,
 * position not after the token's), else -INFINITY. */
void kv_cells_build_mask(const struct kv_cells *kv, const struct kv_batch_view *batch, uint32_t n_kv, float *mask);

#endif
