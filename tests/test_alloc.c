/*
 * The graph allocator: on graphs whose peak memory is worked out by hand
 * below, the planned buffer is no larger than the largest set of tensors
 * alive at once (sizes padded to the 64-byte alignment), in-place ops really
 * take over their source's memory, and every graph computes the same bytes
 * in the planned memory as with each tensor in memory of its own.
 */
#include "test_util.h"

#include "backend/backend.h"
#include "backend/cpu/cpu_backend.h"
#include "core/log.h"
#include "graph/alloc.h"
#include "tensor/tensor.h"

/* S: one F32 [64, 16] tensor */
#define NE0 64
#define NE1 16
#define S ((size_t)NE0 * NE1 * sizeof(float))

/* Weights have memory before any graph: the allocator leaves them alone. */
struct weights {
    struct tensor_ctx *ctx;
    struct tensor *w;     /* [64, 16] */
    struct tensor *w10;   /* [10]: 40 bytes, padded to 64 */
    struct tensor *w_row; /* [64] */
};

/* What a graph builder hands back: outputs to compare, inputs to fill, and
 * named tensors for the checks of the case. */
struct built {
    struct tensor *out[4];
    int n_out;
    struct tensor *in[4];
    int n_in;
    struct tensor *t[8];
};

struct alloc_case {
    const char *name;
    void (*build)(struct tensor_ctx *ctx, const struct weights *w, struct built *b);
    size_t peak;                       /* by hand: the largest set alive at once */
    void (*check)(const struct built *b); /* extra checks after allocation (may be NULL) */
};

static struct tensor *output(struct built *b, struct tensor *t) {
    t->flags |= TENSOR_FLAG_OUTPUT;
    b->out[b->n_out++] = t;
    return t;
}

static struct tensor *input(struct built *b, struct tensor *t) {
    t->flags |= TENSOR_FLAG_INPUT;
    b->in[b->n_in++] = t;
    return t;
}

/* a = dup(w); b = dup(a); c = dup(b)
 * alive: {a} {a,b} then a dies, {b,c}: peak 2S; c reuses a's block. */
static void build_chain(struct tensor_ctx *ctx, const struct weights *w, struct built *b) {
    struct tensor *a = op_dup(ctx, w->w);
    struct tensor *bb = op_dup(ctx, a);
    struct tensor *c = op_dup(ctx, bb);
    output(b, c);
    b->t[0] = a, b->t[2] = c;
}
static void check_chain(const struct built *b) {
    CHECK(b->t[2]->data == b->t[0]->data); /* c landed where a was */
}

/* a = dup(w); b = dup(a); c = sqr(b) [in place on b]; d = add(a, c) [in place on a]
 * in place: {a} {a,b} {a,b=c} {a=d,c} then c dies: peak 2S (3S without). */
static void build_inplace(struct tensor_ctx *ctx, const struct weights *w, struct built *b) {
    struct tensor *a = op_dup(ctx, w->w);
    struct tensor *bb = op_dup(ctx, a);
    struct tensor *c = op_sqr(ctx, bb);
    struct tensor *d = op_add(ctx, a, c);
    output(b, d);
    b->t[0] = a, b->t[1] = bb, b->t[2] = c, b->t[3] = d;
}
static void check_inplace(const struct built *b) {
    CHECK(b->t[2]->data == b->t[1]->data);
    CHECK(b->t[3]->data == b->t[0]->data);
}

/* a = dup(w); b = dup(a); c = dup(a); d = add(b, c) [in place on b]; e = dup(d)
 * {a} {a,b} {a,b,c} then a dies, {b=d,c} then c dies, {d,e}: peak 3S. */
static void build_diamond(struct tensor_ctx *ctx, const struct weights *w, struct built *b) {
    struct tensor *a = op_dup(ctx, w->w);
    struct tensor *bb = op_dup(ctx, a);
    struct tensor *c = op_dup(ctx, a);
    struct tensor *d = op_add(ctx, bb, c);
    struct tensor *e = op_scale(ctx, op_dup(ctx, d), 0.5f);
    output(b, e);
    b->t[1] = bb, b->t[3] = d;
}
static void check_diamond(const struct built *b) {
    CHECK(b->t[3]->data == b->t[1]->data);
}

/* a = dup(w); v = view of a's second half; b = dup(v) (S/2); c = dup(b) (S/2)
 * the view keeps a alive until b has run: {a} {a,b} then a dies, {b,c}:
 * peak 1.5S (it would be S if a died with the view). */
