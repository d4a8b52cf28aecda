/*
 * The SPM tokenizer on stories260K's 512-token vocabulary, built from the
 * "vocab" table of ../shared/golden/tokenizer-stories260K.json (no GGUF
 * reader involved): every golden case (ids, pieces, detokenized text, the
 * special=true cases), the special-token cache against a brute-force
 * reading of b1892's rule, b1892's test-tokenizer-1 round trips, the
 * negative-size contract, hostile inputs and vocab_create's validation.
 */
#include "vocab_test_util.h"

#include "core/log.h"

#include <time.h>

static enum llama_token_type type_from_name(const char *name) {
    static const char *const names[] = { "undefined", "normal", "unknown", "control",
                                         "user_defined", "unused", "byte" };
    for (int i = 0; i < 7; i++) {
        if (strcmp(name, names[i]) == 0) {
            return (enum llama_token_type)i;
        }
    }
    return (enum llama_token_type)-1;
}

struct table {
    int n;
    const char **texts;
    float *scores;
    int32_t *types;
};

static struct table table_from_golden(const cJSON *vocab) {
    struct table t = { cJSON_GetArraySize(vocab), NULL, NULL, NULL };
    t.texts = calloc(t.n, sizeof *t.texts);
    t.scores = calloc(t.n, sizeof *t.scores);
    t.types = calloc(t.n, sizeof *t.types);
    const cJSON *row;
    cJSON_ArrayForEach(row, vocab) {
        int id = cJSON_GetArrayItem(row, 0)->valueint;
        t.texts[id] = cJSON_GetArrayItem(row, 1)->valuestring;
        t.scores[id] = (float)cJSON_GetArrayItem(row, 2)->valuedouble;
        t.types[id] = type_from_name(cJSON_GetArrayItem(row, 3)->valuestring);
    }
    return t;
}

static void table_free(struct table *t) {
    free(t->texts);
    free(t->scores);
    free(t->types);
}

static struct vocab *vocab_from_table(const struct table *t) {
    struct vocab_desc d;
    vocab_desc_init(&d);
    d.type = LLAMA_VOCAB_TYPE_SPM;
    d.n_tokens = (uint32_t)t->n;
    d.texts = t->texts;
    d.scores = t->scores;
    d.types = t->types;
    return vocab_create(&d);
}

/* b1892's utf8_len: sequence length from the high nibble of the first byte. */
static size_t lead_len(uint8_t b) {
    return b < 0xC0 ? 1 : b < 0xE0 ? 2 : b < 0xF0 ? 3 : 4;
}

/* b1892's special-token rule, written out naively (every split, vocab_find). */
static bool brute_force_special(const struct vocab *v, int32_t id) {
    const char *s = vocab_token_text(v, id);
    size_t len = vocab_token_text_len(v, id);
    if (len <= 1) {
        return false;
    }
    for (size_t i = 1; i < len;) {
        size_t seq = lead_len((uint8_t)s[i - 1]);
        if (seq != 1) {
            i += seq - 1;
            continue;
        }
        if (vocab_find(v, s, i) >= 0 && vocab_find(v, s + i, len - i) >= 0) {
            return false;
        }
        i++;
    }
    size_t chars = 0;
    for (size_t i = 0; i < len; i += lead_len((uint8_t)s[i])) {
        chars++;
    }
    return chars > 1;
}

