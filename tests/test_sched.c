/*
 * The scheduler: graphs split between a CPU backend and a test backend that
 * only adds and multiplies in memory of its own (so ops fall back to the CPU
 * and tensors are copied across), and between two CPU backends with pinned
 * nodes. The splits and copies are counted by hand below, and each result
 * equals the same graph computed on one CPU backend.
 */
#include "test_util.h"

#include "backend/backend.h"
#include "backend/cpu/cpu_backend.h"
#include "backend/sched.h"
#include "core/log.h"
#include "tensor/tensor.h"

/* ---- the test backend: ADD and MUL on F32, in "device" memory ------------------------ */

struct test_backend {
    int n_computed; /* nodes it actually computed */
};

static bool test_graph_compute(struct backend *backend, struct graph *g);

static void tb_buffer_free(struct backend_buffer *buf) { free(buf->context); }
static void *tb_buffer_base(struct backend_buffer *buf) { return buf->context; }
static void tb_set(struct backend_buffer *buf, struct tensor *t, const void *data, size_t offset, size_t size) {
    (void)buf;
    memcpy((char *)t->data + offset, data, size);
}
static void tb_get(struct backend_buffer *buf, const struct tensor *t, void *data, size_t offset, size_t size) {
    (void)buf;
    memcpy(data, (const char *)t->data + offset, size);
}
static void tb_clear(struct backend_buffer *buf, uint8_t v) { memset(buf->context, v, buf->size); }
static const struct backend_buffer_i tb_buffer_iface = {
    .free = tb_buffer_free, .base = tb_buffer_base, .set_tensor = tb_set, .get_tensor = tb_get, .clear = tb_clear,
};

static const char *tb_buft_name(struct backend_buffer_type *b) { (void)b; return "TEST"; }
static struct backend_buffer *tb_alloc(struct backend_buffer_type *b, size_t size) {
    void *mem = aligned_alloc(32, (size + 31) / 32 * 32 + 32);
    if (!mem) return NULL;
    struct backend_buffer *buf = backend_buffer_init(b, tb_buffer_iface, mem, size);
    if (!buf) free(mem);
    return buf;
}
static size_t tb_alignment(struct backend_buffer_type *b) { (void)b; return 32; }
/* each tensor gets 32 bytes of padding, as some devices want */
static size_t tb_alloc_size(struct backend_buffer_type *b, const struct tensor *t) { (void)b; return tensor_nbytes(t) + 32; }
static bool tb_supports_backend(struct backend_buffer_type *b, struct backend *be) {
    (void)b;
    return be->iface.graph_compute == test_graph_compute;
}
/* not host memory: the scheduler must go through set/get */
static struct backend_buffer_type g_tb_buft = {
    .iface = { .name = tb_buft_name, .alloc_buffer = tb_alloc, .alignment = tb_alignment,
               .alloc_size = tb_alloc_size, .supports_backend = tb_supports_backend },
};

static const char *tb_name(struct backend *be) { (void)be; return "TEST"; }
static void tb_free(struct backend *be) { free(be->context); free(be); }
static struct backend_buffer_type *tb_default_buft(struct backend *be) { (void)be; return &g_tb_buft; }

static bool tb_supports_op(struct backend *be, const struct tensor *node) {
    (void)be;
    if (node->op != OP_ADD && node->op != OP_MUL) return false;
    return node->type == GGML_TYPE_F32 && node->src[0]->type == GGML_TYPE_F32 && node->src[1]->type == GGML_TYPE_F32;
}

static float *elem(const struct tensor *t, int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
    return (float *)((char *)t->data + i0 * t->nb[0] + i1 * t->nb[1] + i2 * t->nb[2] + i3 * t->nb[3]);
}

static bool test_graph_compute(struct backend *be, struct graph *g) {
    struct test_backend *tb = be->context;
    for (int n = 0; n < g->n_nodes; n++) {
        struct tensor *t = g->nodes[n];
        if (backend_op_is_view(t->op)) continue;
        if (!tb_supports_op(be, t)) {
            error_set("test backend: cannot compute %s", tensor_op_name(t->op));
            return false;
        }
        const struct tensor *a = t->src[0], *b = t->src[1];
        for (int64_t i3 = 0; i3 < t->ne[3]; i3++)
            for (int64_t i2 = 0; i2 < t->ne[2]; i2++)
                for (int64_t i1 = 0; i1 < t->ne[1]; i1++)
                    for (int64_t i0 = 0; i0 < t->ne[0]; i0++) {
                        float x = *elem(a, i0, i1, i2, i3);
                        float y = *elem(b, i0 % b->ne[0], i1 % b->ne[1], i2 % b->ne[2], i3 % b->ne[3]);
                        *elem(t, i0, i1, i2, i3) = t->op == OP_ADD ? x + y : x * y;
                    }
        tb->n_computed++;
    }
    return true;
}

