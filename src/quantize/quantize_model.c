/*
 * llama_model_quantize: GGUF in, GGUF out (see quantize.h for the contract).
 *
 * Two passes: the plan decides every tensor's output type and checks
 * everything a caller or the input file can get wrong; then the output is
 * streamed tensor by tensor (copied, or converted to F32 and quantized by a
 * few threads) into a temporary file that is renamed when complete.
 */
#define _POSIX_C_SOURCE 200809L /* open flags, sysconf */
#include "quantize.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/checked.h"
#include "core/fp16.h"
#include "core/log.h"
#include "gguf/gguf.h"
#include "quant/quant.h"

#define QUANTIZATION_VERSION 2      /* ggml's GGML_QNT_VERSION at b1892 */
#define CHUNK_MIN_ELEMENTS (32 * 512) /* rows handed to a thread at a time (b1892's chunk) */
#define HIST_BINS 16

/* ---- the input model ------------------------------------------------------------ */

/* The architectures b1892 loads; its quantizer refuses the others. */
static const char *const k_known_archs[] = {
    "llama", "falcon", "baichuan", "gpt2", "gptj", "gptneox", "mpt", "starcoder",
    "persimmon", "refact", "bloom", "stablelm", "qwen", "phi2", "plamo",
};

static bool arch_u32(const struct gguf_reader *r, const char *arch, const char *suffix, bool required,
                     uint32_t *out) {
    char key[128];
    snprintf(key, sizeof key, "%s.%s", arch, suffix);
    if (!required && gguf_find_key(r, key) < 0) return true;
    return gguf_get_u32(r, key, out);
}

static bool read_model_info(const struct gguf_reader *r, struct quantize_model_info *info) {
    const char *arch;
    if (!gguf_get_str(r, "general.architecture", &arch)) return false;
    bool known = false;
    for (size_t i = 0; i < sizeof k_known_archs / sizeof k_known_archs[0]; i++) {
        known = known || strcmp(arch, k_known_archs[i]) == 0;
    }
    if (!known) {
        error_set("unknown model architecture: '%s'", arch);
        return false;
    }
    uint32_t n_head = 0, n_head_kv, n_expert = 0;
    memset(info, 0, sizeof *info);
    if (!arch_u32(r, arch, "block_count", true, &info->n_layer) ||
        !arch_u32(r, arch, "attention.head_count", true, &n_head)) {
        return false;
    }
    n_head_kv = n_head;
    if (!arch_u32(r, arch, "attention.head_count_kv", false, &n_head_kv) ||
        !arch_u32(r, arch, "expert_count", false, &n_expert)) {
        return false;
    }
    if (n_head_kv == 0) {
        error_set("%s.attention.head_count_kv is 0", arch);
        return false;
    }
    info->n_gqa = n_head / n_head_kv;
    info->n_expert = n_expert;
    info->is_falcon = strcmp(arch, "falcon") == 0;
    info->is_70b = strcmp(arch, "llama") == 0 && info->n_layer == 80 && n_head != n_head_kv;
    return true;
}

/* general.file_type, or b1892's guess from the most common tensor type
 * (marked with LLAMA_FTYPE_GUESSED): what only_copy writes. */
