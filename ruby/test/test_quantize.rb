# frozen_string_literal: true

require_relative 'test_helper'

# LLaMACpp.model_quantize, then loading and running the result.
class TestQuantize < Minitest::Test
  def quantize(ftype)
    params = LLaMACpp::ModelQuantizeParams.new
    params.ftype = ftype
    params.n_thread = 1
    path = tmp_path("stories260K-#{ftype}.gguf")
    assert_nil LLaMACpp.model_quantize(input_path: stories_path, output_path: path, params: params)
    LLaMACpp::Model.new(model_path: path, params: LLaMACpp::ModelParams.new)
  end

  def generate(model, prompt, count)
    context = new_context(model)
    decode_tokens(context, prompt)
    greedy_tokens(context, prompt.size, count)
  end

  def test_quantize_q8_0_then_generate
    model = quantize(LLaMACpp::LLAMA_FTYPE_MOSTLY_Q8_0)
    reference = golden('eval-stories260K-Q8_0.json')
    assert_equal reference['model_desc'], model.desc
    assert_equal 292_800, model.n_params
    prompt = reference['prompts'][0]
    assert_equal prompt['greedy']['tokens'].first(20), generate(model, prompt['tokens'], 20)
  end

  def test_quantize_f16
    model = quantize(LLaMACpp::LLAMA_FTYPE_MOSTLY_F16)
    reference = golden('eval-stories260K-F16.json')
    assert_equal reference['model_desc'], model.desc
    prompt = reference['prompts'][0]
    assert_equal prompt['greedy']['tokens'].first(20), generate(model, prompt['tokens'], 20)
  end
end