static struct backend *test_backend_new(void) {
    struct backend *be = malloc(sizeof *be);
    be->context = calloc(1, sizeof(struct test_backend));
    be->iface = (struct backend_i){ .name = tb_name, .free = tb_free, .default_buffer_type = tb_default_buft,
                                    .graph_compute = test_graph_compute, .supports_op = tb_supports_op };
    return be;
}

static int tb_computed(struct backend *be) { return ((struct test_backend *)be->context)->n_computed; }

/* ---- the graphs ------------------------------------------------------------------------ */

#define N_IN 32
#define N_OUT 16

struct weights {
    struct tensor *w;   /* [N_IN, N_OUT] matrix */
    struct tensor *b;   /* [N_OUT] bias */
    struct tensor *g;   /* [N_OUT] gain */
    struct tensor *c;   /* [N_OUT] */
};

/* c in its own context, so it can go to a buffer of its own */
static void weights_new(struct tensor_ctx *ctx, struct tensor_ctx *c_ctx, struct weights *w) {
    w->w = tensor_new_2d(ctx, GGML_TYPE_F32, N_IN, N_OUT);
    w->b = tensor_new_1d(ctx, GGML_TYPE_F32, N_OUT);
    w->g = tensor_new_1d(ctx, GGML_TYPE_F32, N_OUT);
    w->c = tensor_new_1d(c_ctx, GGML_TYPE_F32, N_OUT);
    tensor_set_name(w->c, "c");
}

static void weights_fill(const struct weights *w) {
    struct tensor *ts[4] = { w->w, w->b, w->g, w->c };
    uint64_t st = 7;
    for (int i = 0; i < 4; i++) {
        int64_t n = tensor_nelements(ts[i]);
        float *v = malloc((size_t)n * sizeof *v);
        for (int64_t k = 0; k < n; k++) v[k] = test_rand_uniform(&st, -1.0f, 1.0f);
        CHECK(backend_tensor_set(ts[i], v, 0, (size_t)n * sizeof *v));
        free(v);
    }
}

struct built {
    struct tensor *x, *y; /* inputs [N_IN, n_tok], [N_OUT, n_tok] */
    struct tensor *out;
    struct tensor *n[8];  /* the nodes the checks talk about */
};

enum { GRAPH_FALLBACK, GRAPH_WEIGHTS_ON_TEST, GRAPH_PINNED, GRAPH_LATE_COPY };

/* GRAPH_FALLBACK, backends [TEST, CPU]:
 *   n1 = mul_mat(w, x)           CPU  (TEST cannot)                  split 0
 *   n2 = add(n1, b)              CPU  (the weight b is in CPU memory)
 *   n3 = mul(n2, y)              TEST (first that can; y follows it)  split 1: copy n2
 *   n4 = silu(n3)                CPU                                  split 2: copy n3
 *   v  = reshape(n2)             (a view: CPU memory, joins split 2)
 *   n5 = add(n4, v)              TEST                                 split 3: copy n4, copy v
 *   n6 = mul(n5, g)              CPU  (the weight g)                  split 4: copy n5
 *   5 splits, 5 copies; TEST computes n3 and n5.
 * GRAPH_WEIGHTS_ON_TEST, backends [CPU, TEST], c in TEST memory:
 *   n1 = mul_mat(w, x)           CPU                                  split 0
 *   n2 = add(n1, c)              TEST (where c is)                    split 1: copy n1
 *   n3 = silu(n2); n4 = mul(n3, n3)  CPU (first that can)            split 2: copy n2
 *   3 splits, 2 copies; TEST computes n2.
 * GRAPH_PINNED, backends [CPU0, CPU1], n2 and n3 pinned to CPU1:
 *   n1 = mul_mat(w, x)           CPU0                                 split 0
 *   n2 = add(n1, b); n3 = silu(n2)  CPU1 (b's memory serves both)    split 1: copy n1
 *   n4 = mul(n3, n1)             CPU0 (n1 still alive from split 0)   split 2: copy n3
 *   3 splits, 2 copies.
 * GRAPH_LATE_COPY, backends [TEST, CPU]: n1 has a consumer in its own split
 * and one three splits later; it must stay alive until that copy is made.
 *   n1 = mul_mat(w, x); n2 = silu(n1)   CPU                          split 0
 *   n3 = mul(n2, n2)                    TEST                         split 1: copy n2
 *   n4 = silu(n3)                       CPU (n1's memory is not free) split 2: copy n3
 *   n5 = add(n4, n1)                    TEST                         split 3: copy n4, copy n1
 *   out = silu(n5)                      CPU                          split 4: copy n5
 *   5 splits, 5 copies; TEST computes n3 and n5. */