static bool model_file_type(const struct gguf_reader *r, uint32_t *out) {
    if (gguf_find_key(r, "general.file_type") >= 0) return gguf_get_u32(r, "general.file_type", out);
    int64_t count[GGML_TYPE_COUNT] = { 0 };
    int64_t best_count = 0;
    enum ggml_type best = GGML_TYPE_F32;
    for (int64_t i = 0; i < gguf_n_tensors(r); i++) {
        const enum ggml_type t = gguf_tensor(r, i)->type;
        if (++count[t] > best_count) {
            best_count = count[t];
            best = t;
        }
    }
    enum llama_ftype ftype;
    switch (best) {
    case GGML_TYPE_F16:     ftype = LLAMA_FTYPE_MOSTLY_F16; break;
    case GGML_TYPE_Q4_0:    ftype = LLAMA_FTYPE_MOSTLY_Q4_0; break;
    case GGML_TYPE_Q4_1:    ftype = LLAMA_FTYPE_MOSTLY_Q4_1; break;
    case GGML_TYPE_Q5_0:    ftype = LLAMA_FTYPE_MOSTLY_Q5_0; break;
    case GGML_TYPE_Q5_1:    ftype = LLAMA_FTYPE_MOSTLY_Q5_1; break;
    case GGML_TYPE_Q8_0:    ftype = LLAMA_FTYPE_MOSTLY_Q8_0; break;
    case GGML_TYPE_Q2_K:    ftype = LLAMA_FTYPE_MOSTLY_Q2_K; break;
    case GGML_TYPE_Q3_K:    ftype = LLAMA_FTYPE_MOSTLY_Q3_K_M; break;
    case GGML_TYPE_Q4_K:    ftype = LLAMA_FTYPE_MOSTLY_Q4_K_M; break;
    case GGML_TYPE_Q5_K:    ftype = LLAMA_FTYPE_MOSTLY_Q5_K_M; break;
    case GGML_TYPE_Q6_K:    ftype = LLAMA_FTYPE_MOSTLY_Q6_K; break;
    case GGML_TYPE_IQ2_XXS: ftype = LLAMA_FTYPE_MOSTLY_IQ2_XXS; break;
    case GGML_TYPE_IQ2_XS:  ftype = LLAMA_FTYPE_MOSTLY_IQ2_XS; break;
    default:                ftype = LLAMA_FTYPE_ALL_F32; break;
    }
    *out = (uint32_t)ftype | LLAMA_FTYPE_GUESSED;
    return true;
}

/* ggml_n_dims: dimensions up to the last one with more than one element. */
static uint32_t tensor_n_dims(const int64_t *ne) {
    for (uint32_t d = GGUF_MAX_DIMS - 1; d > 0; d--) {
        if (ne[d] > 1) return d + 1;
    }
    return 1;
}

static int64_t tensor_n_elements(const struct gguf_tensor_info *t) {
    return t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3]; /* fits: the reader checked the product */
}

static bool ends_with(const char *s, const char *suffix) {
    const size_t n = strlen(s), m = strlen(suffix);
    return n >= m && strcmp(s + n - m, suffix) == 0;
}

/* ---- the plan ---------------------------------------------------------------------- */

struct tensor_plan {
    const struct gguf_tensor_info *info;
    enum ggml_type type;    /* written type */
    bool convert;           /* quantize (else the bytes are copied) */
    const float *imatrix;   /* importance weights, ne[0] of them, or NULL */
};

struct quantize_run {
    const llama_model_quantize_params *params;
    const struct quantize_imatrix *imatrix;
    struct gguf_reader *reader;
    enum llama_ftype ftype;    /* the file type written (params->ftype, or the input's for only_copy) */
    enum ggml_type base_type;
    struct quantize_mix_state mix;
    struct tensor_plan *plans;
    int64_t n_tensors;
    int nthread;
};

/* b1892's tensor selection: 2-D weights, never MoE routers, output.weight only when asked. */
static bool tensor_is_quantizable(const struct quantize_run *q, const struct gguf_tensor_info *t) {
    const llama_model_quantize_params *p = q->params;
    return ends_with(t->name, "weight") && tensor_n_dims(t->ne) == 2 &&
           (p->quantize_output_tensor || strcmp(t->name, "output.weight") != 0) && !p->only_copy &&
           strstr(t->name, "ffn_gate_inp.weight") == NULL;
}

static const float *plan_imatrix(const struct quantize_run *q, const struct gguf_tensor_info *t) {
    if (!q->imatrix) return NULL;
    int64_t n = 0;
    const float *w = quantize_imatrix_find(q->imatrix, t->name, &n);
    if (!w) {
        LOG_INFO("quantize: no importance matrix entry for %s\n", t->name);
        return NULL;
    }
    if (n != t->ne[0]) {
        LOG_INFO("quantize: importance matrix has %" PRId64 " values for %s, which has rows of %" PRId64
                 "; not used\n", n, t->name, t->ne[0]);
        return NULL;
    }
    return w;
}

/* Types whose quantizers b1892 refuses to run without importance weights. */
static bool plan_needs_imatrix(const struct quantize_run *q, const struct tensor_plan *p) {
    return p->type == GGML_TYPE_IQ2_XXS || p->type == GGML_TYPE_IQ2_XS ||
           (p->type == GGML_TYPE_Q2_K && q->ftype == LLAMA_FTYPE_MOSTLY_Q2_K_S &&
            strcmp(p->info->name, "token_embd.weight") != 0);
}

