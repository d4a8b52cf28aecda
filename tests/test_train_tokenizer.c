/*
 * Tokenizer training (src/train/tokenizer_train.h): merge order pinned on a
 * corpus small enough to count by hand, character coverage, determinism,
 * the llama vocabulary layout and scores, round trips through a
 * greedy-by-score SPM encoder written here after b1892's llm_tokenizer_spm,
 * the GGUF file and `llamac train-tokenizer`, and the engine's own
 * tokenizer (src/vocab) loading the file and agreeing with that encoder.
 */
#include "test_util.h"

#include "cli_test_util.h"
#include "core/log.h"
#include "gguf/gguf.h"
#include "train/tokenizer_train.h"
#include "vocab/vocab.h"

/* ---- an SPM encoder as b1892 runs it ------------------------------------------ */

struct spm {
    const struct tokenizer_vocab *v;
    int32_t *sorted; /* token ids sorted by string */
};

static const struct tokenizer_vocab *g_cmp_vocab;
static int spm_cmp_ids(const void *x, const void *y) {
    return strcmp(g_cmp_vocab->tokens[*(const int32_t *)x], g_cmp_vocab->tokens[*(const int32_t *)y]);
}

static void spm_init(struct spm *s, const struct tokenizer_vocab *v) {
    s->v = v;
    s->sorted = malloc((size_t)v->n_tokens * sizeof *s->sorted);
    for (int32_t i = 0; i < v->n_tokens; i++) s->sorted[i] = i;
    g_cmp_vocab = v;
    qsort(s->sorted, (size_t)v->n_tokens, sizeof *s->sorted, spm_cmp_ids);
}

/* Token id of the n bytes at p, or -1. */
static int32_t spm_find(const struct spm *s, const char *p, size_t n) {
    int32_t lo = 0, hi = s->v->n_tokens - 1;
    while (lo <= hi) {
        int32_t mid = (lo + hi) / 2;
        const char *t = s->v->tokens[s->sorted[mid]];
        size_t tn = strlen(t);
        int c = memcmp(t, p, tn < n ? tn : n);
        if (c == 0) c = tn < n ? -1 : tn > n ? 1 : 0;
        if (c == 0) return s->sorted[mid];
        if (c < 0) lo = mid + 1; else hi = mid - 1;
    }
    return -1;
}

/* Encodes escaped text (spaces already "▁"): characters split by the lead
 * byte's length, then repeatedly the adjacent pair whose concatenation is
 * the token with the highest score is merged (leftmost on ties); symbols
 * not in the vocabulary become byte tokens. Returns the token count. */
static int spm_encode(const struct spm *s, const char *text, size_t n, int32_t *out, int max_out) {
    static const uint8_t lens[16] = { 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4 };
    size_t *off = malloc((n + 1) * sizeof *off), *len = malloc((n + 1) * sizeof *len);
    int n_sym = 0;
    for (size_t i = 0; i < n;) {
        size_t l = lens[(uint8_t)text[i] >> 4];
        if (l > n - i) l = n - i;
        off[n_sym] = i;
        len[n_sym++] = l;
        i += l;
    }
    for (;;) {
        int best = -1;
        float best_score = 0;
        for (int i = 0; i + 1 < n_sym; i++) {
            int32_t id = spm_find(s, text + off[i], len[i] + len[i + 1]);
            if (id >= 0 && (best < 0 || s->v->scores[id] > best_score)) {
                best = i;
                best_score = s->v->scores[id];
            }
        }
        if (best < 0) break;
        len[best] += len[best + 1];
        memmove(off + best + 1, off + best + 2, (size_t)(n_sym - best - 2) * sizeof *off);
        memmove(len + best + 1, len + best + 2, (size_t)(n_sym - best - 2) * sizeof *len);
        n_sym--;
    }
    int n_out = 0;
    for (int i = 0; i < n_sym; i++) {
        int32_t id = spm_find(s, text + off[i], len[i]);
        if (id >= 0) {
            if (n_out < max_out) out[n_out] = id;
            n_out++;
            continue;
        }
        for (size_t k = 0; k < len[i]; k++) {
            if (n_out < max_out) out[n_out] = TOKENIZER_TRAIN_N_SPECIAL + (uint8_t)text[off[i] + k];
            n_out++;
        }
    }
    free(off);
    free(len);
    return n_out;
}