static void test_vocab_table(const struct vocab *v, const cJSON *golden) {
    const cJSON *vocab = cJSON_GetObjectItemCaseSensitive(golden, "vocab");
    CHECK_EQ_INT(vocab_n_tokens(v), cJSON_GetObjectItemCaseSensitive(golden, "n_vocab")->valueint);
    CHECK_EQ_INT(vocab_type(v), cJSON_GetObjectItemCaseSensitive(golden, "vocab_type")->valueint);
    CHECK_EQ_INT(vocab_bos(v), cJSON_GetObjectItemCaseSensitive(golden, "bos")->valueint);
    CHECK_EQ_INT(vocab_eos(v), cJSON_GetObjectItemCaseSensitive(golden, "eos")->valueint);
    CHECK_EQ_INT(vocab_nl(v), cJSON_GetObjectItemCaseSensitive(golden, "nl")->valueint);
    CHECK_EQ_INT(vocab_add_bos(v), cJSON_GetObjectItemCaseSensitive(golden, "add_bos_token")->valueint);
    CHECK_EQ_INT(vocab_add_eos(v), cJSON_GetObjectItemCaseSensitive(golden, "add_eos_token")->valueint);
    CHECK_EQ_INT(vocab_unk(v), 0);
    CHECK_EQ_INT(vocab_sep(v), -1);
    CHECK_EQ_INT(vocab_pad(v), -1);
    CHECK_EQ_INT(vocab_prefix(v), 32007);
    CHECK_EQ_INT(vocab_middle(v), 32009);
    CHECK_EQ_INT(vocab_suffix(v), 32008);
    CHECK_EQ_INT(vocab_eot(v), 32010);

    int mismatches = 0;
    const cJSON *row;
    cJSON_ArrayForEach(row, vocab) {
        int id = cJSON_GetArrayItem(row, 0)->valueint;
        const char *text = cJSON_GetArrayItem(row, 1)->valuestring;
        char buf[64], hex[129];
        int32_t n = vocab_token_to_piece(v, id, buf, sizeof buf);
        bytes_to_hex(buf, n < 0 ? 0 : (size_t)n, hex);
        if (strcmp(vocab_token_text(v, id), text) != 0 || vocab_find(v, text, strlen(text)) != id ||
            vocab_token_score(v, id) != (float)cJSON_GetArrayItem(row, 2)->valuedouble ||
            vocab_token_type(v, id) != type_from_name(cJSON_GetArrayItem(row, 3)->valuestring) ||
            strcmp(hex, cJSON_GetArrayItem(row, 4)->valuestring) != 0) {
            if (mismatches++ < 5) {
                fprintf(stderr, "token %d ('%s') differs from the golden table (piece %s)\n", id, text, hex);
            }
        }
    }
    CHECK_EQ_INT(mismatches, 0);

    /* out-of-range ids */
    CHECK(vocab_token_text(v, -1) == NULL && vocab_token_text(v, 512) == NULL);
    CHECK_EQ_INT(vocab_token_type(v, 512), LLAMA_TOKEN_TYPE_UNDEFINED);
    char buf[8];
    CHECK_EQ_INT(vocab_token_to_piece(v, 512, buf, sizeof buf), 0);
    CHECK_EQ_INT(vocab_token_to_piece(v, -7, buf, sizeof buf), 0);
    /* piece contract: too small -> minus the length, nothing written */
    int32_t once = vocab_find(v, "\xE2\x96\x81Once", 7);
    CHECK(once >= 0);
    memset(buf, 'x', sizeof buf);
    CHECK_EQ_INT(vocab_token_to_piece(v, once, buf, 4), -5);
    CHECK(buf[0] == 'x');
    CHECK_EQ_INT(vocab_token_to_piece(v, once, buf, 5), 5);
    CHECK(memcmp(buf, " Once", 5) == 0);
    CHECK_EQ_INT(vocab_token_to_piece(v, 0, buf, 2), -3); /* <unk> -> U+2585 */
    /* an empty piece (BOS) asked for its length with no buffer: 0, nothing touched */
    CHECK_EQ_INT(vocab_token_to_piece(v, vocab_bos(v), NULL, 0), 0);
}

static void test_special_cache(const struct vocab *v) {
    int32_t n;
    const int32_t *ids = vocab_special_tokens(v, &n);
    bool *in_cache = calloc(vocab_n_tokens(v), 1);
    for (int32_t i = 0; i < n; i++) {
        in_cache[ids[i]] = true;
        if (i > 0) {
            size_t a = vocab_token_text_len(v, ids[i - 1]), b = vocab_token_text_len(v, ids[i]);
            CHECK(a > b || (a == b && ids[i - 1] < ids[i]));
        }
    }
    int differ = 0;
    for (int32_t id = 0; id < vocab_n_tokens(v); id++) {
        differ += in_cache[id] != brute_force_special(v, id);
    }
    CHECK_EQ_INT(differ, 0);
    /* the control tokens and the byte tokens are in it */
    CHECK(in_cache[0] && in_cache[1] && in_cache[2] && in_cache[3 + 0x0A] && in_cache[3 + 0xFF]);
    printf("special-token cache: %d tokens\n", n);
    free(in_cache);
}