static bool plan_tensor(struct quantize_run *q, const struct gguf_tensor_info *t, struct tensor_plan *p) {
    p->info = t;
    p->type = t->type;
    p->convert = false;
    p->imatrix = NULL;
    if (!tensor_is_quantizable(q, t)) return true;
    enum ggml_type type = q->base_type;
    if (!q->params->pure) type = quantize_mix_type(&q->mix, type, t->name, t->ne[0]);
    if (type == t->type) return true;
    if (t->ne[0] % type_traits_get(type)->blck_size != 0) {
        /* b1892 would quantize across row boundaries or abort; no loader accepts that */
        LOG_WARN("quantize: %s: rows of %" PRId64 " do not fit %s blocks; kept as %s\n", t->name, t->ne[0],
                 type_name(type), type_name(t->type));
        return true;
    }
    const struct type_traits *src = type_traits_get(t->type);
    if (src->is_quantized && !q->params->allow_requantize) {
        error_set("%s: requantizing from type %s is disabled", t->name, type_name(t->type));
        return false;
    }
    if (t->type != GGML_TYPE_F32 && t->type != GGML_TYPE_F16 && !(src->is_quantized && src->to_float)) {
        error_set("%s: cannot dequantize/convert tensor type %s", t->name, type_name(t->type));
        return false;
    }
    p->type = type;
    p->convert = true;
    p->imatrix = plan_imatrix(q, t);
    if (!p->imatrix && plan_needs_imatrix(q, p)) {
        error_set("%s: missing importance matrix for this tensor in a very low-bit quantization (%s)", t->name,
                  type_name(type));
        return false;
    }
    return true;
}

static bool plan_all(struct quantize_run *q) {
    const int64_t n = q->n_tensors;
    const char **names = malloc((size_t)(n ? n : 1) * sizeof *names);
    q->plans = calloc((size_t)(n ? n : 1), sizeof *q->plans);
    if (!names || !q->plans) {
        free(names);
        error_set("out of memory planning the quantization");
        return false;
    }
    for (int64_t i = 0; i < n; i++) names[i] = gguf_tensor(q->reader, i)->name;
    struct quantize_model_info model;
    bool ok = read_model_info(q->reader, &model);
    if (ok) {
        quantize_mix_init(&q->mix, &model, q->ftype, names, (size_t)n);
        if (q->mix.n_attention_wv != q->mix.n_ffn_down || (uint32_t)q->mix.n_attention_wv != model.n_layer) {
            LOG_WARN("quantize: strange model: %d attn_v, %d ffn_down tensors, %" PRIu32 " layers\n",
                     q->mix.n_attention_wv, q->mix.n_ffn_down, model.n_layer);
        }
    }
    for (int64_t i = 0; ok && i < n; i++) ok = plan_tensor(q, gguf_tensor(q->reader, i), &q->plans[i]);
    free(names);
    return ok;
}

/* ---- converting one tensor ---------------------------------------------------------- */

struct convert_job {
    const struct tensor_plan *plan;
    const float *f32;          /* the whole tensor as F32: the input itself, or `work` */
    float *work;               /* rows converted to F32 here when the input is not usable F32 */
    uint8_t *out;
    int64_t n_per_row, n_rows, rows_per_chunk, n_chunks;
    atomic_llong next_chunk;
    atomic_bool failed;
    pthread_mutex_t lock;      /* guards hist and error */
    int64_t hist[HIST_BINS];
    char error[512];
};

/* Rows [r0, r0 + nr) of the input as F32 in job->work. */
static void convert_rows_to_f32(struct convert_job *job, int64_t r0, int64_t nr) {
    const struct gguf_tensor_info *t = job->plan->info;
    const int64_t n = nr * job->n_per_row;
    float *dst = job->work + r0 * job->n_per_row;
    size_t row_size;
    type_row_size(t->type, job->n_per_row, &row_size);
    const uint8_t *src = (const uint8_t *)t->data + (size_t)r0 * row_size;
    if (t->type == GGML_TYPE_F32) {
        memcpy(dst, src, (size_t)n * sizeof(float));
    } else if (t->type == GGML_TYPE_F16) {
        for (int64_t i = 0; i < n; i++) {
            fp16_t h;
            memcpy(&h, src + 2 * i, sizeof h);
            dst[i] = fp16_to_fp32(h);
        }
    } else {
        type_traits_get(t->type)->to_float(src, dst, n);
    }
}

