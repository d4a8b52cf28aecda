/*
 * Training throughput of one model shape: a few optimizer updates on random
 * tokens, timed. Prints tokens per second of wall time and, because this
 * machine is shared, also per second of the process's CPU time divided by
 * the thread count (what the run would reach with its cores to itself).
 *
 *   bench_train [n_vocab n_embd n_layer n_head n_head_kv n_ff n_ctx n_batch threads steps]
 *   bench_train 4096 256 4 8 8 768 128 16 2 5
 */
#define _POSIX_C_SOURCE 200809L /* clock_gettime */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "train/trainer.h"
#include "train/train_rng.h"

static double clock_s(clockid_t id) {
    struct timespec t;
    clock_gettime(id, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

int main(int argc, char **argv) {
    long v[10] = { 4096, 256, 4, 8, 8, 768, 128, 16, 2, 5 };
    if (argc != 1 && argc != 11) {
        fprintf(stderr, "usage: %s [n_vocab n_embd n_layer n_head n_head_kv n_ff n_ctx n_batch threads steps]\n",
                argv[0]);
        return 2;
    }
    for (int i = 1; i < argc; i++) v[i - 1] = strtol(argv[i], NULL, 10);
    struct train_params p;
    train_params_default(&p);
    p.hp.n_vocab = (int32_t)v[0];
    p.hp.n_embd = (int32_t)v[1];
    p.hp.n_layer = (int32_t)v[2];
    p.hp.n_head = (int32_t)v[3];
    p.hp.n_head_kv = (int32_t)v[4];
    p.hp.n_ff = (int32_t)v[5];
    p.hp.n_ctx = (int32_t)v[6];
    p.n_batch = (int)v[7];
    p.n_threads = (int)v[8];
    const int steps = (int)v[9];
    p.opt.n_steps = steps + 1;
    p.opt.warmup = 1;

    const size_t n_tokens = 1 << 20;
    int32_t *tokens = malloc(n_tokens * sizeof *tokens);
    struct train_rng rng;
    train_rng_seed(&rng, 1);
    for (size_t i = 0; i < n_tokens; i++) tokens[i] = (int32_t)train_rng_below(&rng, (uint64_t)p.hp.n_vocab);
    struct train_session *s = train_session_new(&p, tokens, n_tokens, NULL, 0, 1);
    if (!s || !train_session_step(s, NULL)) { /* the first update also touches all memory */
        fprintf(stderr, "bench_train: setup failed\n");
        return 1;
    }
    const double w0 = clock_s(CLOCK_MONOTONIC), c0 = clock_s(CLOCK_PROCESS_CPUTIME_ID);
    for (int i = 0; i < steps; i++) train_session_step(s, NULL);
    const double wall = clock_s(CLOCK_MONOTONIC) - w0, cpu = clock_s(CLOCK_PROCESS_CPUTIME_ID) - c0;
    const double tok = (double)steps * p.n_batch * p.hp.n_ctx;
    printf("E %ld L %ld H %ld/%ld F %ld T %ld B %ld V %ld, %.2f M params, %d threads: %.0f tok/s wall, "
           "%.0f tok/s per %d dedicated cores (%.2f s CPU per update)\n",
           v[1], v[2], v[3], v[4], v[5], v[6], v[7], v[0],
           (double)train_model_n_params(train_session_model(s)) / 1e6, p.n_threads, tok / wall,
           tok / (cpu / p.n_threads), p.n_threads, cpu / steps);
    train_session_free(s);
    free(tokens);
    return 0;
}
