/*
 * The GPT-2 byte-level BPE tokenizer on a small hand-made vocabulary: the
 * 256 byte tokens (GPT-2's byte map, written out here independently), a few
 * dozen merges chosen so that each case below shows one rule of b1892's
 * pre-split or merge loop, and <|endoftext|>.
 *
 * A merge across a word boundary never applies, so a merge "X Y" in the
 * list tells whether X and Y ended up in the same word.
 *
 * The falcon vectors of b1892's test-tokenizer-0-falcon need
 * ggml-vocab-falcon.gguf, which ../shared does not have.
 */
#include "vocab_test_util.h"

#include "core/log.h"

/* GPT-2's bytes_to_unicode(): printable bytes map to themselves, the rest
 * to 256, 257, ... in byte order. */
static uint32_t gpt2_byte_cpt(uint8_t b) {
    static uint32_t map[256];
    static bool ready;
    if (!ready) {
        uint32_t n = 0;
        for (int c = 0; c < 256; c++) {
            bool printable = (c >= '!' && c <= '~') || (c >= 0xA1 && c <= 0xAC) || (c >= 0xAE && c <= 0xFF);
            map[c] = printable ? (uint32_t)c : 256 + n++;
        }
        ready = true;
    }
    return map[b];
}

/* raw bytes -> the vocabulary's encoded form (static buffer, rotated). */
static const char *enc_n(const char *raw, size_t n) {
    static char bufs[8][256];
    static int slot;
    char *out = bufs[slot++ % 8];
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        uint32_t cp = gpt2_byte_cpt((uint8_t)raw[i]);
        if (cp < 0x80) {
            out[o++] = (char)cp;
        } else {
            out[o++] = (char)(0xC0 | (cp >> 6));
            out[o++] = (char)(0x80 | (cp & 0x3F));
        }
    }
    out[o] = '\0';
    return out;
}

static const char *enc(const char *raw) {
    return enc_n(raw, strlen(raw));
}

/* Merges as raw (left, right) pairs; rank = position. */
static const char *const k_merges[][2] = {
    { "h", "e" },          /*  0 */
    { "a", "b" },          /*  1 */
    { "b", "c" },          /*  2 */
    { "a", "b" },          /*  3 repeated: the first rank stays */
    { "l", "l" },          /*  4 */
    { " ", "t" },          /*  5 */
    { " t", "he" },        /*  6 */
    { "o", "r" },          /*  7 */
    { " ", "w" },          /*  8 */
    { " w", "or" },        /*  9 */
    { " wor", "l" },       /* 10 */
    { " worl", "d" },      /* 11 */
    { "he", "ll" },        /* 12 */
    { "hell", "o" },       /* 13 */
    { " ", " " },          /* 14 */
    { "1", "2" },          /* 15 */
    { "'", "s" },          /* 16 */
    { "\n", " " },         /* 17 */
    { "b", " " },          /* 18 */
    { "a", "1" },          /* 19 */
    { "1", "b" },          /* 20 */
    { "a", "\xE6" },       /* 21 a + first byte of U+65E5 */
    { "a", "\xC3" },       /* 22 a + first byte of U+00E9 */
    { "\x80", "\xE3" },    /* 23 across two U+3000 */
    { "\xA0", "\xC2" },    /* 24 across two U+00A0 */
    { "r", "e" },          /* 25 */
};
#define N_PAIRS ((int)(sizeof k_merges / sizeof k_merges[0]))
/* two lines that give no usable pair but take up ranks 26 and 27 */
static const char *const k_odd_lines[] = { "xyz", "q " };

struct bpe_fixture {
    struct vocab *v;
    int32_t eot;
};