/* Concatenates the tokens' text (byte tokens as their byte) into out (cap
 * bytes); returns the length, or cap + 1 when it would not fit. */
static size_t spm_decode(const struct tokenizer_vocab *v, const int32_t *ids, int n, char *out, size_t cap) {
    size_t k = 0;
    for (int i = 0; i < n; i++) {
        bool byte = v->types[ids[i]] == TOKENIZER_TOKEN_BYTE;
        size_t l = byte ? 1 : strlen(v->tokens[ids[i]]);
        if (l > cap - k) return cap + 1;
        if (byte) out[k] = (char)(ids[i] - TOKENIZER_TRAIN_N_SPECIAL);
        else memcpy(out + k, v->tokens[ids[i]], l);
        k += l;
    }
    return k;
}

/* "▁" + text with every space as "▁", as b1892 escapes a prompt. */
static size_t escape(const char *text, size_t n, char *out) {
    size_t k = 0;
    memcpy(out, "\xe2\x96\x81", 3);
    k = 3;
    for (size_t i = 0; i < n; i++) {
        if (text[i] == ' ') { memcpy(out + k, "\xe2\x96\x81", 3); k += 3; }
        else out[k++] = text[i];
    }
    return k;
}

/* Encodes and decodes; true when the bytes come back unchanged. */
static bool round_trips(const struct spm *s, const char *text, size_t n, int *n_tokens) {
    char *esc = malloc(3 * n + 3), *back = malloc(3 * n + 3);
    size_t en = escape(text, n, esc);
    int32_t *ids = malloc((en + 1) * sizeof *ids);
    int nt = spm_encode(s, esc, en, ids, (int)en + 1);
    size_t bn = nt <= (int)en + 1 ? spm_decode(s->v, ids, nt, back, 3 * n + 3) : 0;
    bool ok = bn == en && memcmp(back, esc, en) == 0;
    if (n_tokens) *n_tokens = nt;
    free(esc);
    free(back);
    free(ids);
    return ok;
}

/* ---- corpora ------------------------------------------------------------------ */

/* Word frequencies low 5, lower 2, newest 6, widest 3, one word per line. */
static char *toy_corpus(void) {
    static const struct { const char *w; int n; } words[] = { { "low", 5 }, { "lower", 2 }, { "newest", 6 }, { "widest", 3 } };
    char *s = malloc(256);
    size_t k = 0;
    for (size_t i = 0; i < sizeof words / sizeof words[0]; i++) {
        for (int j = 0; j < words[i].n; j++) k += (size_t)sprintf(s + k, "%s\n", words[i].w);
    }
    return s;
}

/* Prose with the cases a corpus brings: punctuation runs, digits, tabs,
 * double and leading spaces, CRLF, empty lines, non-ASCII letters and
 * symbols, a literal "▁", rare characters. */
static const char *const g_prose =
    "The river runs past the mill and the mill turns the stone.\n"
    "When the rains come, the river rises; when the sun returns, it falls again.\n"
    "The miller counts the sacks: 12 in spring, 40 in summer, 7 in the long winter.\r\n"
    "\n"
    "Is the water high? Is the water low?! Nobody knows... until the morning.\n"
    "  Two leading spaces, and  a double space inside.\n"
    "A tab\tseparates\tthese\twords.\n"
    "The naïve visitor ordered a café crème — « très bien », said the owner.\n"
    "In the north they write 日本語 and テキスト, and sometimes an emoji 😀.\n"
    "Some text carries a literal ▁ mark in the middle.\n"
    "The mill, the river, the stone: the miller remembers them all, and the river remembers the miller.\n"
    "Rivers and millers and stones and sacks, counted and recounted, turning and returning.\n"
    "The owner of the mill turned the wheel, and the wheel turned the stone, and the stone turned the grain.\n"
    "A rare Q, a rare Z and a rare X appear once each.\n";

