#include "kv_cells.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"

bool kv_cells_init(struct kv_cells *kv, uint32_t size) {
    memset(kv, 0, sizeof *kv);
    kv->cells = calloc(size ? size : 1, sizeof *kv->cells);
    if (!kv->cells) {
        error_set("out of memory allocating %u KV cells", size);
        return false;
    }
    kv->size = size;
    kv_cells_clear(kv);
    return true;
}

void kv_cells_free(struct kv_cells *kv) {
    free(kv->cells);
    memset(kv, 0, sizeof *kv);
}

bool kv_cell_is_empty(const struct kv_cell *c) {
    for (int i = 0; i < LLAMA_MAX_SEQ / 64; i++) {
        if (c->seq[i]) return false;
    }
    return true;
}

int kv_cell_seq_count(const struct kv_cell *c) {
    int n = 0;
    for (int i = 0; i < LLAMA_MAX_SEQ / 64; i++) n += __builtin_popcountll(c->seq[i]);
    return n;
}

static void cell_reset(struct kv_cell *c) {
    c->pos = -1;
    c->delta = 0;
    memset(c->seq, 0, sizeof c->seq);
}

void kv_cells_clear(struct kv_cells *kv) {
    for (uint32_t i = 0; i < kv->size; i++) cell_reset(&kv->cells[i]);
    kv->head = 0;
    kv->used = 0;
    kv->has_shift = false;
}

bool kv_cells_find_slot(struct kv_cells *kv, const struct kv_batch_view *batch) {
    const uint32_t n_ctx = kv->size, n_tokens = batch->n_tokens;
    if (n_tokens > n_ctx) return false;
    uint32_t head = kv->head, n_tested = 0;
    for (;;) {
        if (head + n_tokens > n_ctx) {
            n_tested += n_ctx - head;
            head = 0;
            continue;
        }
        bool found = true;
        for (uint32_t i = 0; i < n_tokens; i++) {
            if (kv->cells[head + i].pos >= 0) {
                found = false;
                head += i + 1;
                n_tested += i + 1;
                break;
            }
        }
        if (found) break;
        if (n_tested >= n_ctx) return false;
    }
    kv->head = head;
    for (uint32_t i = 0; i < n_tokens; i++) {
        struct kv_cell *c = &kv->cells[head + i];
        c->pos = batch->pos[i];
        for (int32_t j = 0; j < batch->n_seq_id[i]; j++) kv_cell_add_seq(c, batch->seq_id[i][j]);
    }
    kv->used += n_tokens;
    return true;
}

void kv_cells_shift_applied(struct kv_cells *kv) {
    kv->has_shift = false;
    for (uint32_t i = 0; i < kv->size; i++) kv->cells[i].delta = 0;
}

void kv_cells_commit(struct kv_cells *kv, uint32_t n_tokens) {
    kv->head += n_tokens;
    if (kv->head >= kv->size) kv->head = 0;
}

uint32_t kv_cells_max_used(const struct kv_cells *kv) {
    for (uint32_t i = kv->size; i > 0; i--) {
        if (kv->cells[i - 1].pos >= 0 && !kv_cell_is_empty(&kv->cells[i - 1])) return i;
    }
    return 0;
}

static void range_defaults(llama_pos *p0, llama_pos *p1) {
    if (*p0 < 0) *p0 = 0;
    if (*p1 < 0) *p1 = INT32_MAX;
}

void kv_cells_seq_rm(struct kv_cells *kv, llama_seq_id seq, llama_pos p0, llama_pos p1) {
    uint32_t new_head = kv->size;
    range_defaults(&p0, &p1);
    for (uint32_t i = 0; i < kv->size; i++) {
        struct kv_cell *c = &kv->cells[i];
        if (c->pos < p0 || c->pos >= p1) continue;
        if (seq < 0) {
            memset(c->seq, 0, sizeof c->seq);
        } else if (kv_cell_has_seq(c, seq)) {
            kv_cell_del_seq(c, seq);
        } else {
            continue;
        }
        if (kv_cell_is_empty(c)) {
            if (c->pos >= 0) kv->used--;
            c->pos = -1;
            if (new_head == kv->size) new_head = i;
        }
    }
    if (new_head != kv->size && new_head < kv->head) kv->head = new_head;
}

