/*
 * Element types against files written by b1892 (../shared/models):
 *  - dequantizing each quantized tensor gives the F32 file's values within
 *    the format's error;
 *  - our quantizer applied to the F32 tensors gives the same bytes as b1892
 *    (with synth-k.imatrix for the files b1892 made with it), and so the
 *    same error.
 */
#include "test_util.h"

#include "gguf/gguf.h"
#include "quant/quant.h"

/* ---- b1892 importance matrix files ----------------------------------------------
 * int32 n_entries; per entry: int32 len, name, int32 ncall, int32 nval,
 * float values[nval]. b1892's quantize divides the values by ncall. */
struct imatrix_entry { char name[128]; int nval; float *values; };
struct imatrix { int n; struct imatrix_entry *entries; };

static bool read_i32(FILE *f, int32_t *v) { return fread(v, 4, 1, f) == 1; }

static bool imatrix_load(const char *path, struct imatrix *im) {
    memset(im, 0, sizeof *im);
    FILE *f = fopen(path, "rb");
    int32_t n;
    if (!f || !read_i32(f, &n) || n < 1 || n > 100000) {
        if (f) fclose(f);
        return false;
    }
    im->entries = calloc((size_t)n, sizeof *im->entries);
    for (int i = 0; i < n; i++) {
        struct imatrix_entry *e = &im->entries[i];
        int32_t len, ncall, nval;
        if (!read_i32(f, &len) || len <= 0 || len >= (int32_t)sizeof e->name ||
            fread(e->name, 1, (size_t)len, f) != (size_t)len || !read_i32(f, &ncall) || !read_i32(f, &nval) ||
            nval < 1 || nval > (1 << 24)) {
            break;
        }
        e->values = malloc((size_t)nval * sizeof(float));
        if (fread(e->values, sizeof(float), (size_t)nval, f) != (size_t)nval) break;
        if (ncall > 0) {
            for (int j = 0; j < nval; j++) e->values[j] /= (float)ncall;
        }
        e->nval = nval;
        im->n = i + 1;
    }
    fclose(f);
    return im->n == n;
}

static void imatrix_free(struct imatrix *im) {
    for (int i = 0; i < im->n; i++) free(im->entries[i].values);
    free(im->entries);
}

/* As b1892's llama_model_quantize: the entry of the tensor's name, if it has
 * one value per column. */
static const float *imatrix_find(const struct imatrix *im, const char *name, int64_t ne0) {
    if (!im) return NULL;
    for (int i = 0; i < im->n; i++) {
        if (strcmp(im->entries[i].name, name) == 0 && im->entries[i].nval == ne0) return im->entries[i].values;
    }
    return NULL;
}

/* ---- comparison ------------------------------------------------------------------ */

#define IQ2_ROWS_CHECKED 64

struct type_stats {
    int64_t tensors, elements, blocks, blocks_differing;
    double ref_sq;        /* sum of x^2 of the F32 values */
    double theirs_sq;     /* sum of squared errors of b1892's bytes */
    double ours_sq;       /* same for our quantizer */
    double max_abs_err;   /* of b1892's bytes */
};

/* Relative RMSE of b1892's tensors against F32 that no correct decoder
 * exceeds for these N(0, 0.08^2) weights (about twice what each format
 * reaches; a wrong scale or bit layout gives errors near 1). */
static double error_budget(enum ggml_type type) {
    switch (type) {
    case GGML_TYPE_F16: return 1e-3;
    case GGML_TYPE_Q8_0: return 0.01;
    case GGML_TYPE_Q6_K: return 0.02;
    case GGML_TYPE_Q5_0: case GGML_TYPE_Q5_1: case GGML_TYPE_Q5_K: return 0.06;
    case GGML_TYPE_Q4_0: case GGML_TYPE_Q4_1: case GGML_TYPE_Q4_K: return 0.12;
    case GGML_TYPE_Q3_K: return 0.25;
    default: return 0.6;   /* Q2_K, IQ2_XXS, IQ2_XS */
    }
}

static bool is_legacy(enum ggml_type type) {
    return type == GGML_TYPE_Q4_0 || type == GGML_TYPE_Q4_1 || type == GGML_TYPE_Q5_0 || type == GGML_TYPE_Q5_1 ||
           type == GGML_TYPE_Q8_0;
}

/* Our quantization of an F32 tensor, kept so that the files sharing a
 * (tensor, type, importance matrix) combination quantize it once. */
struct quantized {
    const char *name;
    enum ggml_type type;
    const float *imatrix;
    void *bytes;
    float *dequantized;
    size_t size;
};
static struct quantized g_cache[512];
static int g_cache_n;

