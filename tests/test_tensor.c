/* tensor/: contexts, shapes and strides, views, op constructor checks, graph building. */
#include "test_util.h"

#include "core/log.h"
#include "tensor/tensor.h"

static void quiet_log(enum ggml_log_level level, const char *text, void *user_data) {
    (void)level, (void)text, (void)user_data;
}

static void test_context(void) {
    struct tensor_ctx *ctx = tensor_ctx_new(4, 1024);
    CHECK(ctx != NULL);
    struct tensor *a = tensor_new_1d(ctx, GGML_TYPE_F32, 100);
    struct tensor *b = tensor_new_2d(ctx, GGML_TYPE_F16, 10, 10);
    CHECK(a && b && a->data && b->data);
    CHECK((uintptr_t)a->data % TENSOR_DATA_ALIGN == 0 && (uintptr_t)b->data % TENSOR_DATA_ALIGN == 0);
    CHECK((char *)b->data >= (char *)a->data + 400);
    /* the arena is full: 400 + 200 rounded up leaves less than 1024 - 512 - 256 */
    CHECK(tensor_new_1d(ctx, GGML_TYPE_F32, 200) == NULL);
    CHECK(strstr(error_last(), "arena") != NULL);
    CHECK(tensor_new_1d(ctx, GGML_TYPE_F32, 8) != NULL);
    CHECK(tensor_new_1d(ctx, GGML_TYPE_F32, 8) != NULL);
    CHECK_EQ_INT(tensor_ctx_count(ctx), 4);
    CHECK(tensor_new_1d(ctx, GGML_TYPE_F32, 1) == NULL); /* 4 tensors max */
    int n = 0;
    for (struct tensor *t = tensor_ctx_first(ctx); t; t = tensor_ctx_next(ctx, t)) n++;
    CHECK_EQ_INT(n, 4);
    CHECK(tensor_ctx_first(ctx) == a);

    /* a reset empties the context and keeps its memory: same tensor slots,
     * same data arena, the graph block reused (and zeroed) */
    void *a_data = a->data;
    struct graph *g = graph_new(ctx, 8);
    CHECK(g != NULL);
    if (g) g->n_nodes = 5;
    tensor_ctx_reset(ctx);
    CHECK_EQ_INT(tensor_ctx_count(ctx), 0);
    CHECK(tensor_ctx_first(ctx) == NULL);
    struct tensor *a2 = tensor_new_1d(ctx, GGML_TYPE_F32, 100);
    CHECK(a2 == a && a2->data == a_data && a2->op == OP_NONE);
    struct graph *g2 = graph_new(ctx, 4); /* smaller: fits in the old block */
    CHECK(g2 == g && g2->n_nodes == 0 && g2->capacity == 4);
    struct graph *g3 = graph_new(ctx, 4); /* the old block is taken: a new one */
    CHECK(g3 != NULL && g3 != g2);
    tensor_ctx_free(ctx);

    /* without a data arena tensors have no data */
    ctx = tensor_ctx_new(8, 0);
    struct tensor *c = tensor_new_3d(ctx, GGML_TYPE_F32, 4, 5, 6);
    CHECK(c && c->data == NULL);
    CHECK(tensor_new_1d(ctx, GGML_TYPE_Q4_0, 33) == NULL);           /* not whole blocks */
    CHECK(tensor_new_1d(ctx, (enum ggml_type)4, 32) == NULL);         /* removed type number */
    CHECK(tensor_new_2d(ctx, GGML_TYPE_F32, INT64_MAX / 2, 8) == NULL); /* size overflows */
    CHECK(tensor_new_1d(ctx, GGML_TYPE_F32, -1) == NULL);
    CHECK(tensor_ctx_data_overhead(3) == 3 * TENSOR_DATA_ALIGN);
    tensor_ctx_free(ctx);
    tensor_ctx_free(NULL);
}

