/* libFuzzer target: both tokenizers on arbitrary text. The first byte picks
 * the vocabulary (SPM or BPE, both small and built here), add_bos and
 * special; the rest is the text. Checked: the negative-size contract, ids in
 * range, and for SPM without special tokens that the tokens spell out the
 * escaped text exactly (byte tokens as their byte, others as their text). */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "vocab/unicode.h"
#include "vocab/vocab.h"

static void quiet_log(enum ggml_log_level level, const char *text, void *user_data) {
    (void)level; (void)text; (void)user_data;
}

static struct vocab *make_spm(void) {
    static char bytes[256][8];
    static const char *const extra[] = { "<unk>", "<s>", "</s>", "\xE2\x96\x81", "\xE2\x96\x81\x61", "a", "ab",
                                         "abc", "\xE2\x96\x81\xE2\x96\x81", "<|x|>", "\xC3\xA9", "b" };
    static const int32_t extra_types[] = { 2, 3, 3, 1, 1, 1, 1, 1, 1, 4, 1, 1 };
    const char *texts[256 + 12];
    int32_t types[256 + 12];
    float scores[256 + 12];
    for (int b = 0; b < 256; b++) {
        snprintf(bytes[b], sizeof bytes[b], "<0x%02X>", b);
        texts[b] = bytes[b];
        types[b] = 6;
        scores[b] = 0;
    }
    for (int i = 0; i < 12; i++) {
        texts[256 + i] = extra[i];
        types[256 + i] = extra_types[i];
        scores[256 + i] = -(float)i;
    }
    struct vocab_desc d;
    vocab_desc_init(&d);
    d.n_tokens = 256 + 12;
    d.texts = texts;
    d.types = types;
    d.scores = scores;
    d.special_ids[VOCAB_SPECIAL_UNK] = 256;
    d.special_ids[VOCAB_SPECIAL_BOS] = 257;
    d.special_ids[VOCAB_SPECIAL_EOS] = 258;
    return vocab_create(&d);
}

static struct vocab *make_bpe(void) {
    static char base[256][4];
    static const char *const merges[] = { "h e", "l l", "he ll", "hell o", "\xC4\xA0 t", "\xC4\xA0t he", "o r",
                                          "\xC4\x8A \xC4\xA0", "1 2", "' s" };
    static const char *const merged[] = { "he", "ll", "hell", "hello", "\xC4\xA0t", "\xC4\xA0the", "or",
                                          "\xC4\x8A\xC4\xA0", "12", "'s", "<|endoftext|>" };
    const char *texts[256 + 11];
    int32_t types[256 + 11];
    for (int b = 0; b < 256; b++) {
        uint8_t enc[4];
        size_t n = unicode_encode(unicode_byte_to_bpe_cpt((uint8_t)b), enc);
        memcpy(base[b], enc, n);
        base[b][n] = '\0';
        texts[b] = base[b];
        types[b] = 1;
    }
    for (int i = 0; i < 11; i++) {
        texts[256 + i] = merged[i];
        types[256 + i] = i == 10 ? 3 : 1;
    }
    struct vocab_desc d;
    vocab_desc_init(&d);
    d.type = LLAMA_VOCAB_TYPE_BPE;
    d.n_tokens = 256 + 11;
    d.texts = texts;
    d.types = types;
    d.n_merges = 10;
    d.merges = merges;
    d.special_ids[VOCAB_SPECIAL_BOS] = 266;
    d.special_ids[VOCAB_SPECIAL_EOS] = 266;
    return vocab_create(&d);
}

/* SPM without special tokens: the tokens are a segmentation of " " + text
 * with every space written as U+2581. */
static void check_spm_segmentation(const struct vocab *v, const char *text, size_t len, const int32_t *ids,
                                   int32_t n, int32_t skip) {
    size_t pos = 0;
    size_t esc_len = 3;
    for (size_t i = 0; i < len; i++) {
        esc_len += text[i] == ' ' ? 3 : 1;
    }
    char *esc = malloc(esc_len);
    memcpy(esc, "\xE2\x96\x81", 3);
    for (size_t i = 0, o = 3; i < len; i++) {
        if (text[i] == ' ') {
            memcpy(esc + o, "\xE2\x96\x81", 3);
            o += 3;
        } else {
            esc[o++] = text[i];
        }
    }
    for (int32_t i = skip; i < n; i++) {
        size_t tlen;
        const char *t;
        char byte;
        if (vocab_token_type(v, ids[i]) == LLAMA_TOKEN_TYPE_BYTE) {
            t = vocab_token_piece(v, ids[i], &tlen);
            byte = t[0];
            t = &byte;
        } else {
            t = vocab_token_text(v, ids[i]);
            tlen = vocab_token_text_len(v, ids[i]);
        }
        if (pos + tlen > esc_len || memcmp(esc + pos, t, tlen) != 0) abort();
        pos += tlen;
    }
    if (pos != esc_len) abort();
    free(esc);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static struct vocab *spm, *bpe;
    if (!spm) {
        log_set_callback(quiet_log, NULL);
        spm = make_spm();
        bpe = make_bpe();
        if (!spm || !bpe) abort();
    }
    if (size == 0) return 0;
    uint8_t flags = data[0];
    const struct vocab *v = flags & 1 ? bpe : spm;
    bool add_bos = flags & 2, special = flags & 4;
    const char *text = (const char *)data + 1;
    size_t len = size - 1;

    int32_t probe = vocab_tokenize(v, text, len, add_bos, special, NULL, 0);
    if (probe > 0 || probe == VOCAB_TOKENIZE_ERROR || (len > 0 && probe == 0)) abort();
    int32_t need = -probe;
    int32_t *ids = malloc(((size_t)need + 1) * sizeof *ids);
    if (need > 0 && vocab_tokenize(v, text, len, add_bos, special, ids, need - 1) != probe) abort();
    if (vocab_tokenize(v, text, len, add_bos, special, ids, need) != need) abort();
    for (int32_t i = 0; i < need; i++) {
        if (ids[i] < 0 || ids[i] >= vocab_n_tokens(v)) abort();
        char piece[64];
        if (vocab_token_to_piece(v, ids[i], piece, sizeof piece) < 0) abort();
    }
    if (add_bos && (need == 0 || ids[0] != vocab_bos(v))) abort();
    if (v == spm && !special && len > 0) {
        check_spm_segmentation(v, text, len, ids, need, add_bos);
    }
    free(ids);
    return 0;
}
