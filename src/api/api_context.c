/* llama.h: contexts, the KV cache, batches, decoding, outputs, timings. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "context/context.h"
#include "core/log.h"
#include "core/timer.h"
#include "llama.h"

struct llama_context *llama_new_context_with_model(struct llama_model *model, struct llama_context_params params) {
    return context_new(model, &params);
}

void llama_free(struct llama_context *ctx) {
    context_free(ctx);
}

const struct llama_model *llama_get_model(const struct llama_context *ctx) {
    return ctx ? ctx->model : NULL;
}

uint32_t llama_n_ctx(const struct llama_context *ctx) {
    return ctx ? ctx->cparams.n_ctx : 0;
}

uint32_t llama_n_batch(const struct llama_context *ctx) {
    return ctx ? ctx->n_batch : 0;
}

void llama_set_n_threads(struct llama_context *ctx, uint32_t n_threads, uint32_t n_threads_batch) {
    if (!ctx) return;
    if (n_threads == 0 || n_threads_batch == 0 || n_threads > 512 || n_threads_batch > 512) {
        error_set("llama_set_n_threads: thread counts must be in 1..512 (got %u, %u)", n_threads, n_threads_batch);
        return;
    }
    ctx->n_threads = n_threads;
    ctx->n_threads_batch = n_threads_batch;
}

/* ---- KV cache ---------------------------------------------------------------- */

static bool kv_usable(const struct llama_context *ctx, const char *fn) {
    if (!ctx) {
        error_set("%s: context is NULL", fn);
        return false;
    }
    if (!ctx->kv.cells) {
        error_set("%s: the context has no KV cache (vocab-only model)", fn);
        return false;
    }
    return true;
}

static bool seq_valid(llama_seq_id seq, bool allow_any, const char *fn) {
    if ((allow_any && seq < 0) || (seq >= 0 && seq < LLAMA_MAX_SEQ)) return true;
    error_set("%s: sequence id %d is out of range (0..%d)", fn, seq, LLAMA_MAX_SEQ - 1);
    return false;
}

int32_t llama_get_kv_cache_token_count(const struct llama_context *ctx) {
    return ctx && ctx->kv.cells ? kv_cells_token_count(&ctx->kv) : 0;
}

int32_t llama_get_kv_cache_used_cells(const struct llama_context *ctx) {
    return ctx && ctx->kv.cells ? (int32_t)ctx->kv.used : 0;
}

void llama_kv_cache_clear(struct llama_context *ctx) {
    if (kv_usable(ctx, "llama_kv_cache_clear")) kv_cells_clear(&ctx->kv);
}

void llama_kv_cache_seq_rm(struct llama_context *ctx, llama_seq_id seq_id, llama_pos p0, llama_pos p1) {
    if (kv_usable(ctx, __func__) && seq_valid(seq_id, true, __func__)) kv_cells_seq_rm(&ctx->kv, seq_id, p0, p1);
}

void llama_kv_cache_seq_cp(struct llama_context *ctx, llama_seq_id src, llama_seq_id dst, llama_pos p0, llama_pos p1) {
    if (!kv_usable(ctx, __func__) || !seq_valid(src, false, __func__) || !seq_valid(dst, false, __func__)) return;
    if (src == dst) return;
    kv_cells_seq_cp(&ctx->kv, src, dst, p0, p1);
}

void llama_kv_cache_seq_keep(struct llama_context *ctx, llama_seq_id seq_id) {
    if (kv_usable(ctx, __func__) && seq_valid(seq_id, false, __func__)) kv_cells_seq_keep(&ctx->kv, seq_id);
}

void llama_kv_cache_seq_shift(struct llama_context *ctx, llama_seq_id seq_id, llama_pos p0, llama_pos p1, llama_pos delta) {
    if (kv_usable(ctx, __func__) && seq_valid(seq_id, false, __func__)) kv_cells_seq_shift(&ctx->kv, seq_id, p0, p1, delta);
}

void llama_kv_cache_seq_div(struct llama_context *ctx, llama_seq_id seq_id, llama_pos p0, llama_pos p1, int d) {
    if (!kv_usable(ctx, __func__) || !seq_valid(seq_id, false, __func__)) return;
    if (d < 1) {
        error_set("%s: divisor must be at least 1 (got %d)", __func__, d);
        return;
    }
    kv_cells_seq_div(&ctx->kv, seq_id, p0, p1, d);
}