static void test_shapes(void) {
    struct tensor_ctx *ctx = tensor_ctx_new(64, 1 << 16);
    struct tensor *a = tensor_new_3d(ctx, GGML_TYPE_F32, 4, 3, 2);
    CHECK_EQ_INT(a->nb[0], 4);
    CHECK_EQ_INT(a->nb[1], 16);
    CHECK_EQ_INT(a->nb[2], 48);
    CHECK_EQ_INT(a->nb[3], 96);
    CHECK_EQ_INT(tensor_nelements(a), 24);
    CHECK_EQ_INT(tensor_nrows(a), 6);
    CHECK_EQ_INT(tensor_nbytes(a), 96);
    CHECK_EQ_INT(tensor_row_size(a), 16);
    CHECK_EQ_INT(tensor_n_dims(a), 3);
    CHECK(tensor_is_contiguous(a) && !tensor_is_permuted(a) && !tensor_is_transposed(a));

    struct tensor *q = tensor_new_2d(ctx, GGML_TYPE_Q8_0, 64, 3);
    CHECK_EQ_INT(q->nb[0], 34);
    CHECK_EQ_INT(q->nb[1], 68);
    CHECK_EQ_INT(tensor_nbytes(q), 204);
    CHECK_EQ_INT(tensor_element_size(q), 34);

    /* permute: dimension i of a becomes dimension axis_i */
    struct tensor *p = tensor_permute(ctx, a, 2, 0, 1, 3);
    CHECK(p && p->op == OP_PERMUTE && p->view_src == a && p->data == a->data);
    CHECK(p->ne[0] == 3 && p->ne[1] == 2 && p->ne[2] == 4);
    CHECK(p->nb[0] == 16 && p->nb[1] == 48 && p->nb[2] == 4);
    CHECK(tensor_is_permuted(p) && !tensor_is_contiguous(p));
    CHECK(tensor_nbytes(p) == 96);
    CHECK(tensor_permute(ctx, a, 0, 0, 1, 2) == NULL);

    struct tensor *t = tensor_transpose(ctx, a);
    CHECK(t && t->op == OP_TRANSPOSE && t->ne[0] == 3 && t->ne[1] == 4 && t->nb[0] == 16 && t->nb[1] == 4);
    CHECK(tensor_is_transposed(t));

    /* views of views refer to the base tensor, offsets add up */
    struct tensor *v1 = tensor_view_2d(ctx, a, 4, 2, a->nb[1], a->nb[2]);
    struct tensor *v2 = tensor_view_1d(ctx, v1, 2, 8);
    CHECK(v1 && v2 && v2->view_src == a && v2->view_offs == 48 + 8);
    CHECK((char *)v2->data == (char *)a->data + 56);
    CHECK(v2->src[0] == v1 && v2->op == OP_VIEW);
    CHECK(tensor_view_1d(ctx, a, 25, 0) == NULL);           /* past the end */
    CHECK(tensor_view_2d(ctx, a, 4, 3, 44, 0) == NULL);     /* strides past the end */

    struct tensor *r = tensor_reshape_2d(ctx, a, 12, 2);
    CHECK(r && r->op == OP_RESHAPE && r->ne[0] == 12 && r->nb[1] == 48 && r->data == a->data);
    CHECK(tensor_reshape_1d(ctx, a, 23) == NULL);
    CHECK(tensor_reshape_1d(ctx, p, 24) == NULL); /* not contiguous */

    /* element access respects strides */
    for (int i = 0; i < 24; i++) tensor_set_f32_1d(a, i, (float)i);
    CHECK(tensor_get_f32_1d(p, 1) == 4.0f);  /* p[1,0,0] = a[0,1,0] */
    CHECK(tensor_get_f32_1d(t, 1) == 4.0f);  /* t[1,0] = a[0,1] */
    CHECK(tensor_get_f32_1d(v2, 1) == 15.0f);

    struct tensor *h = tensor_new_1d(ctx, GGML_TYPE_F16, 2);
    tensor_set_f32_1d(h, 0, 1.0f / 3.0f);
    CHECK(tensor_get_f32_1d(h, 0) == 0x1.554p-2f); /* rounded to half */

    CHECK(tensor_set_name(a, "a%d", 7) == a && strcmp(a->name, "a7") == 0);
    tensor_ctx_free(ctx);
}