static struct bpe_fixture make_vocab(void) {
    static char texts_buf[512][64];
    const char *texts[512];
    int32_t types[512];
    int n = 0;
    for (int b = 0; b < 256; b++) {
        char raw = (char)b;
        strcpy(texts_buf[n], enc_n(&raw, 1));
        texts[n] = texts_buf[n];
        types[n++] = LLAMA_TOKEN_TYPE_NORMAL;
    }
    static char lines[N_PAIRS + 2][64];
    const char *merges[N_PAIRS + 2];
    for (int m = 0; m < N_PAIRS; m++) {
        snprintf(lines[m], sizeof lines[m], "%s %s", enc(k_merges[m][0]), enc(k_merges[m][1]));
        merges[m] = lines[m];
        char joined[32];
        snprintf(joined, sizeof joined, "%s%s", k_merges[m][0], k_merges[m][1]);
        bool seen = false;
        for (int i = 256; i < n; i++) {
            seen |= strcmp(texts[i], enc(joined)) == 0;
        }
        if (!seen) {
            strcpy(texts_buf[n], enc(joined));
            texts[n] = texts_buf[n];
            types[n++] = LLAMA_TOKEN_TYPE_NORMAL;
        }
    }
    merges[N_PAIRS] = k_odd_lines[0];
    merges[N_PAIRS + 1] = k_odd_lines[1];
    texts[n] = "<|endoftext|>";
    types[n] = LLAMA_TOKEN_TYPE_CONTROL;
    int32_t eot = n++;

    struct vocab_desc d;
    vocab_desc_init(&d);
    d.type = LLAMA_VOCAB_TYPE_BPE;
    d.n_tokens = (uint32_t)n;
    d.texts = texts;
    d.types = types;
    d.n_merges = N_PAIRS + 2;
    d.merges = merges;
    d.special_ids[VOCAB_SPECIAL_BOS] = eot;
    d.special_ids[VOCAB_SPECIAL_EOS] = eot;
    struct bpe_fixture f = { vocab_create(&d), eot };
    return f;
}

/* id of the token for raw bytes */
static int32_t tok(const struct vocab *v, const char *raw) {
    const char *e = enc(raw);
    int32_t id = vocab_find(v, e, strlen(e));
    CHECK_MSG(id >= 0, "no token for '%s'", raw);
    return id;
}

static int32_t tok_n(const struct vocab *v, const char *raw, size_t n) {
    const char *e = enc_n(raw, n);
    return vocab_find(v, e, strlen(e));
}

/* Tokenizes text and compares with the expected raw pieces (NULL-terminated list). */
static void expect(const struct vocab *v, const char *text, size_t len, bool special, const char *const *want,
                   const char *why) {
    int32_t n;
    int32_t *ids = tokenize_all(v, text, len, false, special, &n);
    int32_t n_want = 0;
    while (want[n_want]) {
        n_want++;
    }
    bool same = n == n_want;
    for (int32_t i = 0; same && i < n; i++) {
        same = ids[i] == tok(v, want[i]);
    }
    CHECK_MSG(same, "%s: '%s' gave %d tokens", why, text, n);
    if (!same) {
        for (int32_t i = 0; i < n; i++) {
            fprintf(stderr, "  [%d] '%s'\n", ids[i], vocab_token_text(v, ids[i]));
        }
    }
    /* pieces give the text back (byte-level BPE loses nothing) */
    size_t back_len;
    char *back = detokenize(v, ids, n, false, &back_len);
    CHECK_MSG(back_len == len && memcmp(back, text, len) == 0, "%s: pieces of '%s'", why, text);
    free(back);
    free(ids);
}

#define EXPECT(v, text, why, ...)                                               \
    do {                                                                        \
        static const char *const want_[] = { __VA_ARGS__, NULL };               \
        expect(v, text, sizeof(text) - 1, false, want_, why);                   \
    } while (0)

static void test_merges(const struct vocab *v) {
    EXPECT(v, "hello world", "merges by rank", "hello", " world");
    EXPECT(v, "abc", "a repeated merge keeps its first rank", "ab", "c");
    EXPECT(v, "the", "a merge needs both halves", "t", "he");
    EXPECT(v, "therefore", "lower rank first", "t", "he", "re", "f", "or", "e");
    EXPECT(v, "lll", "leftmost pair of equal rank first", "ll", "l");
    CHECK_EQ_INT(vocab_n_merges(v), N_PAIRS + 2);
}

