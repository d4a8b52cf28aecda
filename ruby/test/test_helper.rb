# frozen_string_literal: true

$LOAD_PATH.unshift(File.expand_path('../lib', __dir__))
require 'llama_cpp'
require 'minitest/autorun'
require 'json'
require 'fileutils'
require 'tmpdir'
require 'base64'

# Shared models and golden data: $LLAMAC_SHARED or ../shared beside the
# repository. Tests that need them skip with a message when they are absent,
# and fail instead when LLAMAC_REQUIRE_SHARED=1 (CI).
module LlamacTestHelper
  REPO_ROOT = File.expand_path('../..', __dir__)

  def self.shared_dir
    dir = ENV.fetch('LLAMAC_SHARED', '')
    dir.empty? ? File.expand_path('../shared', REPO_ROOT) : dir
  end

  def shared_path(relative)
    path = File.join(LlamacTestHelper.shared_dir, relative)
    return path if File.exist?(path)

    message = "shared file #{path} is absent"
    flunk(message) if ENV['LLAMAC_REQUIRE_SHARED'] == '1'
    skip(message)
  end

  GOLDEN = {} # rubocop:disable Style/MutableConstant -- a cache of parsed files

  def golden(name)
    GOLDEN[name] ||= JSON.parse(File.read(shared_path("golden/#{name}")))
  end

  def stories_path
    shared_path('models/stories260K.gguf')
  end

  def load_stories(**options)
    params = LLaMACpp::ModelParams.new
    options.each { |key, value| params.public_send("#{key}=", value) }
    LLaMACpp::Model.new(model_path: stories_path, params: params)
  end

  # The golden files' context: n_ctx 256, n_batch 256, one thread, seed 1234.
  def new_context(model, n_ctx: 256, n_batch: 256, seed: 1234, **options)
    params = LLaMACpp::ContextParams.new
    params.n_ctx = n_ctx
    params.n_batch = n_batch
    params.seed = seed
    params.n_threads = 1
    params.n_threads_batch = 1
    options.each { |key, value| params.public_send("#{key}=", value) }
    LLaMACpp::Context.new(model: model, params: params)
  end

  def decode_tokens(context, tokens, pos_zero: 0)
    context.decode(LLaMACpp::Batch.get_one(tokens: tokens, n_tokens: tokens.size, pos_zero: pos_zero, seq_id: 0))
  end

  def candidates_from(logits)
    LLaMACpp::TokenDataArray.new(logits.each_with_index.map { |l, i| LLaMACpp::TokenData.new(id: i, logit: l, p: 0.0) })
  end

  def argmax(values)
    values.each_with_index.max_by { |v, i| [v, -i] }.last
  end

  # count greedy tokens from the context's logits, each decoded in turn from position n_past
  def greedy_tokens(context, n_past, count)
    Array.new(count) do
      id = argmax(context.logits)
      decode_tokens(context, [id], pos_zero: n_past)
      n_past += 1
      id
    end
  end

  def assert_floats_close(expected, actual, tolerance, message = nil)
    assert_equal expected.size, actual.size, message
    worst = expected.zip(actual).map { |e, a| (e - a).abs }.max || 0.0
    assert_operator worst, :<=, tolerance, "#{message} (max abs diff #{worst})"
  end

  def tmp_path(name)
    @tmp_dir ||= Dir.mktmpdir('llamac-ruby-test')
    File.join(@tmp_dir, name)
  end

  def teardown
    FileUtils.rm_rf(@tmp_dir) if @tmp_dir
    super
  end
end

Minitest::Test.include(LlamacTestHelper)