static void test_constructors(void) {
    struct tensor_ctx *ctx = tensor_ctx_new(64, 0);
    struct tensor *a = tensor_new_3d(ctx, GGML_TYPE_F32, 8, 6, 4);
    struct tensor *row = tensor_new_3d(ctx, GGML_TYPE_F32, 8, 1, 4);
    struct tensor *bad = tensor_new_2d(ctx, GGML_TYPE_F32, 5, 6);

    struct tensor *s = op_add(ctx, a, row);
    CHECK(s && s->op == OP_ADD && tensor_same_shape(s, a) && s->src[0] == a && s->src[1] == row);
    CHECK(op_add(ctx, a, bad) == NULL && strstr(error_last(), "broadcast") != NULL);
    CHECK(op_add(ctx, NULL, a) == NULL);
    CHECK(op_mul(ctx, row, a) == NULL); /* only the second operand broadcasts */

    struct tensor *w = tensor_new_2d(ctx, GGML_TYPE_F16, 8, 10);
    struct tensor *mm = op_mul_mat(ctx, w, a);
    CHECK(mm && mm->type == GGML_TYPE_F32 && mm->ne[0] == 10 && mm->ne[1] == 6 && mm->ne[2] == 4);
    CHECK(op_mul_mat(ctx, w, bad) == NULL);
    CHECK(op_mul_mat(ctx, w, tensor_transpose(ctx, a)) == NULL);

    struct tensor *idx = tensor_new_2d(ctx, GGML_TYPE_I32, 3, 4);
    struct tensor *g = op_get_rows(ctx, a, idx);
    CHECK(g && g->ne[0] == 8 && g->ne[1] == 3 && g->ne[2] == 4);
    CHECK(op_get_rows(ctx, a, bad) == NULL);

    struct tensor *cp = op_cpy(ctx, a, tensor_new_1d(ctx, GGML_TYPE_F16, 192));
    CHECK(cp && cp->op == OP_CPY && cp->type == GGML_TYPE_F16 && cp->view_src == cp->src[1]);
    CHECK(op_cpy(ctx, a, bad) == NULL);

    struct tensor *pos = tensor_new_1d(ctx, GGML_TYPE_I32, 4);
    struct tensor *rp = op_rope(ctx, a, pos, 8, ROPE_MODE_NEOX, 0, 4096, 10000.0f, 1.0f, 0.0f, 1.0f, 32.0f, 1.0f);
    CHECK(rp && rp->op_params[1] == 8 && rp->op_params[2] == ROPE_MODE_NEOX && tensor_op_param_f32(rp, 5) == 10000.0f);
    CHECK(op_rope(ctx, a, idx, 8, 0, 0, 4096, 10000.0f, 1.0f, 0.0f, 1.0f, 32.0f, 1.0f) == NULL);
    CHECK(op_rope(ctx, a, pos, 7, 0, 0, 4096, 10000.0f, 1.0f, 0.0f, 1.0f, 32.0f, 1.0f) == NULL);

    struct tensor *mask = tensor_new_2d(ctx, GGML_TYPE_F32, 8, 3);
    CHECK(op_soft_max(ctx, a, mask, 0.5f) != NULL);
    CHECK(op_soft_max(ctx, a, tensor_new_2d(ctx, GGML_TYPE_F32, 8, 4), 0.5f) == NULL); /* 6 rows % 4 */

    struct tensor *tk = op_top_k(ctx, a, 3);
    CHECK(tk && tk->type == GGML_TYPE_I32 && tk->ne[0] == 3 && tk->src[0]->op == OP_ARGSORT);
    CHECK(op_top_k(ctx, a, 9) == NULL);

    struct tensor *experts[3] = { w, w, w };
    struct tensor *ids = tensor_new_2d(ctx, GGML_TYPE_I32, 2, 6);
    struct tensor *b2 = tensor_new_2d(ctx, GGML_TYPE_F32, 8, 6);
    struct tensor *mid = op_mul_mat_id(ctx, experts, 3, ids, 1, b2);
    CHECK(mid && mid->src[0] == ids && mid->src[1] == b2 && mid->src[4] == w && mid->op_params[1] == 3);
    CHECK(op_mul_mat_id(ctx, experts, 3, ids, 2, b2) == NULL);
    CHECK(op_mul_mat_id(ctx, experts, 9, ids, 0, b2) == NULL);

    CHECK(op_concat(ctx, a, a)->ne[2] == 8);
    CHECK(op_pad(ctx, a, 1, 2, 0, 0)->ne[1] == 8);
    CHECK(op_unary(ctx, a, UNARY_COUNT) == NULL);
    CHECK(strcmp(tensor_op_name(OP_MUL_MAT_ID), "mul_mat_id") == 0);
    CHECK(strcmp(tensor_op_name(OP_COUNT), "?") == 0);
    tensor_ctx_free(ctx);
}