static struct graph *build(struct tensor_ctx *ctx, const struct weights *w, int kind, int n_tok, struct built *b) {
    memset(b, 0, sizeof *b);
    b->x = tensor_new_2d(ctx, GGML_TYPE_F32, N_IN, n_tok);
    b->x->flags |= TENSOR_FLAG_INPUT;
    tensor_set_name(b->x, "x");
    struct tensor *n1 = op_mul_mat(ctx, w->w, b->x);
    struct tensor *out = NULL;
    if (kind == GRAPH_FALLBACK) {
        b->y = tensor_new_2d(ctx, GGML_TYPE_F32, N_OUT, n_tok);
        b->y->flags |= TENSOR_FLAG_INPUT;
        tensor_set_name(b->y, "y");
        struct tensor *n2 = op_add(ctx, n1, w->b);
        struct tensor *n3 = op_mul(ctx, n2, b->y);
        struct tensor *n4 = op_silu(ctx, n3);
        struct tensor *v = tensor_reshape_2d(ctx, n2, N_OUT, n_tok);
        struct tensor *n5 = op_add(ctx, n4, v);
        out = op_mul(ctx, n5, w->g);
        b->n[1] = n1, b->n[2] = n2, b->n[3] = n3, b->n[4] = n4, b->n[5] = n5, b->n[6] = out;
    } else if (kind == GRAPH_WEIGHTS_ON_TEST) {
        struct tensor *n2 = op_add(ctx, n1, w->c);
        struct tensor *n3 = op_silu(ctx, n2);
        out = op_mul(ctx, n3, n3);
        b->n[1] = n1, b->n[2] = n2, b->n[3] = n3, b->n[4] = out;
    } else if (kind == GRAPH_LATE_COPY) {
        struct tensor *n2 = op_silu(ctx, n1);
        struct tensor *n3 = op_mul(ctx, n2, n2);
        struct tensor *n4 = op_silu(ctx, n3);
        struct tensor *n5 = op_add(ctx, n4, n1);
        out = op_silu(ctx, n5);
        b->n[1] = n1, b->n[5] = n5;
    } else {
        struct tensor *n2 = op_add(ctx, n1, w->b);
        struct tensor *n3 = op_silu(ctx, n2);
        out = op_mul(ctx, n3, n1);
        b->n[1] = n1, b->n[2] = n2, b->n[3] = n3, b->n[4] = out;
    }
    out->flags |= TENSOR_FLAG_OUTPUT;
    b->out = out;
    struct graph *g = graph_new(ctx, 64);
    if (!graph_build_forward(g, out)) return NULL;
    return g;
}

static void fill_inputs(const struct built *b, int n_tok, float *x, float *y) {
    uint64_t st = 99;
    for (int i = 0; i < N_IN * n_tok; i++) x[i] = test_rand_uniform(&st, -1.0f, 1.0f);
    for (int i = 0; i < N_OUT * n_tok; i++) y[i] = test_rand_uniform(&st, -1.0f, 1.0f);
    CHECK(backend_tensor_set(b->x, x, 0, sizeof(float) * N_IN * n_tok));
    if (b->y) CHECK(backend_tensor_set(b->y, y, 0, sizeof(float) * N_OUT * n_tok));
}

/* The same graph, every tensor in host memory of its own, on one CPU backend. */
static void reference(struct backend *cpu, int kind, int n_tok, float *out) {
    struct tensor_ctx *ctx = tensor_ctx_new(64, 1 << 20);
    struct weights w;
    weights_new(ctx, ctx, &w);
    weights_fill(&w);
    struct built b;
    struct graph *g = build(ctx, &w, kind, n_tok, &b);
    float x[N_IN * 8], y[N_OUT * 8];
    fill_inputs(&b, n_tok, x, y);
    CHECK(backend_graph_compute(cpu, g));
    memcpy(out, b.out->data, sizeof(float) * N_OUT * n_tok);
    tensor_ctx_free(ctx);
}