static void convert_job_fail(struct convert_job *job) {
    pthread_mutex_lock(&job->lock);
    if (!atomic_load(&job->failed)) snprintf(job->error, sizeof job->error, "%s", error_last());
    atomic_store(&job->failed, true);
    pthread_mutex_unlock(&job->lock);
}

static void *convert_worker(void *arg) {
    struct convert_job *job = arg;
    int64_t hist[HIST_BINS] = { 0 };
    for (;;) {
        const int64_t c = atomic_fetch_add(&job->next_chunk, 1);
        if (c >= job->n_chunks || atomic_load(&job->failed)) break;
        const int64_t r0 = c * job->rows_per_chunk;
        const int64_t nr = job->n_rows - r0 < job->rows_per_chunk ? job->n_rows - r0 : job->rows_per_chunk;
        if (job->work) convert_rows_to_f32(job, r0, nr);
        if (quant_quantize_chunk(job->plan->type, job->f32, job->out, r0 * job->n_per_row, nr, job->n_per_row,
                                 hist, job->plan->imatrix) == 0) {
            convert_job_fail(job);
            break;
        }
    }
    pthread_mutex_lock(&job->lock);
    for (int i = 0; i < HIST_BINS; i++) job->hist[i] += hist[i];
    pthread_mutex_unlock(&job->lock);
    return NULL;
}

/* Buffers reused from tensor to tensor (grown to the largest). */
struct buffers {
    float *f32;
    size_t f32_size;
    uint8_t *out;
    size_t out_size;
};

static bool buffer_reserve(void **p, size_t *have, size_t need) {
    if (need <= *have) return true;
    void *n = realloc(*p, need);
    if (!n) return false;
    *p = n;
    *have = need;
    return true;
}

/* Converts plan's tensor into buf->out (out_size bytes); hist gets the quant histogram. */
static bool convert_tensor(const struct quantize_run *q, const struct tensor_plan *plan, struct buffers *buf,
                           size_t out_size, int64_t hist[HIST_BINS]) {
    const struct gguf_tensor_info *t = plan->info;
    const int64_t n_elements = tensor_n_elements(t);
    /* F32 input is used in place when its floats are aligned (the mapping's offsets need not be) */
    const bool direct = t->type == GGML_TYPE_F32 && (uintptr_t)t->data % sizeof(float) == 0;
    if (!buffer_reserve((void **)&buf->out, &buf->out_size, out_size ? out_size : 1) ||
        (!direct && !buffer_reserve((void **)&buf->f32, &buf->f32_size, (size_t)n_elements * sizeof(float)))) {
        error_set("%s: out of memory (%" PRId64 " elements)", t->name, n_elements);
        return false;
    }
    struct convert_job job = {
        .plan = plan,
        .f32 = direct ? (const float *)t->data : buf->f32,
        .work = direct ? NULL : buf->f32,
        .out = buf->out,
        .n_per_row = t->ne[0],
        .n_rows = n_elements / t->ne[0],
    };
    job.rows_per_chunk = (CHUNK_MIN_ELEMENTS + job.n_per_row - 1) / job.n_per_row;
    job.n_chunks = (job.n_rows + job.rows_per_chunk - 1) / job.rows_per_chunk;
    atomic_init(&job.next_chunk, 0);
    atomic_init(&job.failed, false);
    pthread_mutex_init(&job.lock, NULL);

    /* the calling thread is one of the workers; fewer threads if some cannot start */
    const int n_threads = q->nthread < job.n_chunks ? q->nthread : (int)job.n_chunks;
    pthread_t *threads = n_threads > 1 ? malloc((size_t)(n_threads - 1) * sizeof *threads) : NULL;
    int started = 0;
    while (threads && started < n_threads - 1 && pthread_create(&threads[started], NULL, convert_worker, &job) == 0) {
        started++;
    }
    convert_worker(&job);
    for (int i = 0; i < started; i++) pthread_join(threads[i], NULL);
    free(threads);
    pthread_mutex_destroy(&job.lock);
    if (atomic_load(&job.failed)) {
        error_set("%s: %s", t->name, job.error);
        return false;
    }
    memcpy(hist, job.hist, sizeof job.hist);
    return true;
}

