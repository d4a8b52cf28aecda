# frozen_string_literal: true

require_relative 'test_helper'

# LLaMACpp::Context (spec §3.9) on stories260K against golden/eval-stories260K-F32.json.
class TestContext < Minitest::Test
  def eval_golden
    golden('eval-stories260K-F32.json')
  end

  def test_new_argument_errors
    model = load_stories
    params = LLaMACpp::ContextParams.new
    e = assert_raises(ArgumentError) { LLaMACpp::Context.new }
    assert_equal 'missing keywords: :model, :params', e.message
    e = assert_raises(ArgumentError) { LLaMACpp::Context.new(model: 'model', params: params) }
    assert_equal 'model must be a Model', e.message
    e = assert_raises(ArgumentError) { LLaMACpp::Context.new(model: model, params: LLaMACpp::ModelParams.new) }
    assert_equal 'params must be a ContextParams', e.message
    e = assert_raises(RuntimeError) { LLaMACpp::Context.new(model: LLaMACpp::Model.allocate, params: params) }
    assert_equal 'Model is empty', e.message
    params.type_k = 99
    e = assert_raises(RuntimeError) { LLaMACpp::Context.new(model: model, params: params) }
    assert_match(/\AFailed to initialize LLaMA context/, e.message)
  end

  def test_uninitialized_context
    context = LLaMACpp::Context.allocate
    %i[logits embeddings n_ctx n_batch timings kv_cache_token_count kv_cache_clear].each do |name|
      e = assert_raises(RuntimeError) { context.public_send(name) }
      assert_equal 'LLaMA context is not initialized', e.message
    end
    e = assert_raises(RuntimeError) { context.kv_cache_seq_rm(0, 0, 1) }
    assert_equal 'LLaMA context is not initialized', e.message
    e = assert_raises(ArgumentError) { context.kv_cache_seq_cp(0, 1, 0, 1) }
    assert_equal 'LLaMA context is not initialized', e.message
    assert_raises(ArgumentError) { context.kv_cache_seq_keep(0) }
    assert_raises(ArgumentError) { context.kv_cache_seq_shift(0, 0, 1, 1) }
    assert_raises(ArgumentError) { context.kv_cache_seq_div(0, 0, 1, 2) }
    assert_raises(RuntimeError) { context.decode(LLaMACpp::Batch.get_one(tokens: [1], n_tokens: 1, pos_zero: 0, seq_id: 0)) }
    assert_raises(RuntimeError) { context.sample_token_greedy(candidates_from([0.0])) }
  end

  def test_accessors
    model = load_stories
    context = new_context(model, n_ctx: 128, n_batch: 64)
    assert_same model, context.model
    assert_equal [128, 64], [context.n_ctx, context.n_batch]
    e = assert_raises(RuntimeError) { context.logits }
    assert_equal 'LLaMA context has not been evaluated', e.message
    e = assert_raises(RuntimeError) { context.embeddings }
    assert_equal 'embedding parameter is false', e.message
  end

  def test_prompt_logits_match_golden
    model = load_stories
    eval_golden['prompts'].each do |prompt|
      tokens = prompt['tokens']
      assert_equal tokens, model.tokenize(text: prompt['text'], add_bos: true)
      # every position's logits: one batch, logits_all
      context = new_context(model, logits_all: true)
      decode_tokens(context, tokens)
      logits = context.logits
      assert_equal tokens.size * 512, logits.size
      tokens.each_index do |i|
        assert_floats_close prompt['logits'][i], logits[i * 512, 512], 1e-3, "#{prompt['text']} position #{i}"
      end
      # a Batch with per-token arrays and only the last logits flag: Context#logits is that row
      context = new_context(model)
      batch = LLaMACpp::Batch.new(max_n_token: tokens.size, n_embd: 0, max_n_seq: 1)
      tokens.each_with_index do |t, i|
        batch.set_token(i, t)
        batch.set_pos(i, i)
        batch.set_n_seq_id(i, 1)
        batch.set_seq_id(i, 0, 0)
        batch.set_logits(i, i == tokens.size - 1)
      end
      batch.n_tokens = tokens.size
      context.decode(batch)
      assert_floats_close prompt['logits'].last, context.logits, 1e-3, 'last-token row from a Batch.new batch'
    end
  end

  def test_greedy_generation_matches_golden
    model = load_stories
    eval_golden['prompts'].each do |prompt|
      context = new_context(model)
      decode_tokens(context, prompt['tokens'])
      generated = greedy_tokens(context, prompt['tokens'].size, prompt['greedy']['tokens'].size)
      assert_equal prompt['greedy']['tokens'], generated, prompt['text']
      assert_equal prompt['greedy']['text'], generated.map { |t| model.token_to_piece(t) }.join
    end
  end

  def test_generate_greedy_matches_golden
    model = load_stories
    prompt = eval_golden['prompts'][0]
    greedy = prompt['greedy']
    n = greedy['tokens'].index(model.token_eos) || greedy['tokens'].size
    expected = greedy['tokens'].first(n).map { |t| model.token_to_piece(t) }.join
    context = new_context(model)
    pieces = []
    text = context.generate(prompt['text'], n_predict: n, temperature: 0.0, repeat_penalty: 1.0) { |s| pieces << s }
    assert_equal expected, text
    assert_equal expected, pieces.join
    assert_equal expected.strip, LLaMACpp.generate(context, prompt['text'], n_predict: n, temperature: 0, repeat_penalty: 1)
  end

  def test_generate_sampling_is_reproducible
    model = load_stories
    texts = Array.new(2) { LLaMACpp.generate(new_context(model, seed: 7), 'Once upon a time', n_predict: 40) }
    assert_equal texts[0], texts[1]
    refute_empty texts[0]
    other = LLaMACpp.generate(new_context(model, seed: 8), 'Once upon a time', n_predict: 40)
    refute_equal texts[0], other
    # the context is cleared first: generating again from the same context gives the same text
    context = new_context(model, seed: 9)
    first = context.generate('Once upon a time', n_predict: 20)
    context.set_rng_seed(9)
    assert_equal first, context.generate('Once upon a time', n_predict: 20)
  end

  def test_generate_beyond_the_context
    model = load_stories
    context = new_context(model, n_ctx: 32, n_batch: 32, seed: 3)
    text = context.generate('Once upon a time', n_predict: 80, n_keep: 2)
    refute_empty text
    assert_operator context.kv_cache_token_count, :<=, 32
  end

  def test_embeddings_match_golden
    model = load_stories
    data = eval_golden
    data['prompts'].each_with_index do |prompt, i|
      context = new_context(model, embedding: true)
      e = assert_raises(RuntimeError) { context.embeddings }
      assert_equal 'LLaMA context has not been evaluated', e.message
      decode_tokens(context, prompt['tokens'])
      assert_floats_close data['embeddings']['per_prompt'][i], context.embeddings, 1e-3, prompt['text']
    end
  end

  def test_decode_errors
    model = load_stories
    context = new_context(model, n_ctx: 32, n_batch: 32)
    n_ctx = context.n_ctx
    e = assert_raises(ArgumentError) { context.decode([1, 2]) }
    assert_equal 'batch must be a Batch', e.message
    decode_tokens(context, Array.new(n_ctx - 4, 300))
    # 0.12.2 ignored "no KV slot" (return value 1) and marked the context evaluated
    e = assert_raises(RuntimeError) { decode_tokens(context, Array.new(8, 300), pos_zero: n_ctx - 4) }
    assert_match(/\AFailed to decode: no KV cache slot/, e.message)
    e = assert_raises(RuntimeError) { decode_tokens(context, [100_000], pos_zero: n_ctx - 4) }
    assert_match(/\AFailed to decode/, e.message)
    assert_equal n_ctx - 4, context.kv_cache_token_count
    decode_tokens(context, [300], pos_zero: n_ctx - 4) # still usable
    assert_equal 512, context.logits.size
  end

  def test_kv_cache_operations
    context = new_context(load_stories)
    decode_tokens(context, [1, 403, 407, 261, 378])
    assert_equal 5, context.kv_cache_token_count
    assert_nil context.kv_cache_seq_cp(0, 1, 0, 3)
    assert_equal 8, context.kv_cache_token_count
    assert_nil context.kv_cache_seq_keep(1)
    assert_equal 3, context.kv_cache_token_count
    assert_nil context.kv_cache_seq_shift(1, 0, 3, 10)
    assert_nil context.kv_cache_seq_div(1, 0, 20, 2)
    assert_nil context.kv_cache_seq_rm(1, 0, 6)
    assert_equal 1, context.kv_cache_token_count
    assert_nil context.kv_cache_clear
    assert_equal 0, context.kv_cache_token_count
    assert_raises(ArgumentError) { context.kv_cache_seq_div(0, 0, 1, 0) }
    assert_raises(TypeError) { context.kv_cache_seq_rm('0', 0, 1) }
  end

  def test_timings
    context = new_context(load_stories)
    decode_tokens(context, [1, 403, 407])
    decode_tokens(context, [261], pos_zero: 3)
    context.sample_token_greedy(candidates_from(context.logits))
    t = context.timings
    assert_instance_of LLaMACpp::Timings, t
    assert_equal [3, 1, 1], [t.n_p_eval, t.n_eval, t.n_sample]
    %i[t_start_ms t_end_ms t_load_ms t_sample_ms t_p_eval_ms t_eval_ms].each { |m| assert_kind_of Float, t.public_send(m) }
    assert_nil context.reset_timings
    assert_equal [1, 1, 1], context.timings.then { |r| [r.n_p_eval, r.n_eval, r.n_sample] } # clamped to >= 1
    assert_nil context.print_timings
    assert_kind_of LLaMACpp::Timings, LLaMACpp::Timings.new
  end

  def test_eval_deprecated_api
    model = load_stories
    context = new_context(model)
    tokens = eval_golden['prompts'][0]['tokens']
    _, err = capture_io { context.eval(tokens: tokens, n_past: 0) } # 0.12.2 aborted the process here
    assert_match(/eval is deprecated. Use decode instead./, err)
    assert_floats_close eval_golden['prompts'][0]['logits'].last, context.logits, 1e-3
    capture_io { context.eval(tokens: [tokens.first], n_past: 0, n_tokens: 1) }
    assert_floats_close eval_golden['prompts'][0]['logits'].first, context.logits, 1e-3
    assert_equal 1, context.kv_cache_token_count
    capture_io do
      e = assert_raises(ArgumentError) { context.eval(tokens: 1, n_past: 0) }
      assert_equal 'tokens must be an Array', e.message
      e = assert_raises(ArgumentError) { context.eval(tokens: [1], n_past: 0.0) }
      assert_equal 'n_past must be an integer', e.message
      e = assert_raises(ArgumentError) { context.eval(tokens: [1], n_past: 0, n_tokens: '1') }
      assert_equal 'n_tokens must be an integer', e.message
      e = assert_raises(ArgumentError) { context.eval(tokens: ['a'], n_past: 0) }
      assert_equal 'tokens must be an array of integers', e.message
      assert_raises(ArgumentError) { context.eval(tokens: [1], n_past: 0, n_tokens: 5) }
      e = assert_raises(RuntimeError) { context.eval(tokens: [99_999], n_past: 0) }
      assert_match(/\AFailed to evaluate/, e.message)

      embd = Array.new(2 * model.n_embd) { |i| Math.sin(i) * 0.1 }
      context.eval_embd(embd: embd, n_past: 0)
      assert_equal 512, context.logits.size
      e = assert_raises(ArgumentError) { context.eval_embd(embd: [1, 2], n_past: 0) }
      assert_equal 'embd must be an array of floats', e.message
      e = assert_raises(ArgumentError) { context.eval_embd(embd: 'x', n_past: 0) }
      assert_equal 'tokens must be an Array', e.message
    end
  end

  def test_set_rng_seed
    context = new_context(load_stories)
    assert_nil context.set_rng_seed(0)
    assert_nil context.set_rng_seed(0xFFFFFFFF)
    e = assert_raises(ArgumentError) { context.set_rng_seed(-1) }
    assert_equal 'seed must be a non-negative integer', e.message
    assert_raises(ArgumentError) { context.set_rng_seed(1.5) }
  end
end
