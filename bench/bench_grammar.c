/*
 * Grammar-constrained sampling cost, without a model: per generated token,
 * llama_sample_grammar over the whole vocabulary plus llama_grammar_accept,
 * for each matcher strategy, on a real vocabulary read from a GGUF file.
 *
 *   bench_grammar [vocab.gguf [steps [grammar.gbnf]]]
 *
 * Defaults: ../shared/models/ggml-vocab-llama.gguf (32000 tokens), 300 steps,
 * a JSON grammar (b1892's grammars/json.gbnf). Logits are pseudo-random; the
 * allowed token with the largest logit is taken, so generation wanders
 * through strings, numbers and nesting; when the grammar completes it starts
 * over. Prints microseconds per token for each strategy.
 */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "core/timer.h"
#include "gguf/gguf.h"
#include "sample/gbnf.h"
#include "sample/grammar.h"

#include "json_gbnf.h"

/* llama_token_to_piece for an SPM vocabulary: "▁" -> " ", <0xNN> -> the
 * byte, control -> "", unknown -> "▅". */
static char *spm_piece(const char *text, int32_t type, size_t *len) {
    size_t n = strlen(text);
    char *out = malloc(n + 4);
    size_t o = 0;
    if (type == 3 /* control */ || type == 5 /* unused */) {
        *len = 0;
        return out;
    }
    if (type == 2 /* unknown */) {
        memcpy(out, "\xe2\x96\x85", 3);
        *len = 3;
        return out;
    }
    if (type == 6 /* byte */ && n == 6 && strncmp(text, "<0x", 3) == 0) {
        out[0] = (char)strtol(text + 3, NULL, 16);
        *len = 1;
        return out;
    }
    for (size_t i = 0; i < n;) {
        if (i + 3 <= n && memcmp(text + i, "\xe2\x96\x81", 3) == 0) {
            out[o++] = ' ';
            i += 3;
        } else {
            out[o++] = text[i++];
        }
    }
    *len = o;
    return out;
}

static struct grammar_vocab *load_vocab(const char *path, int32_t *n_out) {
    struct gguf_reader *r = gguf_open_file(path, true);
    if (!r) {
        return NULL;
    }
    int64_t k_tok = gguf_find_key(r, "tokenizer.ggml.tokens");
    int64_t k_type = gguf_find_key(r, "tokenizer.ggml.token_type");
    uint32_t eos = 2;
    gguf_get_u32(r, "tokenizer.ggml.eos_token_id", &eos);
    if (k_tok < 0) {
        fprintf(stderr, "%s: no tokenizer.ggml.tokens\n", path);
        gguf_close(r);
        return NULL;
    }
    const int32_t n = (int32_t)gguf_arr_n(r, k_tok);
    const int32_t *types = k_type >= 0 ? gguf_arr_data(r, k_type) : NULL;
    char **pieces = calloc((size_t)n, sizeof *pieces);
    size_t *lengths = calloc((size_t)n, sizeof *lengths);
    for (int32_t i = 0; i < n; i++) {
        pieces[i] = spm_piece(gguf_arr_str(r, k_tok, (uint64_t)i), types ? types[i] : 1, &lengths[i]);
    }
    struct grammar_vocab *v = grammar_vocab_create((const char *const *)pieces, lengths, n, (llama_token)eos);
    for (int32_t i = 0; i < n; i++) {
        free(pieces[i]);
    }
    free(pieces);
    free(lengths);
    gguf_close(r);
    *n_out = n;
    return v;
}

static uint64_t rng_next(uint64_t *s) {
    uint64_t x = *s;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *s = x;
    return x * 0x2545F4914F6CDD1DULL;
}

struct run_result {
    double us_per_token;
    double mean_allowed;
    int restarts;
    uint64_t checksum;
    size_t max_nodes;
};

