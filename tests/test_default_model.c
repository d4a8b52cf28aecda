/*
 * The repository's own default model (models/kjv-llama.gguf, trained by
 * scripts/train-default-model.sh; see models/kjv-llama.md): it loads, its
 * perplexity on held-out verses (tests/data/kjv-heldout.txt, 40 verses the
 * training never saw) stays below the bound recorded when it was trained, and
 * its greedy continuation is stable. Needs nothing from ../shared.
 */
#include "cli_test_util.h"
#include "test_util.h"

/* Recorded at training time: PPL 39.39 (+/- 4.97) with -c 128. A model that
 * learned nothing scores in the thousands (the vocabulary has 4096 tokens). */
#define HELDOUT_PPL_BOUND 42.0

static const char *k_greedy =
    " And God said unto him, I will not hear thee.\n"
    " And he said unto him, What is this that thou hast said, I will not hear thee.\n"
    " And he said unto him, What is this\n";

int main(void) {
    const char *model = LLAMAC_SOURCE_DIR "/models/kjv-llama.gguf";
    const char *text = LLAMAC_SOURCE_DIR "/tests/data/kjv-heldout.txt";

    const char *ppl_args[] = { "perplexity", "-m", model, "-f", text, "-c", "128", "-t", "2", NULL };
    struct cli_result r = cli_run(ppl_args, NULL, 120);
    const char *final = r.out ? strstr(r.out, "Final estimate: PPL = ") : NULL;
    CHECK_MSG(r.status == 0 && final, "perplexity failed: %s", r.err ? r.err : "");
    if (final) {
        double ppl = atof(final + strlen("Final estimate: PPL = "));
        printf("held-out perplexity %.4f (bound %.1f)\n", ppl, HELDOUT_PPL_BOUND);
        CHECK(ppl > 1.0 && ppl < HELDOUT_PPL_BOUND);
    }
    cli_result_free(&r);

    for (int threads = 1; threads <= 2; threads++) {
        char t[8];
        snprintf(t, sizeof t, "%d", threads);
        const char *run_args[] = { "run", "-m", model, "-p", "And God said", "-n", "40", "--temp", "0",
                                   "--repeat-penalty", "1.0", "-t", t, NULL };
        r = cli_run(run_args, NULL, 120);
        CHECK_MSG(r.status == 0 && r.out && strcmp(r.out, k_greedy) == 0, "greedy output changed:\n%s",
                  r.out ? r.out : "(none)");
        cli_result_free(&r);
    }
    return test_finish("test_default_model");
}