static const struct quantized *quantize_cached(const struct gguf_tensor_info *fr, enum ggml_type type, const float *imatrix,
                                               int64_t nrows, size_t size) {
    for (int i = 0; i < g_cache_n; i++) {
        const struct quantized *c = &g_cache[i];
        if (c->type == type && c->imatrix == imatrix && strcmp(c->name, fr->name) == 0) return c;
    }
    if (g_cache_n == (int)(sizeof g_cache / sizeof g_cache[0])) return NULL;
    const int64_t nel = fr->ne[0] * nrows;
    struct quantized *c = &g_cache[g_cache_n++];
    c->name = fr->name;
    c->type = type;
    c->imatrix = imatrix;
    c->size = size;
    c->bytes = malloc(size);
    c->dequantized = malloc((size_t)nel * sizeof(float));
    const size_t written = quant_quantize_chunk(type, fr->data, c->bytes, 0, nrows, fr->ne[0], NULL, imatrix);
    CHECK_MSG(written == size, "%s as %s: wrote %zu of %zu bytes", fr->name, type_name(type), written, size);
    type_traits_get(type)->to_float(c->bytes, c->dequantized, nel);
    return c;
}

static void cache_free(void) {
    for (int i = 0; i < g_cache_n; i++) {
        free(g_cache[i].bytes);
        free(g_cache[i].dequantized);
    }
    g_cache_n = 0;
}

/* Compares every quantized tensor of `path` with the F32 model `ref`. */
static void compare_file(const struct gguf_reader *ref, const char *rel, const struct imatrix *im,
                         bool require_identical_k) {
    const char *path = test_require_shared(rel);
    struct gguf_reader *q = gguf_open_file(path, true);
    CHECK_MSG(q != NULL, "cannot open %s", rel);
    if (!q) return;
    struct type_stats stats[GGML_TYPE_COUNT];
    memset(stats, 0, sizeof stats);

    for (int64_t t = 0; t < gguf_n_tensors(q); t++) {
        const struct gguf_tensor_info *ti = gguf_tensor(q, t);
        if (ti->type == GGML_TYPE_F32) continue;
        const int64_t fi = gguf_find_tensor(ref, ti->name);
        CHECK_MSG(fi >= 0, "%s: %s not in the F32 model", rel, ti->name);
        if (fi < 0) continue;
        const struct gguf_tensor_info *fr = gguf_tensor(ref, fi);
        CHECK(fr->type == GGML_TYPE_F32);
        const int64_t n_per_row = ti->ne[0];
        CHECK(memcmp(fr->ne, ti->ne, sizeof ti->ne) == 0);
        const struct type_traits *tt = type_traits_get(ti->type);
        /* IQ2 quantization is slow (a full codebook search per group): its
         * tensors are compared on their first rows. */
        int64_t nrows = ti->ne[1] * ti->ne[2] * ti->ne[3];
        if (quant_requires_imatrix(ti->type) && nrows > IQ2_ROWS_CHECKED) nrows = IQ2_ROWS_CHECKED;
        const int64_t nel = n_per_row * nrows;
        size_t size;
        CHECK(type_row_size(ti->type, n_per_row, &size));
        size *= (size_t)nrows;
        const float *x = fr->data;   /* GGUF data is aligned: floats can be read in place */

        float *deq = malloc((size_t)nel * sizeof(float));
        tt->to_float(ti->data, deq, nel);
        const struct quantized *ours = quantize_cached(fr, ti->type, imatrix_find(im, ti->name, n_per_row), nrows, size);
        CHECK(ours != NULL);
        if (!ours) {
            free(deq);
            continue;
        }
        const float *ours_deq = ours->dequantized;

        struct type_stats *s = &stats[ti->type];
        s->tensors++;
        s->elements += nel;
        for (int64_t i = 0; i < nel; i++) {
            const double e1 = (double)deq[i] - x[i], e2 = (double)ours_deq[i] - x[i];
            s->ref_sq += (double)x[i] * x[i];
            s->theirs_sq += e1 * e1;
            s->ours_sq += e2 * e2;
            if (fabs(e1) > s->max_abs_err) s->max_abs_err = fabs(e1);
        }
        const int64_t nblocks = (int64_t)(size / tt->type_size);
        s->blocks += nblocks;
        for (int64_t b = 0; b < nblocks; b++) {
            const size_t off = (size_t)b * tt->type_size;
            if (memcmp((const char *)ti->data + off, (const char *)ours->bytes + off, tt->type_size) != 0) s->blocks_differing++;
        }
        free(deq);
    }

    for (int ty = 0; ty < GGML_TYPE_COUNT; ty++) {
        const struct type_stats *s = &stats[ty];
        if (!s->tensors) continue;
        const double rms = sqrt(s->ref_sq / s->elements);
        const double theirs = sqrt(s->theirs_sq / s->elements) / rms;
        const double ours = sqrt(s->ours_sq / s->elements) / rms;
        printf("%-24s %-8s %2lld tensors %8lld elements  rel.rmse b1892 %.6f ours %.6f  max|err| %.5f  "
               "blocks differing %lld/%lld\n",
               rel, type_name((enum ggml_type)ty), (long long)s->tensors, (long long)s->elements, theirs, ours,
               s->max_abs_err, (long long)s->blocks_differing, (long long)s->blocks);
        CHECK_MSG(theirs < error_budget((enum ggml_type)ty), "%s %s: dequantized error %g", rel,
                  type_name((enum ggml_type)ty), theirs);
        CHECK_MSG(ours <= theirs * (1 + 1e-6), "%s %s: our error %g above b1892's %g", rel,
                  type_name((enum ggml_type)ty), ours, theirs);
        if (is_legacy((enum ggml_type)ty) || ty == GGML_TYPE_F16 || require_identical_k) {
            CHECK_MSG(s->blocks_differing == 0, "%s %s: %lld blocks differ from b1892", rel,
                      type_name((enum ggml_type)ty), (long long)s->blocks_differing);
        }
    }
    gguf_close(q);
}