/* ---- writing -------------------------------------------------------------------------- */

static double mib(size_t bytes) {
    return (double)bytes / 1024.0 / 1024.0;
}

/* snprintf at buf[*len], never past `size` (long tensor names are cut). */
static void append(char *buf, size_t size, size_t *len, const char *fmt, ...) LC_PRINTF(4, 5);
static void append(char *buf, size_t size, size_t *len, const char *fmt, ...) {
    if (*len + 1 >= size) return;
    va_list ap;
    va_start(ap, fmt);
    const int n = vsnprintf(buf + *len, size - *len, fmt, ap);
    va_end(ap);
    if (n > 0) *len = *len + (size_t)n < size ? *len + (size_t)n : size - 1;
}

static void append_hist(char *buf, size_t size, size_t *len, const int64_t hist[HIST_BINS], double n) {
    for (int b = 0; b < HIST_BINS; b++) append(buf, size, len, "%5.3f ", (double)hist[b] / n);
}

static int64_t hist_total(const int64_t hist[HIST_BINS]) {
    int64_t total = 0;
    for (int b = 0; b < HIST_BINS; b++) total += hist[b];
    return total;
}

/* One progress line per tensor, in the layout of b1892's quantizer. */
static void log_tensor(const struct quantize_run *q, int64_t i, const struct tensor_plan *p, size_t in_size,
                       size_t out_size, const int64_t hist[HIST_BINS]) {
    const struct gguf_tensor_info *t = p->info;
    char line[512];
    size_t len = 0;
    append(line, sizeof line, &len, "[%4" PRId64 "/%4" PRId64 "] %36s - [%5" PRId64 ", %5" PRId64 ", %5" PRId64
           ", %5" PRId64 "], type = %6s, ", i + 1, q->n_tensors, t->name, t->ne[0], t->ne[1], t->ne[2], t->ne[3],
           type_name(t->type));
    if (!p->convert) {
        append(line, sizeof line, &len, "size = %8.3f MB", mib(in_size));
    } else {
        append(line, sizeof line, &len, "quantizing to %s .. size = %8.2f MiB -> %8.2f MiB | hist: ",
               type_name(p->type), mib(in_size), mib(out_size));
        if (hist_total(hist) > 0) append_hist(line, sizeof line, &len, hist, (double)tensor_n_elements(t));
    }
    LOG_INFO("%s\n", line);
}

static bool declare_output(const struct quantize_run *q, struct gguf_writer *w) {
    if (!gguf_set_u32(w, "general.quantization_version", QUANTIZATION_VERSION) ||
        !gguf_set_u32(w, "general.file_type", (uint32_t)q->ftype)) {
        return false;
    }
    for (int64_t i = 0; i < q->n_tensors; i++) {
        const struct tensor_plan *p = &q->plans[i];
        if (!gguf_add_tensor_info(w, p->info->name, p->type, tensor_n_dims(p->info->ne), p->info->ne)) return false;
    }
    return true;
}

/* Streams every tensor; sizes_out[0..1] = total bytes in, out. */
static bool write_tensors(const struct quantize_run *q, struct gguf_stream *s, size_t sizes_out[2]) {
    struct buffers buf = { 0 };
    int64_t hist_all[HIST_BINS] = { 0 };
    bool ok = true;
    for (int64_t i = 0; ok && i < q->n_tensors; i++) {
        const struct tensor_plan *p = &q->plans[i];
        const struct gguf_tensor_info *t = p->info;
        size_t out_size = t->size;
        int64_t hist[HIST_BINS] = { 0 };
        if (p->convert) {
            size_t row_size;
            type_row_size(p->type, t->ne[0], &row_size); /* fits: declare_output checked it */
            out_size = row_size * (size_t)(tensor_n_elements(t) / t->ne[0]);
            ok = convert_tensor(q, p, &buf, out_size, hist) && gguf_stream_write(s, buf.out, out_size);
        } else {
            ok = gguf_stream_write(s, t->data, t->size);
        }
        if (!ok) break;
        for (int b = 0; b < HIST_BINS; b++) hist_all[b] += hist[b];
        sizes_out[0] += t->size;
        sizes_out[1] += out_size;
        log_tensor(q, i, p, t->size, out_size, hist);
    }
    free(buf.f32);
    free(buf.out);
    if (!ok) return false;
    if (hist_total(hist_all) > 0) {
        char line[256];
        size_t len = 0;
        append(line, sizeof line, &len, "quantize: hist: ");
        append_hist(line, sizeof line, &len, hist_all, (double)hist_total(hist_all));
        LOG_INFO("%s\n", line);
    }
    return true;
}

