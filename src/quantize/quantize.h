/*
 * Model quantization: llama_model_quantize() at the GGUF level, as b1892's
 * llama_model_quantize_internal does it.
 *
 * quantize_model_file() reads the input GGUF (architecture, block count,
 * head counts and expert count from the metadata, nothing else of the
 * model), chooses every tensor's type (the "mix" below), and streams the
 * output file tensor by tensor, so a model never sits in memory whole:
 *   - only 2-D tensors whose name ends in "weight" are quantized, never
 *     "ffn_gate_inp.weight" (MoE routers), "output.weight" only when
 *     quantize_output_tensor; only_copy copies every tensor unchanged;
 *   - unless pure, b1892's per-tensor rules pick the type (quantize_mix_type);
 *   - a type whose block does not divide the row length is never written
 *     (b1892 would quantize across rows or abort): the tensor keeps its type;
 *   - F16 sources are converted, quantized sources need allow_requantize and
 *     are dequantized first; rows are quantized by params->nthread threads
 *     (<= 0: one per online CPU);
 *   - params->imatrix, when not NULL, points to a struct quantize_imatrix;
 *     IQ2_XXS, IQ2_XS and Q2_K_S (except token_embd) refuse tensors without
 *     importance weights, as b1892 does;
 *   - the metadata is copied; general.quantization_version = 2 and
 *     general.file_type = ftype (only_copy: the input's file type) are set.
 * Every decision and check happens before the output is opened; the file is
 * written under a temporary name and renamed at the end, so a failed run
 * leaves no output file (and an existing one untouched). Progress lines go
 * to the log at INFO level. Returns false with error_set() on any failure.
 */
#ifndef LLAMAC_QUANTIZE_QUANTIZE_H
#define LLAMAC_QUANTIZE_QUANTIZE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "llama.h"

bool quantize_model_file(const char *path_in, const char *path_out, const llama_model_quantize_params *params);

/* The element type a file type quantizes to before the mix adjusts it
 * (Q3_K for every Q3_K_*, ...); false for file types llama_model_quantize
 * cannot produce. */
bool quantize_ftype_base_type(enum llama_ftype ftype, enum ggml_type *out);

/* ---- importance matrix --------------------------------------------------------
 * b1892's binary imatrix file (written by its `imatrix` tool), little-endian:
 *   i32 n_entries (>= 1), then per entry: i32 name_len, name bytes,
 *   i32 ncall, i32 nval (>= 1), f32 values[nval];
 * anything after the last entry is ignored. Each value is divided by ncall
 * when ncall > 0 (b1892's quantize does this on load). A name that appears
 * twice keeps its last entry. */

struct quantize_imatrix;

struct quantize_imatrix *quantize_imatrix_load(const char *path);
void quantize_imatrix_free(struct quantize_imatrix *im);
size_t quantize_imatrix_count(const struct quantize_imatrix *im);
/* The weights for a tensor and their number; NULL when the name is absent. */
const float *quantize_imatrix_find(const struct quantize_imatrix *im, const char *name, int64_t *n_values);
/* The quantize tool's --exclude-weights: drops entries whose name contains `part`. */
void quantize_imatrix_exclude(struct quantize_imatrix *im, const char *part);
/* --include-weights: keeps only entries whose name contains one of `parts`. */
void quantize_imatrix_keep_only(struct quantize_imatrix *im, const char *const *parts, size_t n_parts);
/* True when `p` was made by quantize_imatrix_load (params->imatrix is a void *). */
bool quantize_imatrix_is_valid(const void *p);

/* One entry as the file stores it: per input column of a weight matrix, the
 * sum of the squared activations over `ncall` matrix products. */
struct quantize_imatrix_record {
    const char *name;
    int32_t ncall;
    int32_t n_values;
    const float *sums;
};

/* Writes records in the format above (nothing after the last entry, as b1892's
 * imatrix tool of this version). At least one record; names 1 to INT32_MAX
 * bytes without NUL. False with error_set() on bad records or an I/O error,
 * and then no file is left at `path`. */
bool quantize_imatrix_write(const char *path, const struct quantize_imatrix_record *records, size_t n);

/* ---- collecting an importance matrix ---------------------------------------------
 * What b1892's `imatrix` tool gathers while a model runs over text, observing
 * the context's graphs (context_set_eval_callback): for every matrix product
 * whose weight's name starts with "blk." (and "output.weight" when
 * collect_output), the sum over the product's rows of each input column
 * squared (float, row after row), and the number of products seen. Products
 * of fewer than 16 rows (token-by-token generation) or with non-F32 inputs are
 * skipped. For an expert product (MUL_MAT_ID) every expert that at least one
 * row uses receives the whole input, in expert order, as b1892's ggml did. */

struct imatrix_collector;
struct tensor;

struct imatrix_collector *imatrix_collector_new(bool collect_output);
void imatrix_collector_free(struct imatrix_collector *c);
/* The observer to pass to context_set_eval_callback, with the collector as data.
 * Fails (error_set) when a matrix shows up with another input width. */
bool imatrix_collector_observe(struct tensor *node, bool ask, void *collector);
/* Matrices seen so far, and the largest product count among them (b1892's
 * "chunks" when each chunk is decoded in one batch). */
size_t imatrix_collector_count(const struct imatrix_collector *c);
int32_t imatrix_collector_ncall(const struct imatrix_collector *c);
/* quantize_imatrix_write of everything collected, in the order first seen. */
bool imatrix_collector_write(const struct imatrix_collector *c, const char *path);

/* ---- the type mix ---------------------------------------------------------------
 * b1892's llama_tensor_get_type (get_k_quant_type): the type of one
 * quantizable tensor for a file type, given the model and the tensors seen so
 * far. Call it for the quantizable tensors in file order, with a state made
 * by quantize_mix_init (which counts the attn_v / ffn_down tensors of the
 * whole file). Falls back to a 32-element type when a k-quant or IQ2 type does
 * not fit the row length, as b1892 does (see the .c file). */

struct quantize_model_info {
    bool is_falcon;      /* falcon gets its own ffn_down / attn_output choices */
    bool is_70b;         /* LLaMA with 80 layers and grouped KV heads */
    uint32_t n_layer;
    uint32_t n_gqa;      /* head_count / head_count_kv */
    uint32_t n_expert;
};

struct quantize_mix_state {
    struct quantize_model_info model;
    enum llama_ftype ftype;
    int n_attention_wv, i_attention_wv;  /* attn_v / attn_qkv tensors: all, seen so far */
    int n_ffn_down, i_ffn_down;          /* ffn_down tensors (every expert counts) */
    int n_k_quantized, n_fallback;
};

/* `names`: every tensor name of the file, in order. */
void quantize_mix_init(struct quantize_mix_state *s, const struct quantize_model_info *model,
                       enum llama_ftype ftype, const char *const *names, size_t n_names);
/* `type` is the file type's base type; ne0 the tensor's row length. */
enum ggml_type quantize_mix_type(struct quantize_mix_state *s, enum ggml_type type, const char *name, int64_t ne0);

#endif
