/*
 * A training run: the model, its optimizer, the data, the compute graph and
 * the random state, advanced one optimizer update at a time.
 *
 *     struct train_session *s = train_session_new(&params, train, n_train, valid, n_valid, bos);
 *     if (resuming) train_session_load_checkpoint(s, "ckpt.gguf");
 *     while (train_session_step_count(s) < params.opt.n_steps) {
 *         struct train_step_info info;
 *         train_session_step(s, &info);          // n_accum micro-batches, one AdamW update
 *         ... train_session_eval(s, &val_loss); train_session_save_checkpoint(s, path);
 *     }
 *     train_session_write_model(s, vocab_reader, "name", GGML_TYPE_F32, "model.gguf");
 *
 * Data: the training tokens are one stream; each sequence of a batch is a
 * window of n_ctx consecutive tokens starting at a uniformly random position
 * (drawn from the session's seeded RNG), preceded by BOS when the vocabulary
 * has one (so position 0 always holds BOS, as when llama.cpp prompts the
 * model), and trained to predict each next token. Validation uses fixed
 * windows spread evenly over the held-out tokens.
 *
 * The graph (forward, autograd's backward) is built and placed in memory once
 * by the graph allocator; every micro-batch only writes the inputs and
 * computes it on the CPU thread pool. Results do not depend on the number of
 * threads (the kernels split rows, not sums), and a run resumed from a
 * checkpoint continues bit for bit like the uninterrupted one.
 */
#ifndef LLAMAC_TRAIN_TRAINER_H
#define LLAMAC_TRAIN_TRAINER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ggml.h"
#include "train/train_model.h"
#include "train/train_opt.h"

struct gguf_reader;

struct train_params {
    struct train_hparams hp;       /* n_vocab: the vocabulary's size */
    struct train_opt_params opt;   /* opt.n_steps: updates in all */
    int n_batch;                   /* sequences per micro-batch */
    int n_accum;                   /* micro-batches per update */
    uint64_t seed;                 /* weights and batches */
    int n_threads;
    int eval_batches;              /* most validation batches per evaluation (0: every window) */
};

void train_params_default(struct train_params *p);

struct train_session;

/* Tokens are the caller's and must outlive the session; bos < 0: no BOS.
 * NULL (error_set) on bad parameters, fewer tokens than one window in the
 * training or validation data (n_valid may be 0: no validation), or out of
 * memory. The weights start from the seed's initialisation. */
struct train_session *train_session_new(const struct train_params *p, const int32_t *train_tokens, size_t n_train,
                                        const int32_t *valid_tokens, size_t n_valid, int32_t bos);
void train_session_free(struct train_session *s);

struct train_step_info {
    int64_t step;        /* updates done, this one included */
    float loss;          /* mean training loss of the update's micro-batches */
    float lr;            /* learning rate used */
    double grad_norm;    /* before clipping */
    int64_t n_tokens;    /* tokens predicted in this update */
};

/* One optimizer update. False (error_set) if a computation fails. */
bool train_session_step(struct train_session *s, struct train_step_info *info);
/* Mean loss over the validation windows (false without validation data). */
bool train_session_eval(struct train_session *s, float *loss);

int64_t train_session_step_count(const struct train_session *s);
const struct train_model *train_session_model(const struct train_session *s);
/* The number of validation windows an evaluation covers (0 without validation data). */
int64_t train_session_eval_windows(const struct train_session *s);

/*
 * Checkpoints: a GGUF (written to PATH.tmp, then renamed) with
 *   llamac.train.* keys: format version, the model shape, n_batch, n_accum,
 *     seed, the optimizer settings, step, RNG state, a hash of the training tokens;
 *   tensors: the weights (their model names) and AdamW's moments
 *     ("opt.m.NAME", "opt.v.NAME"), all F32.
 * Loading requires the same shape and batch geometry (else false, and the
 * session is unchanged); differing optimizer
 * settings, seed or data are allowed (with a warning) but then the run is no
 * longer the uninterrupted one.
 */
bool train_session_save_checkpoint(const struct train_session *s, const char *path);
bool train_session_load_checkpoint(struct train_session *s, const char *path);

/* The trained model as a GGUF for the llama loader (see train_model_write_gguf). */
bool train_session_write_model(const struct train_session *s, const struct gguf_reader *vocab_file,
                               const char *name, enum ggml_type type, const char *path);

#endif