static struct tokenizer_vocab *train(const char *text, int32_t vocab_size, double coverage) {
    struct tokenizer_train_params p;
    tokenizer_train_params_default(&p);
    p.vocab_size = vocab_size;
    p.character_coverage = coverage;
    return tokenizer_train(text, strlen(text), &p);
}

/* ---- tests --------------------------------------------------------------------- */

static void test_defaults(void) {
    struct tokenizer_train_params p;
    tokenizer_train_params_default(&p);
    CHECK_EQ_INT(p.vocab_size, 4096);
    CHECK_NEAR(p.character_coverage, 0.9995, 1e-12);
}

static void check_layout(const struct tokenizer_vocab *v) {
    CHECK_STR_EQ(v->tokens[0], "<unk>");
    CHECK_STR_EQ(v->tokens[1], "<s>");
    CHECK_STR_EQ(v->tokens[2], "</s>");
    CHECK_EQ_INT(v->types[0], TOKENIZER_TOKEN_UNKNOWN);
    CHECK_EQ_INT(v->types[1], TOKENIZER_TOKEN_CONTROL);
    CHECK_EQ_INT(v->types[2], TOKENIZER_TOKEN_CONTROL);
    int bad_bytes = 0;
    for (int b = 0; b < 256; b++) {
        char name[8];
        snprintf(name, sizeof name, "<0x%02X>", b);
        int id = TOKENIZER_TRAIN_N_SPECIAL + b;
        if (strcmp(v->tokens[id], name) != 0 || v->types[id] != TOKENIZER_TOKEN_BYTE || v->scores[id] != 0.0f) bad_bytes++;
    }
    CHECK_EQ_INT(bad_bytes, 0);
    CHECK_EQ_INT(v->n_tokens, TOKENIZER_TRAIN_FIRST_PIECE + v->n_merges + v->n_chars);
    /* Pieces: score -(rank), NORMAL; merges have several characters, then single characters. */
    int bad_scores = 0, bad_types = 0, bad_shapes = 0;
    for (int32_t id = TOKENIZER_TRAIN_FIRST_PIECE; id < v->n_tokens; id++) {
        if (v->scores[id] != (float)(TOKENIZER_TRAIN_FIRST_PIECE - id)) bad_scores++;
        if (v->types[id] != TOKENIZER_TOKEN_NORMAL) bad_types++;
        size_t n_chars = 0;
        for (const char *c = v->tokens[id]; *c; c++) n_chars += ((uint8_t)*c & 0xC0) != 0x80;
        bool is_merge = id < TOKENIZER_TRAIN_FIRST_PIECE + v->n_merges;
        if (is_merge ? n_chars < 2 : n_chars != 1) bad_shapes++;
    }
    CHECK_EQ_INT(bad_scores, 0);
    CHECK_EQ_INT(bad_types, 0);
    CHECK_EQ_INT(bad_shapes, 0);
}

