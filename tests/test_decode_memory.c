/*
 * Memory on the hot path (issue 6, part 4), on stories260K:
 *   - llama_decode allocates nothing once the context exists: neither a
 *     single-token decode (generation) nor a prompt batch, with 1 and with
 *     2 threads; every malloc/calloc/realloc/aligned_alloc/posix_memalign
 *     call is counted while decoding;
 *   - the weights are used from the mapped file (no copy).
 *
 * Counting: in a plain build this program defines the allocation functions
 * itself (they take precedence over the C library's) and forwards to
 * glibc's __libc_* entry points; under AddressSanitizer, which owns the
 * allocator, it installs the sanitizer's malloc hook instead.
 */
#include <errno.h>
#include <stdatomic.h>

#include "test_util.h"

#include "llama.h"
#include "model/model.h"
#include "gguf/gguf.h"

static atomic_int g_counting;
static atomic_long g_allocs;

static void count_alloc(void) {
    if (atomic_load_explicit(&g_counting, memory_order_relaxed)) atomic_fetch_add(&g_allocs, 1);
}

#if defined(__SANITIZE_ADDRESS__)
int __sanitizer_install_malloc_and_free_hooks(void (*malloc_hook)(const volatile void *, size_t),
                                              void (*free_hook)(const volatile void *));
static void hook_malloc(const volatile void *p, size_t n) {
    (void)p;
    (void)n;
    count_alloc();
}
static void hook_free(const volatile void *p) { (void)p; }
static bool counting_install(void) { return __sanitizer_install_malloc_and_free_hooks(hook_malloc, hook_free) != 0; }
#elif defined(__GLIBC__)
void *__libc_malloc(size_t size);
void *__libc_calloc(size_t n, size_t size);
void *__libc_realloc(void *p, size_t size);
void *__libc_memalign(size_t alignment, size_t size);
void __libc_free(void *p);

void *malloc(size_t size) {
    count_alloc();
    return __libc_malloc(size);
}
void *calloc(size_t n, size_t size) {
    count_alloc();
    return __libc_calloc(n, size);
}
void *realloc(void *p, size_t size) {
    count_alloc();
    return __libc_realloc(p, size);
}
void *aligned_alloc(size_t alignment, size_t size) {
    count_alloc();
    return __libc_memalign(alignment, size);
}
void *memalign(size_t alignment, size_t size) {
    count_alloc();
    return __libc_memalign(alignment, size);
}
int posix_memalign(void **out, size_t alignment, size_t size) {
    count_alloc();
    void *p = __libc_memalign(alignment, size);
    if (!p) return ENOMEM;
    *out = p;
    return 0;
}
void free(void *p) { __libc_free(p); }
static bool counting_install(void) { return true; }
#else
static bool counting_install(void) { return false; }
#endif

/* Allocations made by n_gen single-token decodes after a prompt of n_prompt tokens. */
static long allocs_while_decoding(struct llama_model *model, int n_threads, int n_prompt, int n_gen, long *prompt_allocs) {
    struct llama_context_params cp = llama_context_default_params();
    cp.seed = 1;
    cp.n_ctx = 128;
    cp.n_batch = 64;
    cp.n_threads = cp.n_threads_batch = (uint32_t)n_threads;
    struct llama_context *ctx = llama_new_context_with_model(model, cp);
    CHECK(ctx != NULL);
    if (!ctx) return -1;
    llama_token tokens[64];
    for (int i = 0; i < n_prompt; i++) tokens[i] = 1 + (i * 37) % 500;
    /* warm-up: the first decodes may size the work memory once */
    CHECK(llama_decode(ctx, llama_batch_get_one(tokens, n_prompt, 0, 0)) == 0);
    CHECK(llama_decode(ctx, llama_batch_get_one(tokens, 1, n_prompt, 0)) == 0);
    llama_kv_cache_clear(ctx);

    atomic_store(&g_allocs, 0);
    atomic_store(&g_counting, 1);
    int rc = llama_decode(ctx, llama_batch_get_one(tokens, n_prompt, 0, 0));
    atomic_store(&g_counting, 0);
    CHECK(rc == 0);
    *prompt_allocs = atomic_load(&g_allocs);

    atomic_store(&g_allocs, 0);
    atomic_store(&g_counting, 1);
    for (int i = 0; i < n_gen && rc == 0; i++) {
        llama_token t = tokens[i % n_prompt];
        rc = llama_decode(ctx, llama_batch_get_one(&t, 1, n_prompt + i, 0));
    }
    atomic_store(&g_counting, 0);
    CHECK(rc == 0);
    llama_free(ctx);
    return atomic_load(&g_allocs);
}

int main(void) {
    const char *path = test_require_shared("models/stories260K.gguf");
    if (!counting_install()) test_skip_unsupported("no way to count allocations with this C library");

    /* the counter works: an allocation in the window is seen */
    atomic_store(&g_allocs, 0);
    atomic_store(&g_counting, 1);
    void *volatile probe = malloc(100);
    atomic_store(&g_counting, 0);
    free(probe);
    CHECK_EQ_INT(atomic_load(&g_allocs), 1);

    struct llama_model_params mp = llama_model_default_params();
    struct llama_model *model = llama_load_model_from_file(path, mp);
    CHECK(model != NULL);
    if (!model) return test_finish("test_decode_memory");

    for (int n_threads = 1; n_threads <= 2; n_threads++) {
        long prompt_allocs = -1;
        long gen_allocs = allocs_while_decoding(model, n_threads, 24, 16, &prompt_allocs);
        CHECK_MSG(prompt_allocs == 0, "%ld allocations in a 24-token prompt decode, %d threads", prompt_allocs, n_threads);
        CHECK_MSG(gen_allocs == 0, "%ld allocations in 16 single-token decodes, %d threads", gen_allocs, n_threads);
    }

    /* mapped weights: every weight tensor's data lies inside the file mapping */
    const char *base = gguf_file_data(model->gguf);
    const size_t size = gguf_file_size(model->gguf);
    const struct tensor *weights[] = { model->tok_embd, model->output, model->layers[0].wq, model->layers[0].ffn_down };
    for (size_t i = 0; i < sizeof weights / sizeof weights[0]; i++) {
        const char *d = weights[i]->data;
        CHECK_MSG(d >= base && d + tensor_nbytes(weights[i]) <= base + size, "'%s' is not in the mapping",
                  weights[i]->name);
    }
    llama_free_model(model);
    return test_finish("test_decode_memory");
}