struct llama_kv_cache_view llama_kv_cache_view_init(const struct llama_context *ctx, int32_t n_max_seq) {
    struct llama_kv_cache_view view = {
        .n_cells = 0, .n_max_seq = n_max_seq < 1 ? 1 : n_max_seq, .token_count = 0, .used_cells = 0,
        .max_contiguous = 0, .max_contiguous_idx = -1, .cells = NULL, .cells_sequences = NULL,
    };
    (void)ctx;
    return view;
}

void llama_kv_cache_view_free(struct llama_kv_cache_view *view) {
    if (!view) return;
    free(view->cells);
    free(view->cells_sequences);
    view->cells = NULL;
    view->cells_sequences = NULL;
    view->n_cells = 0;
}

void llama_kv_cache_view_update(const struct llama_context *ctx, struct llama_kv_cache_view *view) {
    if (!view || !kv_usable(ctx, __func__)) return;
    const struct kv_cells *kv = &ctx->kv;
    if ((uint32_t)view->n_cells < kv->size || !view->cells) {
        struct llama_kv_cache_view_cell *cells = realloc(view->cells, kv->size * sizeof *cells);
        llama_seq_id *seqs = cells ? realloc(view->cells_sequences, (size_t)kv->size * view->n_max_seq * sizeof *seqs) : NULL;
        if (!cells || !seqs) {
            if (cells) view->cells = cells;
            error_set("%s: out of memory", __func__);
            return;
        }
        view->cells = cells;
        view->cells_sequences = seqs;
        view->n_cells = (int32_t)kv->size;
    }
    int32_t token_count = 0, used = 0, run = 0, best = 0, best_idx = -1;
    for (uint32_t i = 0; i < kv->size; i++) {
        const struct kv_cell *c = &kv->cells[i];
        view->cells[i].pos = c->pos;
        llama_seq_id *out = view->cells_sequences + (size_t)i * view->n_max_seq;
        int32_t n = 0;
        for (llama_seq_id s = 0; s < LLAMA_MAX_SEQ; s++) {
            if (!kv_cell_has_seq(c, s)) continue;
            if (n < view->n_max_seq) out[n] = s;
            n++;
        }
        for (int32_t j = n; j < view->n_max_seq; j++) out[j] = -1;
        token_count += n;
        if (n > 0) {
            used++;
            run = 0;
        } else if (++run > best) {
            best = run;
            best_idx = (int32_t)i - run + 1;
        }
    }
    view->token_count = token_count;
    view->used_cells = used;
    view->max_contiguous = best;
    view->max_contiguous_idx = best_idx;
}

/* ---- batches and decoding ----------------------------------------------------- */

struct llama_batch llama_batch_get_one(llama_token *tokens, int32_t n_tokens, llama_pos pos_0, llama_seq_id seq_id) {
    struct llama_batch b = {
        .n_tokens = n_tokens, .token = tokens, .embd = NULL, .pos = NULL, .n_seq_id = NULL, .seq_id = NULL,
        .logits = NULL, .all_pos_0 = pos_0, .all_pos_1 = 1, .all_seq_id = seq_id,
    };
    return b;
}

/* Unlike b1892, the seq_id rows are one block with a NULL sentinel after the
 * last row pointer, so llama_batch_free frees exactly what was allocated
 * whatever n_tokens says. A failed allocation gives a batch of NULL arrays. */
