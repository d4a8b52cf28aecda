#include "context/state.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/checked.h"
#include "core/file_map.h"
#include "core/log.h"
#include "quant/quant.h"

#define SESSION_HPARAMS_SIZE 84
#define STATE_RNG_MAX (64 * 1024) /* LLAMA_MAX_RNG_STATE */

/* ---- writing: the same code fills a memory buffer or a file -------------------- */

struct sink {
    uint8_t *buf; /* memory sink, or NULL */
    FILE *file;   /* file sink, or NULL */
    size_t pos;
    bool failed;
};

static void sink_write(struct sink *s, const void *data, size_t n) {
    if (s->failed || n == 0) return;
    if (s->buf) memcpy(s->buf + s->pos, data, n);
    else if (fwrite(data, 1, n, s->file) != n) s->failed = true;
    s->pos += n;
}

static void sink_u32(struct sink *s, uint32_t v) { sink_write(s, &v, 4); }
static void sink_u64(struct sink *s, uint64_t v) { sink_write(s, &v, 8); }

/* b1892 reports the KV buffer as 64 bytes of slack plus each tensor padded to 64. */
static uint64_t kv_buf_size(const struct llama_context *ctx) {
    if (!ctx->kv_ctx) return 0;
    uint64_t total = 64;
    for (uint32_t il = 0; il < ctx->model->hparams.n_layer; il++) {
        total += (tensor_nbytes(ctx->kv_tensors.k[il]) + 63) / 64 * 64;
        total += (tensor_nbytes(ctx->kv_tensors.v[il]) + 63) / 64 * 64;
    }
    return total;
}

static size_t cells_meta_size(const struct llama_context *ctx) {
    size_t n = 0;
    for (uint32_t i = 0; i < ctx->kv.size; i++) n += 4 + 8 + 4 * (size_t)kv_cell_seq_count(&ctx->kv.cells[i]);
    return n;
}

size_t state_size(const struct llama_context *ctx) {
    const struct llama_hparams *hp = &ctx->model->hparams;
    const size_t logits_cap = ctx->logits ? (size_t)hp->n_vocab * ctx->n_batch : 0;
    const size_t emb = ctx->embedding_out ? hp->n_embd : 0;
    size_t b1892 = 8 + STATE_RNG_MAX + 8 + 4 * logits_cap + 8 + 4 * emb + 8 + 4 + kv_buf_size(ctx);
    /* b1892's bound forgets the cell list; make sure ours holds the real blob */
    size_t exact = 8 + RNG_MT19937_TEXT_MAX + 8 + 4 * logits_cap + 8 + 4 * emb + 8 + 12 + kv_buf_size(ctx) +
                   cells_meta_size(ctx);
    return b1892 > exact ? b1892 : exact;
}

static void write_state(struct llama_context *ctx, struct sink *s) {
    const struct llama_hparams *hp = &ctx->model->hparams;
    char rng_text[RNG_MT19937_TEXT_MAX + 1];
    size_t rng_len = rng_mt19937_write_text(&ctx->rng, rng_text, sizeof rng_text);
    sink_u64(s, rng_len);
    sink_write(s, rng_text, rng_len);

    sink_u64(s, ctx->logits_size);
    sink_write(s, ctx->logits, ctx->logits_size * sizeof(float));
    const size_t emb = ctx->embedding_out ? hp->n_embd : 0;
    sink_u64(s, emb);
    sink_write(s, ctx->embedding_out, emb * sizeof(float));

    const struct kv_cells *kv = &ctx->kv;
    const uint64_t buf_size = kv_buf_size(ctx);
    sink_u64(s, buf_size);
    sink_u32(s, kv->head);
    sink_u32(s, kv->size);
    sink_u32(s, kv->used);
    if (buf_size) {
        const uint32_t n_cells = kv->head, n_ctx = kv->size;
        for (uint32_t il = 0; il < hp->n_layer; il++) {
            const struct tensor *k = ctx->kv_tensors.k[il], *v = ctx->kv_tensors.v[il];
            size_t k_row = 0;
            type_row_size(k->type, hparams_n_embd_k_gqa(hp), &k_row);
            sink_write(s, k->data, k_row * n_cells);
            const size_t v_el = tensor_element_size(v);
            for (uint32_t ir = 0; ir < hparams_n_embd_v_gqa(hp); ir++) {
                sink_write(s, (const uint8_t *)v->data + (size_t)ir * n_ctx * v_el, n_cells * v_el);
            }
        }
    }
    for (uint32_t i = 0; i < kv->size; i++) {
        const struct kv_cell *c = &kv->cells[i];
        sink_u32(s, (uint32_t)c->pos);
        sink_u64(s, (uint64_t)kv_cell_seq_count(c));
        for (llama_seq_id q = 0; q < LLAMA_MAX_SEQ; q++) {
            if (kv_cell_has_seq(c, q)) sink_u32(s, (uint32_t)q);
        }
    }
}