static void test_toy_merge_order(void) {
    char *text = toy_corpus();
    /* Counted by hand: es/st 9 (tie: "es" < "st"), then est 9, lo/ow/▁l 7
     * ("lo" lowest bytes), low 7, ▁low 7, then four pairs of 6 (ew, ne, ▁n
     * shortest; "ew" lowest), ▁n, ▁new, ▁newest, then the 3s of widest
     * (id, ▁w, ▁wid, ▁widest) and the 2s of lower (er, ▁lower). */
    static const char *const merges[] = {
        "es", "est", "lo", "low", "\xe2\x96\x81low", "ew", "\xe2\x96\x81n", "\xe2\x96\x81new",
        "\xe2\x96\x81newest", "id", "\xe2\x96\x81w", "\xe2\x96\x81wid", "\xe2\x96\x81widest", "er",
        "\xe2\x96\x81lower",
    };
    static const char *const chars[] = { "e", "w", "\xe2\x96\x81", "s", "t", "l", "o", "n", "d", "i", "r" };
    struct tokenizer_vocab *v = train(text, 285, 1.0);
    CHECK(v != NULL);
    if (v) {
        CHECK_EQ_INT(v->n_merges, 15);
        CHECK_EQ_INT(v->n_chars, 11);
        CHECK_EQ_INT(v->n_tokens, 285);
        for (int i = 0; i < 15 && i < v->n_merges; i++) CHECK_STR_EQ(v->tokens[TOKENIZER_TRAIN_FIRST_PIECE + i], merges[i]);
        for (int i = 0; i < 11 && i < v->n_chars; i++) {
            CHECK_STR_EQ(v->tokens[TOKENIZER_TRAIN_FIRST_PIECE + v->n_merges + i], chars[i]);
        }
        CHECK_EQ_INT(v->n_sentences, 16);
        CHECK_EQ_INT(v->n_words, 16);
        CHECK_EQ_INT(v->n_unique_words, 4);
        CHECK_EQ_INT(v->n_char_occurrences, 95);
        check_layout(v);
        /* The encoder replays the merges: each training word is one token. */
        struct spm s;
        spm_init(&s, v);
        int32_t ids[16];
        int n = spm_encode(&s, "\xe2\x96\x81widest", 9, ids, 16);
        CHECK_EQ_INT(n, 1);
        CHECK_STR_EQ(v->tokens[ids[0]], "\xe2\x96\x81widest");
        /* "▁lowest" was never seen: ▁low + est. */
        n = spm_encode(&s, "\xe2\x96\x81lowest", 9, ids, 16);
        CHECK_EQ_INT(n, 2);
        if (n == 2) {
            CHECK_STR_EQ(v->tokens[ids[0]], "\xe2\x96\x81low");
            CHECK_STR_EQ(v->tokens[ids[1]], "est");
        }
        free(s.sorted);
    }
    tokenizer_vocab_free(v);

    /* A smaller vocabulary is a prefix of the same merge order. */
    v = train(text, 279, 1.0);
    CHECK(v != NULL);
    if (v) {
        CHECK_EQ_INT(v->n_merges, 9);
        CHECK_STR_EQ(v->tokens[TOKENIZER_TRAIN_FIRST_PIECE + 8], "\xe2\x96\x81newest");
        CHECK_STR_EQ(v->tokens[TOKENIZER_TRAIN_FIRST_PIECE + 9], "e");
    }
    tokenizer_vocab_free(v);

    /* Coverage 0.9 of 95 occurrences: e w ▁ s t l o n cover 87 (91.6%);
     * d, i, r go to bytes, so "id", "er" and everything after are gone. */
    static const char *const merges_cov[] = {
        "es", "est", "lo", "low", "\xe2\x96\x81low", "ew", "\xe2\x96\x81n", "\xe2\x96\x81new",
        "\xe2\x96\x81newest", "\xe2\x96\x81w", "\xe2\x96\x81lowe",
    };
    v = train(text, 300, 0.9); /* runs out of pairs: warns and stops at 278 */
    CHECK(v != NULL);
    if (v) {
        CHECK_EQ_INT(v->n_chars, 8);
        CHECK_EQ_INT(v->n_merges, 11);
        CHECK_EQ_INT(v->n_tokens, 278);
        for (int i = 0; i < 11 && i < v->n_merges; i++) CHECK_STR_EQ(v->tokens[TOKENIZER_TRAIN_FIRST_PIECE + i], merges_cov[i]);
        for (int32_t id = TOKENIZER_TRAIN_FIRST_PIECE; id < v->n_tokens; id++) {
            CHECK(strchr(v->tokens[id], 'd') == NULL && strchr(v->tokens[id], 'i') == NULL && strchr(v->tokens[id], 'r') == NULL);
        }
        check_layout(v);
        struct spm s;
        spm_init(&s, v);
        int nt = 0;
        CHECK(round_trips(&s, "widest lower", 12, &nt));
        /* ▁w i d est ▁lowe r: i, d and r as byte tokens. */
        CHECK_EQ_INT(nt, 6);
        free(s.sorted);
    }
    tokenizer_vocab_free(v);
    free(text);
}