/* Creates an empty, unused file beside `path` (so the rename stays on one file system). */
static char *temp_path_create(const char *path) {
    static atomic_uint counter;
    const size_t size = strlen(path) + 64;
    char *tmp = malloc(size);
    if (!tmp) {
        error_set("out of memory");
        return NULL;
    }
    for (int attempt = 0; attempt < 100; attempt++) {
        snprintf(tmp, size, "%s.tmp-%ld-%u", path, (long)getpid(), atomic_fetch_add(&counter, 1));
        int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL, 0666);
        if (fd >= 0) {
            close(fd);
            return tmp;
        }
        if (errno != EEXIST) break;
    }
    error_set("cannot create '%s': %s", path, strerror(errno));
    free(tmp);
    return NULL;
}

static bool write_output(const struct quantize_run *q, const char *path_out) {
    struct gguf_writer *w = gguf_writer_from_reader(q->reader);
    if (!w) return false;
    char *tmp = NULL;
    struct gguf_stream *s = NULL;
    size_t sizes[2] = { 0, 0 };
    bool ok = declare_output(q, w) && (tmp = temp_path_create(path_out)) && (s = gguf_stream_open(w, tmp));
    if (ok) {
        const bool written = write_tensors(q, s, sizes);
        ok = gguf_stream_close(s) && written; /* closing an incomplete stream removes the file */
    }
    if (ok && rename(tmp, path_out) != 0) {
        error_set("cannot rename '%s' to '%s': %s", tmp, path_out, strerror(errno));
        ok = false;
    }
    if (!ok && tmp) remove(tmp);
    free(tmp);
    gguf_writer_free(w);
    if (!ok) return false;
    LOG_INFO("quantize: model size  = %8.2f MB\n", mib(sizes[0]));
    LOG_INFO("quantize: quant size  = %8.2f MB\n", mib(sizes[1]));
    if (q->mix.n_fallback > 0) {
        LOG_WARN("quantize: %d of %d tensor(s) incompatible with k-quants and required fallback quantization\n",
                 q->mix.n_fallback, q->mix.n_k_quantized + q->mix.n_fallback);
    }
    return true;
}

/* ---- entry point ------------------------------------------------------------------------ */

bool quantize_model_file(const char *path_in, const char *path_out, const llama_model_quantize_params *params) {
    struct quantize_run q = { .params = params, .ftype = params->ftype };
    if (!quantize_ftype_base_type(params->ftype, &q.base_type)) {
        error_set("invalid output file type %d", (int)params->ftype);
        return false;
    }
    if (params->imatrix && !quantize_imatrix_is_valid(params->imatrix)) {
        error_set("params->imatrix is not an importance matrix loaded by quantize_imatrix_load");
        return false;
    }
    q.imatrix = params->imatrix;
    q.nthread = params->nthread;
    if (q.nthread <= 0) {
        const long n = sysconf(_SC_NPROCESSORS_ONLN);
        q.nthread = n > 0 ? (int)(n < 1024 ? n : 1024) : 1;
    }
    if (q.imatrix) LOG_INFO("quantize: importance matrix with %zu entries\n", quantize_imatrix_count(q.imatrix));

    q.reader = gguf_open_file(path_in, true);
    if (!q.reader) return false;
    q.n_tensors = gguf_n_tensors(q.reader);
    uint32_t file_type = (uint32_t)params->ftype;
    bool ok = !params->only_copy || model_file_type(q.reader, &file_type);
    q.ftype = (enum llama_ftype)file_type;
    ok = ok && plan_all(&q) && write_output(&q, path_out);
    free(q.plans);
    gguf_close(q.reader);
    return ok;
}