static void build_view(struct tensor_ctx *ctx, const struct weights *w, struct built *b) {
    struct tensor *a = op_dup(ctx, w->w);
    struct tensor *v = tensor_view_2d(ctx, a, NE0, NE1 / 2, a->nb[1], (NE1 / 2) * a->nb[1]);
    struct tensor *bb = op_dup(ctx, v);
    struct tensor *c = op_sqr(ctx, op_dup(ctx, bb));
    output(b, c);
    b->t[0] = a, b->t[1] = v;
}
static void check_view(const struct built *b) {
    CHECK(b->t[1]->data == (char *)b->t[0]->data + S / 2);
}

/* a = dup(w); t = transpose(a); b = cont(t): the transposed view keeps a alive
 * while b is written, {a} {a,b}: peak 2S (with a dead, b would overwrite what it reads). */
static void build_transpose(struct tensor_ctx *ctx, const struct weights *w, struct built *b) {
    struct tensor *a = op_dup(ctx, w->w);
    struct tensor *t = tensor_transpose(ctx, a);
    output(b, op_cont(ctx, t));
}

/* a = dup(w); r = reshape(a); s = sqr(r) takes over a's block through the view;
 * out = dup(s): {a} {a=s} {s,out}: peak 2S. */
static void build_view_inplace(struct tensor_ctx *ctx, const struct weights *w, struct built *b) {
    struct tensor *a = op_dup(ctx, w->w);
    struct tensor *r = tensor_reshape_1d(ctx, a, NE0 * NE1);
    struct tensor *s = op_sqr(ctx, r);
    output(b, op_dup(ctx, s));
    b->t[0] = a, b->t[1] = s;
}
static void check_view_inplace(const struct built *b) {
    CHECK(b->t[1]->data == b->t[0]->data);
}

/* Odd sizes: [10] F32 is 40 bytes, placed in 64. a = dup(w10); b = dup(a); c = dup(b)
 * peak 2 * 64 (2 * 40 unpadded). */
static void build_padding(struct tensor_ctx *ctx, const struct weights *w, struct built *b) {
    struct tensor *a = op_dup(ctx, w->w10);
    struct tensor *bb = op_dup(ctx, a);
    output(b, op_dup(ctx, bb));
}

/* An OUTPUT in the middle is never freed: a = dup(w) [OUTPUT]; b = sqr(dup(a)) [in place];
 * c = dup(b); d = dup(c): {a} {a,b} {a,b,c} then b dies, {a,c,d}: peak 3S (2S if a were freed). */
static void build_output(struct tensor_ctx *ctx, const struct weights *w, struct built *b) {
    struct tensor *a = output(b, op_dup(ctx, w->w));
    struct tensor *bb = op_sqr(ctx, op_dup(ctx, a));
    struct tensor *c = op_dup(ctx, bb);
    output(b, op_dup(ctx, c));
}

/* Inputs come first and stay until read: x [INPUT], y (a plain leaf without data)
 * a = dup(x); b = dup(a); c = dup(b); out = add(c, y) [in place on c]
 * {x,y,a} then x dies, {y,a,b} then a dies, {y,b,c} then b dies, {y,c=out}: peak 3S. */
static void build_inputs(struct tensor_ctx *ctx, const struct weights *w, struct built *b) {
    (void)w;
    struct tensor *x = input(b, tensor_new_2d(ctx, GGML_TYPE_F32, NE0, NE1));
    struct tensor *y = tensor_new_2d(ctx, GGML_TYPE_F32, NE0, NE1);
    b->in[b->n_in++] = y;
    struct tensor *a = op_dup(ctx, x);
    struct tensor *bb = op_dup(ctx, a);
    struct tensor *c = op_dup(ctx, bb);
    output(b, op_add(ctx, c, y));
    b->t[0] = x, b->t[1] = y, b->t[2] = c;
}
static void check_inputs(const struct built *b) {
    /* inputs are never computed over */
    CHECK(b->t[0]->data != b->t[2]->data && b->t[1]->data != b->t[2]->data);
}

/* A broadcast add is not in place (different shapes); w_row stays where it is.
 * a = dup(w); b = add(a, w_row) [in place on a: same layout as a]; c = mul(b, b); d = silu(c)
 * {a} {a=b} {b,c} then b dies, {c=d}: peak 2S. */