static bool vocab_equal(const struct tokenizer_vocab *a, const struct tokenizer_vocab *b) {
    if (a->n_tokens != b->n_tokens || a->n_merges != b->n_merges || a->n_chars != b->n_chars) return false;
    for (int32_t i = 0; i < a->n_tokens; i++) {
        if (strcmp(a->tokens[i], b->tokens[i]) != 0 || a->scores[i] != b->scores[i] || a->types[i] != b->types[i]) return false;
    }
    return true;
}

static void test_prose(void) {
    struct tokenizer_vocab *v = train(g_prose, 500, 0.995);
    struct tokenizer_vocab *again = train(g_prose, 500, 0.995);
    CHECK(v != NULL && again != NULL);
    if (!v || !again) {
        tokenizer_vocab_free(v);
        tokenizer_vocab_free(again);
        return;
    }
    CHECK(vocab_equal(v, again));
    check_layout(v);
    CHECK_EQ_INT(v->n_sentences, 13); /* the empty line is no sentence */

    /* Coverage 0.995 drops the rarest characters: of those seen once, the
     * ones with the highest bytes, so the emoji goes first. ▁ is kept. */
    bool has_emoji = false, has_space = false, has_digit_merge = false, inner_space = false, dup = false;
    for (int32_t id = TOKENIZER_TRAIN_FIRST_PIECE; id < v->n_tokens; id++) {
        const char *t = v->tokens[id];
        if (strstr(t, "\xf0\x9f\x98\x80")) has_emoji = true;
        if (strcmp(t, "\xe2\x96\x81") == 0) has_space = true;
        if (strlen(t) > 1 && strpbrk(t, "0123456789")) has_digit_merge = true;
        if (strstr(t + 1, "\xe2\x96\x81")) inner_space = true;
        for (int32_t j = TOKENIZER_TRAIN_FIRST_PIECE; j < id; j++) {
            if (strcmp(v->tokens[j], t) == 0) dup = true;
        }
    }
    CHECK(!has_emoji);
    CHECK(has_space);
    CHECK(!has_digit_merge);
    CHECK(!inner_space);
    CHECK(!dup);

    /* Every merged piece splits into two tokens ranked before it, so b1892
     * never mistakes it for a special token and can build it by merging. */
    struct spm s;
    spm_init(&s, v);
    int unsplittable = 0;
    for (int32_t id = TOKENIZER_TRAIN_FIRST_PIECE; id < TOKENIZER_TRAIN_FIRST_PIECE + v->n_merges; id++) {
        const char *t = v->tokens[id];
        size_t n = strlen(t);
        bool found = false;
        for (size_t cut = 1; cut < n && !found; cut++) {
            if (((uint8_t)t[cut] & 0xC0) == 0x80) continue;
            int32_t l = spm_find(&s, t, cut), r = spm_find(&s, t + cut, n - cut);
            found = l >= TOKENIZER_TRAIN_FIRST_PIECE && r >= TOKENIZER_TRAIN_FIRST_PIECE &&
                    (l < id || l >= TOKENIZER_TRAIN_FIRST_PIECE + v->n_merges) &&
                    (r < id || r >= TOKENIZER_TRAIN_FIRST_PIECE + v->n_merges);
        }
        if (!found) unsplittable++;
    }
    CHECK_EQ_INT(unsplittable, 0);

    /* Every line round-trips, in fewer tokens than characters overall. */
    int failures = 0, tokens = 0;
    size_t bytes = 0;
    for (const char *p = g_prose; *p;) {
        const char *nl = strchr(p, '\n');
        size_t n = (size_t)(nl - p);
        int nt = 0;
        if (!round_trips(&s, p, n, &nt)) failures++;
        tokens += nt;
        bytes += n;
        p = nl + 1;
    }
    CHECK_EQ_INT(failures, 0);
    CHECK_MSG(tokens * 2 < (int)bytes, "%d tokens for %zu bytes", tokens, bytes);

    /* Arbitrary bytes, invalid UTF-8 and NUL included, round-trip through byte fallback. */
    uint64_t rng = 0x1234567;
    failures = 0;
    for (int iter = 0; iter < 300; iter++) {
        char buf[64];
        size_t n = 1 + test_rand_u64(&rng) % sizeof buf;
        for (size_t i = 0; i < n; i++) {
            uint64_t r = test_rand_u64(&rng);
            /* Mostly text the vocabulary knows, sometimes any byte. */
            buf[i] = r % 4 == 0 ? (char)(r >> 8) : g_prose[(r >> 8) % strlen(g_prose)];
        }
        if (!round_trips(&s, buf, n, NULL)) failures++;
    }
    CHECK_EQ_INT(failures, 0);
    free(s.sorted);
    tokenizer_vocab_free(v);
    tokenizer_vocab_free(again);
}

