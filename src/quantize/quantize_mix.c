/*
 * The per-tensor type choice of b1892's quantizer (llama.cpp's
 * get_k_quant_type at tag b1892): which tensors of a k-quant or IQ2 "mix" get
 * more (or fewer) bits than the file type's base type.
 *
 * Tensors are recognised by name as b1892 does (substring matches, so MoE
 * experts "blk.N.ffn_down.E.weight" count as ffn_down). The layer index of an
 * attn_v / ffn_down tensor is its position among the tensors of that kind.
 */
#include "quantize.h"

#include <string.h>

#define QK_K 256

bool quantize_ftype_base_type(enum llama_ftype ftype, enum ggml_type *out) {
    switch (ftype) {
    case LLAMA_FTYPE_ALL_F32:        *out = GGML_TYPE_F32; return true;
    case LLAMA_FTYPE_MOSTLY_F16:     *out = GGML_TYPE_F16; return true;
    case LLAMA_FTYPE_MOSTLY_Q4_0:    *out = GGML_TYPE_Q4_0; return true;
    case LLAMA_FTYPE_MOSTLY_Q4_1:    *out = GGML_TYPE_Q4_1; return true;
    case LLAMA_FTYPE_MOSTLY_Q5_0:    *out = GGML_TYPE_Q5_0; return true;
    case LLAMA_FTYPE_MOSTLY_Q5_1:    *out = GGML_TYPE_Q5_1; return true;
    case LLAMA_FTYPE_MOSTLY_Q8_0:    *out = GGML_TYPE_Q8_0; return true;
    case LLAMA_FTYPE_MOSTLY_Q2_K:
    case LLAMA_FTYPE_MOSTLY_Q2_K_S:  *out = GGML_TYPE_Q2_K; return true;
    case LLAMA_FTYPE_MOSTLY_Q3_K_S:
    case LLAMA_FTYPE_MOSTLY_Q3_K_M:
    case LLAMA_FTYPE_MOSTLY_Q3_K_L:  *out = GGML_TYPE_Q3_K; return true;
    case LLAMA_FTYPE_MOSTLY_Q4_K_S:
    case LLAMA_FTYPE_MOSTLY_Q4_K_M:  *out = GGML_TYPE_Q4_K; return true;
    case LLAMA_FTYPE_MOSTLY_Q5_K_S:
    case LLAMA_FTYPE_MOSTLY_Q5_K_M:  *out = GGML_TYPE_Q5_K; return true;
    case LLAMA_FTYPE_MOSTLY_Q6_K:    *out = GGML_TYPE_Q6_K; return true;
    case LLAMA_FTYPE_MOSTLY_IQ2_XXS: *out = GGML_TYPE_IQ2_XXS; return true;
    case LLAMA_FTYPE_MOSTLY_IQ2_XS:  *out = GGML_TYPE_IQ2_XS; return true;
    default: return false;
    }
}

static bool has(const char *name, const char *part) {
    return strstr(name, part) != NULL;
}

static bool is_attn_v(const char *name) {
    return has(name, "attn_v.weight") || has(name, "attn_qkv.weight");
}

void quantize_mix_init(struct quantize_mix_state *s, const struct quantize_model_info *model,
                       enum llama_ftype ftype, const char *const *names, size_t n_names) {
    memset(s, 0, sizeof *s);
    s->model = *model;
    s->ftype = ftype;
    for (size_t i = 0; i < n_names; i++) {
        if (is_attn_v(names[i])) {
            s->n_attention_wv++;
        } else if (has(names[i], "ffn_down")) {
            s->n_ffn_down++;
        }
    }
}

/* The first and last eighth of the layers, and every third one between. */
static bool use_more_bits(int i_layer, int n_layers) {
    return i_layer < n_layers / 8 || i_layer >= 7 * n_layers / 8 || (i_layer - n_layers / 8) % 3 == 2;
}

static bool is_iq2_ftype(enum llama_ftype ftype) {
    return ftype == LLAMA_FTYPE_MOSTLY_IQ2_XXS || ftype == LLAMA_FTYPE_MOSTLY_IQ2_XS;
}