static void test_presplit(const struct vocab *v) {
    EXPECT(v, "the 12's", "numbers and 's", "t", "he", " ", "12", "'s");
    EXPECT(v, "it's", "contraction after letters", "i", "t", "'s");
    EXPECT(v, "a1b", "a char that ends a word starts the next", "a", "1b");
    EXPECT(v, "x  y", "one space stays behind before a letter", "x", " ", " ", "y");
    EXPECT(v, "cb ", "the last char joins the word before it", "c", "b ");
    EXPECT(v, "\n =", "whitespace runs and the final char", "\n ", "=");
    EXPECT(v, "a\n\n b", "whitespace lookahead", "a", "\n", "\n", " ", "b");
    /* U+65E5 is in b1892's CJK override ("other"); U+00E9 is a letter */
    EXPECT(v, "a\xE6\x97\xA5" "x", "CJK is not a letter", "a", "\xE6", "\x97", "\xA5", "x");
    EXPECT(v, "a\xC3\xA9" "x", "Latin-1 letter", "a\xC3", "\xA9", "x");
    EXPECT(v, "a\xE6\x97\xA5", "the last char joins the word before it", "a\xE6", "\x97", "\xA5");
    /* U+3000 is "other" in b1892 (CJK override), U+00A0 whitespace */
    EXPECT(v, "\xE3\x80\x80\xE3\x80\x80" "b", "U+3000 runs like punctuation", "\xE3", "\x80", "\x80\xE3", "\x80",
           "\x80", "b");
    EXPECT(v, "\xC2\xA0\xC2\xA0" "b", "U+00A0 is whitespace", "\xC2", "\xA0", "\xC2", "\xA0", "b");
    EXPECT(v, "!?", "punctuation", "!", "?");
    EXPECT(v, "hi there", "space before a letter", "h", "i", " the", "re");
}

static void test_special_and_bos(const struct vocab *v, int32_t eot) {
    int32_t n;
    const int32_t *cache = vocab_special_tokens(v, &n);
    CHECK_EQ_INT(n, 1);
    CHECK(n == 1 && cache[0] == eot);

    static const char text[] = "hello<|endoftext|>world";
    int32_t *ids = tokenize_all(v, text, sizeof text - 1, false, true, &n);
    CHECK_EQ_INT(n, 6);
    if (n == 6) {
        CHECK(ids[0] == tok(v, "hello") && ids[1] == eot && ids[2] == tok(v, "w") && ids[3] == tok(v, "or") &&
              ids[4] == tok(v, "l") && ids[5] == tok(v, "d"));
    }
    free(ids);
    ids = tokenize_all(v, text, sizeof text - 1, true, false, &n);
    CHECK(n > 0 && ids[0] == eot);
    for (int32_t i = 1; i < n; i++) {
        CHECK(ids[i] != eot);
    }
    free(ids);

    CHECK_EQ_INT(vocab_tokenize(v, "", 0, false, false, NULL, 0), 0);
    int32_t one;
    CHECK_EQ_INT(vocab_tokenize(v, "", 0, true, false, &one, 1), 1);
    CHECK_EQ_INT(one, eot);
    CHECK_EQ_INT(vocab_bos(v), eot);
    CHECK_EQ_INT(vocab_unk(v), -1);
    /* b1892's newline: the first token of the text U+010A, i.e. GPT-2's image of 0xC4 */
    CHECK_EQ_INT(vocab_nl(v), tok(v, "\xC4"));
}

static void test_pieces(const struct vocab *v, int32_t eot) {
    size_t len;
    const char *p = vocab_token_piece(v, tok(v, " world"), &len);
    CHECK(len == 6 && memcmp(p, " world", 6) == 0);
    p = vocab_token_piece(v, tok(v, "\n "), &len);
    CHECK(len == 2 && memcmp(p, "\n ", 2) == 0);
    vocab_token_piece(v, eot, &len);
    CHECK_EQ_INT(len, 0);
    for (int b = 0; b < 256; b++) {
        char raw = (char)b;
        p = vocab_token_piece(v, tok_n(v, &raw, 1), &len);
        CHECK(len == 1 && (uint8_t)p[0] == b);
    }
}

