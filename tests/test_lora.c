/*
 * LoRA adapters (b1892's ggla format) on stories260K: an adapter written here
 * changes exactly the weights it names by (alpha/r)*scale*B·A, on F32 and
 * quantized models and with a base model; broken adapters are refused with
 * the model unchanged.
 */
#include <unistd.h>

#include "golden_eval.h"
#include "llama.h"
#include "quant/quant.h"
#include "tensor/tensor.h"
#include "test_util.h"

#define R 2
#define N 64 /* attn_q is [64, 64] in stories260K */

static float g_a[N * R], g_b[N * R];

static void put_i32(FILE *f, int32_t v) { fwrite(&v, 4, 1, f); }

/* One adapter for blk.0.attn_q.weight; `corrupt` selects a defect. */
static void write_adapter(const char *path, int corrupt) {
    FILE *f = fopen(path, "wb");
    put_i32(f, corrupt == 1 ? 0x12345678 : (int32_t)LLAMA_FILE_MAGIC_GGLA);
    put_i32(f, 1);
    put_i32(f, R);
    put_i32(f, 4); /* alpha: scaling = scale * 4 / 2 */
    const char *names[2] = { "blk.0.attn_q.weight.loraA", "blk.0.attn_q.weight.loraB" };
    const float *data[2] = { g_a, g_b };
    for (int t = 0; t < 2; t++) {
        const char *name = corrupt == 2 && t == 0 ? "blk.0.nope.weight.loraA" : names[t];
        put_i32(f, 2);
        put_i32(f, (int32_t)strlen(name));
        put_i32(f, 0);
        put_i32(f, R);
        put_i32(f, corrupt == 3 && t == 1 ? N + 1 : N);
        fwrite(name, 1, strlen(name), f);
        long pos = ftell(f);
        while (pos % 32) {
            fputc(0, f);
            pos++;
        }
        fwrite(data[t], sizeof(float), (size_t)N * R * (corrupt == 4 && t == 1 ? 0 : 1), f);
    }
    fclose(f);
}

static void weight_f32(struct llama_model *m, const char *name, float *out) {
    const struct tensor *t = (const struct tensor *)llama_get_model_tensor(m, name);
    for (int64_t r = 0; r < t->ne[1]; r++) {
        type_traits_get(t->type)->to_float((const char *)t->data + r * t->nb[1], out + r * t->ne[0], t->ne[0]);
    }
}

static double check_applied(const char *model_rel, const char *base_rel, float scale, double tol) {
    struct llama_model_params mp = llama_model_default_params();
    struct llama_model *m = llama_load_model_from_file(test_require_shared(model_rel), mp);
    float before[N * N], after[N * N], other_before[N * N] = { 0 }, other_after[N * N] = { 0 };
    weight_f32(m, "blk.0.attn_q.weight", before);
    weight_f32(m, "blk.0.attn_k.weight", other_before);
    if (base_rel) {
        struct llama_model *base = llama_load_model_from_file(test_require_shared(base_rel), mp);
        weight_f32(base, "blk.0.attn_q.weight", before);
        llama_free_model(base);
    }
    CHECK_EQ_INT(llama_model_apply_lora_from_file(m, "test_lora.ggla", scale,
                                                  base_rel ? test_require_shared(base_rel) : NULL, 2), 0);
    weight_f32(m, "blk.0.attn_q.weight", after);
    weight_f32(m, "blk.0.attn_k.weight", other_after);
    double worst = 0;
    for (int o = 0; o < N; o++) {
        for (int i = 0; i < N; i++) {
            double delta = 0;
            for (int k = 0; k < R; k++) delta += (double)g_a[i * R + k] * g_b[o * R + k];
            double want = before[o * N + i] + scale * 4.0 / R * delta;
            double d = fabs(after[o * N + i] - want);
            if (d > worst) worst = d;
        }
    }
    CHECK_MSG(worst <= tol, "%s: adapted weight off by %g", model_rel, worst);
    CHECK(memcmp(other_before, other_after, sizeof other_before) == 0); /* untouched */
    /* the model still decodes */
    struct llama_context *ctx = llama_new_context_with_model(m, llama_context_default_params());
    llama_token toks[2] = { 1, 403 };
    CHECK(llama_decode(ctx, llama_batch_get_one(toks, 2, 0, 0)) == 0);
    llama_free(ctx);
    llama_free_model(m);
    return worst;
}

int main(void) {
    uint64_t rng = 7;
    for (int i = 0; i < N * R; i++) {
        g_a[i] = test_rand_uniform(&rng, -0.1f, 0.1f);
        g_b[i] = test_rand_uniform(&rng, -0.1f, 0.1f);
    }
    write_adapter("test_lora.ggla", 0);
    printf("F32: %g\n", check_applied("models/stories260K.gguf", NULL, 1.0f, 1e-6));
    printf("Q8_0: %g\n", check_applied("models/stories260K-Q8_0.gguf", NULL, 0.5f, 0.02));
    printf("Q8_0 with F32 base: %g\n", check_applied("models/stories260K-Q8_0.gguf", "models/stories260K.gguf", 1.0f, 0.02));

    /* broken adapters: refused, weights unchanged */
    struct llama_model *m = golden_load_model("models/stories260K.gguf");
    float before[N * N], after[N * N];
    weight_f32(m, "blk.0.attn_q.weight", before);
    for (int defect = 1; defect <= 4; defect++) {
        write_adapter("test_lora_bad.ggla", defect);
        CHECK_MSG(llama_model_apply_lora_from_file(m, "test_lora_bad.ggla", 1.0f, NULL, 1) != 0, "defect %d accepted", defect);
    }
    CHECK(llama_model_apply_lora_from_file(m, "/nonexistent.ggla", 1.0f, NULL, 1) != 0);
    CHECK(llama_model_apply_lora_from_file(m, "test_lora.ggla", 1.0f, "/nonexistent.gguf", 1) != 0);
    weight_f32(m, "blk.0.attn_q.weight", after);
    CHECK(memcmp(before, after, sizeof before) == 0);
    llama_free_model(m);
    unlink("test_lora.ggla");
    unlink("test_lora_bad.ggla");
    return test_finish("test_lora");
}