static void test_special_partition(const struct vocab *v) {
    int32_t n;
    /* byte tokens are special too: "<0x0A>" with special=true is the newline token */
    int32_t *ids = tokenize_all(v, "a<0x0A>b", 8, false, true, &n);
    CHECK(n >= 3);
    bool has_nl = false;
    for (int32_t i = 0; i < n; i++) {
        has_nl |= ids[i] == vocab_nl(v);
    }
    CHECK(has_nl);
    free(ids);
    /* a special token first: no leading space anywhere; raw text first: space only there */
    int32_t *a = tokenize_all(v, "</s>Hello", 9, false, true, &n);
    int32_t n_hello;
    int32_t *b = tokenize_all(v, "Hello", 5, false, false, &n_hello);
    CHECK(n >= 1 && a[0] == 2);
    CHECK(n - 1 != n_hello || memcmp(a + 1, b, sizeof *b * (size_t)n_hello) != 0); /* "Hello" vs " Hello" */
    free(a);
    free(b);
    /* repeated and adjacent specials */
    int32_t *c = tokenize_all(v, "<s><s></s>", 10, true, true, &n);
    CHECK_EQ_INT(n, 4);
    CHECK(n == 4 && c[0] == 1 && c[1] == 1 && c[2] == 1 && c[3] == 2);
    free(c);
}

static void test_round_trips(const struct vocab *v) {
    CHECK_EQ_INT(check_token_round_trip(v), 0);
    CHECK_EQ_INT(check_codepoint_round_trip(v, 1), 0);
}

static void test_contract(const struct vocab *v) {
    int32_t ids[4] = { -9, -9, -9, -9 };
    /* empty text: nothing, or only BOS */
    CHECK_EQ_INT(vocab_tokenize(v, "", 0, false, false, NULL, 0), 0);
    CHECK_EQ_INT(vocab_tokenize(v, NULL, 0, true, false, ids, 4), 1);
    CHECK_EQ_INT(ids[0], 1);
    CHECK_EQ_INT(vocab_tokenize(v, NULL, 0, true, false, ids, 0), -1);
    /* n_max negative, or no buffer, counts as 0 */
    CHECK_EQ_INT(vocab_tokenize(v, "Once", 4, false, false, ids, -5), -1);
    CHECK_EQ_INT(vocab_tokenize(v, "Once", 4, true, false, NULL, 10), -2);
    CHECK_EQ_INT(vocab_token_to_piece(v, 403, NULL, 10), -5);
    /* errors */
    CHECK_EQ_INT(vocab_tokenize(v, NULL, 3, false, false, ids, 4), VOCAB_TOKENIZE_ERROR);
    CHECK_EQ_INT(vocab_tokenize(v, "x", VOCAB_MAX_TEXT_LEN + 1, false, false, ids, 4), VOCAB_TOKENIZE_ERROR);
    CHECK(strstr(error_last(), "too long") != NULL);
}

