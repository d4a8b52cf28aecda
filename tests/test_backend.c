/*
 * Buffers, buffer types, the CPU backend and the device / split-mode helpers.
 * The KV buffer sizes are the figures b1892 writes into session files.
 */
#include "test_util.h"

#include "backend/backend.h"
#include "backend/cpu/cpu_backend.h"
#include "backend/device.h"
#include "core/log.h"
#include "tensor/tensor.h"

/* ---- a device-like buffer type: memory the host may not address directly ---- */

static int g_dev_sets, g_dev_gets;

static void dev_free(struct backend_buffer *buf) { free(buf->context); }
static void *dev_base(struct backend_buffer *buf) { return buf->context; }
static void dev_set(struct backend_buffer *buf, struct tensor *t, const void *data, size_t offset, size_t size) {
    (void)buf;
    g_dev_sets++;
    memcpy((char *)t->data + offset, data, size);
}
static void dev_get(struct backend_buffer *buf, const struct tensor *t, void *data, size_t offset, size_t size) {
    (void)buf;
    g_dev_gets++;
    memcpy(data, (const char *)t->data + offset, size);
}
static void dev_clear(struct backend_buffer *buf, uint8_t v) { memset(buf->context, v, buf->size); }

static const struct backend_buffer_i dev_buffer_iface = {
    .free = dev_free, .base = dev_base, .set_tensor = dev_set, .get_tensor = dev_get, .clear = dev_clear,
};
static const char *dev_name(struct backend_buffer_type *b) { (void)b; return "DEV"; }
static struct backend_buffer *dev_alloc(struct backend_buffer_type *b, size_t size) {
    void *mem = aligned_alloc(32, (size + 31) / 32 * 32 + 32);
    return backend_buffer_init(b, dev_buffer_iface, mem, size);
}
static size_t dev_alignment(struct backend_buffer_type *b) { (void)b; return 32; }
static bool dev_supports(struct backend_buffer_type *b, struct backend *be) { (void)b; (void)be; return false; }
static struct backend_buffer_type g_dev_buft = {
    .iface = { .name = dev_name, .alloc_buffer = dev_alloc, .alignment = dev_alignment, .supports_backend = dev_supports },
};

/* ---- CPU buffers ---------------------------------------------------------------- */

static void test_cpu_buffer(void) {
    struct backend_buffer_type *buft = backend_cpu_buffer_type();
    CHECK_STR_EQ(backend_buft_name(buft), "CPU");
    CHECK(backend_buft_is_host(buft));
    CHECK_EQ_INT(backend_buft_alignment(buft), 64);

    struct backend_buffer *buf = backend_buft_alloc_buffer(buft, 100);
    CHECK(buf != NULL);
    CHECK_EQ_INT(backend_buffer_size(buf), 128 + 64); /* PAD64(100) + b1892's 64 bytes of slack */
    CHECK(((uintptr_t)backend_buffer_base(buf) % 64) == 0);
    CHECK(backend_buffer_get_type(buf) == buft);
    CHECK(backend_buffer_get_usage(buf) == BUFFER_USAGE_ANY);
    backend_buffer_set_usage(buf, BUFFER_USAGE_WEIGHTS);
    CHECK(backend_buffer_get_usage(buf) == BUFFER_USAGE_WEIGHTS);
    backend_buffer_clear(buf, 0xAB);
    CHECK(((unsigned char *)backend_buffer_base(buf))[191] == 0xAB);
    backend_buffer_reset(buf);
    backend_buffer_free(buf);
    backend_buffer_free(NULL);

    buf = backend_buft_alloc_buffer(buft, SIZE_MAX - 10);
    CHECK(buf == NULL);
}

/* The KV cache of b1892's session examples: n_layer 2, n_embd_gqa 64, F16 K and V
 * per layer in one CPU buffer: kv_buf_size = 64 + sum PAD64(bytes). */
static void test_kv_buffer_size(void) {
    const int n_ctx_cases[] = { 128, 16 };
    const size_t expected[] = { 65600, 8256 };
    for (int c = 0; c < 2; c++) {
        struct tensor_ctx *ctx = tensor_ctx_new(8, 0);
        struct tensor *kv[4];
        for (int i = 0; i < 4; i++) kv[i] = tensor_new_1d(ctx, GGML_TYPE_F16, 64 * n_ctx_cases[c]);
        size_t need;
        CHECK(backend_ctx_tensors_size(ctx, backend_cpu_buffer_type(), &need));
        CHECK_EQ_INT(need, 4 * 64 * n_ctx_cases[c] * 2);
        struct backend_buffer *buf = backend_alloc_ctx_tensors(ctx, backend_cpu_buffer_type());
        CHECK(buf != NULL);
        CHECK_EQ_INT(backend_buffer_size(buf), expected[c]);
        for (int i = 0; i < 4; i++) {
            CHECK(kv[i]->buffer == buf);
            CHECK((char *)kv[i]->data == (char *)backend_buffer_base(buf) + (size_t)i * 64 * n_ctx_cases[c] * 2);
        }
        backend_buffer_free(buf);
        tensor_ctx_free(ctx);
    }
}

