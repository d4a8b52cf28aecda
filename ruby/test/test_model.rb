# frozen_string_literal: true

require_relative 'test_helper'

# LLaMACpp::Model (spec §3.1) on stories260K against golden/models- and tokenizer-stories260K.json.
class TestModel < Minitest::Test
  TOKEN_TYPES = { 'undefined' => 0, 'normal' => 1, 'unknown' => 2, 'control' => 3, 'user_defined' => 4,
                  'unused' => 5, 'byte' => 6 }.freeze

  def test_new_argument_errors
    e = assert_raises(ArgumentError) { LLaMACpp::Model.new }
    assert_equal 'missing keywords: :model_path, :params', e.message
    e = assert_raises(ArgumentError) { LLaMACpp::Model.new(model_path: 1, params: LLaMACpp::ModelParams.new) }
    assert_equal 'model_path must be a string', e.message
    e = assert_raises(ArgumentError) { LLaMACpp::Model.new(model_path: 'x', params: LLaMACpp::ContextParams.new) }
    assert_equal 'params must be a ModelParams', e.message
    e = assert_raises(ArgumentError) { LLaMACpp::Model.new(model_path: 'x', params: LLaMACpp::ModelParams.new, x: 1) }
    assert_equal 'unknown keyword: :x', e.message
    e = assert_raises(RuntimeError) do
      LLaMACpp::Model.new(model_path: '/nonexistent/model.gguf', params: LLaMACpp::ModelParams.new)
    end
    assert_match(/\AFailed to initialize LLaMA model/, e.message)
  end

  def test_free_and_load
    params = LLaMACpp::ModelParams.new
    model = LLaMACpp::Model.new(model_path: stories_path, params: params)
    refute model.empty?
    assert_same params, model.params
    assert_nil model.free
    assert model.empty?
    assert_nil model.params
    assert_nil model.free # idempotent
    e = assert_raises(RuntimeError) { model.n_vocab }
    assert_equal 'LLaMA model is not initialized', e.message
    assert_raises(RuntimeError) { model.tokenize(text: 'x') }
    e = assert_raises(ArgumentError) { model.load(model_path: stories_path, params: LLaMACpp::ContextParams.new) }
    assert_equal 'params must be a LLaMAModelParams', e.message
    e = assert_raises(ArgumentError) { model.load(model_path: nil, params: params) }
    assert_equal 'model_path must be a string', e.message
    assert_nil model.load(model_path: stories_path, params: params)
    assert_equal 512, model.n_vocab
    e = assert_raises(RuntimeError) { model.load(model_path: stories_path, params: params) }
    assert_equal 'LLaMA model is already loaded', e.message
    assert LLaMACpp::Model.allocate.empty?
  end

  def test_metadata_matches_golden
    golden('models-stories260K.json')['models'].each do |entry|
      model = LLaMACpp::Model.new(model_path: shared_path("models/#{entry['file']}"), params: LLaMACpp::ModelParams.new)
      assert_equal entry['desc'], model.desc, entry['file']
      assert_equal entry['size'], model.size, entry['file'] # 0.12.2 returned 8
      assert_equal entry['n_params'], model.n_params, entry['file']
      assert_equal entry['n_vocab'], model.n_vocab
      assert_equal entry['n_ctx_train'], model.n_ctx_train
      assert_equal entry['n_embd'], model.n_embd
      assert_in_delta entry['rope_freq_scale_train'], model.rope_freq_scale_train, 1e-7
    end
  end

  def test_vocabulary_matches_golden
    data = golden('tokenizer-stories260K.json')
    model = load_stories
    assert_equal [data['bos'], data['eos'], data['nl']], [model.token_bos, model.token_eos, model.token_nl]
    assert model.add_bos_token? # add_bos_token -1 (unknown): BOS for an SPM vocabulary
    refute model.add_eos_token?
    assert_equal [32_007, 32_009, 32_008, 32_010],
                 [model.token_prefix, model.token_middle, model.token_suffix, model.token_eot]
    data['vocab'].each do |id, text, score, type, piece_hex|
      assert_equal text, model.text(id), "text #{id}"
      assert_in_delta score, model.score(id), 1e-6, "score #{id}"
      assert_equal TOKEN_TYPES.fetch(type), model.type(id), "type #{id}"
      piece = model.token_to_piece(id)
      assert_equal piece_hex, piece.unpack1('H*'), "piece #{id}"
      assert_equal Encoding::UTF_8, piece.encoding
    end
  end

  def test_vocabulary_range_checks
    model = load_stories
    [-1, 512, 2**31 - 1].each do |id|
      assert_raises(IndexError) { model.text(id) }
      assert_raises(IndexError) { model.score(id) }
      assert_raises(IndexError) { model.type(id) }
      assert_equal '', model.token_to_piece(id)
    end
    assert_raises(RangeError) { model.text(2**40) }
    e = assert_raises(ArgumentError) { model.token_to_piece('1') }
    assert_equal 'token must be an integer', e.message
  end

  def test_tokenize_matches_golden
    model = load_stories
    golden('tokenizer-stories260K.json')['cases'].each do |c|
      tokens = model.tokenize(text: c['text'], add_bos: c['add_bos'], special: c['special'])
      assert_equal c['tokens'], tokens, c.inspect
      assert_equal c['pieces_hex'], tokens.map { |t| model.token_to_piece(t).unpack1('H*') }, c.inspect
      assert_equal tokens, model.tokenize(c['text'], add_bos: c['add_bos'], special: c['special'])
    end
  end

  def test_tokenize_arguments
    model = load_stories
    assert_equal model.tokenize(text: 'Hello'), model.tokenize('Hello')
    assert_equal [1] + model.tokenize('Hello'), model.tokenize('Hello', add_bos: true)
    e = assert_raises(ArgumentError) { model.tokenize }
    assert_equal 'missing keyword: :text', e.message
    e = assert_raises(ArgumentError) { model.tokenize('a', text: 'b') }
    assert_match(/text given both/, e.message)
    e = assert_raises(ArgumentError) { model.tokenize(text: 1) }
    assert_equal 'text must be a String', e.message
    e = assert_raises(ArgumentError) { model.tokenize(:sym) }
    assert_equal 'text must be a String', e.message
    e = assert_raises(ArgumentError) { model.tokenize(text: 'a', n_max_tokens: 1.5) }
    assert_equal 'n_max_tokens must be an integer', e.message
    e = assert_raises(ArgumentError) { model.tokenize(text: 'a', add_bos: nil) }
    assert_equal 'add_bos must be a boolean', e.message
    e = assert_raises(ArgumentError) { model.tokenize(text: 'a', special: 1) }
    assert_equal 'special must be a boolean', e.message
    e = assert_raises(ArgumentError) { model.tokenize(text: 'a', n_max_tokens: -1) }
    assert_equal 'n_max_tokens must be a non-negative integer', e.message
    # 0.12.2's default capacity (bytesize) was too small for "\n" (2 tokens for 1 byte)
    assert_equal 2, model.tokenize(text: "\n").size
    e = assert_raises(RuntimeError) { model.tokenize(text: 'Hello world', n_max_tokens: 1) }
    assert_match(/\Afailed to tokenize. The numebr of tokens \(\d+\) is greater than n_max_tokens.\z/, e.message)
    assert_equal model.tokenize(text: 'Hello world'), model.tokenize(text: 'Hello world', n_max_tokens: 100)
    assert_includes model.tokenize("a\0b"), 3 # the whole string, NUL included (byte token <0x00>)
  end

  def test_progress_block
    progress = []
    model = LLaMACpp::Model.new(model_path: stories_path, params: LLaMACpp::ModelParams.new) { |p| progress << p }
    refute model.empty?
    refute_empty progress
    assert_equal progress.sort, progress
    assert_in_delta 1.0, progress.last, 1e-6
    assert(progress.all? { |p| p.is_a?(Float) && p.between?(0.0, 1.0) })

    e = assert_raises(RuntimeError) do
      LLaMACpp::Model.new(model_path: stories_path, params: LLaMACpp::ModelParams.new) { |_| false }
    end
    assert_equal 'Failed to initialize LLaMA model: loading was cancelled by the progress block', e.message
    e = assert_raises(IOError) do
      LLaMACpp::Model.new(model_path: stories_path, params: LLaMACpp::ModelParams.new) { |_| raise IOError, 'stop' }
    end
    assert_equal 'stop', e.message
    model = LLaMACpp::Model.allocate
    model.load(model_path: stories_path, params: LLaMACpp::ModelParams.new) { |p| progress << p }
    refute model.empty?
  end

  def test_apply_lora_errors
    model = load_stories
    e = assert_raises(ArgumentError) { model.apply_lora_from_file(lora_path: 1) }
    assert_equal 'lora_path must be a string', e.message
    e = assert_raises(ArgumentError) { model.apply_lora_from_file(lora_path: 'x', base_model_path: 1) }
    assert_equal 'base_model_path must be a string', e.message
    e = assert_raises(ArgumentError) { model.apply_lora_from_file(lora_path: 'x', n_threads: 1.0) }
    assert_equal 'n_threads must be an integer', e.message
    e = assert_raises(ArgumentError) { model.apply_lora_from_file(lora_path: 'x', scale: 1) }
    assert_equal 'scale must be a float', e.message
    e = assert_raises(RuntimeError) { model.apply_lora_from_file(lora_path: '/nonexistent/lora.bin') }
    assert_match(/\AFailed to apply LoRA/, e.message)
  end
end