static enum ggml_type attn_v_type(struct quantize_mix_state *s, enum ggml_type type) {
    const enum llama_ftype ftype = s->ftype;
    const int i = s->i_attention_wv, n = s->n_attention_wv;
    if (ftype == LLAMA_FTYPE_MOSTLY_Q2_K) {
        type = s->model.n_gqa >= 4 ? GGML_TYPE_Q4_K : GGML_TYPE_Q3_K;
    } else if (ftype == LLAMA_FTYPE_MOSTLY_Q2_K_S && s->model.n_gqa >= 4) {
        type = GGML_TYPE_Q4_K;
    } else if (ftype == LLAMA_FTYPE_MOSTLY_Q3_K_M) {
        type = i < 2 ? GGML_TYPE_Q5_K : GGML_TYPE_Q4_K;
    } else if (ftype == LLAMA_FTYPE_MOSTLY_Q3_K_L) {
        type = GGML_TYPE_Q5_K;
    } else if ((ftype == LLAMA_FTYPE_MOSTLY_Q4_K_M || ftype == LLAMA_FTYPE_MOSTLY_Q5_K_M) && use_more_bits(i, n)) {
        type = GGML_TYPE_Q6_K;
    } else if (ftype == LLAMA_FTYPE_MOSTLY_Q4_K_S && i < 4) {
        type = GGML_TYPE_Q5_K;
    }
    /* 70B shares each attn_v among 8 heads: more bits cost little there */
    if (s->model.is_70b && (type == GGML_TYPE_Q3_K || type == GGML_TYPE_Q4_K)) type = GGML_TYPE_Q5_K;
    if (s->model.n_expert == 8) type = GGML_TYPE_Q8_0;
    return type;
}

static enum ggml_type ffn_down_type(struct quantize_mix_state *s, enum ggml_type type) {
    const enum llama_ftype ftype = s->ftype;
    const bool falcon = s->model.is_falcon;
    const int i = s->i_ffn_down, n = s->n_ffn_down;
    switch (ftype) {
    case LLAMA_FTYPE_MOSTLY_Q2_K:
        return GGML_TYPE_Q3_K;
    case LLAMA_FTYPE_MOSTLY_Q2_K_S:
        return i < n / 8 ? GGML_TYPE_Q4_K : type;
    case LLAMA_FTYPE_MOSTLY_Q3_K_M:
        if (i < n / 16) return GGML_TYPE_Q5_K;
        return !falcon || use_more_bits(i, n) ? GGML_TYPE_Q4_K : GGML_TYPE_Q3_K;
    case LLAMA_FTYPE_MOSTLY_Q3_K_L:
        return falcon ? GGML_TYPE_Q4_K : GGML_TYPE_Q5_K;
    case LLAMA_FTYPE_MOSTLY_Q4_K_M:
        if (falcon) {
            if (i < n / 16) return GGML_TYPE_Q6_K;
            return use_more_bits(i, n) ? GGML_TYPE_Q5_K : GGML_TYPE_Q4_K;
        }
        return use_more_bits(i, n) ? GGML_TYPE_Q6_K : type;
    case LLAMA_FTYPE_MOSTLY_Q5_K_M:
        return use_more_bits(i, n) ? GGML_TYPE_Q6_K : type;
    case LLAMA_FTYPE_MOSTLY_Q4_K_S:
        return !falcon && i < n / 8 ? GGML_TYPE_Q5_K : type;
    default:
        return type;
    }
}

static enum ggml_type attn_output_type(const struct quantize_mix_state *s, enum ggml_type type) {
    const enum llama_ftype ftype = s->ftype;
    if (s->model.is_falcon) return ftype == LLAMA_FTYPE_MOSTLY_Q3_K_L ? GGML_TYPE_Q4_K : type;
    if (s->model.n_expert == 8) {
        /* the attention is a small part of an 8-expert model */
        switch (ftype) {
        case LLAMA_FTYPE_MOSTLY_Q2_K: case LLAMA_FTYPE_MOSTLY_Q3_K_S: case LLAMA_FTYPE_MOSTLY_Q3_K_M:
        case LLAMA_FTYPE_MOSTLY_Q4_K_S: case LLAMA_FTYPE_MOSTLY_Q4_K_M:
            return GGML_TYPE_Q5_K;
        default:
            return type;
        }
    }
    switch (ftype) {
    case LLAMA_FTYPE_MOSTLY_Q2_K: return GGML_TYPE_Q3_K;
    case LLAMA_FTYPE_MOSTLY_Q3_K_M: return GGML_TYPE_Q4_K;
    case LLAMA_FTYPE_MOSTLY_Q3_K_L: return GGML_TYPE_Q5_K;
    default: return type;
    }
}