/* Odd sizes are padded; views among the context's tensors point into their sources. */
static void test_alloc_ctx_tensors(void) {
    struct tensor_ctx *ctx = tensor_ctx_new(8, 0);
    struct tensor *a = tensor_new_1d(ctx, GGML_TYPE_F32, 10); /* 40 -> 64 */
    struct tensor *b = tensor_new_1d(ctx, GGML_TYPE_F32, 17); /* 68 -> 128 */
    struct tensor *v = tensor_view_1d(ctx, b, 4, 8);
    struct tensor *c = tensor_new_2d(ctx, GGML_TYPE_F16, 32, 3); /* 192 */
    size_t need;
    CHECK(backend_ctx_tensors_size(ctx, backend_cpu_buffer_type(), &need));
    CHECK_EQ_INT(need, 64 + 128 + 192);
    struct backend_buffer *buf = backend_alloc_ctx_tensors(ctx, backend_cpu_buffer_type());
    CHECK(buf != NULL);
    char *base = backend_buffer_base(buf);
    CHECK((char *)a->data == base);
    CHECK((char *)b->data == base + 64);
    CHECK((char *)c->data == base + 192);
    CHECK((char *)v->data == (char *)b->data + 8);
    CHECK(backend_tensor_buffer(v) == buf);

    float vals[17];
    for (int i = 0; i < 17; i++) vals[i] = (float)i;
    CHECK(backend_tensor_set(b, vals, 0, sizeof vals));
    float got[4];
    CHECK(backend_tensor_get(v, got, 0, sizeof got));
    CHECK(got[0] == 2.0f && got[3] == 5.0f);
    /* out of range, either end */
    CHECK(!backend_tensor_set(b, vals, 4, sizeof vals));
    CHECK(strstr(error_last(), "outside") != NULL);
    CHECK(!backend_tensor_get(v, got, 0, 17));
    CHECK(!backend_tensor_get(v, got, SIZE_MAX, 2));

    /* nothing left to allocate is an error, not an empty buffer */
    CHECK(backend_alloc_ctx_tensors(ctx, backend_cpu_buffer_type()) == NULL);
    backend_buffer_free(buf);
    tensor_ctx_free(ctx);
}

/* Weights used in place: a buffer over memory it does not own. */
static void test_buffer_from_ptr(void) {
    size_t size = 4096;
    unsigned char *mem = aligned_alloc(64, size);
    for (size_t i = 0; i < size; i++) mem[i] = (unsigned char)i;
    struct backend_buffer *buf = backend_cpu_buffer_from_ptr(mem, size);
    CHECK(buf != NULL);
    CHECK(backend_buffer_base(buf) == mem);
    CHECK_EQ_INT(backend_buffer_size(buf), size);
    CHECK(backend_buffer_is_host(buf));

    struct tensor_ctx *ctx = tensor_ctx_new(8, 0);
    struct tensor *w = tensor_new_1d(ctx, GGML_TYPE_F32, 8);          /* 32 bytes */
    struct tensor *w2 = tensor_new_1d(ctx, GGML_TYPE_F32, 8);
    struct tensor *big = tensor_new_1d(ctx, GGML_TYPE_F32, 1025);     /* 4100 bytes */
    struct tensor *view = tensor_view_1d(ctx, w2, 2, 0);
    CHECK(backend_buffer_place_tensor(buf, w, mem + 32)); /* 32-byte aligned, as GGUF data */
    CHECK(w->data == mem + 32 && w->buffer == buf);
    unsigned char got[4];
    CHECK(backend_tensor_get(w, got, 0, 4));
    CHECK(got[0] == 32 && got[3] == 35);
    CHECK(!backend_buffer_place_tensor(buf, w, mem + 64)); /* already placed */
    CHECK(!backend_buffer_place_tensor(buf, big, mem));    /* does not fit */
    CHECK(!backend_buffer_place_tensor(buf, w2, mem + size - 16)); /* runs past the end */
    CHECK(!backend_buffer_place_tensor(buf, w2, mem - 64));        /* before the start */
    CHECK(!backend_buffer_place_tensor(buf, view, mem));           /* a view has its source's memory */
    CHECK(backend_buffer_place_tensor(buf, w2, mem + size - 32));  /* exactly at the end */
    CHECK(backend_view_init(view) && view->data == w2->data);

    backend_buffer_free(buf); /* leaves mem alone (ASan would see a double free) */
    CHECK(mem[100] == 100);
    free(mem);
    tensor_ctx_free(ctx);
    CHECK(backend_cpu_buffer_from_ptr(NULL, 10) == NULL);
}