size_t state_save(struct llama_context *ctx, uint8_t *dst) {
    struct sink s = { .buf = dst };
    write_state(ctx, &s);
    return s.pos;
}

/* ---- reading: parse and validate everything, then apply ------------------------- */

struct cursor {
    const uint8_t *p;
    size_t size, pos;
};

static bool cur_take(struct cursor *c, size_t n, const uint8_t **out, const char *what) {
    if (c->size - c->pos < n) {
        error_set("state data is truncated (reading %s)", what);
        return false;
    }
    *out = c->p + c->pos;
    c->pos += n;
    return true;
}

static bool cur_u32(struct cursor *c, uint32_t *v, const char *what) {
    const uint8_t *p;
    if (!cur_take(c, 4, &p, what)) return false;
    memcpy(v, p, 4);
    return true;
}

static bool cur_u64(struct cursor *c, uint64_t *v, const char *what) {
    const uint8_t *p;
    if (!cur_take(c, 8, &p, what)) return false;
    memcpy(v, p, 8);
    return true;
}

struct parsed_state {
    struct rng_mt19937 rng;
    uint64_t n_logits;
    const uint8_t *logits;
    uint64_t n_embd;
    const uint8_t *embd;
    uint64_t buf_size;
    uint32_t head, size;
    const uint8_t *kv_data;   /* layers' K then V rows, as written */
    const uint8_t *cells;     /* the cell list */
};

static bool parse_state(const struct llama_context *ctx, struct cursor *c, struct parsed_state *ps) {
    const struct llama_hparams *hp = &ctx->model->hparams;
    uint64_t rng_len;
    const uint8_t *rng_text;
    if (!cur_u64(c, &rng_len, "the RNG size")) return false;
    if (rng_len > STATE_RNG_MAX) {
        error_set("state RNG text is %llu bytes (at most %d)", (unsigned long long)rng_len, STATE_RNG_MAX);
        return false;
    }
    if (!cur_take(c, rng_len, &rng_text, "the RNG state") ||
        !rng_mt19937_read_text(&ps->rng, (const char *)rng_text, rng_len)) {
        return false;
    }

    const uint64_t logits_cap = (uint64_t)hp->n_vocab * ctx->n_batch;
    if (!cur_u64(c, &ps->n_logits, "the logits size")) return false;
    if (ps->n_logits > logits_cap || ps->n_logits % hp->n_vocab != 0) {
        error_set("state has %llu logits; this context holds at most %llu in rows of %u",
                  (unsigned long long)ps->n_logits, (unsigned long long)logits_cap, hp->n_vocab);
        return false;
    }
    if (!cur_take(c, ps->n_logits * 4, &ps->logits, "the logits")) return false;

    const uint64_t emb = ctx->embedding_out ? hp->n_embd : 0;
    if (!cur_u64(c, &ps->n_embd, "the embedding size")) return false;
    if (ps->n_embd != emb) {
        error_set("state has an embedding of %llu floats; this context keeps %llu", (unsigned long long)ps->n_embd,
                  (unsigned long long)emb);
        return false;
    }
    if (!cur_take(c, ps->n_embd * 4, &ps->embd, "the embedding")) return false;

    uint32_t used;
    if (!cur_u64(c, &ps->buf_size, "the KV buffer size") || !cur_u32(c, &ps->head, "the KV head") ||
        !cur_u32(c, &ps->size, "the KV size") || !cur_u32(c, &used, "the KV used count")) {
        return false;
    }
    if (ps->size != ctx->kv.size) {
        error_set("state has %u KV cells; this context has %u (use the same n_ctx)", ps->size, ctx->kv.size);
        return false;
    }
    if (ps->head > ps->size) {
        error_set("state KV head %u is beyond its %u cells", ps->head, ps->size);
        return false;
    }
    if (ps->buf_size != 0 && ps->buf_size != kv_buf_size(ctx)) {
        error_set("state KV buffer is %llu bytes; this context's is %llu (same model, n_ctx and cache types needed)",
                  (unsigned long long)ps->buf_size, (unsigned long long)kv_buf_size(ctx));
        return false;
    }
    ps->kv_data = c->p + c->pos;
    if (ps->buf_size) {
        for (uint32_t il = 0; il < hp->n_layer; il++) {
            size_t k_row = 0;
            const uint8_t *skip;
            type_row_size(ctx->kv_tensors.k[il]->type, hparams_n_embd_k_gqa(hp), &k_row);
            size_t v_bytes = (size_t)hparams_n_embd_v_gqa(hp) * ps->head * tensor_element_size(ctx->kv_tensors.v[il]);
            if (!cur_take(c, k_row * ps->head, &skip, "the K cache") || !cur_take(c, v_bytes, &skip, "the V cache")) {
                return false;
            }
        }
    }
    ps->cells = c->p + c->pos;
    for (uint32_t i = 0; i < ps->size; i++) {
        uint32_t pos, seq;
        uint64_t n_seq;
        if (!cur_u32(c, &pos, "a KV cell") || !cur_u64(c, &n_seq, "a KV cell")) return false;
        if ((int32_t)pos < -1 || n_seq > LLAMA_MAX_SEQ || ((int32_t)pos < 0 && n_seq != 0)) {
            error_set("state KV cell %u is invalid (pos %d, %llu sequences)", i, (int32_t)pos, (unsigned long long)n_seq);
            return false;
        }
        for (uint64_t j = 0; j < n_seq; j++) {
            if (!cur_u32(c, &seq, "a KV cell's sequences")) return false;
            if (seq >= LLAMA_MAX_SEQ) {
                error_set("state KV cell %u has sequence id %u (at most %d)", i, seq, LLAMA_MAX_SEQ - 1);
                return false;
            }
        }
    }
    return true;
}

