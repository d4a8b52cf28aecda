/* `llamac train`: trains a LLaMA-architecture model from scratch on a text
 * corpus on the CPU (src/train/trainer.h) and writes it as a GGUF model. */
#include <inttypes.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "cli.h"
#include "core/cpu_features.h"
#include "core/file_map.h"
#include "core/log.h"
#include "core/timer.h"
#include "gguf/gguf.h"
#include "quant/quant.h"
#include "train/train_data.h"
#include "train/trainer.h"
#include "vocab/vocab.h"

#define TR_CMD "train"

struct tr_options {
    struct train_params p;
    const char *vocab_path, *train_path, *valid_path, *out_path, *name;
    const char *ckpt_path, *resume_path, *log_path;
    double valid_fraction;
    enum ggml_type out_type;
    long long eval_interval, ckpt_interval, log_interval;
};

static void usage(FILE *f) {
    struct train_params d;
    train_params_default(&d);
    fprintf(f,
            "usage: llamac " TR_CMD " [options] --vocab VOCAB.gguf --train-data TEXT -o MODEL.gguf\n"
            "\n"
            "Trains a LLaMA model from scratch on the CPU and writes it as a GGUF file that\n"
            "llamac and llama.cpp load. Each line of the text is a sentence: it is tokenized\n"
            "on its own (SPM, leading space) and followed by a newline token. Each sequence\n"
            "of a batch is BOS followed by a random window of that token stream.\n"
            "\n"
            "data and output:\n"
            "  --vocab FILE               vocabulary GGUF (llamac train-tokenizer, or any SPM model)\n"
            "  --train-data FILE          training text\n"
            "  --valid-data FILE          held-out text for the validation loss (default: the\n"
            "                             last --valid-fraction of the training tokens)\n"
            "  --valid-fraction F         (default 0.05; 0: no validation)\n"
            "  -o, --output FILE          the trained model\n"
            "  --name NAME                general.name (default \"llamac model\")\n"
            "  --quantize TYPE            matrices of the output: f32 (default), f16, q8_0, q4_0, ...\n"
            "model (default %d/%d/%d/%d/%d/%d):\n"
            "  --n-embd N --n-layer N --n-head N --n-head-kv N --n-ff N --n-ctx N\n"
            "  --norm-eps F (%g)  --rope-freq-base F (%g)\n"
            "training:\n"
            "  --batch N                  sequences per micro-batch (default %d)\n"
            "  --accum N                  micro-batches per update (default %d)\n"
            "  --steps N                  updates (default %lld)\n"
            "  --lr F, --lr-min F         peak and final learning rate (default %g, %g)\n"
            "  --warmup N                 linear warm-up updates (default %lld, at most a tenth of\n"
            "                             --steps), then cosine decay\n"
            "  --weight-decay F           AdamW decay of the matrices (default %g)\n"
            "  --beta1 F --beta2 F        (default %g, %g)\n"
            "  --grad-clip F              clip the gradient's global norm (default %g; 0: off)\n"
            "  --seed N                   weights and batches (default %llu)\n"
            "  -t, --threads N            (default: physical cores)\n"
            "progress:\n"
            "  --eval-interval N          validation loss every N updates (default 100)\n"
            "  --eval-batches N           most batches per validation (default all windows)\n"
            "  --log-interval N           a progress line every N updates (default 10)\n"
            "  --log FILE                 tab-separated log: step, tokens, seconds, lr, loss, val_loss\n"
            "                             (scripts/plot-loss.py draws it)\n"
            "  --checkpoint FILE          save the training state here (also on Ctrl-C)\n"
            "  --checkpoint-interval N    every N updates (default 0: only at the end)\n"
            "  --resume FILE              continue from a checkpoint (same shape and batch)\n"
            "  -h, --help                 this text\n",
            d.hp.n_embd, d.hp.n_layer, d.hp.n_head, d.hp.n_head_kv, d.hp.n_ff, d.hp.n_ctx, d.hp.norm_eps,
            d.hp.rope_freq_base, d.n_batch, d.n_accum, (long long)d.opt.n_steps, d.opt.lr, d.opt.lr_min,
            (long long)d.opt.warmup, d.opt.weight_decay, d.opt.beta1, d.opt.beta2, d.opt.grad_clip,
            (unsigned long long)d.seed);
}

static bool tr_parse_type(const char *s, enum ggml_type *out) {
    for (int t = 0; t < GGML_TYPE_COUNT; t++) {
        if (type_is_valid(t) && strcasecmp(type_name((enum ggml_type)t), s) == 0) {
            *out = (enum ggml_type)t;
            return true;
        }
    }
    return false;
}