struct expect {
    int n_splits, n_copies, test_computed;
};

static void run(const char *name, struct backend **backends, int n_backends, int kind, struct backend *pin,
                struct expect want) {
    const int n_tok = 4;
    struct backend *cpu_ref = backend_cpu_new(1);
    float ref[N_OUT * 8];
    reference(cpu_ref, kind, n_tok, ref);

    /* weights in buffers: w, b, g in CPU memory; c in TEST memory */
    struct tensor_ctx *wctx = tensor_ctx_new(8, 0);
    struct tensor_ctx *cctx = tensor_ctx_new(1, 0);
    struct weights w;
    weights_new(wctx, cctx, &w);
    struct backend_buffer *wbuf = backend_alloc_ctx_tensors(wctx, backend_cpu_buffer_type());
    struct backend_buffer *cbuf = backend_alloc_ctx_tensors(cctx, &g_tb_buft);
    CHECK(wbuf && cbuf);
    backend_buffer_set_usage(wbuf, BUFFER_USAGE_WEIGHTS);
    backend_buffer_set_usage(cbuf, BUFFER_USAGE_WEIGHTS);
    weights_fill(&w);

    struct backend_sched *sched = backend_sched_new(backends, n_backends);
    CHECK(sched != NULL);

    /* reserve with a larger batch; the graph comes back unchanged */
    struct tensor_ctx *big_ctx = tensor_ctx_new(64, 0);
    struct built big;
    struct graph *big_g = build(big_ctx, &w, kind, 8, &big);
    struct tensor *srcs_before[64][TENSOR_MAX_SRC];
    for (int i = 0; i < big_g->n_nodes; i++) memcpy(srcs_before[i], big_g->nodes[i]->src, sizeof srcs_before[i]);
    if (pin) {
        CHECK(backend_sched_set_tensor_backend(sched, big.n[2], pin));
        CHECK(backend_sched_set_tensor_backend(sched, big.n[3], pin));
    }
    CHECK_MSG(backend_sched_reserve(sched, big_g), "%s: %s", name, error_last());
    for (int i = 0; i < big_g->n_nodes; i++) {
        CHECK(memcmp(srcs_before[i], big_g->nodes[i]->src, sizeof srcs_before[i]) == 0);
        CHECK(big_g->nodes[i]->data == NULL);
    }
    size_t reserved[SCHED_MAX_BACKENDS];
    for (int i = 0; i < n_backends; i++) reserved[i] = backend_sched_buffer_size(sched, backends[i]);
    tensor_ctx_free(big_ctx);

    struct tensor_ctx *ctx = tensor_ctx_new(64, 0);
    struct built b;
    struct graph *g = build(ctx, &w, kind, n_tok, &b);
    if (pin) {
        CHECK(backend_sched_set_tensor_backend(sched, b.n[2], pin));
        CHECK(backend_sched_set_tensor_backend(sched, b.n[3], pin));
    }
    CHECK_MSG(backend_sched_alloc_graph(sched, g), "%s: %s", name, error_last());
    CHECK_MSG(backend_sched_n_splits(sched) == want.n_splits, "%s: %d splits, expected %d", name,
              backend_sched_n_splits(sched), want.n_splits);
    CHECK_MSG(backend_sched_n_copies(sched) == want.n_copies, "%s: %d copies, expected %d", name,
              backend_sched_n_copies(sched), want.n_copies);
    for (int i = 0; i < n_backends; i++) {
        CHECK_MSG(backend_sched_buffer_size(sched, backends[i]) == reserved[i], "%s: buffer %d grew", name, i);
    }
    float x[N_IN * 8], y[N_OUT * 8];
    fill_inputs(&b, n_tok, x, y);
    int before = 0;
    for (int i = 0; i < n_backends; i++) {
        if (!backend_is_cpu(backends[i])) before = tb_computed(backends[i]);
    }
    CHECK_MSG(backend_sched_graph_compute(sched, g), "%s: %s", name, error_last());
    for (int i = 0; i < n_backends; i++) {
        if (!backend_is_cpu(backends[i])) CHECK_EQ_INT(tb_computed(backends[i]) - before, want.test_computed);
    }
    float got[N_OUT * 8];
    CHECK(backend_tensor_get(b.out, got, 0, sizeof(float) * N_OUT * n_tok));
    CHECK_MSG(memcmp(got, ref, sizeof(float) * N_OUT * n_tok) == 0, "%s: result differs from one CPU", name);
    /* computing the placed graph again (inputs set again: their memory was reused) gives the same */
    memset(got, 0, sizeof got);
    fill_inputs(&b, n_tok, x, y);
    CHECK(backend_sched_graph_compute(sched, g));
    CHECK(backend_tensor_get(b.out, got, 0, sizeof(float) * N_OUT * n_tok));
    CHECK(memcmp(got, ref, sizeof(float) * N_OUT * n_tok) == 0);

    if (kind == GRAPH_FALLBACK) {
        CHECK(backend_sched_tensor_backend(sched, b.n[1]) == backends[1]);
        CHECK(backend_sched_tensor_backend(sched, b.n[3]) == backends[0]);
        CHECK(backend_sched_tensor_backend(sched, b.y) == backends[0]); /* the input follows its consumer */
        CHECK(b.y->buffer && backend_buffer_get_type(b.y->buffer) == &g_tb_buft);
        CHECK(b.n[3]->src[0] != b.n[2]); /* the consumer reads a copy */
        CHECK_STR_EQ(b.n[3]->src[0]->name, "node_1#TEST");
    }
    if (pin) {
        CHECK(backend_sched_tensor_backend(sched, b.n[2]) == pin);
        CHECK(backend_sched_tensor_backend(sched, b.n[4]) == backends[0]);
    }

    backend_sched_free(sched);
    tensor_ctx_free(ctx);
    backend_buffer_free(wbuf);
    backend_buffer_free(cbuf);
    tensor_ctx_free(wctx);
    tensor_ctx_free(cctx);
    backend_free(cpu_ref);
}

