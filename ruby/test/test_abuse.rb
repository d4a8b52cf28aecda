# frozen_string_literal: true

require_relative 'test_helper'
require 'rbconfig'
require 'open3'

# Nothing a Ruby caller does crashes the process: wrong argument types and
# values everywhere, out-of-range indices, any freeing order, corrupted files.
class TestAbuse < Minitest::Test
  # Runs Ruby code in a child process (a crash there fails the test with its output).
  def assert_survives(code)
    script = <<~RUBY
      require 'llama_cpp'
      STORIES = #{stories_path.dump}
      #{code}
      puts 'survived'
    RUBY
    env = { 'RUBYLIB' => $LOAD_PATH.join(File::PATH_SEPARATOR) }
    out, status = Open3.capture2e(env, RbConfig.ruby, '-e', script)
    assert status.success? && out.include?('survived'), "child process died (#{status.inspect}):\n#{out[-4000..] || out}"
  end

  def test_wrong_argument_types_everywhere
    assert_survives(<<~RUBY)
      values = [nil, true, 'x', "a\\0b", :sym, 1.5, -1, 0, 2**31, 2**64, -(2**64), [], [1, 'a', nil], {}, Object.new,
                Float::NAN, Float::INFINITY]
      model = LLaMACpp::Model.new(model_path: STORIES, params: LLaMACpp::ModelParams.new)
      params = LLaMACpp::ContextParams.new
      params.n_ctx = 64
      params.n_batch = 64
      context = LLaMACpp::Context.new(model: model, params: params)
      objects = [model, context, LLaMACpp::ModelParams.new, params, LLaMACpp::ModelQuantizeParams.new,
                 LLaMACpp::ModelKVOverride.new, LLaMACpp::Batch.new(max_n_token: 4, n_embd: 0, max_n_seq: 1),
                 LLaMACpp::Batch.get_one(tokens: [1, 2], n_tokens: 2, pos_zero: 0, seq_id: 0),
                 LLaMACpp::TokenData.new(id: 1, logit: 0.0, p: 0.0),
                 LLaMACpp::TokenDataArray.new([LLaMACpp::TokenData.new(id: 1, logit: 0.0, p: 0.0)]),
                 LLaMACpp::GrammarElement.new, LLaMACpp::Timings.new,
                 LLaMACpp::Model.allocate, LLaMACpp::Context.allocate, LLaMACpp::Batch.allocate,
                 LLaMACpp::TokenDataArray.allocate, LLaMACpp::Grammar.allocate]
      skip = %i[free load generate] # exercised elsewhere; free would end the run early
      $stderr.reopen(File::NULL) # the library logs every rejected argument
      calls = 0
      objects.each do |object|
        (object.class.instance_methods(false) - skip).each do |name|
          arity = object.method(name).arity
          counts = arity.negative? ? [0, 1, 2, 3] : [arity]
          counts.each do |count|
            values.each do |value|
              args = Array.new(count, value)
              [args, args + [{ text: value, tokens: value, k: value, prob: value, grammar: value, token: value }]].each do |a|
                calls += 1
                begin
                  object.public_send(name, *a)
                rescue StandardError, NoMemoryError
                  nil
                end
              end
            end
          end
        end
      end
      mod_calls = %i[model_quantize print_system_info time_us mmap_supported? mlock_supported? max_devices backend_init]
      mod_calls.each do |name|
        values.each do |v|
          LLaMACpp.public_send(name, input_path: v, output_path: v, params: v) rescue nil
          LLaMACpp.public_send(name, v) rescue nil
        end
      end
      GC.start
      raise 'too few calls' if calls < 1000
    RUBY
  end

  def test_out_of_range_batch_indices
    assert_survives(<<~RUBY)
      batch = LLaMACpp::Batch.new(max_n_token: 8, n_embd: 0, max_n_seq: 2)
      embd = LLaMACpp::Batch.new(max_n_token: 8, n_embd: 16, max_n_seq: 1)
      one = LLaMACpp::Batch.get_one(tokens: [1, 2, 3], n_tokens: 3, pos_zero: 0, seq_id: 0)
      indices = [-2**31, -9, -1, 0, 7, 8, 9, 100, 2**20, 2**31 - 1]
      [batch, embd, one].each do |b|
        indices.each do |i|
          %i[get_token get_pos get_n_seq_id get_logits].each { |m| b.public_send(m, i) rescue nil }
          %i[set_token set_pos set_n_seq_id set_logits].each { |m| b.public_send(m, i, 5) rescue nil }
          indices.each do |j|
            b.get_seq_id(i, j) rescue nil
            b.set_seq_id(i, j, 1) rescue nil
          end
          begin
            b.n_tokens = i
          rescue ArgumentError
            nil
          end
        end
      end
      model = LLaMACpp::Model.new(model_path: STORIES, params: LLaMACpp::ModelParams.new)
      context = LLaMACpp::Context.new(model: model, params: LLaMACpp::ContextParams.new)
      batch.n_tokens = 8
      8.times { |i| batch.set_n_seq_id(i, i % 2 == 0 ? 1 : 3) }
      [batch, embd, one].each { |b| context.decode(b) rescue nil }
      8.times { |i| batch.set_token(i, 100_000 + i); batch.set_n_seq_id(i, 1); batch.set_seq_id(i, 0, 99) }
      context.decode(batch) rescue nil
      context.kv_cache_seq_rm(-5, -5, -5)
      [-1, 0, 64, 10_000].each do |s|
        context.kv_cache_seq_cp(s, s + 1, -1, -1) rescue nil
        context.kv_cache_seq_keep(s) rescue nil
        context.kv_cache_seq_shift(s, 0, -1, 2**30) rescue nil
        context.kv_cache_seq_div(s, 0, -1, 3) rescue nil
      end
      context.decode(LLaMACpp::Batch.get_one(tokens: [1, 2], n_tokens: 2, pos_zero: 2**31 - 2, seq_id: 0)) rescue nil
      context.decode(LLaMACpp::Batch.get_one(tokens: [1, 2], n_tokens: 2, pos_zero: 0, seq_id: 0))
      raise 'no logits' unless context.logits.size == 512
    RUBY
  end

  def test_freeing_order
    assert_survives(<<~RUBY)
      params = LLaMACpp::ContextParams.new
      params.n_ctx = 64
      model = LLaMACpp::Model.new(model_path: STORIES, params: LLaMACpp::ModelParams.new)
      contexts = Array.new(3) { LLaMACpp::Context.new(model: model, params: params) }
      model.free # the contexts keep the weights alive
      contexts.each { |c| c.decode(LLaMACpp::Batch.get_one(tokens: [1, 403], n_tokens: 2, pos_zero: 0, seq_id: 0)) }
      raise 'model not empty' unless model.empty?
      begin
        LLaMACpp::Context.new(model: model, params: params)
        raise 'context from a freed model'
      rescue RuntimeError
      end
      model = nil
      GC.start
      contexts.first.sample_token_greedy(LLaMACpp::TokenDataArray.new(contexts.first.logits.each_with_index.map { |l, i| LLaMACpp::TokenData.new(id: i, logit: l, p: 0.0) }))
      contexts = nil
      GC.start
      # contexts and models left to the final GC in any order
      20.times do
        m = LLaMACpp::Model.new(model_path: STORIES, params: LLaMACpp::ModelParams.new)
        c = LLaMACpp::Context.new(model: m, params: params)
        m.free if rand < 0.5
        c.decode(LLaMACpp::Batch.get_one(tokens: [1], n_tokens: 1, pos_zero: 0, seq_id: 0)) if rand < 0.5
      end
      grammar = LLaMACpp::Grammar.new(rules: [[LLaMACpp::GrammarElement.new(type: 3, value: 97), LLaMACpp::GrammarElement.new]], start_rule_index: 0)
      copies = Array.new(5) { grammar.dup }
      grammar = nil
      GC.start
      copies.map(&:dup)
    RUBY
  end

  def test_corrupted_model_files
    bytes = File.binread(stories_path)
    random = Random.new(1234)
    variants = {
      'empty' => '',
      'magic only' => 'GGUF'.b,
      'header' => bytes.byteslice(0, 24),
      'half' => bytes.byteslice(0, bytes.bytesize / 2),
      'all but one byte' => bytes.byteslice(0, bytes.bytesize - 1),
      'garbage' => random.bytes(4096),
      'big-endian version' => bytes.byteslice(0, 4) + [3].pack('N') + bytes.byteslice(8..),
      'version 1' => bytes.byteslice(0, 4) + [1].pack('V') + bytes.byteslice(8..),
      'huge tensor count' => bytes.byteslice(0, 8) + [2**62].pack('Q<') + bytes.byteslice(16..),
      'huge kv count' => bytes.byteslice(0, 16) + [2**62].pack('Q<') + bytes.byteslice(24..)
    }
    variants.each do |name, content|
      path = tmp_path('bad.gguf')
      File.binwrite(path, content)
      e = assert_raises(RuntimeError, name) { LLaMACpp::Model.new(model_path: path, params: LLaMACpp::ModelParams.new) }
      assert_match(/\AFailed to initialize LLaMA model/, e.message)
    end
    # flipped bytes in the metadata and tensor table: an error or a model, never a crash
    header_end = 8192
    40.times do
      corrupted = bytes.dup
      3.times { corrupted.setbyte(random.rand(header_end), random.rand(256)) }
      path = tmp_path('flipped.gguf')
      File.binwrite(path, corrupted)
      begin
        model = LLaMACpp::Model.new(model_path: path, params: LLaMACpp::ModelParams.new)
        context = new_context(model, n_ctx: 32, n_batch: 32)
        decode_tokens(context, [1, 2, 3])
      rescue RuntimeError
        nil
      end
    end
  end

  def test_corrupted_session_files
    model = load_stories
    context = new_context(model)
    decode_tokens(context, [1, 403, 407, 261, 378])
    path = tmp_path('session.bin')
    context.save_session_file(session_path: path, session_tokens: [1, 403, 407, 261, 378])
    bytes = File.binread(path)
    random = Random.new(99)
    target = new_context(model)
    60.times do |i|
      corrupted = bytes.dup
      if i.even?
        4.times { corrupted.setbyte(random.rand(bytes.bytesize), random.rand(256)) }
      else
        corrupted = corrupted.byteslice(0, random.rand(bytes.bytesize))
      end
      File.binwrite(tmp_path('bad.bin'), corrupted)
      begin
        target.load_session_file(session_path: tmp_path('bad.bin'))
      rescue RuntimeError
        nil
      end
    end
    target.kv_cache_clear
    decode_tokens(target, [1, 403, 407, 261, 378])
    assert_equal context.logits, target.logits
  end
end