static void test_errors(void) {
    struct tokenizer_vocab *v = train(g_prose, TOKENIZER_TRAIN_FIRST_PIECE, 1.0);
    CHECK(v == NULL);
    CHECK(strstr(error_last(), "vocabulary size") != NULL);
    v = train(g_prose, 600, 0.0);
    CHECK(v == NULL);
    CHECK(strstr(error_last(), "coverage") != NULL);
    v = train(g_prose, 600, 1.5);
    CHECK(v == NULL);
    /* Room for fewer characters than the corpus keeps. */
    v = train(g_prose, TOKENIZER_TRAIN_FIRST_PIECE + 10, 1.0);
    CHECK(v == NULL);
    CHECK(strstr(error_last(), "characters are kept") != NULL);
    /* No text at all: just the specials and the bytes. */
    v = train("", 300, 1.0);
    CHECK(v != NULL);
    if (v) {
        CHECK_EQ_INT(v->n_tokens, TOKENIZER_TRAIN_FIRST_PIECE);
        check_layout(v);
    }
    tokenizer_vocab_free(v);
}

/* ---- the GGUF file and the command line ---------------------------------------- */

static void check_gguf(const char *path, const struct tokenizer_vocab *v) {
    struct gguf_reader *r = gguf_open_file(path, false);
    CHECK_MSG(r != NULL, "%s", error_last());
    if (!r) return;
    const char *str = NULL;
    CHECK(gguf_get_str(r, "general.architecture", &str) && strcmp(str, "llama") == 0);
    CHECK(gguf_get_str(r, "general.name", &str) && strcmp(str, "test vocab") == 0);
    CHECK(gguf_get_str(r, "tokenizer.ggml.model", &str) && strcmp(str, "llama") == 0);
    uint32_t u = 99;
    CHECK(gguf_get_u32(r, "tokenizer.ggml.bos_token_id", &u) && u == 1);
    CHECK(gguf_get_u32(r, "tokenizer.ggml.eos_token_id", &u) && u == 2);
    CHECK(gguf_get_u32(r, "tokenizer.ggml.unknown_token_id", &u) && u == 0);
    bool b = false;
    CHECK(gguf_get_bool(r, "tokenizer.ggml.add_bos_token", &b) && b);
    CHECK(gguf_get_bool(r, "tokenizer.ggml.add_eos_token", &b) && !b);
    CHECK_EQ_INT(gguf_n_tensors(r), 0);
    int64_t kt = gguf_find_key(r, "tokenizer.ggml.tokens");
    int64_t ks = gguf_find_key(r, "tokenizer.ggml.scores");
    int64_t ky = gguf_find_key(r, "tokenizer.ggml.token_type");
    CHECK(kt >= 0 && ks >= 0 && ky >= 0);
    if (kt >= 0 && ks >= 0 && ky >= 0) {
        CHECK_EQ_INT(gguf_arr_type(r, kt), GGUF_TYPE_STRING);
        CHECK_EQ_INT(gguf_arr_type(r, ks), GGUF_TYPE_FLOAT32);
        CHECK_EQ_INT(gguf_arr_type(r, ky), GGUF_TYPE_INT32);
        CHECK_EQ_INT(gguf_arr_n(r, kt), v->n_tokens);
        CHECK_EQ_INT(gguf_arr_n(r, ks), v->n_tokens);
        CHECK_EQ_INT(gguf_arr_n(r, ky), v->n_tokens);
        int mismatches = 0;
        for (int32_t i = 0; i < v->n_tokens && (uint64_t)i < gguf_arr_n(r, kt); i++) {
            float score;
            int32_t type;
            memcpy(&score, (const char *)gguf_arr_data(r, ks) + 4 * (size_t)i, 4);
            memcpy(&type, (const char *)gguf_arr_data(r, ky) + 4 * (size_t)i, 4);
            if (strcmp(gguf_arr_str(r, kt, (uint64_t)i), v->tokens[i]) != 0 || score != v->scores[i] || type != v->types[i]) {
                mismatches++;
            }
        }
        CHECK_EQ_INT(mismatches, 0);
    }
    gguf_close(r);
}