static struct run_result run(const struct llama_grammar *initial, const struct grammar_vocab *v, int32_t n_vocab,
                             int steps, enum grammar_strategy strategy) {
    struct run_result res = {0, 0, 0, 1469598103934665603ull, 0};
    llama_token_data *cand = malloc((size_t)n_vocab * sizeof *cand);
    struct llama_grammar *g = grammar_copy(initial);
    uint64_t seed = 42;
    double allowed_sum = 0;
    int64_t t_total = 0;
    for (int step = 0; step < steps; step++) {
        for (int32_t i = 0; i < n_vocab; i++) {
            cand[i].id = i;
            cand[i].logit = (float)(rng_next(&seed) >> 40) / (float)(1 << 24);
            cand[i].p = 0.0f;
        }
        llama_token_data_array arr = {cand, (size_t)n_vocab, false};
        int64_t t0 = time_us();
        grammar_sample_with(g, v, &arr, strategy);
        size_t best = 0;
        int allowed = 0;
        for (int32_t i = 0; i < n_vocab; i++) {
            if (cand[i].logit != -INFINITY) {
                allowed++;
                if (cand[best].logit < cand[i].logit) {
                    best = (size_t)i;
                }
            }
        }
        const llama_token tok = cand[best].id;
        const bool ok = allowed > 0 && grammar_accept(g, v, tok);
        t_total += time_us() - t0;
        allowed_sum += allowed;
        if (grammar_node_count(g) > res.max_nodes) {
            res.max_nodes = grammar_node_count(g);
        }
        res.checksum = (res.checksum ^ (uint64_t)tok) * 1099511628211ull;
        if (!ok || (grammar_allows_eos(g) && grammar_stack_count(g) == 1)) {
            grammar_free(g);
            g = grammar_copy(initial);
            res.restarts++;
        }
    }
    grammar_free(g);
    free(cand);
    res.us_per_token = (double)t_total / steps;
    res.mean_allowed = allowed_sum / steps;
    return res;
}

int main(int argc, char **argv) {
    const char *path = argc > 1 ? argv[1] : "../shared/models/ggml-vocab-llama.gguf";
    const int steps = argc > 2 ? atoi(argv[2]) : 300;
    char *text = NULL;
    if (argc > 3) {
        FILE *f = fopen(argv[3], "rb");
        if (!f) {
            fprintf(stderr, "cannot open %s\n", argv[3]);
            return 1;
        }
        fseek(f, 0, SEEK_END);
        long n = ftell(f);
        fseek(f, 0, SEEK_SET);
        text = calloc((size_t)n + 1, 1);
        if (fread(text, 1, (size_t)n, f) != (size_t)n) {
            fclose(f);
            return 1;
        }
        fclose(f);
    }
    int32_t n_vocab = 0;
    struct grammar_vocab *v = load_vocab(path, &n_vocab);
    if (!v) {
        fprintf(stderr, "cannot load a vocabulary from %s: %s\n", path, error_last());
        return 1;
    }
    struct gbnf_grammar parsed;
    if (!gbnf_parse(text ? text : JSON_GBNF, &parsed)) {
        fprintf(stderr, "grammar: %s\n", error_last());
        return 1;
    }
    const int32_t root = gbnf_symbol_id(&parsed, "root");
    struct llama_grammar *g =
        root < 0 ? NULL : grammar_create((const llama_grammar_element **)parsed.rules, parsed.n_rules, (size_t)root);
    gbnf_grammar_free(&parsed);
    if (!g) {
        fprintf(stderr, "grammar: %s\n", error_last());
        return 1;
    }
    printf("vocabulary %s: %d tokens; %d steps\n", path, n_vocab, steps);
    static const struct {
        enum grammar_strategy s;
        const char *name;
    } strategies[] = {
        {GRAMMAR_STRATEGY_AUTO, "auto (prefix tree + cache)"},
        {GRAMMAR_STRATEGY_TRIE, "prefix tree, no cache"},
        {GRAMMAR_STRATEGY_PER_TOKEN, "per token (a walk per piece)"},
    };
    uint64_t checksum = 0;
    for (size_t i = 0; i < sizeof strategies / sizeof strategies[0]; i++) {
        struct run_result r = run(g, v, n_vocab, steps, strategies[i].s);
        printf("  %-28s %9.1f us/token   (mean allowed %.0f, restarts %d, stack nodes <= %zu, checksum %016" PRIx64
               ")\n",
               strategies[i].name, r.us_per_token, r.mean_allowed, r.restarts, r.max_nodes, r.checksum);
        if (i > 0 && r.checksum != checksum) {
            printf("  strategies disagree!\n");
            return 1;
        }
        checksum = r.checksum;
    }
    grammar_free(g);
    grammar_vocab_free(v);
    free(text);
    return 0;
}