void kv_cells_seq_cp(struct kv_cells *kv, llama_seq_id src, llama_seq_id dst, llama_pos p0, llama_pos p1) {
    range_defaults(&p0, &p1);
    kv->head = 0;
    for (uint32_t i = 0; i < kv->size; i++) {
        struct kv_cell *c = &kv->cells[i];
        if (kv_cell_has_seq(c, src) && c->pos >= p0 && c->pos < p1) kv_cell_add_seq(c, dst);
    }
}

void kv_cells_seq_keep(struct kv_cells *kv, llama_seq_id seq) {
    uint32_t new_head = kv->size;
    for (uint32_t i = 0; i < kv->size; i++) {
        struct kv_cell *c = &kv->cells[i];
        if (!kv_cell_has_seq(c, seq)) {
            if (c->pos >= 0) kv->used--;
            c->pos = -1;
            memset(c->seq, 0, sizeof c->seq);
            if (new_head == kv->size) new_head = i;
        } else {
            memset(c->seq, 0, sizeof c->seq);
            kv_cell_add_seq(c, seq);
        }
    }
    if (new_head != kv->size && new_head < kv->head) kv->head = new_head;
}

void kv_cells_seq_shift(struct kv_cells *kv, llama_seq_id seq, llama_pos p0, llama_pos p1, llama_pos delta) {
    uint32_t new_head = kv->size;
    range_defaults(&p0, &p1);
    for (uint32_t i = 0; i < kv->size; i++) {
        struct kv_cell *c = &kv->cells[i];
        if (!kv_cell_has_seq(c, seq) || c->pos < p0 || c->pos >= p1) continue;
        kv->has_shift = true;
        c->pos += delta;
        c->delta += delta;
        if (c->pos < 0) {
            if (!kv_cell_is_empty(c)) kv->used--;
            c->pos = -1;
            memset(c->seq, 0, sizeof c->seq);
            if (new_head == kv->size) new_head = i;
        }
    }
    /* b1892: start the next slot search at the first freed cell, else at 0 */
    kv->head = new_head != kv->size ? new_head : 0;
}

void kv_cells_seq_div(struct kv_cells *kv, llama_seq_id seq, llama_pos p0, llama_pos p1, int d) {
    if (d == 1) return;
    range_defaults(&p0, &p1);
    for (uint32_t i = 0; i < kv->size; i++) {
        struct kv_cell *c = &kv->cells[i];
        if (!kv_cell_has_seq(c, seq) || c->pos < p0 || c->pos >= p1) continue;
        kv->has_shift = true;
        llama_pos old = c->pos;
        c->pos /= d;
        c->delta += c->pos - old;
    }
}

int32_t kv_cells_token_count(const struct kv_cells *kv) {
    int32_t n = 0;
    for (uint32_t i = 0; i < kv->size; i++) n += kv_cell_seq_count(&kv->cells[i]);
    return n;
}

void kv_cells_build_mask(const struct kv_cells *kv, const struct kv_batch_view *batch, uint32_t n_kv, float *mask) {
    for (uint32_t j = 0; j < batch->n_tokens; j++) {
        const llama_pos pos = batch->pos[j];
        const llama_seq_id seq = batch->seq_id[j][0];
        float *row = mask + (size_t)j * n_kv;
        for (uint32_t i = 0; i < n_kv; i++) {
            const struct kv_cell *c = &kv->cells[i];
            row[i] = (!kv_cell_has_seq(c, seq) || c->pos > pos) ? -INFINITY : 0.0f;
        }
    }
}