static void build_broadcast(struct tensor_ctx *ctx, const struct weights *w, struct built *b) {
    struct tensor *a = op_dup(ctx, w->w);
    struct tensor *bb = op_add(ctx, a, w->w_row);
    struct tensor *c = op_mul(ctx, bb, bb);
    struct tensor *d = op_silu(ctx, c);
    output(b, d);
    b->t[0] = a, b->t[1] = bb, b->t[2] = c, b->t[3] = d;
}
static void check_broadcast(const struct built *b) {
    CHECK(b->t[1]->data == b->t[0]->data);
    CHECK(b->t[2]->data != b->t[1]->data); /* b has two uses in c: no take-over */
    CHECK(b->t[3]->data == b->t[2]->data);
}

static const struct alloc_case g_cases[] = {
    { "chain", build_chain, 2 * S, check_chain },
    { "inplace", build_inplace, 2 * S, check_inplace },
    { "diamond", build_diamond, 3 * S, check_diamond },
    { "view", build_view, S + S / 2, check_view },
    { "transpose", build_transpose, 2 * S, NULL },
    { "view_inplace", build_view_inplace, 2 * S, check_view_inplace },
    { "padding", build_padding, 2 * 64, NULL },
    { "output", build_output, 3 * S, NULL },
    { "inputs", build_inputs, 3 * S, check_inputs },
    { "broadcast", build_broadcast, 2 * S, check_broadcast },
};

static void fill_random(float *p, size_t n, uint64_t seed) {
    uint64_t st = seed * 0x9E3779B97F4A7C15ULL + 1;
    for (size_t i = 0; i < n; i++) p[i] = test_rand_uniform(&st, -2.0f, 2.0f);
}

static struct weights weights_new(void) {
    struct weights w;
    w.ctx = tensor_ctx_new(8, 64 * 1024);
    w.w = tensor_new_2d(w.ctx, GGML_TYPE_F32, NE0, NE1);
    w.w10 = tensor_new_1d(w.ctx, GGML_TYPE_F32, 10);
    w.w_row = tensor_new_1d(w.ctx, GGML_TYPE_F32, NE0);
    fill_random(w.w->data, (size_t)tensor_nelements(w.w), 1);
    fill_random(w.w10->data, 10, 2);
    fill_random(w.w_row->data, NE0, 3);
    return w;
}

static struct graph *build_graph(struct tensor_ctx *ctx, const struct alloc_case *c, const struct weights *w,
                                 struct built *b) {
    memset(b, 0, sizeof *b);
    c->build(ctx, w, b);
    struct graph *g = graph_new(ctx, 64);
    for (int i = 0; i < b->n_out; i++) {
        if (!graph_build_forward(g, b->out[i])) return NULL;
    }
    return g;
}

