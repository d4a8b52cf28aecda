# frozen_string_literal: true

require_relative 'test_helper'

# ModelParams, ContextParams, ModelQuantizeParams, ModelKVOverride (spec §3.2-3.5).
class TestParams < Minitest::Test
  def test_model_params_defaults_and_setters
    params = LLaMACpp::ModelParams.new
    assert_equal 0, params.n_gpu_layers
    assert_equal LLaMACpp::LLAMA_SPLIT_LAYER, params.split_mode
    assert_equal 0, params.main_gpu
    assert_equal [], params.tensor_split
    refute params.vocab_only
    assert params.use_mmap
    refute params.use_mlock
    assert_equal 2, params.send(:split_mode=, LLaMACpp::LLAMA_SPLIT_ROW)
    assert_equal 2, params.split_mode
    params.n_gpu_layers = 3
    params.main_gpu = 1
    params.vocab_only = 1 # truthiness, as 0.12.2
    params.use_mmap = nil
    params.use_mlock = true
    assert_equal [3, 1, true, false, true],
                 [params.n_gpu_layers, params.main_gpu, params.vocab_only, params.use_mmap, params.use_mlock]
    refute_respond_to params, :tensor_split=
  end

  def test_context_params_defaults
    p = LLaMACpp::ContextParams.new
    assert_equal [-1, 512, 512, 4, 4, -1], [p.seed, p.n_ctx, p.n_batch, p.n_threads, p.n_threads_batch, p.rope_scaling_type]
    assert_equal [0.0, 0.0, -1.0, 1.0, 32.0, 1.0],
                 [p.rope_freq_base, p.rope_freq_scale, p.yarn_ext_factor, p.yarn_attn_factor, p.yarn_beta_fast,
                  p.yarn_beta_slow]
    assert_equal [0, 1, 1], [p.yarn_orig_ctx, p.type_k, p.type_v]
    assert_equal [true, false, false, true], [p.mul_mat_q, p.logits_all, p.embedding, p.offload_kqv]
  end

  def test_context_params_setters
    p = LLaMACpp::ContextParams.new
    p.n_batch = 32
    p.n_threads = 2
    p.n_threads_batch = 3
    p.rope_scaling_type = LLaMACpp::LLAMA_ROPE_SCALING_YARN
    p.rope_freq_base = 10_000
    p.rope_freq_scale = 0.5
    p.yarn_ext_factor = 0.25
    p.yarn_attn_factor = 2.0
    p.yarn_beta_fast = 16.0
    p.yarn_beta_slow = 2.0
    p.yarn_orig_ctx = 128
    p.type_k = 0
    p.type_v = 0
    p.mul_mat_q = false
    p.offload_kqv = false
    assert_equal [32, 2, 3, 2, 10_000.0, 0.5, 0.25, 2.0, 16.0, 2.0, 128, 0, 0, false, false],
                 [p.n_batch, p.n_threads, p.n_threads_batch, p.rope_scaling_type, p.rope_freq_base,
                  p.rope_freq_scale, p.yarn_ext_factor, p.yarn_attn_factor, p.yarn_beta_fast, p.yarn_beta_slow,
                  p.yarn_orig_ctx, p.type_k, p.type_v, p.mul_mat_q, p.offload_kqv]
    assert_in_delta 0.1, p.send(:rope_freq_scale=, 0.1), 1e-7 # stored as float32
    refute_equal 0.1, p.rope_freq_scale
  end

  def test_context_params_seed
    p = LLaMACpp::ContextParams.new
    p.seed = 0
    assert_equal 0, p.seed
    e = assert_raises(ArgumentError) { p.seed = -1 }
    assert_equal 'seed must be positive', e.message
    p.seed = 0xFFFFFFFF # allowed here (0.12.2: RangeError); reads back as 0.12.2 shows the default
    assert_equal(-1, p.seed)
    assert_raises(RangeError) { p.seed = 2**32 }
  end

  def test_context_params_range_checks
    p = LLaMACpp::ContextParams.new
    e = assert_raises(ArgumentError) { p.n_ctx = -1 }
    assert_equal 'n_ctx must be a non-negative integer', e.message
    assert_raises(RangeError) { p.n_batch = 2**40 }
    assert_raises(RangeError) { p.rope_scaling_type = 300 }
    assert_raises(TypeError) { p.n_ctx = 'big' }
    assert_equal 512, p.n_ctx
  end

  def test_quantize_params
    p = LLaMACpp::ModelQuantizeParams.new
    assert_equal [0, LLaMACpp::LLAMA_FTYPE_MOSTLY_Q5_1, false, true, false, false],
                 [p.n_thread, p.ftype, p.allow_requantize, p.quantize_output_tensor, p.only_copy, p.pure]
    p.n_thread = 2
    p.ftype = LLaMACpp::LLAMA_FTYPE_MOSTLY_Q8_0
    p.allow_requantize = true
    p.quantize_output_tensor = false
    p.only_copy = true
    p.pure = true
    assert_equal [2, 7, true, false, true, true],
                 [p.n_thread, p.ftype, p.allow_requantize, p.quantize_output_tensor, p.only_copy, p.pure]
    refute_respond_to p, :params
  end

  def test_kv_override
    kv = LLaMACpp::ModelKVOverride.new
    assert_equal ['', 0, 0, 0.0, false], [kv.key, kv.tag, kv.int_value, kv.float_value, kv.bool_value]
  end
end