static enum ggml_type attn_qkv_type(const struct quantize_mix_state *s, enum ggml_type type) {
    switch (s->ftype) {
    case LLAMA_FTYPE_MOSTLY_Q3_K_M: case LLAMA_FTYPE_MOSTLY_Q3_K_L: return GGML_TYPE_Q4_K;
    case LLAMA_FTYPE_MOSTLY_Q4_K_M: return GGML_TYPE_Q5_K;
    case LLAMA_FTYPE_MOSTLY_Q5_K_M: return GGML_TYPE_Q6_K;
    default: return type;
    }
}

/* The IQ2 mixes: attn_v and the first eighth of ffn_down in Q2_K (Q4_K for
 * attn_v when several heads share it), everything else in the IQ2 type. */
static enum ggml_type iq2_mix_type(struct quantize_mix_state *s, enum ggml_type type, const char *name) {
    if (has(name, "attn_v.weight")) {
        type = s->model.n_gqa >= 4 || s->model.n_expert >= 4 ? GGML_TYPE_Q4_K : GGML_TYPE_Q2_K;
        s->i_attention_wv++;
    } else if (has(name, "ffn_down")) {
        if (s->i_ffn_down < s->n_ffn_down / 8) type = GGML_TYPE_Q2_K;
        s->i_ffn_down++;
    }
    return type;
}

/* Rows that k-quant blocks do not tile get a 32-element type of about the
 * same size (b1892's fallback table; IQ2, for which b1892 has none, takes
 * Q2_K's). */
static enum ggml_type fallback_type(struct quantize_mix_state *s, enum ggml_type type, int64_t ne0) {
    enum ggml_type fallback;
    switch (type) {
    case GGML_TYPE_Q2_K: case GGML_TYPE_IQ2_XXS: case GGML_TYPE_IQ2_XS: fallback = GGML_TYPE_Q4_0; break;
    case GGML_TYPE_Q3_K: fallback = GGML_TYPE_Q4_1; break;
    case GGML_TYPE_Q4_K: fallback = GGML_TYPE_Q5_0; break;
    case GGML_TYPE_Q5_K: fallback = GGML_TYPE_Q5_1; break;
    case GGML_TYPE_Q6_K: fallback = GGML_TYPE_Q8_0; break;
    default: return type;
    }
    if (ne0 % QK_K == 0) {
        s->n_k_quantized++;
        return type;
    }
    s->n_fallback++;
    return fallback;
}

enum ggml_type quantize_mix_type(struct quantize_mix_state *s, enum ggml_type type, const char *name, int64_t ne0) {
    const enum llama_ftype ftype = s->ftype;
    if (strcmp(name, "output.weight") == 0) {
        if (s->model.is_falcon || ne0 % QK_K != 0) {
            type = GGML_TYPE_Q8_0;
        } else if (is_iq2_ftype(ftype)) {
            type = GGML_TYPE_Q5_K;
        } else if (type != GGML_TYPE_Q8_0) {
            type = GGML_TYPE_Q6_K;
        }
    } else if (strcmp(name, "token_embd.weight") == 0) {
        if (is_iq2_ftype(ftype)) type = GGML_TYPE_Q2_K;
    } else if (is_iq2_ftype(ftype)) {
        type = iq2_mix_type(s, type, name);
    } else if (has(name, "attn_v.weight")) {
        type = attn_v_type(s, type);
        s->i_attention_wv++;
    } else if (has(name, "attn_k.weight")) {
        if (s->model.n_expert == 8) type = GGML_TYPE_Q8_0;
    } else if (has(name, "ffn_down")) {
        type = ffn_down_type(s, type);
        s->i_ffn_down++;
    } else if (has(name, "attn_output.weight")) {
        type = attn_output_type(s, type);
    } else if (has(name, "attn_qkv.weight")) {
        type = attn_qkv_type(s, type);
    }
    return fallback_type(s, type, ne0);
}