static void run_case(struct backend *cpu, const struct alloc_case *c, const struct weights *w) {
    /* reference: every tensor in memory of its own */
    struct tensor_ctx *ref_ctx = tensor_ctx_new(64, 1 << 20);
    struct built ref;
    struct graph *ref_g = build_graph(ref_ctx, c, w, &ref);
    CHECK_MSG(ref_g != NULL, "%s: %s", c->name, error_last());
    if (!ref_g) return;
    for (int i = 0; i < ref.n_in; i++) fill_random(ref.in[i]->data, (size_t)tensor_nelements(ref.in[i]), 10 + i);
    CHECK_MSG(backend_graph_compute(cpu, ref_g), "%s: %s", c->name, error_last());

    /* planned memory */
    struct tensor_ctx *ctx = tensor_ctx_new(64, 0);
    struct built b;
    struct graph *g = build_graph(ctx, c, w, &b);
    struct graph_allocr *ga = graph_allocr_new(backend_cpu_buffer_type());
    CHECK(graph_allocr_reserve(ga, g));
    for (int i = 0; i < g->n_nodes; i++) CHECK(g->nodes[i]->data == NULL); /* reserve places nothing */
    size_t planned = graph_allocr_reserved_size(ga, 0);
    CHECK_MSG(planned <= c->peak, "%s: planned %zu bytes, peak by hand %zu", c->name, planned, c->peak);
    CHECK_MSG(planned == c->peak, "%s: planned %zu bytes, expected exactly %zu", c->name, planned, c->peak);
    struct backend_buffer *buf = graph_allocr_buffer(ga, 0);
    CHECK(buf != NULL && backend_buffer_get_usage(buf) == BUFFER_USAGE_COMPUTE);

    CHECK_MSG(graph_allocr_alloc_graph(ga, g), "%s: %s", c->name, error_last());
    CHECK(graph_allocr_buffer(ga, 0) == buf); /* the reserved buffer fits: no new allocation */
    CHECK(w->w->data && w->w->buffer == NULL); /* weights untouched */
    char *base = buf ? backend_buffer_base(buf) : NULL;
    for (int i = 0; i < g->n_nodes; i++) {
        struct tensor *t = g->nodes[i];
        CHECK_MSG(t->data != NULL, "%s: node %s has no memory", c->name, t->name);
        if (t->view_src) continue;
        CHECK(t->buffer == buf);
        CHECK((char *)t->data >= base && (char *)t->data + tensor_nbytes(t) <= base + planned);
        CHECK(((uintptr_t)t->data % CPU_BUFFER_ALIGNMENT) == 0);
    }
    if (c->check) c->check(&b);

    for (int i = 0; i < b.n_in; i++) {
        CHECK(backend_tensor_set(b.in[i], ref.in[i]->data, 0, tensor_nbytes(ref.in[i])));
    }
    CHECK_MSG(backend_graph_compute(cpu, g), "%s: %s", c->name, error_last());
    for (int i = 0; i < b.n_out; i++) {
        size_t n = tensor_nbytes(b.out[i]);
        void *got = malloc(n);
        CHECK(backend_tensor_get(b.out[i], got, 0, n));
        CHECK_MSG(memcmp(got, ref.out[i]->data, n) == 0, "%s: output %d differs from the reference", c->name, i);
        free(got);
    }

    graph_allocr_free(ga);
    tensor_ctx_free(ctx);
    tensor_ctx_free(ref_ctx);
}

/* Reserve with the largest graph, then allocate smaller ones: the buffer stays. */
static void test_reserve_then_smaller(void) {
    struct graph_allocr *ga = graph_allocr_new(backend_cpu_buffer_type());
    size_t reserved = 0;
    struct backend_buffer *buf = NULL;
    for (int n_tokens = 16; n_tokens >= 1; n_tokens /= 2) {
        struct tensor_ctx *ctx = tensor_ctx_new(16, 0);
        struct tensor *x = tensor_new_2d(ctx, GGML_TYPE_F32, 64, n_tokens);
        x->flags |= TENSOR_FLAG_INPUT;
        struct tensor *y = op_scale(ctx, op_dup(ctx, op_sqr(ctx, op_dup(ctx, x))), 2.0f);
        y->flags |= TENSOR_FLAG_OUTPUT;
        struct graph *g = graph_new(ctx, 16);
        CHECK(graph_build_forward(g, y));
        if (n_tokens == 16) {
            CHECK(graph_allocr_reserve(ga, g));
            reserved = graph_allocr_reserved_size(ga, 0);
            buf = graph_allocr_buffer(ga, 0);
            /* x; dup(x) = sqr (in place); x dies; dup = scale (in place) where x was: 2 x 4096 bytes */
            CHECK_EQ_INT(reserved, 2 * 64 * 16 * 4);
        }
        CHECK(graph_allocr_alloc_graph(ga, g));
        CHECK(graph_allocr_buffer(ga, 0) == buf);
        CHECK_EQ_INT(graph_allocr_reserved_size(ga, 0), reserved);
        tensor_ctx_free(ctx);
    }
    /* a larger graph than reserved makes the buffer grow instead of failing */
    struct tensor_ctx *ctx = tensor_ctx_new(16, 0);
    struct tensor *x = tensor_new_2d(ctx, GGML_TYPE_F32, 64, 64);
    x->flags |= TENSOR_FLAG_INPUT;
    struct tensor *y = op_dup(ctx, x);
    struct graph *g = graph_new(ctx, 16);
    CHECK(graph_build_forward(g, y));
    CHECK(graph_allocr_alloc_graph(ga, g));
    CHECK_EQ_INT(graph_allocr_reserved_size(ga, 0), 2 * 64 * 64 * 4);
    CHECK(backend_buffer_size(graph_allocr_buffer(ga, 0)) >= 2 * 64 * 64 * 4);
    CHECK((char *)y->data + tensor_nbytes(y) <=
          (char *)backend_buffer_base(graph_allocr_buffer(ga, 0)) + backend_buffer_size(graph_allocr_buffer(ga, 0)));
    tensor_ctx_free(ctx);
    graph_allocr_free(ga);
}