/* Parses argv into o; returns -1 to go on, else the exit status. */
static int tr_parse(int argc, char **argv, struct tr_options *o) {
    struct train_params *p = &o->p;
    bool warmup_given = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        long long n;
        double f;
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            usage(stdout);
            return 0;
        }
        if (!v) return cli_fail(TR_CMD, "unknown or incomplete option '%s' (see llamac train --help)", a);
        i++;
        /* integer and float options: name, destination, range */
#define TR_INT(opt, dst, lo, hi)                                                                      \
    if (strcmp(a, opt) == 0) {                                                                        \
        if (!cli_parse_int(v, lo, hi, &n)) return cli_fail(TR_CMD, "%s needs a whole number from %lld to %lld", a, (long long)(lo), (long long)(hi)); \
        dst = n;                                                                                      \
        continue;                                                                                     \
    }
#define TR_FLOAT(opt, dst)                                                                            \
    if (strcmp(a, opt) == 0) {                                                                        \
        if (!cli_parse_float(v, &f) || !isfinite(f)) return cli_fail(TR_CMD, "%s needs a number", a);  \
        dst = (float)f;                                                                               \
        continue;                                                                                     \
    }
        TR_INT("--n-embd", p->hp.n_embd, 2, 1 << 16)
        TR_INT("--n-layer", p->hp.n_layer, 1, TRAIN_MAX_LAYERS)
        TR_INT("--n-head", p->hp.n_head, 1, 1 << 16)
        TR_INT("--n-head-kv", p->hp.n_head_kv, 1, 1 << 16)
        TR_INT("--n-ff", p->hp.n_ff, 1, 1 << 18)
        TR_INT("--n-ctx", p->hp.n_ctx, 2, 1 << 16)
        TR_FLOAT("--norm-eps", p->hp.norm_eps)
        TR_FLOAT("--rope-freq-base", p->hp.rope_freq_base)
        TR_INT("--batch", p->n_batch, 1, 1 << 20)
        TR_INT("--accum", p->n_accum, 1, 1 << 20)
        TR_INT("--steps", p->opt.n_steps, 1, INT64_MAX / 2)
        TR_FLOAT("--lr", p->opt.lr)
        TR_FLOAT("--lr-min", p->opt.lr_min)
        if (strcmp(a, "--warmup") == 0) warmup_given = true;
        TR_INT("--warmup", p->opt.warmup, 0, INT64_MAX / 2)
        TR_FLOAT("--weight-decay", p->opt.weight_decay)
        TR_FLOAT("--beta1", p->opt.beta1)
        TR_FLOAT("--beta2", p->opt.beta2)
        TR_FLOAT("--grad-clip", p->opt.grad_clip)
        TR_INT("--seed", p->seed, 0, INT64_MAX)
        TR_INT("-t", p->n_threads, 1, 512)
        TR_INT("--threads", p->n_threads, 1, 512)
        TR_INT("--eval-interval", o->eval_interval, 0, INT64_MAX)
        TR_INT("--eval-batches", p->eval_batches, 0, 1 << 30)
        TR_INT("--log-interval", o->log_interval, 1, INT64_MAX)
        TR_INT("--checkpoint-interval", o->ckpt_interval, 0, INT64_MAX)
#undef TR_INT
#undef TR_FLOAT
        if (strcmp(a, "--valid-fraction") == 0) {
            if (!cli_parse_float(v, &o->valid_fraction) || !(o->valid_fraction >= 0.0 && o->valid_fraction < 1.0)) {
                return cli_fail(TR_CMD, "--valid-fraction needs a number in [0, 1)");
            }
        } else if (strcmp(a, "--quantize") == 0) {
            if (!tr_parse_type(v, &o->out_type)) return cli_fail(TR_CMD, "--quantize: unknown type '%s'", v);
        } else if (strcmp(a, "--vocab") == 0) {
            o->vocab_path = v;
        } else if (strcmp(a, "--train-data") == 0) {
            o->train_path = v;
        } else if (strcmp(a, "--valid-data") == 0) {
            o->valid_path = v;
        } else if (strcmp(a, "-o") == 0 || strcmp(a, "--output") == 0) {
            o->out_path = v;
        } else if (strcmp(a, "--name") == 0) {
            o->name = v;
        } else if (strcmp(a, "--checkpoint") == 0) {
            o->ckpt_path = v;
        } else if (strcmp(a, "--resume") == 0) {
            o->resume_path = v;
        } else if (strcmp(a, "--log") == 0) {
            o->log_path = v;
        } else {
            return cli_fail(TR_CMD, "unknown option '%s' (see llamac train --help)", a);
        }
    }
    if (!o->vocab_path || !o->train_path || !o->out_path) {
        return cli_fail(TR_CMD, "expected --vocab FILE, --train-data FILE and -o FILE (see llamac train --help)");
    }
    /* a short run without --warmup warms up for a tenth of it */
    if (!warmup_given && p->opt.warmup > p->opt.n_steps / 10) p->opt.warmup = p->opt.n_steps / 10;
    return -1;
}