static int index_of(struct tensor **list, int n, const struct tensor *t) {
    for (int i = 0; i < n; i++) {
        if (list[i] == t) return i;
    }
    return -1;
}

static void test_graph(void) {
    struct tensor_ctx *ctx = tensor_ctx_new(64, 0);
    struct tensor *x = tensor_new_2d(ctx, GGML_TYPE_F32, 4, 4);
    struct tensor *w = tensor_new_2d(ctx, GGML_TYPE_F32, 4, 4);
    /* a diamond: x feeds two branches that meet again, plus a view */
    struct tensor *left = op_mul_mat(ctx, w, x);
    struct tensor *right = op_sqr(ctx, x);
    struct tensor *tr = tensor_transpose(ctx, right);
    struct tensor *sum = op_add(ctx, left, op_cont(ctx, tr));
    struct tensor *out = op_mul(ctx, sum, x);

    struct graph *g = graph_new(ctx, 16);
    CHECK(graph_build_forward(g, out));
    CHECK_EQ_INT(g->n_leafs, 2);
    CHECK_EQ_INT(g->n_nodes, 6); /* mul_mat, sqr, transpose, cont, add, mul */
    CHECK(index_of(g->leafs, g->n_leafs, x) >= 0 && index_of(g->leafs, g->n_leafs, w) >= 0);
    CHECK(index_of(g->nodes, g->n_nodes, tr) >= 0); /* views are nodes */
    CHECK(g->nodes[g->n_nodes - 1] == out);
    /* every node comes after its sources */
    for (int i = 0; i < g->n_nodes; i++) {
        for (int s = 0; s < TENSOR_MAX_SRC; s++) {
            const struct tensor *src = g->nodes[i]->src[s];
            if (src && src->op != OP_NONE) CHECK(index_of(g->nodes, g->n_nodes, src) < i);
        }
    }
    /* adding an output that is already there changes nothing; a new one adds only itself */
    CHECK(graph_build_forward(g, sum));
    CHECK_EQ_INT(g->n_nodes, 6);
    struct tensor *extra = op_scale(ctx, sum, 2.0f);
    CHECK(graph_build_forward(g, extra));
    CHECK_EQ_INT(g->n_nodes, 7);
    CHECK(g->nodes[6] == extra);
    CHECK(strcmp(x->name, "leaf_0") == 0 || strcmp(w->name, "leaf_0") == 0);

    graph_reset(g);
    CHECK(g->n_nodes == 0 && g->n_leafs == 0);
    CHECK(graph_build_forward(g, out));
    CHECK_EQ_INT(g->n_nodes, 6);

    /* capacity */
    struct graph *small = graph_new(ctx, 3);
    CHECK(!graph_build_forward(small, out));
    CHECK(strstr(error_last(), "capacity") != NULL);
    CHECK(!graph_build_forward(g, NULL));
    CHECK(graph_new(ctx, 0) == NULL);

    /* a long chain builds without trouble */
    struct graph *big = graph_new(ctx, 64);
    struct tensor_ctx *ctx2 = tensor_ctx_new(2100, 0);
    struct graph *chain_g = graph_new(ctx2, 2100);
    struct tensor *c = tensor_new_1d(ctx2, GGML_TYPE_F32, 4);
    for (int i = 0; i < 2000; i++) c = op_scale(ctx2, c, 1.0f);
    CHECK(graph_build_forward(chain_g, c));
    CHECK_EQ_INT(chain_g->n_nodes, 2000);
    CHECK(big != NULL);
    tensor_ctx_free(ctx2);
    tensor_ctx_free(ctx);
}

int main(void) {
    log_set_callback(quiet_log, NULL);
    test_context();
    test_shapes();
    test_constructors();
    test_graph();
    return test_finish("test_tensor");
}