/* Copies between host memory, a host buffer and device-like buffers. */
static void test_tensor_copy(void) {
    struct tensor_ctx *host = tensor_ctx_new(4, 4096);
    struct tensor *h = tensor_new_1d(host, GGML_TYPE_F32, 16);
    for (int i = 0; i < 16; i++) ((float *)h->data)[i] = (float)i * 0.5f;

    struct tensor_ctx *ctx = tensor_ctx_new(8, 0);
    struct tensor *d1 = tensor_new_1d(ctx, GGML_TYPE_F32, 16);
    struct tensor *d2 = tensor_new_1d(ctx, GGML_TYPE_F32, 16);
    struct tensor *c = tensor_new_1d(ctx, GGML_TYPE_F32, 16);
    struct tensor *other = tensor_new_1d(ctx, GGML_TYPE_F32, 8);
    struct tensor *unplaced = tensor_new_1d(ctx, GGML_TYPE_F32, 16);
    struct backend_buffer *b1 = backend_buft_alloc_buffer(&g_dev_buft, 64);
    struct backend_buffer *b2 = backend_buft_alloc_buffer(&g_dev_buft, 64);
    struct backend_buffer *bc = backend_buft_alloc_buffer(backend_cpu_buffer_type(), 128);
    CHECK(backend_buffer_place_tensor(b1, d1, backend_buffer_base(b1)));
    CHECK(backend_buffer_place_tensor(b2, d2, backend_buffer_base(b2)));
    CHECK(backend_buffer_place_tensor(bc, c, backend_buffer_base(bc)));
    CHECK(backend_buffer_place_tensor(bc, other, (char *)backend_buffer_base(bc) + 64));
    CHECK(!backend_buffer_is_host(b1));

    g_dev_sets = g_dev_gets = 0;
    CHECK(backend_tensor_copy(h, d1)); /* host -> device: one set */
    CHECK_EQ_INT(g_dev_sets, 1);
    CHECK(backend_tensor_copy(d1, d2)); /* device -> device without a direct path: staged */
    CHECK_EQ_INT(g_dev_gets, 1);
    CHECK_EQ_INT(g_dev_sets, 2);
    CHECK(backend_tensor_copy(d2, c)); /* device -> host: one get */
    CHECK_EQ_INT(g_dev_gets, 2);
    float got[16];
    CHECK(backend_tensor_get(c, got, 0, sizeof got));
    CHECK(memcmp(got, h->data, sizeof got) == 0);

    CHECK(!backend_tensor_copy(h, other)); /* different shape */
    CHECK(strstr(error_last(), "different") != NULL);
    CHECK(!backend_tensor_copy(unplaced, c));
    CHECK(!backend_tensor_set(unplaced, got, 0, 4));

    backend_buffer_free(b1);
    backend_buffer_free(b2);
    backend_buffer_free(bc);
    tensor_ctx_free(ctx);
    tensor_ctx_free(host);
}

/* ---- the CPU backend ---------------------------------------------------------------- */

static int g_abort_polls;
static bool abort_now(void *data) {
    (void)data;
    g_abort_polls++;
    return true;
}

