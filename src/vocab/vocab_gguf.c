/*
 * Reading a vocabulary from GGUF metadata (the keys b1892's llm_load_vocab
 * reads), validated: every array must have the element type and length it
 * needs, scalars the exact type (b1892 throws on a wrong type too).
 */
#include "vocab/vocab.h"

#include "core/log.h"
#include "gguf/gguf.h"

#include <stdlib.h>
#include <string.h>

#define KEY_MODEL      "tokenizer.ggml.model"
#define KEY_TOKENS     "tokenizer.ggml.tokens"
#define KEY_SCORES     "tokenizer.ggml.scores"
#define KEY_TOKEN_TYPE "tokenizer.ggml.token_type"
#define KEY_MERGES     "tokenizer.ggml.merges"
#define KEY_ADD_BOS    "tokenizer.ggml.add_bos_token"
#define KEY_ADD_EOS    "tokenizer.ggml.add_eos_token"

static const char *const k_special_keys[VOCAB_SPECIAL_COUNT] = {
    "tokenizer.ggml.bos_token_id",
    "tokenizer.ggml.eos_token_id",
    "tokenizer.ggml.unknown_token_id",
    "tokenizer.ggml.seperator_token_id", /* sic, as b1892 and gguf-py spell it */
    "tokenizer.ggml.padding_token_id",
};

/* Index of an array key holding `n` (0 = any number) elements of `type`; -1 if absent, -2 on error. */
static int64_t find_array(const struct gguf_reader *r, const char *key, enum gguf_type type, uint64_t n) {
    int64_t i = gguf_find_key(r, key);
    if (i < 0) {
        return -1;
    }
    if (gguf_kv_type(r, i) != GGUF_TYPE_ARRAY || gguf_arr_type(r, i) != type) {
        error_set("vocab: %s must be an array of %s", key, gguf_type_name(type));
        return -2;
    }
    if (n && gguf_arr_n(r, i) != n) {
        error_set("vocab: %s has %llu entries, expected %llu", key, (unsigned long long)gguf_arr_n(r, i),
                  (unsigned long long)n);
        return -2;
    }
    return i;
}

/* Pointers to and lengths of the strings of array i. */
static bool string_array(const struct gguf_reader *r, int64_t i, const char ***strs, size_t **lens) {
    uint64_t n = gguf_arr_n(r, i);
    *strs = malloc((n ? n : 1) * sizeof **strs);
    *lens = malloc((n ? n : 1) * sizeof **lens);
    if (!*strs || !*lens) {
        error_set("vocab: out of memory for %llu strings", (unsigned long long)n);
        return false;
    }
    for (uint64_t j = 0; j < n; j++) {
        (*strs)[j] = gguf_arr_str(r, i, j);
        (*lens)[j] = (size_t)gguf_arr_str_len(r, i, j);
    }
    return true;
}

static bool optional_bool(const struct gguf_reader *r, const char *key, int32_t *out) {
    bool value;
    if (gguf_find_key(r, key) < 0) {
        *out = -1;
        return true;
    }
    if (!gguf_get_bool(r, key, &value)) {
        return false;
    }
    *out = value;
    return true;
}

struct vocab *vocab_load_gguf(const struct gguf_reader *r) {
    struct vocab_desc d;
    vocab_desc_init(&d);
    struct vocab *v = NULL;
    const char **texts = NULL, **merges = NULL;
    size_t *text_lens = NULL, *merge_lens = NULL;
    float *scores = NULL;
    int32_t *types = NULL;

    const char *model;
    if (gguf_find_key(r, KEY_MODEL) < 0) {
        error_set("vocab: the file has no %s", KEY_MODEL);
        goto done;
    }
    if (!gguf_get_str(r, KEY_MODEL, &model)) {
        goto done;
    }
    if (strcmp(model, "llama") == 0) {
        d.type = LLAMA_VOCAB_TYPE_SPM;
    } else if (strcmp(model, "gpt2") == 0) {
        d.type = LLAMA_VOCAB_TYPE_BPE;
    } else {
        LOG_WARN("vocab: unknown tokenizer '%s', using 'llama'\n", model);
        d.type = LLAMA_VOCAB_TYPE_SPM;
    }

    int64_t tok = find_array(r, KEY_TOKENS, GGUF_TYPE_STRING, 0);
    if (tok == -1) {
        error_set("vocab: the file has no %s", KEY_TOKENS);
    }
    if (tok < 0) {
        goto done;
    }
    uint64_t n = gguf_arr_n(r, tok);
    if (n == 0 || n > (uint64_t)INT32_MAX) {
        error_set("vocab: %s has %llu entries", KEY_TOKENS, (unsigned long long)n);
        goto done;
    }
    d.n_tokens = (uint32_t)n;
    if (!string_array(r, tok, &texts, &text_lens)) {
        goto done;
    }
    d.texts = texts;
    d.text_lens = text_lens;

    int64_t sc = find_array(r, KEY_SCORES, GGUF_TYPE_FLOAT32, n);
    if (sc == -2) {
        goto done;
    }
    if (sc >= 0) {
        scores = malloc(n * sizeof *scores);
        if (!scores) {
            error_set("vocab: out of memory");
            goto done;
        }
        memcpy(scores, gguf_arr_data(r, sc), n * sizeof *scores); /* little-endian f32, maybe unaligned */
        d.scores = scores;
    }

    int64_t ty = find_array(r, KEY_TOKEN_TYPE, GGUF_TYPE_INT32, n);
    if (ty == -2) {
        goto done;
    }
    if (ty >= 0) {
        types = malloc(n * sizeof *types);
        if (!types) {
            error_set("vocab: out of memory");
            goto done;
        }
        memcpy(types, gguf_arr_data(r, ty), n * sizeof *types);
        d.types = types;
    }

    if (d.type == LLAMA_VOCAB_TYPE_BPE) {
        int64_t mg = find_array(r, KEY_MERGES, GGUF_TYPE_STRING, 0);
        if (mg == -1) {
            error_set("vocab: the file has no %s", KEY_MERGES);
        }
        if (mg < 0) {
            goto done;
        }
        if (gguf_arr_n(r, mg) > (uint64_t)INT32_MAX) {
            error_set("vocab: too many merges");
            goto done;
        }
        d.n_merges = (uint32_t)gguf_arr_n(r, mg);
        if (!string_array(r, mg, &merges, &merge_lens)) {
            goto done;
        }
        d.merges = merges;
        d.merge_lens = merge_lens;
    }

    for (int k = 0; k < VOCAB_SPECIAL_COUNT; k++) {
        uint32_t id;
        if (gguf_find_key(r, k_special_keys[k]) < 0) {
            continue;
        }
        if (!gguf_get_u32(r, k_special_keys[k], &id)) {
            goto done;
        }
        d.special_ids[k] = id;
    }
    if (!optional_bool(r, KEY_ADD_BOS, &d.add_bos) || !optional_bool(r, KEY_ADD_EOS, &d.add_eos)) {
        goto done;
    }

    v = vocab_create(&d);

done:
    free(texts);
    free(text_lens);
    free(merges);
    free(merge_lens);
    free(scores);
    free(types);
    return v;
}