/* Tokenizes `text` with the engine's tokenizer (b1892's algorithm) loaded
 * from the GGUF: BOS first (b1892 gives only BOS for empty text), then the
 * same ids as the reference encoder above. */
static bool real_tokenizer_agrees(const struct vocab *rv, const struct spm *s, const char *text, size_t n) {
    int32_t *real = malloc((3 * n + 4) * sizeof *real), *ref = malloc((3 * n + 4) * sizeof *ref);
    char *esc = malloc(3 * n + 3);
    int32_t n_real = vocab_tokenize(rv, text, n, true, false, real, 3 * (int32_t)n + 4);
    int n_ref = n == 0 ? 0 : spm_encode(s, esc, escape(text, n, esc), ref, 3 * (int)n + 4);
    bool ok = n_real == n_ref + 1 && real[0] == 1 && memcmp(real + 1, ref, (size_t)n_ref * sizeof *ref) == 0;
    free(real);
    free(ref);
    free(esc);
    return ok;
}

/* b1892's pieces of the tokens of a valid UTF-8 line give back " " + line,
 * with a literal "▁" read as a space (b1892 cannot tell them apart). */
static bool real_tokenizer_round_trips(const struct vocab *rv, const char *text, size_t n) {
    int32_t *ids = malloc((3 * n + 4) * sizeof *ids);
    char *back = malloc(n + 2), *want = malloc(n + 2);
    size_t k = 0, w = 0;
    want[w++] = ' ';
    for (size_t i = 0; i < n; i++) {
        bool mark = n - i >= 3 && memcmp(text + i, "\xe2\x96\x81", 3) == 0;
        want[w++] = mark ? ' ' : text[i];
        if (mark) i += 2;
    }
    int32_t n_ids = vocab_tokenize(rv, text, n, false, false, ids, 3 * (int32_t)n + 4);
    bool ok = n_ids > 0;
    for (int32_t i = 0; ok && i < n_ids; i++) {
        size_t len;
        const char *piece = vocab_token_piece(rv, ids[i], &len);
        ok = len <= n + 1 - k;
        if (ok) memcpy(back + k, piece, len);
        k += len;
    }
    ok = ok && k == w && memcmp(back, want, w) == 0;
    free(ids);
    free(back);
    free(want);
    return ok;
}

static void test_real_tokenizer(const char *path, const struct tokenizer_vocab *v) {
    struct gguf_reader *r = gguf_open_file(path, false);
    struct vocab *rv = r ? vocab_load_gguf(r) : NULL;
    CHECK_MSG(rv != NULL, "%s", error_last());
    if (rv) {
        CHECK_EQ_INT(vocab_n_tokens(rv), v->n_tokens);
        CHECK_EQ_INT(vocab_bos(rv), 1);
        CHECK_EQ_INT(vocab_eos(rv), 2);
        CHECK_EQ_INT(vocab_unk(rv), 0);
        CHECK_EQ_INT(vocab_add_bos(rv), 1);
        CHECK_EQ_INT(vocab_nl(rv), TOKENIZER_TRAIN_N_SPECIAL + '\n');
        /* b1892 treats a multi-character token that is not the concatenation
         * of two tokens as special: that must be <unk> <s> </s> and the byte
         * tokens only, never a learned piece. */
        int32_t n_special = 0;
        const int32_t *special = vocab_special_tokens(rv, &n_special);
        CHECK_EQ_INT(n_special, TOKENIZER_TRAIN_FIRST_PIECE);
        int learned = 0;
        for (int32_t i = 0; i < n_special; i++) learned += special[i] >= TOKENIZER_TRAIN_FIRST_PIECE;
        CHECK_EQ_INT(learned, 0);

        struct spm s;
        spm_init(&s, v);
        int disagreements = 0, lost = 0;
        for (const char *p = g_prose; *p;) {
            const char *nl = strchr(p, '\n');
            size_t n = (size_t)(nl - p);
            if (n > 0 && p[n - 1] == '\r') n--;
            if (!real_tokenizer_agrees(rv, &s, p, n)) disagreements++;
            if (n > 0 && !real_tokenizer_round_trips(rv, p, n)) lost++;
            p = nl + 1;
        }
        CHECK_EQ_INT(lost, 0);
        uint64_t rng = 0xfeed;
        for (int iter = 0; iter < 200; iter++) {
            char buf[48];
            size_t n = 1 + test_rand_u64(&rng) % sizeof buf;
            for (size_t i = 0; i < n; i++) {
                uint64_t x = test_rand_u64(&rng);
                buf[i] = x % 4 == 0 ? (char)(x >> 8) : g_prose[(x >> 8) % strlen(g_prose)];
            }
            if (!real_tokenizer_agrees(rv, &s, buf, n)) disagreements++;
        }
        CHECK_EQ_INT(disagreements, 0);
        free(s.sorted);
    }
    vocab_free(rv);
    gguf_close(r);
}

