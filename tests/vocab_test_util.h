/*
 * Helpers shared by the tokenizer tests: golden cases from
 * ../shared/golden/tokenizer-*.json, SPM detokenization as b1892's common
 * code does it, and the round trips of b1892's test-tokenizer-1-llama.
 */
#ifndef LLAMAC_TESTS_VOCAB_TEST_UTIL_H
#define LLAMAC_TESTS_VOCAB_TEST_UTIL_H

#include "test_util.h"
#include "vocab/vocab.h"

#include <cjson/cJSON.h>

/* A byte string from a golden field: a JSON string, or {"hex": "..."}. */
static inline char *golden_bytes(const cJSON *item, size_t *len) {
    if (cJSON_IsString(item)) {
        *len = strlen(item->valuestring);
        char *s = malloc(*len + 1);
        memcpy(s, item->valuestring, *len + 1);
        return s;
    }
    const cJSON *hex = cJSON_GetObjectItemCaseSensitive(item, "hex");
    if (!cJSON_IsString(hex)) {
        return NULL;
    }
    size_t n = strlen(hex->valuestring) / 2;
    char *s = malloc(n + 1);
    for (size_t i = 0; i < n; i++) {
        unsigned b;
        sscanf(hex->valuestring + 2 * i, "%2x", &b);
        s[i] = (char)b;
    }
    s[n] = '\0';
    *len = n;
    return s;
}

static inline void bytes_to_hex(const char *s, size_t n, char *out) {
    for (size_t i = 0; i < n; i++) {
        sprintf(out + 2 * i, "%02x", (uint8_t)s[i]);
    }
    out[2 * n] = '\0';
}

/* Tokenizes and returns a malloc'ed array (count in *n), checking the
 * negative-size contract on the way. */
static inline int32_t *tokenize_all(const struct vocab *v, const char *text, size_t len, bool add_bos,
                                    bool special, int32_t *n) {
    int32_t probe = vocab_tokenize(v, text, len, add_bos, special, NULL, 0);
    CHECK(probe <= 0 && probe != VOCAB_TOKENIZE_ERROR);
    int32_t need = -probe;
    int32_t *ids = malloc(((size_t)need + 1) * sizeof *ids);
    if (need > 0) {
        /* one short: still negative, nothing written */
        ids[need - 1] = -12345;
        CHECK_EQ_INT(vocab_tokenize(v, text, len, add_bos, special, ids, need - 1), -need);
        CHECK_EQ_INT(ids[need - 1], -12345);
    }
    *n = vocab_tokenize(v, text, len, add_bos, special, ids, need);
    CHECK_EQ_INT(*n, need);
    return ids;
}

/* Concatenated pieces; with strip_first, the first non-BOS piece loses one
 * leading space (b1892's llama_detokenize_spm). Returns a malloc'ed string. */
static inline char *detokenize(const struct vocab *v, const int32_t *ids, int32_t n, bool strip_first,
                               size_t *len) {
    size_t cap = 16, used = 0;
    char *out = malloc(cap);
    for (int32_t i = 0; i < n; i++) {
        size_t plen;
        const char *piece = vocab_token_piece(v, ids[i], &plen);
        bool first = (ids[0] == vocab_bos(v) && i == 1) || (ids[0] != vocab_bos(v) && i == 0);
        if (strip_first && first && plen > 0 && piece[0] == ' ') {
            piece++;
            plen--;
        }
        while (used + plen + 1 > cap) {
            cap *= 2;
            out = realloc(out, cap);
        }
        memcpy(out + used, piece, plen);
        used += plen;
    }
    out[used] = '\0';
    *len = used;
    return out;
}