/* Tokens of a text file (train_tokenize_lines); NULL with error_set on failure. */
static int32_t *tr_tokenize_file(const struct vocab *v, const char *path, size_t *n) {
    struct file_map fm;
    if (!file_map_open(&fm, path, true)) return NULL;
    int32_t *tokens = train_tokenize_lines(v, fm.data, fm.size, n);
    file_map_close(&fm);
    return tokens;
}

static void tr_format_duration(double s, char *buf, size_t size) {
    const long long t = (long long)(s + 0.5);
    if (t >= 3600) {
        snprintf(buf, size, "%lldh%02lldm%02llds", t / 3600, t / 60 % 60, t % 60);
    } else if (t >= 60) {
        snprintf(buf, size, "%lldm%02llds", t / 60, t % 60);
    } else {
        snprintf(buf, size, "%llds", t);
    }
}

static volatile sig_atomic_t g_tr_interrupted;

/* The first Ctrl-C finishes the update and saves the checkpoint; a second one ends the process. */
static void tr_on_sigint(int sig) {
    g_tr_interrupted = 1;
    signal(sig, SIG_DFL);
}

/* Warnings (e.g. a checkpoint's changed settings) reach the user; errors come back as one line. */
static void tr_log_sink(enum ggml_log_level level, const char *text, void *user_data) {
    (void)user_data;
    if (level == GGML_LOG_LEVEL_WARN) fputs(text, stderr);
}