static void apply_state(struct llama_context *ctx, const struct parsed_state *ps) {
    const struct llama_hparams *hp = &ctx->model->hparams;
    ctx->rng = ps->rng;
    memcpy(ctx->logits, ps->logits, ps->n_logits * 4);
    ctx->logits_size = ps->n_logits;
    ctx->n_logit_rows = (int32_t)(ps->n_logits / hp->n_vocab);
    for (int32_t i = 0; i < (int32_t)ctx->n_batch; i++) ctx->logit_row_valid[i] = i < ctx->n_logit_rows;
    if (ps->n_embd) memcpy(ctx->embedding_out, ps->embd, ps->n_embd * 4);

    const uint8_t *p = ps->kv_data;
    if (ps->buf_size) {
        const uint32_t n_ctx = ctx->kv.size;
        for (uint32_t il = 0; il < hp->n_layer; il++) {
            struct tensor *k = ctx->kv_tensors.k[il], *v = ctx->kv_tensors.v[il];
            size_t k_row = 0;
            type_row_size(k->type, hparams_n_embd_k_gqa(hp), &k_row);
            memcpy(k->data, p, k_row * ps->head);
            p += k_row * ps->head;
            const size_t v_el = tensor_element_size(v);
            for (uint32_t ir = 0; ir < hparams_n_embd_v_gqa(hp); ir++) {
                memcpy((uint8_t *)v->data + (size_t)ir * n_ctx * v_el, p, ps->head * v_el);
                p += ps->head * v_el;
            }
        }
    }
    struct kv_cells *kv = &ctx->kv;
    kv_cells_clear(kv);
    p = ps->cells;
    for (uint32_t i = 0; i < ps->size; i++) {
        int32_t pos;
        uint64_t n_seq;
        memcpy(&pos, p, 4);
        memcpy(&n_seq, p + 4, 8);
        p += 12;
        struct kv_cell *c = &kv->cells[i];
        c->pos = pos;
        for (uint64_t j = 0; j < n_seq; j++, p += 4) {
            int32_t seq;
            memcpy(&seq, p, 4);
            kv_cell_add_seq(c, seq);
        }
        if (c->pos >= 0 && !kv_cell_is_empty(c)) kv->used++;
        else c->pos = -1;
    }
    kv->head = ps->head < kv->size ? ps->head : 0;
}

size_t state_load(struct llama_context *ctx, const uint8_t *src, size_t size) {
    if (!ctx->kv.cells) {
        error_set("this context has no state (vocab-only model)");
        return 0;
    }
    struct cursor c = { .p = src, .size = size };
    struct parsed_state ps;
    if (!parse_state(ctx, &c, &ps)) return 0;
    apply_state(ctx, &ps);
    return c.pos;
}

/* ---- session files ------------------------------------------------------------------- */

/* b1892's llama_hparams struct as x86-64 GCC lays it out (84 bytes). */
static void encode_hparams(const struct llama_hparams *hp, uint8_t out[SESSION_HPARAMS_SIZE]) {
    memset(out, 0, SESSION_HPARAMS_SIZE);
    out[0] = hp->vocab_only;
    const uint32_t u[] = { hp->n_vocab, hp->n_ctx_train, hp->n_embd, hp->n_head, hp->n_head_kv, hp->n_layer,
                           hp->n_rot, hp->n_embd_head_k, hp->n_embd_head_v, hp->n_ff, hp->n_expert, hp->n_expert_used };
    memcpy(out + 4, u, sizeof u);
    const float f[] = { hp->f_norm_eps, hp->f_norm_rms_eps, hp->rope_freq_base_train, hp->rope_freq_scale_train };
    memcpy(out + 52, f, sizeof f);
    memcpy(out + 68, &hp->n_yarn_orig_ctx, 4);
    out[72] = (uint8_t)((hp->rope_scaling_type_train & 7) | (hp->rope_finetuned ? 8 : 0));
    memcpy(out + 76, &hp->f_clamp_kqv, 4);
    memcpy(out + 80, &hp->f_max_alibi_bias, 4);
}

