/*
 * llama_decode: validate a batch, claim KV cells, build and run the graph,
 * and keep the requested outputs. On any failure after the cells were
 * claimed they are released again, so the context stays usable.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "context/compute.h"
#include "context/context.h"
#include "core/log.h"
#include "core/timer.h"
#include "vocab/vocab.h"

/* A batch with every per-token array present (the legacy all_* fields expanded). */
struct full_batch {
    uint32_t n_tokens;
    const llama_token *token;
    const float *embd;
    llama_pos *pos;
    int32_t *n_seq_id;
    llama_seq_id **seq_id;
    const int8_t *logits; /* NULL: last token only, or all with logits_all */
};

static bool validate_batch(const struct llama_context *ctx, const struct llama_batch *b) {
    const struct llama_hparams *hp = &ctx->model->hparams;
    if (b->n_tokens <= 0) {
        error_set("llama_decode: the batch is empty (n_tokens = %d)", b->n_tokens);
        return false;
    }
    if ((uint32_t)b->n_tokens > ctx->n_batch) {
        error_set("llama_decode: n_tokens %d exceeds n_batch %u", b->n_tokens, ctx->n_batch);
        return false;
    }
    if (!b->token == !b->embd) {
        error_set("llama_decode: a batch needs exactly one of token and embd");
        return false;
    }
    for (int32_t i = 0; i < b->n_tokens; i++) {
        if (b->token && (b->token[i] < 0 || (uint32_t)b->token[i] >= hp->n_vocab)) {
            error_set("llama_decode: token %d at batch index %d is outside the vocabulary (0..%u)",
                      b->token[i], i, hp->n_vocab - 1);
            return false;
        }
        llama_pos pos = b->pos ? b->pos[i] : b->all_pos_0 + i * b->all_pos_1;
        if (pos < 0) {
            error_set("llama_decode: negative position %d at batch index %d", pos, i);
            return false;
        }
        if (b->seq_id) {
            int32_t n = b->n_seq_id ? b->n_seq_id[i] : 1;
            if (n < 1 || n > LLAMA_MAX_SEQ || !b->seq_id[i]) {
                error_set("llama_decode: token %d has %d sequence ids (1..%d allowed)", i, n, LLAMA_MAX_SEQ);
                return false;
            }
            for (int32_t j = 0; j < n; j++) {
                if (b->seq_id[i][j] < 0 || b->seq_id[i][j] >= LLAMA_MAX_SEQ) {
                    error_set("llama_decode: sequence id %d at batch index %d is out of range (0..%d)",
                              b->seq_id[i][j], i, LLAMA_MAX_SEQ - 1);
                    return false;
                }
            }
        } else if (b->all_seq_id < 0 || b->all_seq_id >= LLAMA_MAX_SEQ) {
            error_set("llama_decode: sequence id %d is out of range (0..%d)", b->all_seq_id, LLAMA_MAX_SEQ - 1);
            return false;
        }
    }
    return true;
}

static void expand_batch(const struct llama_batch *b, struct batch_scratch *s, struct full_batch *fb) {
    fb->n_tokens = (uint32_t)b->n_tokens;
    fb->token = b->token;
    fb->embd = b->embd;
    fb->logits = b->logits;
    if (b->pos) {
        fb->pos = b->pos;
    } else {
        for (int32_t i = 0; i < b->n_tokens; i++) s->pos[i] = b->all_pos_0 + i * b->all_pos_1;
        fb->pos = s->pos;
    }
    if (b->seq_id) {
        fb->seq_id = b->seq_id;
        if (b->n_seq_id) {
            fb->n_seq_id = b->n_seq_id;
        } else {
            for (int32_t i = 0; i < b->n_tokens; i++) s->n_seq_id[i] = 1;
            fb->n_seq_id = s->n_seq_id;
        }
    } else {
        s->seq = b->all_seq_id;
        for (int32_t i = 0; i < b->n_tokens; i++) {
            s->n_seq_id[i] = 1;
            s->seq_id[i] = &s->seq;
        }
        fb->n_seq_id = s->n_seq_id;
        fb->seq_id = s->seq_id;
    }
}

static void release_cells(struct kv_cells *kv, uint32_t head, uint32_t n_tokens) {
    for (uint32_t i = 0; i < n_tokens; i++) {
        struct kv_cell *c = &kv->cells[head + i];
        c->pos = -1;
        memset(c->seq, 0, sizeof c->seq);
    }
    kv->used -= n_tokens;
}

static bool apply_k_shift(struct llama_context *ctx) {
    struct llm_shift_graph sg;
    if (!llm_build_k_shift(compute_arena(ctx->compute), ctx->model, &ctx->cparams, &ctx->kv_tensors, &sg) ||
        !compute_alloc(ctx->compute, sg.graph)) {
        return false;
    }
    int32_t *shift = sg.inp_shift->data;
    for (uint32_t i = 0; i < ctx->kv.size; i++) shift[i] = ctx->kv.cells[i].delta;
    return compute_run(ctx->compute, sg.graph, (int)ctx->n_threads_batch, ctx->abort_callback, ctx->abort_callback_data,
                       ctx->eval_callback, ctx->eval_callback_data);
}

/* Which batch rows produce outputs: flagged rows, all (logits_all), or the last;
 * with `embedding` the last row is always computed. Returns the count. */