static void test_cpu_backend(void) {
    CHECK(backend_cpu_new(0) == NULL);
    struct backend *cpu = backend_cpu_new(1);
    CHECK(cpu != NULL);
    CHECK(backend_is_cpu(cpu));
    CHECK_STR_EQ(backend_name(cpu), "CPU");
    CHECK(backend_default_buffer_type(cpu) == backend_cpu_buffer_type());
    CHECK(backend_buft_supports_backend(backend_cpu_buffer_type(), cpu));
    CHECK(!backend_buft_supports_backend(&g_dev_buft, cpu));

    struct tensor_ctx *ctx = tensor_ctx_new(8, 0);
    struct tensor *a = tensor_new_1d(ctx, GGML_TYPE_F32, 32);
    struct tensor *b = op_scale(ctx, op_sqr(ctx, a), 3.0f);
    struct graph *g = graph_new(ctx, 8);
    CHECK(graph_build_forward(g, b));
    CHECK(backend_supports_op(cpu, b));
    struct backend_buffer *buf = backend_alloc_ctx_tensors(ctx, backend_default_buffer_type(cpu));
    CHECK(buf != NULL);
    float x[32], y[32];
    for (int i = 0; i < 32; i++) x[i] = (float)i - 10.0f;
    CHECK(backend_tensor_set_async(cpu, a, x, 0, sizeof x));
    backend_synchronize(cpu);

    /* more threads than the pool had, then fewer: both compute the same */
    for (int n_threads = 1; n_threads <= 4; n_threads += 3) {
        CHECK(backend_cpu_set_n_threads(cpu, n_threads));
        CHECK(backend_graph_compute(cpu, g));
        CHECK(backend_tensor_get_async(cpu, b, y, 0, sizeof y));
        backend_synchronize(cpu);
        for (int i = 0; i < 32; i++) CHECK(y[i] == 3.0f * x[i] * x[i]);
    }
    CHECK(!backend_cpu_set_n_threads(cpu, 0));

    backend_cpu_set_abort_callback(cpu, abort_now, NULL);
    CHECK(!backend_graph_compute(cpu, g));
    CHECK(g_abort_polls > 0);
    backend_cpu_set_abort_callback(cpu, NULL, NULL);
    CHECK(backend_graph_compute(cpu, g));

    backend_buffer_free(buf);
    tensor_ctx_free(ctx);
    backend_free(cpu);
    backend_free(NULL);
}

/* ---- devices and split modes ----------------------------------------------------------- */

static void test_devices(void) {
    CHECK_EQ_INT(backend_device_count(), 1);
    CHECK_STR_EQ(backend_device_name(0), "CPU");
    CHECK(backend_device_buffer_type(0) == backend_cpu_buffer_type());
    CHECK(backend_device_buffer_type(1) == NULL);
    CHECK(backend_device_name(-1) == NULL);

    /* b1892's layer split: cumulative shares [0.25, 0.5, 1] over 9 slots (8 layers + output) */
    const float split3[3] = { 1.0f, 1.0f, 2.0f };
    const int want3[9] = { 0, 0, 0, 1, 1, 2, 2, 2, 2 };
    for (int il = 0; il < 9; il++) CHECK_EQ_INT(backend_layer_split_device(split3, 3, il, 9), want3[il]);
    /* no shares: equal ones */
    const float zeros[2] = { 0.0f, 0.0f };
    const int want2[4] = { 0, 0, 1, 1 };
    for (int il = 0; il < 4; il++) {
        CHECK_EQ_INT(backend_layer_split_device(NULL, 2, il, 4), want2[il]);
        CHECK_EQ_INT(backend_layer_split_device(zeros, 2, il, 4), want2[il]);
    }
    /* a device with a zero share gets nothing */
    const float skip_first[2] = { 0.0f, 3.0f };
    for (int il = 0; il < 4; il++) CHECK_EQ_INT(backend_layer_split_device(skip_first, 2, il, 4), 1);
    const float negative[2] = { 1.0f, -1.0f };
    CHECK_EQ_INT(backend_layer_split_device(negative, 2, 0, 4), -1);
    CHECK_EQ_INT(backend_layer_split_device(NULL, 2, 4, 4), -1);

    struct backend_buffer_type *mat = NULL, *other = NULL;
    const float one[1] = { 1.0f };
    for (int mode = LLAMA_SPLIT_NONE; mode <= LLAMA_SPLIT_ROW; mode++) {
        mat = other = NULL;
        CHECK(backend_layer_buffer_types((enum llama_split_mode)mode, 0, one, 3, 9, &mat, &other));
        CHECK(mat == backend_cpu_buffer_type() && other == backend_cpu_buffer_type());
    }
    CHECK(backend_layer_buffer_types(LLAMA_SPLIT_LAYER, 0, NULL, 8, 9, &mat, &other));
    CHECK(!backend_layer_buffer_types(LLAMA_SPLIT_NONE, 1, NULL, 0, 9, &mat, &other));
    CHECK(strstr(error_last(), "device 1") != NULL);
    CHECK(!backend_layer_buffer_types(LLAMA_SPLIT_ROW, -1, NULL, 0, 9, &mat, &other));
    CHECK(!backend_layer_buffer_types((enum llama_split_mode)7, 0, NULL, 0, 9, &mat, &other));
}

int main(void) {
    test_cpu_buffer();
    test_kv_buffer_size();
    test_alloc_ctx_tensors();
    test_buffer_from_ptr();
    test_tensor_copy();
    test_cpu_backend();
    test_devices();
    return test_finish("test_backend");
}
