/*
 * llama.h — the llamac C API, source-compatible with llama.cpp b1892.
 *
 * Programs and bindings written against llama.cpp b1892's llama.h compile
 * against this header and link with libllama from llamac: same functions,
 * argument lists, struct fields and field order, enum values and defaults.
 *
 * Where b1892 aborts, llamac reports: functions return their error value
 * (NULL, false, a non-zero or negative code) and log the reason through the
 * callback set with llama_log_set(). Thread safety: a model may be shared by
 * many contexts on many threads; a context is used by one thread at a time.
 *
 * Quick start (error checks shortened):
 *
 *     llama_backend_init(false);
 *     struct llama_model *model = llama_load_model_from_file("m.gguf", llama_model_default_params());
 *     struct llama_context *ctx = llama_new_context_with_model(model, llama_context_default_params());
 *     llama_token toks[64];
 *     int n = llama_tokenize(model, "Once upon a time", 16, toks, 64, true, false);
 *     llama_decode(ctx, llama_batch_get_one(toks, n, 0, 0));
 *     float *logits = llama_get_logits(ctx);          // n_vocab floats for the last token
 *     ...
 *     llama_free(ctx); llama_free_model(model); llama_backend_free();
 */
#ifndef LLAMA_H
#define LLAMA_H

#include "ggml.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define LLAMA_MAX_DEVICES 1

#if defined(__GNUC__)
#  define LLAMA_API __attribute__((visibility("default")))
#  define DEPRECATED(func, hint) func __attribute__((deprecated(hint)))
#else
#  define LLAMA_API
#  define DEPRECATED(func, hint) func
#endif

#define LLAMA_DEFAULT_SEED 0xFFFFFFFF

#define LLAMA_MAX_RNG_STATE (64*1024)

#define LLAMA_FILE_MAGIC_GGLA 0x67676c61u /* 'ggla' */
#define LLAMA_FILE_MAGIC_GGSN 0x6767736eu /* 'ggsn' */

#define LLAMA_SESSION_MAGIC   LLAMA_FILE_MAGIC_GGSN
#define LLAMA_SESSION_VERSION 4