static void test_hostile(const struct vocab *v) {
    /* invalid UTF-8 stands byte by byte; the pieces give the bytes back */
    static const char *const samples[] = { "\xff\xfe a", "\x80\x80", "ab\xe2\x82", "\xf4\x90\x80\x80x", "x\0y" };
    static const size_t lens[] = { 4, 2, 4, 5, 3 };
    for (size_t k = 0; k < sizeof lens / sizeof lens[0]; k++) {
        int32_t n;
        size_t back_len;
        int32_t *ids = tokenize_all(v, samples[k], lens[k], false, true, &n);
        char *back = detokenize(v, ids, n, false, &back_len);
        CHECK_MSG(back_len == lens[k] && memcmp(back, samples[k], lens[k]) == 0, "sample %zu", k);
        free(back);
        free(ids);
    }
    static const char *const want[] = { "\xff", "\xfe", " ", "a", NULL };
    expect(v, "\xff\xfe a", 4, false, want, "invalid bytes are 'other' chars");
    /* an overlong '!' is normalised to '!' before the byte map, as in b1892 */
    static const char *const want_overlong[] = { "!", NULL };
    int32_t ids[4];
    CHECK_EQ_INT(vocab_tokenize(v, "\xC0\xA1", 2, false, false, ids, 4), 1);
    CHECK_EQ_INT(ids[0], tok(v, want_overlong[0]));

    /* 1 MiB of random bytes and 1 MiB of one long word: exact round trip */
    size_t big = 1 << 20;
    char *text = malloc(big);
    uint64_t seed = 7;
    for (size_t i = 0; i < big; i++) {
        /* no C0, C1, E0, F0: their overlong forms would be normalised */
        uint8_t b = (uint8_t)test_rand_u64(&seed);
        text[i] = (char)(b == 0xC0 || b == 0xC1 || b == 0xE0 || b == 0xF0 ? 'z' : b);
    }
    int32_t n;
    size_t back_len;
    int32_t *many = tokenize_all(v, text, big, false, true, &n);
    char *back = detokenize(v, many, n, false, &back_len);
    CHECK(back_len == big && memcmp(back, text, big) == 0);
    free(back);
    free(many);
    for (size_t i = 0; i < big; i++) {
        text[i] = "hello"[i % 5];
    }
    many = tokenize_all(v, text, big, false, false, &n);
    back = detokenize(v, many, n, false, &back_len);
    CHECK(back_len == big && memcmp(back, text, big) == 0);
    printf("1 MiB word 'hellohello...': %d tokens\n", n);
    free(back);
    free(many);
    free(text);
}

static void test_validation(void) {
    static const char *const texts[] = { "a", "b", "ab" };
    struct vocab_desc d;
    vocab_desc_init(&d);
    d.type = LLAMA_VOCAB_TYPE_BPE;
    d.n_tokens = 3;
    d.texts = texts;
    static const char *const bad_merge[] = { "a b", "\xc3" };
    d.n_merges = 2;
    d.merges = bad_merge;
    CHECK(vocab_create(&d) == NULL);
    CHECK(strstr(error_last(), "merge 1") != NULL);
    /* no newline token can be formed: b1892 asserts, we refuse */
    static const char *const ok_merge[] = { "a b" };
    d.n_merges = 1;
    d.merges = ok_merge;
    struct vocab *v = vocab_create(&d);
    CHECK(v == NULL);
    CHECK(strstr(error_last(), "newline") != NULL);
    vocab_free(v);
}

int main(void) {
    struct bpe_fixture f = make_vocab();
    CHECK(f.v != NULL);
    if (f.v) {
        test_merges(f.v);
        test_presplit(f.v);
        test_special_and_bos(f.v, f.eot);
        test_pieces(f.v, f.eot);
        test_hostile(f.v);
    }
    test_validation();
    vocab_free(f.v);
    return test_finish("test_vocab_bpe");
}
