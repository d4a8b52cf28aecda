/* `llamac train-tokenizer`: learns a SentencePiece-style BPE vocabulary from
 * text files and writes it as a vocabulary-only GGUF (see
 * src/train/tokenizer_train.h for the algorithm). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "core/file_map.h"
#include "core/log.h"
#include "core/timer.h"
#include "train/tokenizer_train.h"

#define TT_CMD "train-tokenizer"

static void usage(FILE *f) {
    struct tokenizer_train_params d;
    tokenizer_train_params_default(&d);
    fprintf(f,
            "usage: llamac " TT_CMD " [options] -o OUT.gguf CORPUS.txt [MORE.txt ...]\n"
            "\n"
            "Learns a SentencePiece-style BPE vocabulary for the llama (SPM) tokenizer:\n"
            "every line of the corpus is a sentence, spaces become U+2581, pieces never\n"
            "cross words, <unk> <s> </s> are ids 0-2 and <0x00>..<0xFF> byte fallback\n"
            "ids 3-258. The output is a vocabulary-only GGUF with b1892's tokenizer keys.\n"
            "\n"
            "options:\n"
            "  -o, --output FILE           where to write the GGUF (required)\n"
            "  --vocab-size N              tokens in all, specials and bytes included (default %d)\n"
            "  --character-coverage F      share of character occurrences kept as pieces,\n"
            "                              the rest go to byte tokens (default %g; 1.0 suits\n"
            "                              small alphabets such as English)\n"
            "  --name NAME                 general.name (default \"llamac tokenizer\")\n"
            "  -h, --help                  this text\n",
            (int)d.vocab_size, d.character_coverage);
}

/* Appends a file's bytes to *buf, ending them with a newline so lines of
 * consecutive files stay apart. */
static bool append_file(const char *path, char **buf, size_t *n) {
    struct file_map fm;
    if (!file_map_open(&fm, path, true)) return false;
    char *grown = realloc(*buf, *n + fm.size + 1);
    if (!grown) {
        file_map_close(&fm);
        error_set("out of memory reading %s", path);
        return false;
    }
    *buf = grown;
    if (fm.size) memcpy(*buf + *n, fm.data, fm.size);
    *n += fm.size;
    if (fm.size && (*buf)[*n - 1] != '\n') (*buf)[(*n)++] = '\n';
    file_map_close(&fm);
    return true;
}

/* Errors reach the user once, as the command's one-line failure. */
static void tt_log_sink(enum ggml_log_level level, const char *text, void *user_data) {
    (void)user_data;
    if (level == GGML_LOG_LEVEL_WARN) fputs(text, stderr);
}

int cmd_train_tokenizer(int argc, char **argv) {
    struct tokenizer_train_params params;
    tokenizer_train_params_default(&params);
    const char *out = NULL, *name = "llamac tokenizer";
    const char **inputs = calloc((size_t)argc, sizeof *inputs);
    int n_inputs = 0;
    if (!inputs) return cli_fail(TT_CMD, "out of memory");
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        bool has_value = i + 1 < argc;
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            usage(stdout);
            free(inputs);
            return 0;
        } else if ((strcmp(a, "-o") == 0 || strcmp(a, "--output") == 0) && has_value) {
            out = argv[++i];
        } else if (strcmp(a, "--vocab-size") == 0 && has_value) {
            long long v;
            if (!cli_parse_int(argv[++i], TOKENIZER_TRAIN_FIRST_PIECE + 1, 1 << 24, &v)) {
                free(inputs);
                return cli_fail(TT_CMD, "--vocab-size needs a whole number from %d to %d", TOKENIZER_TRAIN_FIRST_PIECE + 1, 1 << 24);
            }
            params.vocab_size = (int32_t)v;
        } else if (strcmp(a, "--character-coverage") == 0 && has_value) {
            double v;
            if (!cli_parse_float(argv[++i], &v) || !(v > 0.0 && v <= 1.0)) {
                free(inputs);
                return cli_fail(TT_CMD, "--character-coverage needs a number in (0, 1]");
            }
            params.character_coverage = v;
        } else if (strcmp(a, "--name") == 0 && has_value) {
            name = argv[++i];
        } else if (a[0] == '-' && a[1] != '\0') {
            free(inputs);
            return cli_fail(TT_CMD, "unknown or incomplete option '%s' (see llamac train-tokenizer --help)", a);
        } else {
            inputs[n_inputs++] = a;
        }
    }
    if (!out || n_inputs == 0) {
        free(inputs);
        return cli_fail(TT_CMD, "expected -o OUT.gguf and at least one corpus file (see llamac train-tokenizer --help)");
    }

    log_set_callback(tt_log_sink, NULL);
    int64_t t0 = time_us();
    char *text = NULL;
    size_t size = 0;
    struct tokenizer_vocab *v = NULL;
    int rc = 0;
    for (int i = 0; i < n_inputs; i++) {
        if (!append_file(inputs[i], &text, &size)) {
            rc = cli_fail(TT_CMD, "%s", error_last());
            goto done;
        }
    }
    v = tokenizer_train(text, size, &params);
    if (!v) {
        rc = cli_fail(TT_CMD, "%s", error_last());
        goto done;
    }
    if (!tokenizer_vocab_write_gguf(v, name, out)) {
        rc = cli_fail(TT_CMD, "%s", error_last());
        goto done;
    }
    double covered = v->n_char_occurrences ? 100.0 * (double)v->n_char_occurrences_kept / (double)v->n_char_occurrences : 100.0;
    printf("corpus:     %zu bytes in %d file%s, %" PRId64 " sentences, %" PRId64 " words (%" PRId64 " distinct)\n",
           size, n_inputs, n_inputs == 1 ? "" : "s", v->n_sentences, v->n_words, v->n_unique_words);
    printf("characters: %" PRId64 " distinct, %d kept, covering %.4f%% of %" PRId64 " occurrences\n",
           v->n_chars_seen, (int)v->n_chars, covered, v->n_char_occurrences);
    printf("vocabulary: %d tokens = %d special + %d byte + %d merged + %d character\n", (int)v->n_tokens,
           TOKENIZER_TRAIN_N_SPECIAL, TOKENIZER_TRAIN_N_BYTES, (int)v->n_merges, (int)v->n_chars);
    printf("wrote %s in %.2f s\n", out, (double)(time_us() - t0) / 1e6);
done:
    log_set_callback(NULL, NULL);
    tokenizer_vocab_free(v);
    free(text);
    free(inputs);
    return rc;
}