static double seconds_since(struct timespec t0) {
    struct timespec t1;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    return (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
}

static void test_hostile(const struct vocab *v) {
    /* invalid UTF-8, lone continuation bytes, truncated sequences, NUL: every
     * byte string (without U+2581 in it) comes back byte for byte */
    static const char *const samples[] = { "\xff\xfe", "\x80", "abc\xe2\x82", "\xf0\x9f", "\xc3",
                                           "x\0y", "\xed\xa0\x80", "\xf7\xbf\xbf\xbf" };
    static const size_t lens[] = { 2, 1, 5, 2, 1, 3, 3, 4 };
    for (size_t k = 0; k < sizeof lens / sizeof lens[0]; k++) {
        int32_t n;
        size_t back_len;
        int32_t *ids = tokenize_all(v, samples[k], lens[k], true, k % 2 == 0, &n);
        char *back = detokenize(v, ids, n, true, &back_len);
        CHECK_MSG(back_len == lens[k] && memcmp(back, samples[k], lens[k]) == 0, "sample %zu", k);
        free(back);
        free(ids);
    }

    /* 1 MiB of random bytes, special on. Pieces need not round-trip here (an
     * invalid lead byte before a space swallows part of its U+2581, as in
     * b1892), but the tokens always segment the escaped text exactly: byte
     * tokens give their byte, the others their text. */
    size_t big = 1 << 20;
    char *text = malloc(big);
    uint64_t seed = 42;
    for (size_t i = 0; i < big; i++) {
        text[i] = (char)test_rand_u64(&seed);
    }
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    int32_t n;
    int32_t *ids = tokenize_all(v, text, big, false, true, &n);
    printf("1 MiB of random bytes: %d tokens, %.2f s (3 tokenizations)\n", n, seconds_since(t0));
    char *escaped = malloc(3 * big + 3), *joined = malloc(3 * big + 3);
    size_t e = 0, j = 0;
    memcpy(escaped, "\xE2\x96\x81", 3);
    e = 3;
    for (size_t i = 0; i < big; i++) {
        if (text[i] == ' ') {
            memcpy(escaped + e, "\xE2\x96\x81", 3);
            e += 3;
        } else {
            escaped[e++] = text[i];
        }
    }
    bool in_range = true;
    for (int32_t i = 0; i < n && j < 3 * big; i++) {
        in_range &= ids[i] >= 0 && ids[i] < vocab_n_tokens(v);
        if (vocab_token_type(v, ids[i]) == LLAMA_TOKEN_TYPE_BYTE) {
            size_t plen;
            joined[j++] = *vocab_token_piece(v, ids[i], &plen);
        } else {
            size_t tlen = vocab_token_text_len(v, ids[i]);
            memcpy(joined + j, vocab_token_text(v, ids[i]), tlen);
            j += tlen;
        }
    }
    CHECK(in_range);
    CHECK(j == e && memcmp(joined, escaped, e) == 0);
    free(escaped);
    free(joined);
    free(ids);

    size_t back_len;
    char *back;
    /* 1 MiB of prose: many merges, the queue does the work */
    static const char prose[] = "Once upon a time, there was a little girl named Lily. ";
    for (size_t i = 0; i < big; i++) {
        text[i] = prose[i % (sizeof prose - 1)];
    }
    clock_gettime(CLOCK_MONOTONIC, &t0);
    ids = tokenize_all(v, text, big, false, false, &n);
    back = detokenize(v, ids, n, true, &back_len);
    CHECK(back_len == big && memcmp(back, text, big) == 0);
    printf("1 MiB of prose: %d tokens, %.2f s (3 tokenizations)\n", n, seconds_since(t0));
    free(back);
    free(ids);
    free(text);
}

/* vocab_create rejects what b1892 would assert on or misread. */
static void test_validation(const struct table *t) {
    struct vocab_desc d;
    const char **texts = malloc(t->n * sizeof *texts);
    float *scores = malloc(t->n * sizeof *scores);
    int32_t *types = malloc(t->n * sizeof *types);
    size_t *lens = malloc(t->n * sizeof *lens);
    struct {
        const char *what;
        int id;
        const char *text;
        size_t len;
        float score;
        int32_t type;
        const char *expect;
    } bad[] = {
        { "duplicate", 300, "<s>", 3, 0, 1, "same text" },
        { "empty", 300, "", 0, 0, 1, "empty" },
        { "NUL", 300, "a\0b", 3, 0, 1, "NUL" },
        { "invalid UTF-8", 300, "\xc3(", 2, 0, 1, "UTF-8" },
        { "lone continuation", 300, "\x80", 1, 0, 1, "UTF-8" },
        { "NaN score", 300, "zzz", 3, NAN, 1, "NaN" },
        { "bad type", 300, "zzz", 3, 0, 7, "type" },
        { "no <0x0A>", 3 + 0x0A, "zzz", 3, 0, 6, "<0x0A>" },
    };
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        for (int i = 0; i < t->n; i++) {
            texts[i] = t->texts[i];
            lens[i] = strlen(t->texts[i]);
            scores[i] = t->scores[i];
            types[i] = t->types[i];
        }
        texts[bad[k].id] = bad[k].text;
        lens[bad[k].id] = bad[k].len;
        scores[bad[k].id] = bad[k].score;
        types[bad[k].id] = bad[k].type;
        vocab_desc_init(&d);
        d.n_tokens = (uint32_t)t->n;
        d.texts = texts;
        d.text_lens = lens;
        d.scores = scores;
        d.types = types;
        struct vocab *v = vocab_create(&d);
        CHECK_MSG(v == NULL, "%s accepted", bad[k].what);
        CHECK_MSG(strstr(error_last(), bad[k].expect) != NULL, "%s: '%s'", bad[k].what, error_last());
        vocab_free(v);
    }

    /* special ids: a bad one keeps the default; a default outside the vocabulary becomes none */
    vocab_desc_init(&d);
    d.n_tokens = (uint32_t)t->n;
    d.texts = t->texts;
    d.special_ids[VOCAB_SPECIAL_BOS] = 4000;
    d.special_ids[VOCAB_SPECIAL_EOS] = 5;
    d.special_ids[VOCAB_SPECIAL_PAD] = 0;
    d.add_bos = 1;
    d.add_eos = 0;
    struct vocab *v = vocab_create(&d);
    CHECK(v != NULL);
    if (v) {
        CHECK_EQ_INT(vocab_bos(v), 1);
        CHECK_EQ_INT(vocab_eos(v), 5);
        CHECK_EQ_INT(vocab_pad(v), 0);
        CHECK_EQ_INT(vocab_add_bos(v), 1);
        CHECK_EQ_INT(vocab_add_eos(v), 0);
        /* without scores and types every token is normal with score 0 */
        CHECK_EQ_INT(vocab_token_type(v, 1), LLAMA_TOKEN_TYPE_NORMAL);
        CHECK(vocab_token_score(v, 400) == 0.0f);
    }
    vocab_free(v);

    static const char *const tiny_texts[] = { "<0x0A>", "a" };
    vocab_desc_init(&d);
    d.n_tokens = 2;
    d.texts = tiny_texts;
    v = vocab_create(&d);
    CHECK(v != NULL);
    if (v) {
        CHECK_EQ_INT(vocab_bos(v), 1);
        CHECK_EQ_INT(vocab_eos(v), -1);
        CHECK_EQ_INT(vocab_unk(v), 0);
        CHECK_EQ_INT(vocab_nl(v), 0);
        /* no byte tokens but <0x0A>: an unknown byte becomes UNK (id 0) */
        int32_t ids[8];
        int32_t n = vocab_tokenize(v, "a\x01", 2, false, false, ids, 8);
        CHECK(n >= 2 && ids[n - 1] == 0);
    }
    vocab_free(v);

    vocab_desc_init(&d);
    d.type = (enum llama_vocab_type)7;
    d.n_tokens = 2;
    d.texts = tiny_texts;
    CHECK(vocab_create(&d) == NULL);
    d.type = LLAMA_VOCAB_TYPE_SPM;
    d.n_tokens = 0;
    CHECK(vocab_create(&d) == NULL);
    free(texts);
    free(scores);
    free(types);
    free(lens);
}

int main(void) {
    cJSON *golden = golden_load("golden/tokenizer-stories260K.json");
    struct table t = table_from_golden(cJSON_GetObjectItemCaseSensitive(golden, "vocab"));
    struct vocab *v = vocab_from_table(&t);
    CHECK(v != NULL);
    if (v) {
        test_vocab_table(v, golden);
        test_special_cache(v);
        int n = check_golden_cases(v, cJSON_GetObjectItemCaseSensitive(golden, "cases"));
        CHECK_EQ_INT(n, 86);
        printf("golden cases: %d\n", n);
        test_special_partition(v);
        test_round_trips(v);
        test_contract(v);
        test_hostile(v);
    }
    test_validation(&t);
    vocab_free(v);
    table_free(&t);
    cJSON_Delete(golden);
    return test_finish("test_vocab_spm");
}
