# frozen_string_literal: true

require_relative 'test_helper'

# llama_cpp.rb 0.12.2's own tests (test/test_llama_cpp.rb), unchanged in substance.
class TestLLaMACpp < Minitest::Test
  def test_version_numbers
    refute_nil LLaMACpp::VERSION
    refute_nil LLaMACpp::LLAMA_CPP_VERSION
  end

  def test_module_functions
    assert_match(/AVX = \d{1} | AVX2 = \d{1} | AVX512 = \d{1}/, LLaMACpp.print_system_info)
  end
end

# The module: constants and functions of 0.12.2 (spec §1, §2).
class TestLLaMACppModule < Minitest::Test
  def test_versions
    assert_equal '0.12.2', LLaMACpp::VERSION
    assert_equal 'b1892', LLaMACpp::LLAMA_CPP_VERSION
  end

  def test_string_constants
    assert_equal '0x67676c61', LLaMACpp::LLAMA_FILE_MAGIC_GGLA
    assert_equal '0x6767736e', LLaMACpp::LLAMA_FILE_MAGIC_GGSN
    assert_equal '0x6767736e', LLaMACpp::LLAMA_SESSION_MAGIC
    assert_equal '0xffffffff', LLaMACpp::LLAMA_DEFAULT_SEED
    assert_equal '4', LLaMACpp::LLAMA_SESSION_VERSION
    assert_equal 1, LLaMACpp::LLAMA_MAX_DEVICES
    refute LLaMACpp.const_defined?(:LLAMA_DEFALUT_SEED)
    refute LLaMACpp.const_defined?(:Params)
  end

  def test_enum_constants
    expected = {
      LLAMA_VOCAB_TYPE_SPM: 0, LLAMA_VOCAB_TYPE_BPE: 1,
      LLAMA_TOKEN_TYPE_UNDEFINED: 0, LLAMA_TOKEN_TYPE_NORMAL: 1, LLAMA_TOKEN_TYPE_UNKNOWN: 2,
      LLAMA_TOKEN_TYPE_CONTROL: 3, LLAMA_TOKEN_TYPE_USER_DEFINED: 4, LLAMA_TOKEN_TYPE_UNUSED: 5,
      LLAMA_TOKEN_TYPE_BYTE: 6,
      LLAMA_FTYPE_ALL_F32: 0, LLAMA_FTYPE_MOSTLY_F16: 1, LLAMA_FTYPE_MOSTLY_Q4_0: 2, LLAMA_FTYPE_MOSTLY_Q4_1: 3,
      LLAMA_FTYPE_MOSTLY_Q4_1_SOME_F16: 4, LLAMA_FTYPE_MOSTLY_Q8_0: 7, LLAMA_FTYPE_MOSTLY_Q5_0: 8,
      LLAMA_FTYPE_MOSTLY_Q5_1: 9, LLAMA_FTYPE_MOSTLY_Q2_K: 10, LLAMA_FTYPE_MOSTLY_Q3_K_S: 11,
      LLAMA_FTYPE_MOSTLY_Q3_K_M: 12, LLAMA_FTYPE_MOSTLY_Q3_K_L: 13, LLAMA_FTYPE_MOSTLY_Q4_K_S: 14,
      LLAMA_FTYPE_MOSTLY_Q4_K_M: 15, LLAMA_FTYPE_MOSTLY_Q5_K_S: 16, LLAMA_FTYPE_MOSTLY_Q5_K_M: 17,
      LLAMA_FTYPE_MOSTLY_Q6_K: 18, LLAMA_FTYPE_MOSTLY_IQ2_XXS: 19, LLAMA_FTYPE_MOSTLY_IQ2_XS: 20,
      LLAMA_FTYPE_MOSTLY_Q2_K_S: 21, LLAMA_FTYPE_GUESSED: 1024,
      LLAMA_KV_OVERRIDE_INT: 0, LLAMA_KV_OVERRIDE_FLOAT: 1, LLAMA_KV_OVERRIDE_BOOL: 2,
      LLAMA_GRETYPE_END: 0, LLAMA_GRETYPE_ALT: 1, LLAMA_GRETYPE_RULE_REF: 2, LLAMA_GRETYPE_CHAR: 3,
      LLAMA_GRETYPE_CHAR_NOT: 4, LLAMA_GRETYPE_CHAR_RNG_UPPER: 5, LLAMA_GRETYPE_CHAR_ALT: 6,
      LLAMA_ROPE_SCALING_UNSPECIFIED: -1, LLAMA_ROPE_SCALING_NONE: 0, LLAMA_ROPE_SCALING_LINEAR: 1,
      LLAMA_ROPE_SCALING_YARN: 2, LLAMA_ROPE_SCALING_MAX_VALUE: 2,
      LLAMA_SPLIT_NONE: 0, LLAMA_SPLIT_LAYER: 1, LLAMA_SPLIT_ROW: 2
    }
    expected.each { |name, value| assert_equal value, LLaMACpp.const_get(name), name.to_s }
  end

  def test_module_functions
    assert_nil LLaMACpp.backend_init
    assert_nil LLaMACpp.backend_init(numa: false)
    assert_nil LLaMACpp.backend_free
    assert_raises(ArgumentError) { LLaMACpp.backend_init(nume: true) }
    info = LLaMACpp.print_system_info
    fields = %w[AVX AVX_VNNI AVX2 AVX512 AVX512_VBMI AVX512_VNNI FMA NEON ARM_FMA F16C FP16_VA WASM_SIMD BLAS SSE3
                SSSE3 VSX]
    assert_match(/\A#{fields.map { |f| "#{f} = [01] \\| " }.join}\z/, info)
  end

  def test_clock_and_capabilities
    t0 = LLaMACpp.time_us
    sleep 0.002
    assert_operator LLaMACpp.time_us - t0, :>=, 1000
    assert_includes [true, false], LLaMACpp.mmap_supported?
    assert_includes [true, false], LLaMACpp.mlock_supported?
    assert_equal 1, LLaMACpp.max_devices
  end

  def test_module_function_argument_errors
    params = LLaMACpp::ModelQuantizeParams.new
    e = assert_raises(ArgumentError) { LLaMACpp.model_quantize(input_path: 1, output_path: 'x', params: params) }
    assert_equal 'input_path must be a string', e.message
    e = assert_raises(ArgumentError) { LLaMACpp.model_quantize(input_path: 'x', output_path: 1, params: params) }
    assert_equal 'output_path must be a string', e.message
    e = assert_raises(ArgumentError) { LLaMACpp.model_quantize(input_path: 'x', output_path: 'y', params: 1) }
    assert_equal 'params must be a ModelQuantizeParams', e.message
    e = assert_raises(ArgumentError) { LLaMACpp.model_quantize(input_path: 'x') }
    assert_equal 'missing keywords: :output_path, :params', e.message
    e = assert_raises(RuntimeError) do
      LLaMACpp.model_quantize(input_path: '/nonexistent/model.gguf', output_path: tmp_path('q.gguf'), params: params)
    end
    assert_match(/\AFailed to quantize model/, e.message)
  end

  def test_generate_argument_errors
    e = assert_raises(ArgumentError) { LLaMACpp.generate(nil, 'x') }
    assert_equal 'context must be an instance of LLaMACpp::Context', e.message
    context = new_context(load_stories)
    e = assert_raises(ArgumentError) { LLaMACpp.generate(context, 1) }
    assert_equal 'prompt must be a String', e.message
    e = assert_raises(ArgumentError) { LLaMACpp.generate(context, 'x', n_threads: 2) }
    assert_equal 'unknown keyword: :n_threads', e.message
    e = assert_raises(ArgumentError) { LLaMACpp.generate(context, 'Once upon a time ' * 100) }
    assert_match(/\Aprompt is too long \d+ tokens, maximum is 252\z/, e.message)
  end
end

# llama_cpp.rb 0.12.2's test/test_context_params.rb.
class TestContextParams < Minitest::Test
  def test_default_values
    params = LLaMACpp::ContextParams.new
    assert_equal 512, params.n_ctx
    assert_equal(-1, params.seed)
    refute params.logits_all
    refute params.embedding
  end

  def test_setter_and_getter
    params = LLaMACpp::ContextParams.new
    params.n_ctx = 1024
    params.seed = 1
    params.logits_all = true
    params.embedding = true
    assert_equal 1024, params.n_ctx
    assert_equal 1, params.seed
    assert params.logits_all
    assert params.embedding
  end
end