struct llama_batch llama_batch_init(int32_t n_tokens, int32_t embd, int32_t n_seq_max) {
    struct llama_batch b = {0};
    if (n_tokens <= 0 || embd < 0 || n_seq_max <= 0) {
        error_set("llama_batch_init: invalid sizes (n_tokens %d, embd %d, n_seq_max %d)", n_tokens, embd, n_seq_max);
        return b;
    }
    size_t n = (size_t)n_tokens;
    if (embd) b.embd = malloc(n * (size_t)embd * sizeof *b.embd);
    else b.token = malloc(n * sizeof *b.token);
    b.pos = malloc(n * sizeof *b.pos);
    b.n_seq_id = malloc(n * sizeof *b.n_seq_id);
    b.seq_id = malloc((n + 1) * sizeof *b.seq_id);
    llama_seq_id *rows = malloc(n * (size_t)n_seq_max * sizeof *rows);
    b.logits = malloc(n * sizeof *b.logits);
    if (!(b.embd || b.token) || !b.pos || !b.n_seq_id || !b.seq_id || !rows || !b.logits) {
        free(rows);
        free(b.seq_id);
        b.seq_id = NULL;
        llama_batch_free(b);
        error_set("llama_batch_init: out of memory");
        return (struct llama_batch){0};
    }
    for (size_t i = 0; i < n; i++) b.seq_id[i] = rows + i * (size_t)n_seq_max;
    b.seq_id[n] = NULL;
    return b;
}

void llama_batch_free(struct llama_batch batch) {
    free(batch.token);
    free(batch.embd);
    free(batch.pos);
    free(batch.n_seq_id);
    if (batch.seq_id) free(batch.seq_id[0]);
    free(batch.seq_id);
    free(batch.logits);
}

int32_t llama_decode(struct llama_context *ctx, struct llama_batch batch) {
    if (!ctx) {
        error_set("llama_decode: context is NULL");
        return -1;
    }
    return context_decode(ctx, &batch);
}

int llama_eval(struct llama_context *ctx, llama_token *tokens, int32_t n_tokens, int32_t n_past) {
    if (!ctx || !tokens) {
        error_set("llama_eval: context and tokens are required");
        return -1;
    }
    if (ctx->kv.cells) kv_cells_seq_rm(&ctx->kv, -1, n_past, -1);
    return context_decode(ctx, &(struct llama_batch){
        .n_tokens = n_tokens, .token = tokens, .all_pos_0 = n_past, .all_pos_1 = 1, .all_seq_id = 0 });
}

int llama_eval_embd(struct llama_context *ctx, float *embd, int32_t n_tokens, int32_t n_past) {
    if (!ctx || !embd) {
        error_set("llama_eval_embd: context and embeddings are required");
        return -1;
    }
    if (ctx->kv.cells) kv_cells_seq_rm(&ctx->kv, -1, n_past, -1);
    return context_decode(ctx, &(struct llama_batch){
        .n_tokens = n_tokens, .embd = embd, .all_pos_0 = n_past, .all_pos_1 = 1, .all_seq_id = 0 });
}

float *llama_get_logits(struct llama_context *ctx) {
    return ctx ? ctx->logits : NULL;
}

float *llama_get_logits_ith(struct llama_context *ctx, int32_t i) {
    if (!ctx || !ctx->logits) return NULL;
    if (i < 0 || i >= ctx->n_logit_rows) {
        error_set("llama_get_logits_ith: row %d is out of range (the last batch has %d rows of logits)", i,
                  ctx->n_logit_rows);
        return NULL;
    }
    return ctx->logits + (size_t)i * ctx->model->hparams.n_vocab;
}

float *llama_get_embeddings(struct llama_context *ctx) {
    return ctx ? ctx->embedding_out : NULL;
}

/* ---- timings --------------------------------------------------------------------- */

struct llama_timings llama_get_timings(struct llama_context *ctx) {
    struct llama_timings t = {0};
    if (!ctx) return t;
    t.t_start_ms = 1e-3 * (double)ctx->t_start_us;
    t.t_end_ms = 1e-3 * (double)time_us();
    t.t_load_ms = 1e-3 * (double)ctx->t_load_us;
    t.t_sample_ms = 1e-3 * (double)ctx->t_sample_us;
    t.t_p_eval_ms = 1e-3 * (double)ctx->t_p_eval_us;
    t.t_eval_ms = 1e-3 * (double)ctx->t_eval_us;
    t.n_sample = ctx->n_sample > 1 ? ctx->n_sample : 1;
    t.n_p_eval = ctx->n_p_eval > 1 ? ctx->n_p_eval : 1;
    t.n_eval = ctx->n_eval > 1 ? ctx->n_eval : 1;
    return t;
}