/* A graph whose tensors all have memory already needs no buffer. */
static void test_nothing_to_place(void) {
    struct tensor_ctx *ctx = tensor_ctx_new(8, 4096);
    struct tensor *a = tensor_new_1d(ctx, GGML_TYPE_F32, 16);
    struct tensor *b = op_sqr(ctx, a);
    struct graph *g = graph_new(ctx, 8);
    CHECK(graph_build_forward(g, b));
    void *before = b->data;
    struct graph_allocr *ga = graph_allocr_new(backend_cpu_buffer_type());
    CHECK(graph_allocr_alloc_graph(ga, g));
    CHECK(b->data == before);
    CHECK_EQ_INT(graph_allocr_reserved_size(ga, 0), 0);
    CHECK(graph_allocr_buffer(ga, 0) == NULL);
    graph_allocr_free(ga);
    tensor_ctx_free(ctx);
}

/* The decode loop the context layer runs: weights used in place from a
 * "mapped file", a K cache in a buffer of its own, the compute buffer
 * reserved once for the largest graph. Each step writes its key into the
 * cache (op_cpy into a view) and attends over the keys so far; the compute
 * buffer never changes and each step's result equals the reference's. */
#define KV_D 32
#define KV_CTX 8

struct kv_step {
    struct tensor *x, *cpy, *out;
    struct graph *g;
};

static void build_kv_step(struct tensor_ctx *ctx, struct tensor *wk, struct tensor *wq, struct tensor *k_cache,
                          int n_past, int n_tok, struct kv_step *s) {
    s->x = tensor_new_2d(ctx, GGML_TYPE_F32, KV_D, n_tok);
    s->x->flags |= TENSOR_FLAG_INPUT;
    struct tensor *k = op_mul_mat(ctx, wk, s->x); /* [KV_D, n_tok] */
    struct tensor *k_dst = tensor_view_1d(ctx, k_cache, (int64_t)KV_D * n_tok, (size_t)n_past * k_cache->nb[1]);
    s->cpy = op_cpy(ctx, tensor_reshape_1d(ctx, k, (int64_t)KV_D * n_tok), k_dst);
    struct tensor *q = op_mul_mat(ctx, wq, s->x);
    struct tensor *keys = tensor_view_2d(ctx, k_cache, KV_D, n_past + n_tok, k_cache->nb[1], 0);
    struct tensor *kq = op_mul_mat(ctx, keys, q); /* [n_past + n_tok, n_tok] */
    s->out = op_soft_max(ctx, op_scale(ctx, kq, 0.125f), NULL, 1.0f);
    s->out->flags |= TENSOR_FLAG_OUTPUT;
    s->g = graph_new(ctx, 64);
    /* the write into the cache first, then what reads the cache */
    CHECK(graph_build_forward(s->g, s->cpy) && graph_build_forward(s->g, s->out));
}