static uint32_t select_outputs(const struct llama_context *ctx, const struct full_batch *b, int32_t *out_ids) {
    uint32_t n = 0;
    for (uint32_t i = 0; i < b->n_tokens; i++) {
        bool want = b->logits ? b->logits[i] != 0 : (ctx->logits_all || i == b->n_tokens - 1);
        if (want || (ctx->embedding && i == b->n_tokens - 1)) out_ids[n++] = (int32_t)i;
    }
    return n;
}

static void store_outputs(struct llama_context *ctx, const struct full_batch *b, const struct llm_graph *g,
                          const int32_t *out_ids, uint32_t n_outputs) {
    const size_t n_vocab = ctx->model->hparams.n_vocab, n_embd = ctx->model->hparams.n_embd;
    const float *logits = g->result->data;
    memset(ctx->logit_row_valid, 0, ctx->n_batch * sizeof *ctx->logit_row_valid);
    if (b->logits || ctx->logits_all) {
        /* one row per batch token; rows not requested keep stale data as in b1892 */
        for (uint32_t r = 0; r < n_outputs; r++) {
            uint32_t i = (uint32_t)out_ids[r];
            if (b->logits ? !b->logits[i] : !ctx->logits_all) continue;
            memcpy(ctx->logits + i * n_vocab, logits + r * n_vocab, n_vocab * sizeof *logits);
            ctx->logit_row_valid[i] = true;
        }
        ctx->logits_size = b->n_tokens * n_vocab;
        ctx->n_logit_rows = (int32_t)b->n_tokens;
    } else {
        memcpy(ctx->logits, logits + (n_outputs - 1) * n_vocab, n_vocab * sizeof *logits);
        ctx->logit_row_valid[0] = true;
        ctx->logits_size = n_vocab;
        ctx->n_logit_rows = 1;
    }
    if (ctx->embedding) {
        const float *hidden = g->result_norm->data;
        memcpy(ctx->embedding_out, hidden + (n_outputs - 1) * n_embd, n_embd * sizeof *hidden);
    }
}

int32_t context_decode(struct llama_context *ctx, const struct llama_batch *batch) {
    if (ctx->model->hparams.vocab_only) {
        error_set("llama_decode: the model was loaded with vocab_only");
        return -1;
    }
    if (!validate_batch(ctx, batch)) return -1;
    const int64_t t_start = time_us();
    struct full_batch b;
    expand_batch(batch, &ctx->scratch, &b);
    const uint32_t n_tokens = b.n_tokens;

    struct kv_cells *kv = &ctx->kv;
    /* plenty of free cells before head: search from the start, to fill the cache */
    if (kv->head > kv->used + 2 * n_tokens) kv->head = 0;
    struct kv_batch_view view = { n_tokens, b.pos, b.n_seq_id, b.seq_id };
    if (!kv_cells_find_slot(kv, &view)) {
        LOG_WARN("llama_decode: no free KV cache slot for %u tokens (%u of %u cells used)\n",
                 n_tokens, kv->used, kv->size);
        return 1;
    }
    const uint32_t kv_head = kv->head;
    /* attend only to the used part of the cache, padded to 32 cells */
    uint32_t n_kv = (kv_cells_max_used(kv) + 31) / 32 * 32;
    if (n_kv < 32) n_kv = 32;
    if (n_kv > ctx->cparams.n_ctx) n_kv = ctx->cparams.n_ctx;

    const int n_threads = (int)(n_tokens == 1 ? ctx->n_threads : ctx->n_threads_batch);
    if (kv->has_shift) {
        if (!apply_k_shift(ctx)) goto fail;
        kv_cells_shift_applied(kv);
    }

    int32_t *out_ids = ctx->scratch.out_ids;
    uint32_t n_outputs = select_outputs(ctx, &b, out_ids);
    if (n_outputs == 0) out_ids[n_outputs++] = (int32_t)n_tokens - 1; /* nothing asked: keep the graph's shape sane */

    struct llm_batch_shape shape = {
        .n_tokens = n_tokens, .n_outputs = n_outputs, .n_kv = n_kv, .kv_head = kv_head, .use_embd = b.embd != NULL,
    };
    struct llm_graph g;
    if (!llm_build_llama(compute_arena(ctx->compute), ctx->model, &ctx->cparams, &ctx->kv_tensors, &shape, &g) ||
        !compute_alloc(ctx->compute, g.graph)) {
        goto fail;
    }
    if (b.embd) {
        memcpy(g.inp_embd->data, b.embd, (size_t)n_tokens * ctx->model->hparams.n_embd * sizeof(float));
    } else {
        memcpy(g.inp_tokens->data, b.token, n_tokens * sizeof(llama_token));
    }
    memcpy(g.inp_pos->data, b.pos, n_tokens * sizeof(llama_pos));
    kv_cells_build_mask(kv, &view, n_kv, g.inp_mask->data);
    if (g.inp_out_ids) memcpy(g.inp_out_ids->data, out_ids, n_outputs * sizeof *out_ids);

    if (!compute_run(ctx->compute, g.graph, n_threads, ctx->abort_callback, ctx->abort_callback_data,
                     ctx->eval_callback, ctx->eval_callback_data)) {
        goto fail;
    }

    store_outputs(ctx, &b, &g, out_ids, n_outputs);
    kv_cells_commit(kv, n_tokens);

    const int64_t t_used = time_us() - t_start;
    if (n_tokens == 1) {
        ctx->t_eval_us += t_used;
        ctx->n_eval++;
    } else {
        ctx->t_p_eval_us += t_used;
        ctx->n_p_eval += (int32_t)n_tokens;
    }
    return 0;

fail:
    release_cells(kv, kv_head, n_tokens);
    return -2;
}