static void test_gguf_and_cli(void) {
    char lib_path[512], cli_path[512], corpus_path[512];
    snprintf(lib_path, sizeof lib_path, "%s", test_tmp_path("lib.gguf"));
    snprintf(cli_path, sizeof cli_path, "%s", test_tmp_path("cli.gguf"));
    snprintf(corpus_path, sizeof corpus_path, "%s", test_tmp_path("corpus.txt"));
    struct tokenizer_vocab *v = train(g_prose, 500, 0.995);
    CHECK(v != NULL);
    if (!v) return;
    CHECK(tokenizer_vocab_write_gguf(v, "test vocab", lib_path));
    check_gguf(lib_path, v);
    test_real_tokenizer(lib_path, v);

    /* The command line writes the same file from the same text. */
    CHECK(test_write_file(corpus_path, g_prose, strlen(g_prose)));
    struct cli_result r = cli_run((const char *[]){ "train-tokenizer", "--vocab-size", "500", "--character-coverage",
                                                    "0.995", "--name", "test vocab", "-o", cli_path, corpus_path, NULL },
                                  NULL, 300);
    CHECK_EQ_INT(r.status, 0);
    CHECK_MSG(strstr(r.out, "vocabulary: 500 tokens = 3 special + 256 byte") != NULL, "%s", r.out);
    cli_result_free(&r);
    CHECK(test_files_equal(lib_path, cli_path));

    r = cli_run((const char *[]){ "train-tokenizer", corpus_path, NULL }, NULL, 300);
    CHECK_EQ_INT(r.status, 1);
    CHECK_STR_EQ(r.err, "llamac train-tokenizer: expected -o OUT.gguf and at least one corpus file (see llamac train-tokenizer --help)\n");
    cli_result_free(&r);
    r = cli_run((const char *[]){ "train-tokenizer", "--vocab-size", "100", "-o", cli_path, corpus_path, NULL }, NULL,
                300);
    CHECK_EQ_INT(r.status, 1);
    CHECK(strstr(r.err, "--vocab-size needs a whole number from 260") != NULL);
    cli_result_free(&r);
    r = cli_run((const char *[]){ "train-tokenizer", "-o", cli_path, "/nonexistent/corpus.txt", NULL }, NULL, 300);
    CHECK_EQ_INT(r.status, 1);
    CHECK_MSG(strncmp(r.err, "llamac train-tokenizer: ", 24) == 0 && strchr(r.err, '\n') == r.err + strlen(r.err) - 1,
              "%s", r.err);
    cli_result_free(&r);

    tokenizer_vocab_free(v);
}

int main(void) {
    test_defaults();
    test_toy_merge_order();
    test_prose();
    test_errors();
    test_tmp_dir_create("test_train_tokenizer");
    test_gguf_and_cli();
    test_tmp_dir_remove();
    return test_finish("test_train_tokenizer");
}
