# frozen_string_literal: true

require_relative 'test_helper'

# TokenData, TokenDataArray and Context#sample_* (spec §3.6, §3.7, §3.9): the
# sampler vectors of b1892's test-sampling (reference-tests.md §2) and the
# seeded sampling chains of golden/sampling-stories260K.json.
class TestSampling < Minitest::Test
  def context
    @context ||= new_context(load_stories)
  end

  # As b1892's test-sampling builds them: logit = logf(p) of the float probability.
  def from_probs(probs)
    LLaMACpp::TokenDataArray.new(probs.each_with_index.map do |p, i|
      LLaMACpp::TokenData.new(id: i, logit: Math.log([p].pack('e').unpack1('e')), p: 0.0)
    end)
  end

  def assert_probs(expected, candidates, tolerance)
    assert_floats_close expected, candidates.to_a.map(&:p), tolerance
  end

  def test_token_data
    d = LLaMACpp::TokenData.new(id: 3, logit: 0.1, p: 0.5)
    assert_equal [3, 0.10000000149011612, 0.5], [d.id, d.logit, d.p]
    d.id = 4
    d.logit = 2 # setters coerce
    assert_equal [4, 2.0], [d.id, d.logit]
    assert_in_delta 0.3, d.send(:p=, 0.3), 1e-7
    e = assert_raises(ArgumentError) { LLaMACpp::TokenData.new(id: 1.0, logit: 0.0, p: 0.0) }
    assert_equal 'id must be an integer', e.message
    e = assert_raises(ArgumentError) { LLaMACpp::TokenData.new(id: 1, logit: 1, p: 0.0) }
    assert_equal 'logit must be a float', e.message
    e = assert_raises(ArgumentError) { LLaMACpp::TokenData.new(id: 1, logit: 1.0, p: 0) }
    assert_equal 'p must be a float', e.message
    e = assert_raises(ArgumentError) { LLaMACpp::TokenData.new(id: 1) }
    assert_equal 'missing keywords: :logit, :p', e.message
  end

  def test_token_data_array
    items = [LLaMACpp::TokenData.new(id: 0, logit: 1.0, p: 0.0), LLaMACpp::TokenData.new(id: 1, logit: 2.0, p: 0.0)]
    array = LLaMACpp::TokenDataArray.new(items)
    assert_equal [2, false], [array.size, array.sorted]
    assert LLaMACpp::TokenDataArray.new(items, sorted: true).sorted
    items[0].logit = 5.0 # copied: later changes are not seen
    assert_equal 1.0, array[0].logit
    assert_equal [0, 1], array.to_a.map(&:id)
    assert_nil array[2]
    assert_equal 1, array[-1].id
    e = assert_raises(ArgumentError) { LLaMACpp::TokenDataArray.new(items.first) }
    assert_equal '1st argument must be an array', e.message
    e = assert_raises(ArgumentError) { LLaMACpp::TokenDataArray.new([]) }
    assert_equal 'array must not be empty', e.message
    e = assert_raises(ArgumentError) { LLaMACpp::TokenDataArray.new([1]) }
    assert_equal 'array element must be a TokenData', e.message
    e = assert_raises(ArgumentError) { LLaMACpp::TokenDataArray.new(items, sorted: nil) }
    assert_equal 'sorted must be a boolean', e.message
    e = assert_raises(RuntimeError) { context.sample_softmax(LLaMACpp::TokenDataArray.allocate) }
    assert_equal 'TokenDataArray is empty', e.message
  end

  def test_top_k_and_top_p_vectors
    [[1, [0.4]], [3, [0.4, 0.3, 0.2]]].each do |k, expected|
      c = from_probs([0.1, 0.2, 0.3, 0.4])
      context.sample_softmax(c)
      context.sample_top_k(c, k: k)
      assert_probs expected, c, 1e-5
    end
    [[0.0, [0.4]], [0.7, [0.4, 0.3]], [0.8, [0.4, 0.3, 0.2]], [1.0, [0.4, 0.3, 0.2, 0.1]]].each do |p, expected|
      c = from_probs([0.1, 0.2, 0.3, 0.4])
      context.sample_softmax(c)
      context.sample_top_p(c, prob: p)
      assert_probs expected, c, 1e-3
    end
    c = from_probs([0.1, 0.2, 0.3, 0.4])
    context.sample_top_k(c, k: 2)
    assert_equal [[3, 0.0], [2, 0.0]], c.to_a.map { |d| [d.id, d.p] } # top-k never computes p
    assert c.sorted
    c = from_probs([0.1, 0.2, 0.3, 0.4])
    context.sample_softmax(c)
    context.sample_top_p(c, prob: 0.0, min_keep: 3)
    assert_equal [3, 2, 1], c.to_a.map(&:id)
  end

  def test_tail_free_typical_min_p_temp_vectors
    [[0.25, [0.3]], [0.75, [0.3, 0.25]], [0.99, [0.3, 0.25]]].each do |z, expected|
      c = from_probs([0.1, 0.15, 0.2, 0.25, 0.3])
      context.sample_tail_free(c, z: z)
      assert_probs expected, c, 1e-3
    end
    c = from_probs([0.97, 0.01, 0.01, 0.01])
    context.sample_typical(c, prob: 0.5)
    assert_probs [0.97], c, 1e-3
    c = from_probs([0.4, 0.2, 0.2, 0.2])
    context.sample_typical(c, prob: 0.5)
    assert_probs [0.2, 0.2, 0.2], c, 1e-3
    refute c.sorted
    [[0.05, 4], [0.25, 4], [0.5, 2], [0.6, 2], [0.74, 2], [0.76, 1], [1.0, 1]].each do |p, kept|
      c = from_probs([0.1, 0.2, 0.3, 0.4])
      context.sample_min_p(c, prob: p)
      assert_equal kept, c.size, "min_p #{p}"
    end
    c = from_probs([0.1, 0.2, 0.3, 0.4])
    context.sample_temp(c, temp: 0.5)
    assert_floats_close [-4.605170, -3.218876, -2.407946, -1.832581], c.to_a.map(&:logit), 1e-5
    c = from_probs([0.1, 0.2, 0.3, 0.4])
    _, err = capture_io { context.sample_temperature(c, temperature: 0.5) }
    assert_match(/sample_temperature is deprecated. Use sample_temp instead./, err)
    assert_in_delta(-1.832581, c[3].logit, 1e-5)
  end

  def test_penalty_vectors
    [
      [[0], 50.0, 0.0, 0.0, [0.25, 0.25, 0.25, 0.25, 0.0]],
      [[0, 1, 2], 50.0, 0.0, 0.0, [0.5, 0.5, 0.0, 0.0, 0.0]],
      [[0, 1, 2, 0, 0], 50.0, 0.0, 0.0, [0.5, 0.5, 0.0, 0.0, 0.0]],
      [[0], 1.0, 5.0, 5.0, [0.249997, 0.249997, 0.249997, 0.249997, 0.000011]],
      [[0, 1, 2], 1.0, 5.0, 5.0, [0.499966, 0.499966, 0.000023, 0.000023, 0.000023]],
      [[0, 1, 2, 0, 0], 1.0, 5.0, 5.0, [0.499977, 0.499977, 0.000023, 0.000023, 0.0]]
    ].each do |last, repeat, freq, present, expected|
      c = from_probs([0.2] * 5)
      context.sample_softmax(c)
      context.sample_repetition_penalties(c, last, penalty_repeat: repeat, penalty_freq: freq, penalty_present: present)
      context.sample_softmax(c)
      assert_probs expected, c, 1e-3
    end
  end

  def test_mirostat_vectors
    logits = [30.0] + [0.0] * 9
    id, mu = context.sample_token_mirostat_v2(candidates_from(logits), tau: 5.0, eta: 0.1, mu: 10.0)
    assert_equal 0, id
    assert_in_delta 10.5, mu, 1e-4
    id, mu = context.sample_token_mirostat(candidates_from(logits), tau: 5.0, eta: 0.1, m: 100, mu: 10.0)
    assert_equal 0, id
    assert_in_delta 10.5, mu, 1e-4
  end

  def test_greedy_and_draws
    c = from_probs([0.1, 0.2, 0.3, 0.4])
    assert_equal 3, context.sample_token_greedy(c)
    context.set_rng_seed(42)
    draws = Array.new(20) { context.sample_token(from_probs([0.1, 0.2, 0.3, 0.4])) }
    context.set_rng_seed(42)
    assert_equal draws, Array.new(20) { context.sample_token(from_probs([0.1, 0.2, 0.3, 0.4])) }
    assert_operator draws.uniq.size, :>, 1
  end

  def test_argument_errors
    c = from_probs([0.5, 0.5])
    messages = {
      -> { context.sample_softmax(1) } => 'argument must be a TokenDataArray',
      -> { context.sample_top_k(1, k: 1) } => '1st argument must be a TokenDataArray',
      -> { context.sample_top_k(c, k: 1.0) } => 'k must be an integer',
      -> { context.sample_top_k(c, k: 1, min_keep: 1.0) } => 'min_keep must be an integer',
      -> { context.sample_top_p(c, prob: 1) } => 'prob must be a float',
      -> { context.sample_min_p(c, prob: 1) } => 'prob must be a float',
      -> { context.sample_tail_free(c, z: 1) } => 'prob must be a float',
      -> { context.sample_typical(c, prob: 1) } => 'prob must be a float',
      -> { context.sample_temp(c, temp: 1) } => 'temp must be a float',
      -> { context.sample_token_mirostat(c, tau: 1, eta: 0.1, m: 1, mu: 1.0) } => 'tau must be a float',
      -> { context.sample_token_mirostat(c, tau: 1.0, eta: 1, m: 1, mu: 1.0) } => 'eta must be a float',
      -> { context.sample_token_mirostat(c, tau: 1.0, eta: 0.1, m: 1.0, mu: 1.0) } => 'm must be an integer',
      -> { context.sample_token_mirostat(c, tau: 1.0, eta: 0.1, m: 1, mu: 1) } => 'mu must be a float',
      -> { context.sample_token_mirostat_v2(c, tau: 1.0, eta: 0.1, mu: 1) } => 'mu must be a float',
      -> { context.sample_token_greedy(nil) } => '1st argument must be a TokenDataArray',
      -> { context.sample_token([]) } => '1st argument must be a TokenDataArray',
      -> { context.sample_grammar(c, grammar: 1) } => 'grammar must be a Grammar',
      -> { context.sample_repetition_penalties(1, [], penalty_repeat: 1.0, penalty_freq: 0.0, penalty_present: 0.0) } =>
        'candidates must be a TokenDataArray',
      -> { context.sample_repetition_penalties(c, 1, penalty_repeat: 1.0, penalty_freq: 0.0, penalty_present: 0.0) } =>
        'last_n_tokens must be an Array',
      -> { context.sample_repetition_penalties(c, [], penalty_repeat: 1, penalty_freq: 0.0, penalty_present: 0.0) } =>
        'penalty_repeat must be a float',
      -> { context.sample_repetition_penalties(c, [], penalty_repeat: 1.0, penalty_freq: 0, penalty_present: 0.0) } =>
        'penalty_freq must be a float',
      -> { context.sample_repetition_penalties(c, [], penalty_repeat: 1.0, penalty_freq: 0.0, penalty_present: 0) } =>
        'penalty_present must be a float',
      -> { context.sample_classifier_free_guidance(c, guidance: 1, scale: 1.0) } => 'guidance must be a Context',
      -> { context.sample_classifier_free_guidance(c, guidance: context, scale: 1) } => 'scale must be a float',
      -> { context.sample_apply_guidance(logits_guidance: [], scale: 1.0) } => 'logits must be an Array',
      -> { context.sample_apply_guidance(logits: [], scale: 1.0) } => 'logits_guidance must be an Array',
      -> { context.sample_apply_guidance(logits: [], logits_guidance: []) } => 'scale must be a float',
      -> { context.sample_top_k(c) } => 'missing keyword: :k'
    }
    messages.each do |call, message|
      e = assert_raises(ArgumentError, message) { call.call }
      assert_equal message, e.message
    end
    assert_raises(TypeError) do
      context.sample_repetition_penalties(c, ['x'], penalty_repeat: 1.0, penalty_freq: 0.0, penalty_present: 0.0)
    end
  end

  def test_apply_guidance_writes_back
    model = load_stories
    ctx = new_context(model)
    guidance = new_context(model)
    decode_tokens(ctx, model.tokenize(text: 'Once upon a time', add_bos: true))
    decode_tokens(guidance, model.tokenize(text: 'The dog was sad', add_bos: true))
    logits = ctx.logits
    original = logits.dup
    assert_nil ctx.sample_apply_guidance(logits: logits, logits_guidance: guidance.logits, scale: 1.5)
    refute_equal original, logits # 0.12.2 dropped the result
    # scale 1 leaves the log-softmax of the logits
    logits = ctx.logits
    ctx.sample_apply_guidance(logits: logits, logits_guidance: guidance.logits, scale: 1.0)
    max = original.max
    log_sum = Math.log(original.sum { |l| Math.exp(l - max) })
    assert_floats_close(original.map { |l| l - max - log_sum }, logits, 1e-4)
    e = assert_raises(ArgumentError) { ctx.sample_apply_guidance(logits: [0.0], logits_guidance: guidance.logits, scale: 1.5) }
    assert_match(/logits must have at least n_vocab \(512\) elements/, e.message)
    assert_raises(FrozenError) { ctx.sample_apply_guidance(logits: ctx.logits.freeze, logits_guidance: guidance.logits, scale: 1.5) }
    # the deprecated candidate form
    c = candidates_from(ctx.logits)
    ctx.sample_classifier_free_guidance(c, guidance: guidance, scale: 1.5)
    expected = ctx.logits
    ctx.sample_apply_guidance(logits: expected, logits_guidance: guidance.logits, scale: 1.5)
    assert_floats_close expected, c.to_a.map(&:logit), 1e-4
    sorted = candidates_from(ctx.logits)
    ctx.sample_softmax(sorted)
    assert_raises(ArgumentError) { ctx.sample_classifier_free_guidance(sorted, guidance: guidance, scale: 1.5) }
    e = assert_raises(RuntimeError) { ctx.sample_classifier_free_guidance(c, guidance: new_context(model), scale: 1.5) }
    assert_equal 'guidance context has not been evaluated', e.message
    e = assert_raises(RuntimeError) do
      ctx.sample_classifier_free_guidance(c, guidance: LLaMACpp::Context.allocate, scale: 1.5)
    end
    assert_equal 'guidance context is not initialized', e.message
  end

  # One case of golden/sampling-stories260K.json, with the call order of b1892's common/sampling.cpp.
  def run_golden_case(model, c)
    params = c['params']
    ctx = new_context(model, seed: c['context_seed'])
    decode_tokens(ctx, c['prompt_tokens'])
    n_past = c['prompt_tokens'].size
    prev = (Array.new(params['n_prev'], 0) + c['prompt_tokens']).last(params['n_prev'])
    cfg_scale = params['cfg_scale'].to_f
    if cfg_scale > 1.0
      cfg = new_context(model, seed: c['context_seed'])
      negative = model.tokenize(text: params['cfg_negative_prompt'], add_bos: true, special: true)
      decode_tokens(cfg, negative)
      cfg_past = negative.size
    end
    mu = c['name'].end_with?('_mu2tau') ? 2.0 * params['mirostat_tau'] : 0.0
    temp = params['temp'].to_f
    Array.new(c['n_gen']) do
      logits = ctx.logits
      ctx.sample_apply_guidance(logits: logits, logits_guidance: cfg.logits, scale: cfg_scale) if cfg
      cand = candidates_from(logits)
      penalty_n = [params['n_prev'], params['penalty_last_n']].min
      if penalty_n.positive?
        ctx.sample_repetition_penalties(cand, prev.last(penalty_n), penalty_repeat: params['penalty_repeat'].to_f,
                                                                   penalty_freq: params['penalty_freq'].to_f,
                                                                   penalty_present: params['penalty_present'].to_f)
      end
      id =
        if temp.zero?
          ctx.sample_token_greedy(cand)
        elsif params['mirostat'] == 1
          ctx.sample_temp(cand, temp: temp)
          id, mu = ctx.sample_token_mirostat(cand, tau: params['mirostat_tau'].to_f, eta: params['mirostat_eta'].to_f,
                                                   m: 100, mu: mu)
          id
        elsif params['mirostat'] == 2
          ctx.sample_temp(cand, temp: temp)
          id, mu = ctx.sample_token_mirostat_v2(cand, tau: params['mirostat_tau'].to_f,
                                                      eta: params['mirostat_eta'].to_f, mu: mu)
          id
        else
          params['samplers_sequence'].each_char do |s|
            case s
            when 'k' then ctx.sample_top_k(cand, k: params['top_k'] <= 0 ? model.n_vocab : params['top_k'])
            when 'f' then ctx.sample_tail_free(cand, z: params['tfs_z'].to_f)
            when 'y' then ctx.sample_typical(cand, prob: params['typical_p'].to_f)
            when 'p' then ctx.sample_top_p(cand, prob: params['top_p'].to_f)
            when 'm' then ctx.sample_min_p(cand, prob: params['min_p'].to_f)
            when 't' then ctx.sample_temp(cand, temp: temp)
            end
          end
          ctx.sample_token(cand)
        end
      prev = prev.drop(1) << id
      decode_tokens(ctx, [id], pos_zero: n_past)
      n_past += 1
      if cfg
        decode_tokens(cfg, [id], pos_zero: cfg_past)
        cfg_past += 1
      end
      id
    end
  end

  def test_seeded_sampling_matches_golden
    model = load_stories
    golden('sampling-stories260K.json')['cases'].each do |c|
      assert_equal c['tokens'], run_golden_case(model, c), "case #{c['name']}: #{c['desc']}"
    end
  end

  def test_seeded_sampling_is_reproducible
    model = load_stories
    c = golden('sampling-stories260K.json')['cases'].find { |x| x['name'] == 'a' }
    assert_equal run_golden_case(model, c), run_golden_case(model, c)
  end
end