/* The fields b1892 compares when loading a session (ints exactly, floats within 1e-9). */
static bool hparams_match(const uint8_t *mine, const uint8_t *theirs) {
    if (mine[0] != theirs[0] || memcmp(mine + 4, theirs + 4, 48) != 0 || memcmp(mine + 68, theirs + 68, 4) != 0) {
        return false;
    }
    for (int off = 52; off < 68; off += 4) {
        float a, b;
        memcpy(&a, mine + off, 4);
        memcpy(&b, theirs + off, 4);
        if (!(a == b || fabsf(a - b) <= 1e-9f)) return false;
    }
    return (mine[72] & 8) == (theirs[72] & 8);
}

bool session_save(struct llama_context *ctx, const char *path, const llama_token *tokens, size_t n_tokens) {
    if (!ctx->kv.cells) {
        error_set("this context has no state to save (vocab-only model)");
        return false;
    }
    if (n_tokens > UINT32_MAX || (n_tokens > 0 && !tokens)) {
        error_set("invalid session token list");
        return false;
    }
    FILE *f = fopen(path, "wb");
    if (!f) {
        error_set("cannot write session file '%s': %s", path, strerror(errno));
        return false;
    }
    struct sink s = { .file = f };
    uint8_t hparams[SESSION_HPARAMS_SIZE];
    encode_hparams(&ctx->model->hparams, hparams);
    sink_u32(&s, LLAMA_SESSION_MAGIC);
    sink_u32(&s, LLAMA_SESSION_VERSION);
    sink_write(&s, hparams, sizeof hparams);
    sink_u32(&s, (uint32_t)n_tokens);
    sink_write(&s, tokens, n_tokens * sizeof *tokens);
    write_state(ctx, &s);
    bool ok = !s.failed;
    if (fclose(f) != 0) ok = false;
    if (!ok) {
        remove(path);
        error_set("cannot write session file '%s'", path);
    }
    return ok;
}

bool session_load(struct llama_context *ctx, const char *path, llama_token *tokens_out, size_t capacity,
                  size_t *n_out) {
    struct file_map fm;
    if (!file_map_open(&fm, path, true)) return false;
    struct cursor c = { .p = fm.data, .size = fm.size };
    bool ok = false;
    uint32_t magic, version, n_tokens;
    const uint8_t *hparams, *toks;
    uint8_t mine[SESSION_HPARAMS_SIZE];
    if (!cur_u32(&c, &magic, "the magic") || !cur_u32(&c, &version, "the version")) goto done;
    if (magic != LLAMA_SESSION_MAGIC || version != LLAMA_SESSION_VERSION) {
        error_set("'%s' is not a session file of version %d (magic 0x%08x, version %u)", path,
                  LLAMA_SESSION_VERSION, magic, version);
        goto done;
    }
    if (!cur_take(&c, SESSION_HPARAMS_SIZE, &hparams, "the model parameters")) goto done;
    encode_hparams(&ctx->model->hparams, mine);
    if (!hparams_match(mine, hparams)) {
        error_set("session file '%s' was saved with another model", path);
        goto done;
    }
    if (!cur_u32(&c, &n_tokens, "the token count")) goto done;
    if (n_tokens > capacity) {
        error_set("session file holds %u tokens; the buffer has room for %zu", n_tokens, capacity);
        goto done;
    }
    if (!cur_take(&c, (size_t)n_tokens * 4, &toks, "the tokens")) goto done;

    struct cursor blob = { .p = fm.data + c.pos, .size = fm.size - c.pos };
    struct parsed_state ps;
    if (!ctx->kv.cells) {
        error_set("this context has no state (vocab-only model)");
        goto done;
    }
    if (!parse_state(ctx, &blob, &ps)) goto done;
    if (blob.pos != blob.size) {
        error_set("session file '%s' has %zu unexpected bytes at its end", path, blob.size - blob.pos);
        goto done;
    }
    apply_state(ctx, &ps);
    if (n_tokens) memcpy(tokens_out, toks, (size_t)n_tokens * 4);
    if (n_out) *n_out = n_tokens;
    ok = true;
done:
    file_map_close(&fm);
    return ok;
}