#ifdef __cplusplus
extern "C" {
#endif

    /* Opaque objects. */
    struct llama_model;
    struct llama_context;

    typedef int32_t llama_pos;
    typedef int32_t llama_token;
    typedef int32_t llama_seq_id;

    enum llama_vocab_type {
        LLAMA_VOCAB_TYPE_SPM = 0, /* SentencePiece: byte fallback, scores */
        LLAMA_VOCAB_TYPE_BPE = 1, /* GPT-2 style byte-level BPE */
    };

    enum llama_token_type {
        LLAMA_TOKEN_TYPE_UNDEFINED    = 0,
        LLAMA_TOKEN_TYPE_NORMAL       = 1,
        LLAMA_TOKEN_TYPE_UNKNOWN      = 2,
        LLAMA_TOKEN_TYPE_CONTROL      = 3,
        LLAMA_TOKEN_TYPE_USER_DEFINED = 4,
        LLAMA_TOKEN_TYPE_UNUSED       = 5,
        LLAMA_TOKEN_TYPE_BYTE         = 6,
    };

    /* Model file types (general.file_type): the dominant weight type. */
    enum llama_ftype {
        LLAMA_FTYPE_ALL_F32              = 0,
        LLAMA_FTYPE_MOSTLY_F16           = 1,  /* except 1d tensors */
        LLAMA_FTYPE_MOSTLY_Q4_0          = 2,  /* except 1d tensors */
        LLAMA_FTYPE_MOSTLY_Q4_1          = 3,  /* except 1d tensors */
        LLAMA_FTYPE_MOSTLY_Q4_1_SOME_F16 = 4,  /* tok_embeddings.weight and output.weight are F16 */
        /* 5 (Q4_2) and 6 (Q4_3) were removed */
        LLAMA_FTYPE_MOSTLY_Q8_0          = 7,  /* except 1d tensors */
        LLAMA_FTYPE_MOSTLY_Q5_0          = 8,  /* except 1d tensors */
        LLAMA_FTYPE_MOSTLY_Q5_1          = 9,  /* except 1d tensors */
        LLAMA_FTYPE_MOSTLY_Q2_K          = 10, /* except 1d tensors */
        LLAMA_FTYPE_MOSTLY_Q3_K_S        = 11, /* except 1d tensors */
        LLAMA_FTYPE_MOSTLY_Q3_K_M        = 12, /* except 1d tensors */
        LLAMA_FTYPE_MOSTLY_Q3_K_L        = 13, /* except 1d tensors */
        LLAMA_FTYPE_MOSTLY_Q4_K_S        = 14, /* except 1d tensors */
        LLAMA_FTYPE_MOSTLY_Q4_K_M        = 15, /* except 1d tensors */
        LLAMA_FTYPE_MOSTLY_Q5_K_S        = 16, /* except 1d tensors */
        LLAMA_FTYPE_MOSTLY_Q5_K_M        = 17, /* except 1d tensors */
        LLAMA_FTYPE_MOSTLY_Q6_K          = 18, /* except 1d tensors */
        LLAMA_FTYPE_MOSTLY_IQ2_XXS       = 19, /* except 1d tensors */
        LLAMA_FTYPE_MOSTLY_IQ2_XS        = 20, /* except 1d tensors */
        LLAMA_FTYPE_MOSTLY_Q2_K_S        = 21, /* except 1d tensors */

        LLAMA_FTYPE_GUESSED = 1024, /* not specified in the model file */
    };

    enum llama_rope_scaling_type {
        LLAMA_ROPE_SCALING_UNSPECIFIED = -1,
        LLAMA_ROPE_SCALING_NONE        = 0,
        LLAMA_ROPE_SCALING_LINEAR      = 1,
        LLAMA_ROPE_SCALING_YARN        = 2,
        LLAMA_ROPE_SCALING_MAX_VALUE   = LLAMA_ROPE_SCALING_YARN,
    };

    enum llama_split_mode {
        LLAMA_SPLIT_NONE  = 0, /* single device */
        LLAMA_SPLIT_LAYER = 1, /* split layers and KV across devices */
        LLAMA_SPLIT_ROW   = 2, /* split rows across devices */
    };

    typedef struct llama_token_data {
        llama_token id; /* token id */
        float logit;    /* log-odds of the token */
        float p;        /* probability of the token */
    } llama_token_data;

    typedef struct llama_token_data_array {
        llama_token_data * data;
        size_t size;
        bool sorted;
    } llama_token_data_array;

    /* Called during model loading with progress in [0, 1]; returning false cancels the load. */
    typedef bool (*llama_progress_callback)(float progress, void *ctx);

    /* Input data for llama_decode: a set of tokens (or embeddings), each with a
     * position, the sequences it belongs to, and whether its logits are wanted.
     * A batch from llama_batch_get_one() leaves pos/seq_id/logits NULL and uses
     * the all_* fields instead (legacy). */
    typedef struct llama_batch {
        int32_t n_tokens;

        llama_token  *  token;
        float        *  embd;
        llama_pos    *  pos;
        int32_t      *  n_seq_id;
        llama_seq_id ** seq_id;
        int8_t       *  logits;

        /* used when the arrays above are NULL (legacy, to be removed) */
        llama_pos    all_pos_0;  /* pos of the first token */
        llama_pos    all_pos_1;  /* pos stride */
        llama_seq_id all_seq_id; /* sequence id of every token */
    } llama_batch;

    enum llama_model_kv_override_type {
        LLAMA_KV_OVERRIDE_INT,
        LLAMA_KV_OVERRIDE_FLOAT,
        LLAMA_KV_OVERRIDE_BOOL,
    };

    struct llama_model_kv_override {
        char key[128];
        enum llama_model_kv_override_type tag;
        union {
            int64_t int_value;
            double float_value;
            bool bool_value;
        };
    };

    struct llama_model_params {
        int32_t n_gpu_layers;             /* number of layers to store in VRAM */
        enum llama_split_mode split_mode; /* how to split the model across devices */
        int32_t main_gpu;                 /* the device used with LLAMA_SPLIT_NONE */
        const float * tensor_split;       /* proportion of the model per device (LLAMA_MAX_DEVICES floats) */

        /* called with a progress value between 0.0 and 1.0; false cancels the load */
        llama_progress_callback progress_callback;
        void * progress_callback_user_data;

        /* metadata overrides, an array terminated by an entry with an empty key */
        const struct llama_model_kv_override * kv_overrides;

        bool vocab_only; /* only load the vocabulary, no weights */
        bool use_mmap;   /* use the mapped file for the weights when possible */
        bool use_mlock;  /* force the system to keep the model in RAM */
    };

    struct llama_context_params {
        uint32_t seed;            /* RNG seed, LLAMA_DEFAULT_SEED for a random one */
        uint32_t n_ctx;           /* text context, 0 = from the model */
        uint32_t n_batch;         /* most tokens per llama_decode call */
        uint32_t n_threads;       /* threads for generation (single-token batches) */
        uint32_t n_threads_batch; /* threads for batches of several tokens */
        int8_t   rope_scaling_type; /* enum llama_rope_scaling_type */

        /* 0 = from the model */
        float    rope_freq_base;   /* RoPE base frequency */
        float    rope_freq_scale;  /* RoPE frequency scaling factor */
        float    yarn_ext_factor;  /* YaRN extrapolation mix factor, negative = from the model */
        float    yarn_attn_factor; /* YaRN magnitude scaling factor */
        float    yarn_beta_fast;   /* YaRN low correction dim */
        float    yarn_beta_slow;   /* YaRN high correction dim */
        uint32_t yarn_orig_ctx;    /* YaRN original context size */

        enum ggml_type type_k; /* data type of the K cache */
        enum ggml_type type_v; /* data type of the V cache */

        bool mul_mat_q;   /* deprecated, ignored */
        bool logits_all;  /* every token's logits for batches without a logits array */
        bool embedding;   /* keep the last token's embedding */
        bool offload_kqv; /* keep KQV ops and KV cache on the device (GPU builds) */
    };

    typedef struct llama_model_quantize_params {
        int32_t nthread;             /* threads for quantizing; <= 0 = hardware concurrency */
        enum llama_ftype ftype;      /* target file type */
        bool allow_requantize;       /* allow quantizing tensors that are not F32/F16 */
        bool quantize_output_tensor; /* quantize output.weight */
        bool only_copy;              /* copy tensors as they are; ftype, allow_requantize, quantize_output_tensor ignored */
        bool pure;                   /* every tensor in ftype's type, no k-quant mixture */
        void * imatrix;              /* importance matrix (tool-specific representation) */
    } llama_model_quantize_params;

    /* grammar types */
    struct llama_grammar;

    enum llama_gretype {
        LLAMA_GRETYPE_END            = 0, /* end of rule definition */
        LLAMA_GRETYPE_ALT            = 1, /* start of alternate definition for rule */
        LLAMA_GRETYPE_RULE_REF       = 2, /* non-terminal element: reference to rule */
        LLAMA_GRETYPE_CHAR           = 3, /* terminal element: character (code point) */
        LLAMA_GRETYPE_CHAR_NOT       = 4, /* inverse char(s) ([^a], [^a-b] [^abc]) */
        LLAMA_GRETYPE_CHAR_RNG_UPPER = 5, /* modifies a preceding CHAR or CHAR_ALT to an inclusive range */
        LLAMA_GRETYPE_CHAR_ALT       = 6, /* modifies a preceding CHAR or CHAR_RNG_UPPER to add an alternate char */
    };

    typedef struct llama_grammar_element {
        enum llama_gretype type;
        uint32_t           value; /* Unicode code point or rule id */
    } llama_grammar_element;

    /* performance timing information */
    struct llama_timings {
        double t_start_ms;
        double t_end_ms;
        double t_load_ms;
        double t_sample_ms;
        double t_p_eval_ms;
        double t_eval_ms;

        int32_t n_sample;
        int32_t n_p_eval;
        int32_t n_eval;
    };

    /* Default parameters. */
    LLAMA_API struct llama_model_params llama_model_default_params(void);
    LLAMA_API struct llama_context_params llama_context_default_params(void);
    LLAMA_API struct llama_model_quantize_params llama_model_quantize_default_params(void);

    /* Initialize the library once per program (numa is accepted and ignored on
     * machines without several NUMA nodes). */
    LLAMA_API void llama_backend_init(bool numa);

    /* Call once at the end of the program. */
    LLAMA_API void llama_backend_free(void);

    /* NULL (with the reason logged) if the file cannot be loaded. */
    LLAMA_API struct llama_model * llama_load_model_from_file(
                             const char * path_model,
            struct llama_model_params     params);

    LLAMA_API void llama_free_model(struct llama_model * model);

    LLAMA_API struct llama_context * llama_new_context_with_model(
                     struct llama_model * model,
            struct llama_context_params   params);

    /* Frees all allocated memory of the context (not the model). */
    LLAMA_API void llama_free(struct llama_context * ctx);

    LLAMA_API int64_t llama_time_us(void);

    LLAMA_API int32_t llama_max_devices(void);
    LLAMA_API bool llama_mmap_supported (void);
    LLAMA_API bool llama_mlock_supported(void);

    LLAMA_API const struct llama_model * llama_get_model(const struct llama_context * ctx);

    LLAMA_API uint32_t llama_n_ctx  (const struct llama_context * ctx);
    LLAMA_API uint32_t llama_n_batch(const struct llama_context * ctx);

    LLAMA_API enum llama_vocab_type llama_vocab_type(const struct llama_model * model);

    LLAMA_API int32_t llama_n_vocab    (const struct llama_model * model);
    LLAMA_API int32_t llama_n_ctx_train(const struct llama_model * model);
    LLAMA_API int32_t llama_n_embd     (const struct llama_model * model);

    /* The model's RoPE frequency scaling factor. */
    LLAMA_API float llama_rope_freq_scale_train(const struct llama_model * model);

    /* Metadata: values of scalar GGUF keys as text (arrays are not listed).
     * Each returns the length of the string (like snprintf) or -1 on failure;
     * buf is always NUL-terminated when buf_size > 0. */

    /* Value of `key` as text. */
    LLAMA_API int32_t llama_model_meta_val_str(const struct llama_model * model, const char * key, char * buf, size_t buf_size);

    /* Number of metadata key/value pairs. */
    LLAMA_API int32_t llama_model_meta_count(const struct llama_model * model);

    /* Name of the i-th key. */
    LLAMA_API int32_t llama_model_meta_key_by_index(const struct llama_model * model, int32_t i, char * buf, size_t buf_size);

    /* Value of the i-th key as text. */
    LLAMA_API int32_t llama_model_meta_val_str_by_index(const struct llama_model * model, int32_t i, char * buf, size_t buf_size);

    /* A string describing the model type, e.g. "llama 7B mostly Q4_0". */
    LLAMA_API int32_t llama_model_desc(const struct llama_model * model, char * buf, size_t buf_size);

    /* Total size of all tensors in the model, in bytes. */
    LLAMA_API uint64_t llama_model_size(const struct llama_model * model);

    /* Total number of parameters in the model. */
    LLAMA_API uint64_t llama_model_n_params(const struct llama_model * model);

    /* A tensor of the model by name (opaque; NULL if absent). */
    LLAMA_API struct ggml_tensor * llama_get_model_tensor(struct llama_model * model, const char * name);

    /* Returns 0 on success. */
    LLAMA_API uint32_t llama_model_quantize(
            const char * fname_inp,
            const char * fname_out,
            const llama_model_quantize_params * params);

    /* Apply a LoRA adapter to a loaded model. path_base_model, when not NULL,
     * names a higher-precision model whose layers the adapter is applied to
     * (the model can then be quantized). Returns 0 on success. */
    LLAMA_API DEPRECATED(int32_t llama_apply_lora_from_file(
            struct llama_context * ctx,
                      const char * path_lora,
                           float   scale,
                      const char * path_base_model,
                         int32_t   n_threads),
            "use llama_model_apply_lora_from_file instead");

    LLAMA_API int32_t llama_model_apply_lora_from_file(
            const struct llama_model * model,
                      const char * path_lora,
                           float   scale,
                      const char * path_base_model,
                         int32_t   n_threads);

    /*
     * KV cache
     */

    /* Information of one cell of the KV cache (debugging). */
    struct llama_kv_cache_view_cell {
        /* position of the token in the cell, < 0 if empty */
        llama_pos pos;
    };

    /* A snapshot of the KV cache (debugging). */
    struct llama_kv_cache_view {
        int32_t n_cells;        /* number of cells in the view */
        int32_t n_max_seq;      /* most sequences listed per cell */
        int32_t token_count;    /* tokens in the cache (a token in several sequences counts for each) */
        int32_t used_cells;     /* cells holding at least one sequence */
        int32_t max_contiguous; /* longest run of empty cells */
        int32_t max_contiguous_idx; /* start of that run */

        struct llama_kv_cache_view_cell * cells;

        /* n_max_seq sequence ids per cell, -1 for unused slots */
        llama_seq_id * cells_sequences;
    };

    LLAMA_API struct llama_kv_cache_view llama_kv_cache_view_init(const struct llama_context * ctx, int32_t n_max_seq);
    LLAMA_API void llama_kv_cache_view_free(struct llama_kv_cache_view * view);
    LLAMA_API void llama_kv_cache_view_update(const struct llama_context * ctx, struct llama_kv_cache_view * view);

    /* Tokens in the cache: a cell in several sequences counts once per sequence. */
    LLAMA_API int32_t llama_get_kv_cache_token_count(const struct llama_context * ctx);

    /* Cells holding at least one sequence. */
    LLAMA_API int32_t llama_get_kv_cache_used_cells(const struct llama_context * ctx);

    /* Empty every cell. */
    LLAMA_API void llama_kv_cache_clear(struct llama_context * ctx);

    /* Remove the tokens of seq_id with positions in [p0, p1).
     * seq_id < 0: any sequence; p0 < 0: [0, p1); p1 < 0: [p0, inf). */
    LLAMA_API void llama_kv_cache_seq_rm(struct llama_context * ctx, llama_seq_id seq_id, llama_pos p0, llama_pos p1);

    /* Add seq_id_dst to the cells of seq_id_src with positions in [p0, p1). */
    LLAMA_API void llama_kv_cache_seq_cp(struct llama_context * ctx, llama_seq_id seq_id_src, llama_seq_id seq_id_dst, llama_pos p0, llama_pos p1);

    /* Remove every sequence but seq_id. */
    LLAMA_API void llama_kv_cache_seq_keep(struct llama_context * ctx, llama_seq_id seq_id);

    /* Add delta to the positions of seq_id in [p0, p1) (keys are re-rotated at the next decode). */
    LLAMA_API void llama_kv_cache_seq_shift(struct llama_context * ctx, llama_seq_id seq_id, llama_pos p0, llama_pos p1, llama_pos delta);

    /* Integer-divide the positions of seq_id in [p0, p1) by d > 1. */
    LLAMA_API void llama_kv_cache_seq_div(struct llama_context * ctx, llama_seq_id seq_id, llama_pos p0, llama_pos p1, int d);

    /*
     * State / sessions
     */

    /* Upper bound of the bytes llama_copy_state_data() writes (rng, logits, embedding, KV cache). */
    LLAMA_API size_t llama_get_state_size(const struct llama_context * ctx);

    /* Copies the state to dst (at least llama_get_state_size() bytes); returns the bytes written. */
    LLAMA_API size_t llama_copy_state_data(struct llama_context * ctx, uint8_t * dst);

    /* Restores the state from src; returns the bytes read (0 if src does not fit this context). */
    LLAMA_API size_t llama_set_state_data(struct llama_context * ctx, uint8_t * src);

    /* Session files: the prompt tokens and the state. */
    LLAMA_API bool llama_load_session_file(
            struct llama_context * ctx,
                      const char * path_session,
                     llama_token * tokens_out,
                          size_t   n_token_capacity,
                          size_t * n_token_count_out);

    LLAMA_API bool llama_save_session_file(
            struct llama_context * ctx,
                      const char * path_session,
               const llama_token * tokens,
                          size_t   n_token_count);

    /*
     * Decoding
     */

    /* Decodes n_tokens tokens at positions n_past.. of sequence 0 after
     * removing everything from n_past on. Returns 0 on success. */
    LLAMA_API DEPRECATED(int llama_eval(
            struct llama_context * ctx,
                     llama_token * tokens,
                         int32_t   n_tokens,
                         int32_t   n_past),
            "use llama_decode() instead");

    /* Same, with embeddings (n_tokens x n_embd floats) instead of tokens. */
    LLAMA_API DEPRECATED(int llama_eval_embd(
            struct llama_context * ctx,
                           float * embd,
                         int32_t   n_tokens,
                         int32_t   n_past),
            "use llama_decode() instead");

    /* A batch over a caller's token array: positions pos_0.., one sequence, not owning. */
    LLAMA_API struct llama_batch llama_batch_get_one(
                  llama_token * tokens,
                      int32_t   n_tokens,
                    llama_pos   pos_0,
                 llama_seq_id   seq_id);

    /* Allocates a batch for up to n_tokens tokens (or embeddings of embd floats
     * each when embd != 0), each in up to n_seq_max sequences. n_tokens is 0
     * and the contents are uninitialised. Free with llama_batch_free(). */
    LLAMA_API struct llama_batch llama_batch_init(
            int32_t n_tokens,
            int32_t embd,
            int32_t n_seq_max);

    LLAMA_API void llama_batch_free(struct llama_batch batch);

    /* Returns 0 on success, 1 when no KV cache slot fits the batch (try a
     * smaller batch or a larger context), < 0 on error (invalid input). */
    LLAMA_API int32_t llama_decode(
            struct llama_context * ctx,
              struct llama_batch   batch);

    /* Threads for generation and for batches. */
    LLAMA_API void llama_set_n_threads(struct llama_context * ctx, uint32_t n_threads, uint32_t n_threads_batch);

    /* Logits of the last llama_decode: rows of n_vocab floats, one per token
     * whose logits were requested (see llama_batch.logits). */
    LLAMA_API float * llama_get_logits(struct llama_context * ctx);

    /* Logits of the i-th token of the last batch (NULL if out of range). */
    LLAMA_API float * llama_get_logits_ith(struct llama_context * ctx, int32_t i);

    /* Embedding of the last token (n_embd floats; contexts with embedding = true). */
    LLAMA_API float * llama_get_embeddings(struct llama_context * ctx);

    /*
     * Vocabulary
     */

    LLAMA_API const char * llama_token_get_text(const struct llama_model * model, llama_token token);

    LLAMA_API float llama_token_get_score(const struct llama_model * model, llama_token token);

    LLAMA_API enum llama_token_type llama_token_get_type(const struct llama_model * model, llama_token token);

    /* Special tokens */
    LLAMA_API llama_token llama_token_bos(const struct llama_model * model); /* beginning-of-sentence */
    LLAMA_API llama_token llama_token_eos(const struct llama_model * model); /* end-of-sentence */
    LLAMA_API llama_token llama_token_nl (const struct llama_model * model); /* next-line */

    /* 1 if BOS should be added, 0 if not, -1 if the model does not say. */
    LLAMA_API int32_t llama_add_bos_token(const struct llama_model * model);
    /* 1 if EOS should be added, 0 if not, -1 if the model does not say. */
    LLAMA_API int32_t llama_add_eos_token(const struct llama_model * model);

    /* codellama infill tokens */
    LLAMA_API llama_token llama_token_prefix(const struct llama_model * model); /* beginning of infill prefix */
    LLAMA_API llama_token llama_token_middle(const struct llama_model * model); /* beginning of infill middle */
    LLAMA_API llama_token llama_token_suffix(const struct llama_model * model); /* beginning of infill suffix */
    LLAMA_API llama_token llama_token_eot   (const struct llama_model * model); /* end of infill middle */

    /*
     * Tokenization
     */

    /* Converts text into tokens. Returns the number of tokens written, or,
     * when n_max_tokens is too small, minus the number needed (nothing written).
     * special: parse control/special token texts (like "<s>") into their ids. */
    LLAMA_API int32_t llama_tokenize(
        const struct llama_model * model,
                      const char * text,
                         int32_t   text_len,
                     llama_token * tokens,
                         int32_t   n_max_tokens,
                            bool   add_bos,
                            bool   special);

    /* Writes the text of a token (not NUL-terminated). Returns its length, or
     * minus the length needed when `length` is too small. */
    LLAMA_API int32_t llama_token_to_piece(
              const struct llama_model * model,
                           llama_token   token,
                                  char * buf,
                               int32_t   length);

    /*
     * Grammar
     */

    /* NULL (with the reason logged) if the rules are malformed. */
    LLAMA_API struct llama_grammar * llama_grammar_init(
            const llama_grammar_element ** rules,
                                 size_t    n_rules,
                                 size_t    start_rule_index);

    LLAMA_API void llama_grammar_free(struct llama_grammar * grammar);

    LLAMA_API struct llama_grammar * llama_grammar_copy(const struct llama_grammar * grammar);

    /*
     * Sampling functions
     */

    /* Sets the current RNG seed (LLAMA_DEFAULT_SEED: from the clock). */
    LLAMA_API void llama_set_rng_seed(struct llama_context * ctx, uint32_t seed);

    /* Repetition penalty (CTRL paper, https://arxiv.org/abs/1909.05858, with negative-logit fix)
     * and frequency/presence penalties (OpenAI API). */
    LLAMA_API void llama_sample_repetition_penalties(
            struct llama_context * ctx,
          llama_token_data_array * candidates,
               const llama_token * last_tokens,
                          size_t   penalty_last_n,
                           float   penalty_repeat,
                           float   penalty_freq,
                           float   penalty_present);

    /* Classifier-free guidance (https://arxiv.org/abs/2306.17806), in place on
     * n_vocab logits; logits_guidance (from a context given the negative
     * prompt) is turned into log-probabilities in place too. scale 1 = no guidance. */
    LLAMA_API void llama_sample_apply_guidance(
              struct llama_context * ctx,
                             float * logits,
                             float * logits_guidance,
                             float   scale);

    LLAMA_API DEPRECATED(void llama_sample_classifier_free_guidance(
              struct llama_context * ctx,
            llama_token_data_array * candidates,
              struct llama_context * guidance_ctx,
                             float   scale),
              "use llama_sample_apply_guidance() instead");

    /* Sorts candidates by logit, descending, and computes their probabilities. */
    LLAMA_API void llama_sample_softmax(struct llama_context * ctx, llama_token_data_array * candidates);

    /* Top-K sampling (https://arxiv.org/abs/1904.09751) */
    LLAMA_API void llama_sample_top_k(struct llama_context * ctx, llama_token_data_array * candidates, int32_t k, size_t min_keep);

    /* Nucleus sampling (https://arxiv.org/abs/1904.09751) */
    LLAMA_API void llama_sample_top_p(struct llama_context * ctx, llama_token_data_array * candidates, float p, size_t min_keep);

    /* Minimum P sampling (https://github.com/ggerganov/llama.cpp/pull/3841) */
    LLAMA_API void llama_sample_min_p(struct llama_context * ctx, llama_token_data_array * candidates, float p, size_t min_keep);

    /* Tail free sampling (https://www.trentonbricken.com/Tail-Free-Sampling/) */
    LLAMA_API void llama_sample_tail_free(struct llama_context * ctx, llama_token_data_array * candidates, float z, size_t min_keep);

    /* Locally typical sampling (https://arxiv.org/abs/2202.00666) */
    LLAMA_API void llama_sample_typical(struct llama_context * ctx, llama_token_data_array * candidates, float p, size_t min_keep);

    LLAMA_API void llama_sample_temp(struct llama_context * ctx, llama_token_data_array * candidates, float temp);

    LLAMA_API DEPRECATED(void llama_sample_temperature(
                struct llama_context * ctx,
              llama_token_data_array * candidates,
                               float   temp),
            "use llama_sample_temp instead");

    /* Sets the logit of every candidate the grammar rejects to -INFINITY. */
    LLAMA_API void llama_sample_grammar(struct llama_context * ctx, llama_token_data_array * candidates, const struct llama_grammar * grammar);

    /* Mirostat 1.0 (https://arxiv.org/abs/2007.14966): tau = target surprise,
     * eta = learning rate, m = tokens used to estimate s_hat, *mu = 2*tau initially. */
    LLAMA_API llama_token llama_sample_token_mirostat(
            struct llama_context * ctx,
          llama_token_data_array * candidates,
                           float   tau,
                           float   eta,
                         int32_t   m,
                           float * mu);

    /* Mirostat 2.0. */
    LLAMA_API llama_token llama_sample_token_mirostat_v2(
            struct llama_context * ctx,
          llama_token_data_array * candidates,
                           float   tau,
                           float   eta,
                           float * mu);

    /* The candidate with the highest logit. */
    LLAMA_API llama_token llama_sample_token_greedy(struct llama_context * ctx, llama_token_data_array * candidates);

    /* A token drawn from the candidates' probabilities with the context's RNG. */
    LLAMA_API llama_token llama_sample_token(struct llama_context * ctx, llama_token_data_array * candidates);

    /* Advances the grammar over the token's text. */
    LLAMA_API void llama_grammar_accept_token(struct llama_context * ctx, struct llama_grammar * grammar, llama_token token);

    /*
     * Beam search
     */

    struct llama_beam_view {
        const llama_token * tokens;

        size_t n_tokens;
        float  p;   /* cumulative beam probability (renormalised relative to all beams) */
        bool   eob; /* set to true by the callback to end this beam */
    };

    /* Passed to the callback: the current beams; last_call is true on the final call. */
    struct llama_beams_state {
        struct llama_beam_view * beam_views;

        size_t n_beams;              /* number of elements in beam_views[] */
        size_t common_prefix_length; /* tokens shared by all beams (removed from them after the call) */
        bool   last_call;            /* true iff this is the last callback invocation */
    };

    /* Called at every step with the current beams; it may set eob on beams. */
    typedef void (*llama_beam_search_callback_fn_t)(void * callback_data, struct llama_beams_state);

    /* Deterministic beam search with n_beams beams from position n_past,
     * at most n_predict steps; the callback gets every step and the result. */
    LLAMA_API void llama_beam_search(
                   struct llama_context * ctx,
        llama_beam_search_callback_fn_t   callback,
                                   void * callback_data,
                                 size_t   n_beams,
                                int32_t   n_past,
                                int32_t   n_predict);

    /* Performance information */
    LLAMA_API struct llama_timings llama_get_timings(struct llama_context * ctx);

    LLAMA_API void llama_print_timings(struct llama_context * ctx);
    LLAMA_API void llama_reset_timings(struct llama_context * ctx);

    /* The SIMD features of this machine, in llama.cpp's format. */
    LLAMA_API const char * llama_print_system_info(void);

    /* Sets the log callback (NULL: the default, which prints to stderr). */
    LLAMA_API void llama_log_set(ggml_log_callback log_callback, void * user_data);

    LLAMA_API void llama_dump_timing_info_yaml(FILE * stream, const struct llama_context * ctx);

    /*
     * llamac extensions (not in b1892; the same names as later llama.cpp)
     */

    /* Polled while a decode computes; returning true stops it (llama_decode
     * then returns a negative code and the context stays usable). */
    typedef bool (*ggml_abort_callback)(void * data);
    LLAMA_API void llama_set_abort_callback(struct llama_context * ctx, ggml_abort_callback abort_callback, void * abort_callback_data);

#ifdef __cplusplus
}
#endif

#endif /* LLAMA_H */