static int tr_run(struct tr_options *o) {
    int rc = 0;
    struct gguf_reader *vr = NULL;
    struct vocab *vocab = NULL;
    int32_t *train = NULL, *valid = NULL;
    struct train_session *s = NULL;
    FILE *log = NULL;
    size_t n_train = 0, n_valid = 0;

    vr = gguf_open_file(o->vocab_path, true);
    vocab = vr ? vocab_load_gguf(vr) : NULL;
    if (!vocab) {
        rc = cli_fail(TR_CMD, "%s", error_last());
        goto done;
    }
    const int64_t t_tok = time_us();
    train = tr_tokenize_file(vocab, o->train_path, &n_train);
    if (train && o->valid_path) valid = tr_tokenize_file(vocab, o->valid_path, &n_valid);
    if (!train || (o->valid_path && !valid)) {
        rc = cli_fail(TR_CMD, "%s", error_last());
        goto done;
    }
    if (!o->valid_path && o->valid_fraction > 0.0) {
        /* the tail of the stream is held out */
        n_valid = (size_t)((double)n_train * o->valid_fraction);
        n_train -= n_valid;
        valid = train + n_train;
    }
    o->p.hp.n_vocab = vocab_n_tokens(vocab);
    printf("data:     %zu training tokens, %zu validation tokens (vocabulary of %d, tokenized in %.1f s)\n",
           n_train, n_valid, o->p.hp.n_vocab, (double)(time_us() - t_tok) / 1e6);

    s = train_session_new(&o->p, train, n_train, valid, n_valid, vocab_bos(vocab));
    if (!s || (o->resume_path && !train_session_load_checkpoint(s, o->resume_path))) {
        rc = cli_fail(TR_CMD, "%s", error_last());
        goto done;
    }
    const struct train_params *p = &o->p;
    const int64_t tokens_per_step = (int64_t)p->n_batch * p->n_accum * p->hp.n_ctx;
    printf("model:    n_embd %d, n_layer %d, n_head %d, n_head_kv %d, n_ff %d, n_ctx %d: %.2f M parameters\n",
           p->hp.n_embd, p->hp.n_layer, p->hp.n_head, p->hp.n_head_kv, p->hp.n_ff, p->hp.n_ctx,
           (double)train_model_n_params(train_session_model(s)) / 1e6);
    printf("training: %lld updates of %d x %d sequences (%lld tokens, %.2f epochs), lr %g -> %g, warm-up %lld, "
           "%d threads\n",
           (long long)p->opt.n_steps, p->n_accum, p->n_batch, (long long)tokens_per_step,
           (double)tokens_per_step * (double)p->opt.n_steps / (double)n_train, p->opt.lr, p->opt.lr_min,
           (long long)p->opt.warmup, p->n_threads);
    if (o->resume_path) printf("resumed:  %s at update %lld\n", o->resume_path, (long long)train_session_step_count(s));
    fflush(stdout);

    if (o->log_path) {
        log = fopen(o->log_path, o->resume_path ? "a" : "w");
        if (!log) {
            rc = cli_fail(TR_CMD, "cannot write %s", o->log_path);
            goto done;
        }
        if (!o->resume_path) fprintf(log, "step\ttokens\tseconds\tlr\tloss\tval_loss\n");
    }
    signal(SIGINT, tr_on_sigint);

    const int64_t first = train_session_step_count(s);
    if (first == 0 && n_valid > 0 && o->eval_interval > 0) {
        /* where the curve starts: the untrained model's validation loss */
        float val0;
        if (!train_session_eval(s, &val0)) {
            rc = cli_fail(TR_CMD, "%s", error_last());
            goto done;
        }
        printf("step %6d/%lld  val_loss %.4f\n", 0, (long long)p->opt.n_steps, val0);
        if (log) fprintf(log, "0\t0\t0\t\t\t%.6f\n", val0);
    }
    const int64_t t0 = time_us();
    double train_seconds = 0.0, recent_loss = 0.0;
    int64_t recent_n = 0;
    float val = NAN;
    while (train_session_step_count(s) < p->opt.n_steps && !g_tr_interrupted) {
        struct train_step_info info;
        const int64_t ts = time_us();
        if (!train_session_step(s, &info)) {
            rc = cli_fail(TR_CMD, "%s", error_last());
            goto done;
        }
        train_seconds += (double)(time_us() - ts) / 1e6;
        recent_loss += info.loss;
        recent_n++;
        const bool last = info.step == p->opt.n_steps;
        const bool eval = n_valid > 0 && ((o->eval_interval > 0 && info.step % o->eval_interval == 0) || last);
        val = NAN;
        if (eval && !train_session_eval(s, &val)) {
            rc = cli_fail(TR_CMD, "%s", error_last());
            goto done;
        }
        const double elapsed = (double)(time_us() - t0) / 1e6;
        if (log) {
            fprintf(log, "%lld\t%lld\t%.3f\t%.6g\t%.6f\t", (long long)info.step, (long long)(info.step * tokens_per_step),
                    elapsed, info.lr, info.loss);
            if (eval) fprintf(log, "%.6f", val);
            fputc('\n', log);
            fflush(log);
        }
        if (info.step % o->log_interval == 0 || eval || last) {
            char el[32], eta[32];
            const double per_step = elapsed / (double)(info.step - first);
            tr_format_duration(elapsed, el, sizeof el);
            tr_format_duration(per_step * (double)(p->opt.n_steps - info.step), eta, sizeof eta);
            printf("step %6lld/%lld  loss %.4f", (long long)info.step, (long long)p->opt.n_steps,
                   recent_loss / (double)recent_n);
            if (eval) printf("  val_loss %.4f", val);
            printf("  lr %.2e  |g| %.3f  %.0f tok/s  elapsed %s  ETA %s\n", info.lr, info.grad_norm,
                   (double)((info.step - first) * tokens_per_step) / train_seconds, el, eta);
            fflush(stdout);
            recent_loss = 0.0;
            recent_n = 0;
        }
        if (o->ckpt_path && o->ckpt_interval > 0 && info.step % o->ckpt_interval == 0 && !last &&
            !train_session_save_checkpoint(s, o->ckpt_path)) {
            rc = cli_fail(TR_CMD, "%s", error_last());
            goto done;
        }
    }
    if (o->ckpt_path) {
        if (!train_session_save_checkpoint(s, o->ckpt_path)) {
            rc = cli_fail(TR_CMD, "%s", error_last());
            goto done;
        }
        printf("saved checkpoint %s at update %lld\n", o->ckpt_path, (long long)train_session_step_count(s));
    }
    if (g_tr_interrupted) {
        fprintf(stderr, "llamac %s: interrupted at update %lld%s\n", TR_CMD, (long long)train_session_step_count(s),
                o->ckpt_path ? " (resume with --resume)" : "");
        rc = 130;
        goto done;
    }
    if (!train_session_write_model(s, vr, o->name, o->out_type, o->out_path)) {
        rc = cli_fail(TR_CMD, "%s", error_last());
        goto done;
    }
    printf("wrote %s (%s)\n", o->out_path, type_name(o->out_type));
done:
    signal(SIGINT, SIG_DFL);
    if (log) fclose(log);
    train_session_free(s);
    free(train);
    if (o->valid_path) free(valid);
    vocab_free(vocab);
    gguf_close(vr);
    return rc;
}

int cmd_train(int argc, char **argv) {
    struct tr_options o;
    memset(&o, 0, sizeof o);
    train_params_default(&o.p);
    o.p.n_threads = cpu_physical_cores();
    o.name = "llamac model";
    o.valid_fraction = 0.05;
    o.out_type = GGML_TYPE_F32;
    o.eval_interval = 100;
    o.log_interval = 10;
    const int parsed = tr_parse(argc, argv, &o);
    if (parsed >= 0) return parsed;
    log_set_callback(tr_log_sink, NULL);
    const int rc = tr_run(&o);
    log_set_callback(NULL, NULL);
    return rc;
}