/* Checks every golden case: ids, pieces, detokenized text. Returns the number checked. */
static inline int check_golden_cases(const struct vocab *v, const cJSON *cases) {
    int n_cases = 0;
    const cJSON *c;
    cJSON_ArrayForEach(c, cases) {
        size_t len = 0, detok_len = 0;
        char *text = golden_bytes(cJSON_GetObjectItemCaseSensitive(c, "text"), &len);
        char *detok = golden_bytes(cJSON_GetObjectItemCaseSensitive(c, "detok"), &detok_len);
        bool add_bos = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(c, "add_bos"));
        bool special = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(c, "special"));
        const cJSON *want = cJSON_GetObjectItemCaseSensitive(c, "tokens");
        const cJSON *pieces = cJSON_GetObjectItemCaseSensitive(c, "pieces_hex");
        CHECK(text && detok && cJSON_IsArray(want) && cJSON_IsArray(pieces));
        if (!text || !detok) {
            free(text);
            free(detok);
            continue;
        }

        int32_t n;
        int32_t *ids = tokenize_all(v, text, len, add_bos, special, &n);
        bool same = n == cJSON_GetArraySize(want);
        for (int32_t i = 0; same && i < n; i++) {
            same = ids[i] == cJSON_GetArrayItem(want, i)->valueint;
        }
        CHECK_MSG(same, "tokens of '%s' (add_bos %d, special %d): got %d tokens, first %d", text, add_bos,
                  special, n, n ? ids[0] : -1);

        for (int32_t i = 0; i < n && i < cJSON_GetArraySize(pieces); i++) {
            char buf[256], hex[513];
            int32_t plen = vocab_token_to_piece(v, ids[i], buf, sizeof buf);
            CHECK(plen >= 0);
            bytes_to_hex(buf, plen < 0 ? 0 : (size_t)plen, hex);
            CHECK_STR_EQ(hex, cJSON_GetArrayItem(pieces, i)->valuestring);
        }
        size_t got_len;
        char *got = detokenize(v, ids, n, false, &got_len);
        CHECK_MSG(got_len == detok_len && memcmp(got, detok, detok_len) == 0, "detok of '%s'", text);
        free(got);
        free(ids);
        free(text);
        free(detok);
        n_cases++;
    }
    return n_cases;
}

/* test-tokenizer-1-llama: every token detokenizes to a string that
 * tokenizes and detokenizes back to itself. Returns the failures. */
static inline int check_token_round_trip(const struct vocab *v) {
    int failures = 0;
    for (int32_t id = 0; id < vocab_n_tokens(v); id++) {
        size_t len, back_len;
        char *str = detokenize(v, &id, 1, true, &len);
        int32_t n;
        int32_t *ids = tokenize_all(v, str, len, false, false, &n);
        char *back = detokenize(v, ids, n, true, &back_len);
        if (back_len != len || memcmp(back, str, len) != 0) {
            if (failures++ < 5) {
                fprintf(stderr, "token %d: '%s' comes back as '%s'\n", id, str, back);
            }
        }
        free(back);
        free(ids);
        free(str);
    }
    return failures;
}

/* The same for single code points: every `stride`-th one below 0x110000
 * (all below 0x800), surrogates and U+2581 excluded. Returns the failures. */
static inline int check_codepoint_round_trip(const struct vocab *v, uint32_t stride) {
    int failures = 0;
    for (uint32_t cp = 0; cp < 0x110000; cp += cp < 0x800 ? 1 : stride) {
        if ((cp >= 0xD800 && cp <= 0xDFFF) || cp == 0x2581) {
            continue;
        }
        char str[4];
        size_t len;
        if (cp < 0x80) {
            str[0] = (char)cp;
            len = 1;
        } else if (cp < 0x800) {
            str[0] = (char)(0xC0 | (cp >> 6));
            str[1] = (char)(0x80 | (cp & 0x3F));
            len = 2;
        } else if (cp < 0x10000) {
            str[0] = (char)(0xE0 | (cp >> 12));
            str[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
            str[2] = (char)(0x80 | (cp & 0x3F));
            len = 3;
        } else {
            str[0] = (char)(0xF0 | (cp >> 18));
            str[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
            str[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
            str[3] = (char)(0x80 | (cp & 0x3F));
            len = 4;
        }
        int32_t ids[16];
        int32_t n = vocab_tokenize(v, str, len, false, false, ids, 16);
        size_t back_len = 0;
        char *back = n > 0 ? detokenize(v, ids, n, true, &back_len) : NULL;
        if (n <= 0 || back_len != len || memcmp(back, str, len) != 0) {
            if (failures++ < 5) {
                fprintf(stderr, "code point U+%04X does not round-trip (%d tokens)\n", cp, n);
            }
        }
        free(back);
    }
    return failures;
}

#endif