static void test_errors(struct backend *cpu, struct backend *tb) {
    CHECK(backend_sched_new(&cpu, 0) == NULL);
    struct backend *only_test[1] = { tb };
    struct backend_sched *sched = backend_sched_new(only_test, 1);
    struct tensor_ctx *ctx = tensor_ctx_new(8, 0);
    struct tensor *a = tensor_new_1d(ctx, GGML_TYPE_F32, 8);
    struct tensor *s = op_silu(ctx, a);
    struct graph *g = graph_new(ctx, 8);
    CHECK(graph_build_forward(g, s));
    CHECK(!backend_sched_alloc_graph(sched, g)); /* nobody computes silu */
    CHECK(strstr(error_last(), "no backend") != NULL);
    CHECK(!backend_sched_graph_compute(sched, g)); /* not placed */
    CHECK(strstr(error_last(), "alloc_graph") != NULL);
    CHECK(!backend_sched_set_tensor_backend(sched, s, tb));
    CHECK(!backend_sched_set_tensor_backend(sched, s, cpu)); /* not one of its backends */
    backend_sched_free(sched);
    tensor_ctx_free(ctx);
}

int main(void) {
    struct backend *cpu = backend_cpu_new(2);
    struct backend *cpu1 = backend_cpu_new(1);
    struct backend *tb = test_backend_new();

    struct backend *test_first[2] = { tb, cpu };
    run("fallback", test_first, 2, GRAPH_FALLBACK, NULL, (struct expect){ 5, 5, 2 });
    run("late copy", test_first, 2, GRAPH_LATE_COPY, NULL, (struct expect){ 5, 5, 2 });
    struct backend *cpu_first[2] = { cpu, tb };
    run("weights on test", cpu_first, 2, GRAPH_WEIGHTS_ON_TEST, NULL, (struct expect){ 3, 2, 1 });
    struct backend *two_cpus[2] = { cpu, cpu1 };
    run("two cpus", two_cpus, 2, GRAPH_PINNED, cpu1, (struct expect){ 3, 2, 0 });
    struct backend *one_cpu[1] = { cpu };
    run("one cpu", one_cpu, 1, GRAPH_PINNED, NULL, (struct expect){ 1, 0, 0 });
    test_errors(cpu, tb);

    backend_free(tb);
    backend_free(cpu1);
    backend_free(cpu);
    return test_finish("test_sched");
}