void llama_print_timings(struct llama_context *ctx) {
    if (!ctx) return;
    const struct llama_timings t = llama_get_timings(ctx);
    LOG_INFO("\n");
    LOG_INFO("llama_print_timings:        load time = %10.2f ms\n", t.t_load_ms);
    LOG_INFO("llama_print_timings:      sample time = %10.2f ms / %5d runs   (%8.2f ms per token, %8.2f tokens per second)\n",
             t.t_sample_ms, t.n_sample, t.t_sample_ms / t.n_sample, 1e3 / t.t_sample_ms * t.n_sample);
    LOG_INFO("llama_print_timings: prompt eval time = %10.2f ms / %5d tokens (%8.2f ms per token, %8.2f tokens per second)\n",
             t.t_p_eval_ms, t.n_p_eval, t.t_p_eval_ms / t.n_p_eval, 1e3 / t.t_p_eval_ms * t.n_p_eval);
    LOG_INFO("llama_print_timings:        eval time = %10.2f ms / %5d runs   (%8.2f ms per token, %8.2f tokens per second)\n",
             t.t_eval_ms, t.n_eval, t.t_eval_ms / t.n_eval, 1e3 / t.t_eval_ms * t.n_eval);
    LOG_INFO("llama_print_timings:       total time = %10.2f ms\n", t.t_end_ms - t.t_start_ms);
}

void llama_reset_timings(struct llama_context *ctx) {
    if (!ctx) return;
    ctx->t_start_us = time_us();
    ctx->t_sample_us = ctx->n_sample = 0;
    ctx->t_eval_us = ctx->n_eval = 0;
    ctx->t_p_eval_us = ctx->n_p_eval = 0;
}

void llama_dump_timing_info_yaml(FILE *stream, const struct llama_context *ctx) {
    if (!stream || !ctx) return;
    fprintf(stream, "\n");
    fprintf(stream, "###########\n");
    fprintf(stream, "# Timings #\n");
    fprintf(stream, "###########\n");
    fprintf(stream, "\n");
    fprintf(stream, "mst_eval: %.2f  # ms / token during generation\n", 1.0e-3 * ctx->t_eval_us / (ctx->n_eval > 0 ? ctx->n_eval : 1));
    fprintf(stream, "mst_p_eval: %.2f  # ms / token during prompt processing\n", 1.0e-3 * ctx->t_p_eval_us / (ctx->n_p_eval > 0 ? ctx->n_p_eval : 1));
    fprintf(stream, "mst_sample: %.2f  # ms / token during sampling\n", 1.0e-3 * ctx->t_sample_us / (ctx->n_sample > 0 ? ctx->n_sample : 1));
    fprintf(stream, "n_eval: %d  # number of tokens generated (excluding the first one)\n", ctx->n_eval);
    fprintf(stream, "n_p_eval: %d  # number of tokens processed in batches at the beginning\n", ctx->n_p_eval);
    fprintf(stream, "n_sample: %d  # number of sampled tokens\n", ctx->n_sample);
    fprintf(stream, "t_eval_us: %" PRId64 "  # total microseconds spent generating tokens\n", ctx->t_eval_us);
    fprintf(stream, "t_load_us: %" PRId64 "  # total microseconds spent loading the model\n", ctx->t_load_us);
    fprintf(stream, "t_p_eval_us: %" PRId64 "  # total microseconds spent prompt processing\n", ctx->t_p_eval_us);
    fprintf(stream, "t_sample_us: %" PRId64 "  # total microseconds spent sampling\n", ctx->t_sample_us);
    fprintf(stream, "ts_eval: %.2f  # tokens / second during generation\n", 1.0e6 * ctx->n_eval / (ctx->t_eval_us > 0 ? ctx->t_eval_us : 1));
    fprintf(stream, "ts_p_eval: %.2f  # tokens / second during prompt processing\n", 1.0e6 * ctx->n_p_eval / (ctx->t_p_eval_us > 0 ? ctx->t_p_eval_us : 1));
    fprintf(stream, "ts_sample: %.2f  # tokens / second during sampling\n", 1.0e6 * ctx->n_sample / (ctx->t_sample_us > 0 ? ctx->t_sample_us : 1));
}

/* llamac extension (also in later llama.cpp): stop a running decode. */
void llama_set_abort_callback(struct llama_context *ctx, ggml_abort_callback abort_callback, void *data) {
    if (!ctx) return;
    ctx->abort_callback = abort_callback;
    ctx->abort_callback_data = data;
}