int main(void) {
    struct gguf_reader *stories = gguf_open_file(test_require_shared("models/stories260K.gguf"), true);
    struct gguf_reader *synth = gguf_open_file(test_require_shared("models/synth-k/synth-k-F32.gguf"), true);
    CHECK(stories && synth);
    if (!stories || !synth) return test_finish("test_quant_files");

    compare_file(stories, "models/stories260K-Q8_0.gguf", NULL, true);
    compare_file(stories, "models/stories260K-Q4_0.gguf", NULL, true);
    compare_file(stories, "models/stories260K-F16.gguf", NULL, true);
    cache_free();   /* tensor names repeat across models */

    static const char *const plain[] = {
        "models/synth-k/synth-k-F16.gguf",        "models/synth-k/synth-k-Q8_0.gguf",
        "models/synth-k/synth-k-Q4_0-pure.gguf",  "models/synth-k/synth-k-Q4_1-pure.gguf",
        "models/synth-k/synth-k-Q5_0-pure.gguf",  "models/synth-k/synth-k-Q5_1-pure.gguf",
        "models/synth-k/synth-k-Q4_0.gguf",       "models/synth-k/synth-k-Q4_1.gguf",
        "models/synth-k/synth-k-Q5_0.gguf",       "models/synth-k/synth-k-Q5_1.gguf",
        "models/synth-k/synth-k-Q2_K-pure.gguf",  "models/synth-k/synth-k-Q3_K-pure.gguf",
        "models/synth-k/synth-k-Q4_K-pure.gguf",  "models/synth-k/synth-k-Q5_K-pure.gguf",
        "models/synth-k/synth-k-Q2_K.gguf",       "models/synth-k/synth-k-Q3_K_S.gguf",
        "models/synth-k/synth-k-Q3_K_M.gguf",     "models/synth-k/synth-k-Q3_K_L.gguf",
        "models/synth-k/synth-k-Q4_K_S.gguf",     "models/synth-k/synth-k-Q4_K_M.gguf",
        "models/synth-k/synth-k-Q5_K_S.gguf",     "models/synth-k/synth-k-Q5_K_M.gguf",
        "models/synth-k/synth-k-Q6_K.gguf",
    };
    for (size_t i = 0; i < sizeof plain / sizeof plain[0]; i++) compare_file(synth, plain[i], NULL, true);

    struct imatrix im;
    CHECK(imatrix_load(test_require_shared("models/synth-k/synth-k.imatrix"), &im));
    CHECK_EQ_INT(im.n, 14);
    static const char *const with_imatrix[] = {
        "models/synth-k/synth-k-Q2_K_S.gguf",
        "models/synth-k/synth-k-IQ2_XXS.gguf",
        "models/synth-k/synth-k-IQ2_XS.gguf",
    };
    for (size_t i = 0; i < sizeof with_imatrix / sizeof with_imatrix[0]; i++) compare_file(synth, with_imatrix[i], &im, true);
    imatrix_free(&im);

    cache_free();
    gguf_close(stories);
    gguf_close(synth);
    return test_finish("test_quant_files");
}
