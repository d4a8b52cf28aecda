/* libFuzzer target: reading a vocabulary from arbitrary GGUF bytes. A file
 * that gives a vocabulary must be safe to use: every token is queried and a
 * few texts are tokenized with and without special tokens. Seeds:
 * fuzz/corpus/vocab_gguf/ (tiny SPM and BPE vocabularies, see
 * tests/test_vocab_gguf.c). */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "gguf/gguf.h"
#include "vocab/vocab.h"

static void quiet_log(enum ggml_log_level level, const char *text, void *user_data) {
    (void)level; (void)text; (void)user_data;
}

static volatile uint64_t g_sink;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static const char *const texts[] = { "", " ", "Hello world", "<s>a</s>\n", "\xff\xe2\x96\x81 x\xc3\xa9" };
    log_set_callback(quiet_log, NULL);
    struct gguf_reader *r = gguf_open_buffer(data, size);
    if (!r) return 0;
    struct vocab *v = vocab_load_gguf(r);
    gguf_close(r);
    if (!v) return 0;

    int32_t n = vocab_n_tokens(v);
    for (int32_t id = -1; id <= n; id++) {
        size_t len;
        const char *piece = vocab_token_piece(v, id, &len); /* may hold no NUL: read only if len */
        const char *text = vocab_token_text(v, id);
        g_sink += len + (len ? (uint8_t)piece[0] : 0) + vocab_token_text_len(v, id) + (text ? (uint8_t)text[0] : 0) +
                  (uint64_t)vocab_token_type(v, id) + (vocab_token_score(v, id) < 0);
        if (text && vocab_find(v, text, vocab_token_text_len(v, id)) != id) abort();
    }
    int32_t n_special;
    const int32_t *special = vocab_special_tokens(v, &n_special);
    for (int32_t i = 0; i < n_special; i++) {
        if (special[i] < 0 || special[i] >= n) abort();
    }
    int32_t ids[256];
    for (size_t k = 0; k < sizeof texts / sizeof texts[0]; k++) {
        for (int special_flag = 0; special_flag <= 1; special_flag++) {
            int32_t got = vocab_tokenize(v, texts[k], strlen(texts[k]), true, special_flag, ids, 256);
            if (got == VOCAB_TOKENIZE_ERROR || got > 256) abort();
            for (int32_t i = 0; i < got; i++) {
                if (ids[i] < 0 || ids[i] >= n) abort();
            }
        }
    }
    vocab_free(v);
    return 0;
}