static void test_decode_loop(struct backend *cpu) {
    /* the "file": two [KV_D, KV_D] F32 matrices at 32-byte aligned offsets */
    const size_t mat = (size_t)KV_D * KV_D * sizeof(float);
    const size_t file_size = 32 + 2 * mat;
    float *file = aligned_alloc(64, (file_size + 63) / 64 * 64);
    fill_random((float *)((char *)file + 32), 2 * KV_D * KV_D, 42);
    struct backend_buffer *wbuf = backend_cpu_buffer_from_ptr(file, file_size);
    backend_buffer_set_usage(wbuf, BUFFER_USAGE_WEIGHTS);
    struct tensor_ctx *wctx = tensor_ctx_new(4, 0);
    struct tensor *wk = tensor_new_2d(wctx, GGML_TYPE_F32, KV_D, KV_D);
    struct tensor *wq = tensor_new_2d(wctx, GGML_TYPE_F32, KV_D, KV_D);
    CHECK(backend_buffer_place_tensor(wbuf, wk, (char *)file + 32));
    CHECK(backend_buffer_place_tensor(wbuf, wq, (char *)file + 32 + mat));
    struct tensor_ctx *kvctx = tensor_ctx_new(1, 0);
    struct tensor *k_cache = tensor_new_2d(kvctx, GGML_TYPE_F32, KV_D, KV_CTX);
    struct backend_buffer *kvbuf = backend_alloc_ctx_tensors(kvctx, backend_cpu_buffer_type());
    CHECK(kvbuf != NULL);

    /* the reference: the same weights and a cache in memory of their own */
    struct tensor_ctx *rctx = tensor_ctx_new(4, 3 * mat + 4096);
    struct tensor *rwk = tensor_new_2d(rctx, GGML_TYPE_F32, KV_D, KV_D);
    struct tensor *rwq = tensor_new_2d(rctx, GGML_TYPE_F32, KV_D, KV_D);
    struct tensor *rk_cache = tensor_new_2d(rctx, GGML_TYPE_F32, KV_D, KV_CTX);
    memcpy(rwk->data, wk->data, mat);
    memcpy(rwq->data, wq->data, mat);

    struct graph_allocr *ga = graph_allocr_new(backend_cpu_buffer_type());
    {
        /* worst case: a full batch */
        struct tensor_ctx *ctx = tensor_ctx_new(32, 0);
        struct kv_step s;
        build_kv_step(ctx, wk, wq, k_cache, 0, KV_CTX, &s);
        CHECK(graph_allocr_reserve(ga, s.g));
        tensor_ctx_free(ctx);
    }
    struct backend_buffer *compute = graph_allocr_buffer(ga, 0);
    size_t reserved = graph_allocr_reserved_size(ga, 0);

    /* a prompt of 3 tokens, then one token at a time */
    int n_past = 0;
    const int n_toks[] = { 3, 1, 1, 1, 1 };
    for (size_t step = 0; step < sizeof n_toks / sizeof n_toks[0]; step++) {
        int n_tok = n_toks[step];
        float x[KV_D * KV_CTX];
        fill_random(x, (size_t)KV_D * n_tok, 100 + step);

        struct tensor_ctx *rg = tensor_ctx_new(32, 1 << 16);
        struct kv_step r;
        build_kv_step(rg, rwk, rwq, rk_cache, n_past, n_tok, &r);
        memcpy(r.x->data, x, sizeof(float) * KV_D * n_tok);
        CHECK(backend_graph_compute(cpu, r.g));

        struct tensor_ctx *ctx = tensor_ctx_new(32, 0);
        struct kv_step s;
        build_kv_step(ctx, wk, wq, k_cache, n_past, n_tok, &s);
        CHECK(graph_allocr_alloc_graph(ga, s.g));
        CHECK(graph_allocr_buffer(ga, 0) == compute && graph_allocr_reserved_size(ga, 0) == reserved);
        CHECK(s.cpy->data == (char *)k_cache->data + (size_t)n_past * k_cache->nb[1]); /* the cache, not the buffer */
        CHECK(backend_tensor_set(s.x, x, 0, sizeof(float) * KV_D * n_tok));
        CHECK(backend_graph_compute(cpu, s.g));

        size_t n = tensor_nbytes(s.out);
        float got[KV_CTX * KV_CTX];
        CHECK(n == tensor_nbytes(r.out) && n <= sizeof got);
        CHECK(backend_tensor_get(s.out, got, 0, n));
        CHECK_MSG(memcmp(got, r.out->data, n) == 0, "decode step %zu differs from the reference", step);
        CHECK(memcmp(k_cache->data, rk_cache->data, (size_t)(n_past + n_tok) * k_cache->nb[1]) == 0);
        n_past += n_tok;
        tensor_ctx_free(ctx);
        tensor_ctx_free(rg);
    }

    graph_allocr_free(ga);
    tensor_ctx_free(rctx);
    backend_buffer_free(kvbuf);
    tensor_ctx_free(kvctx);
    backend_buffer_free(wbuf);
    tensor_ctx_free(wctx);
    free(file);
}

int main(void) {
    struct backend *cpu = backend_cpu_new(2);
    CHECK(cpu != NULL);
    if (!cpu) return test_finish("test_alloc");
    struct weights w = weights_new();
    for (size_t i = 0; i < sizeof g_cases / sizeof g_cases[0]; i++) run_case(cpu, &g_cases[i], &w);
    test_reserve_then_smaller();
    test_nothing_to_place();
    test_decode_loop(cpu);
    tensor_ctx_free(w.ctx);
    backend_free(cpu);
    return test_finish("test_alloc");
}
