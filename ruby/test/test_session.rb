# frozen_string_literal: true

require_relative 'test_helper'

# Context#save_session_file / #load_session_file against golden/session-stories260K.json.
class TestSession < Minitest::Test
  def data
    golden('session-stories260K.json')
  end

  def saved_session(model)
    context = new_context(model)
    decode_tokens(context, data['tokens'])
    path = tmp_path('session.bin')
    assert_nil context.save_session_file(session_path: path, session_tokens: data['tokens'])
    [context, path]
  end

  def test_round_trip
    model = load_stories
    context, path = saved_session(model)
    assert_equal data['file_size'], File.size(path)
    assert_equal data['file_first_8_bytes_hex'], File.binread(path, 8).unpack1('H*')
    loaded = new_context(model)
    assert_equal data['tokens'], loaded.load_session_file(session_path: path)
    assert_equal data['tokens'].size, loaded.kv_cache_token_count
    assert_equal context.logits, loaded.logits
    assert_equal data['greedy20_original_ctx'], greedy_tokens(context, data['tokens'].size, 20)
    assert_equal data['greedy20_after_load'], greedy_tokens(loaded, data['tokens'].size, 20)
  end

  def test_golden_file_loads
    model = load_stories
    path = tmp_path('golden-session.bin')
    File.binwrite(path, Base64.decode64(data['file_base64']))
    context = new_context(model)
    assert_equal data['tokens'], context.load_session_file(session_path: path)
    assert_equal data['greedy20_after_load'], greedy_tokens(context, data['tokens'].size, 20)
  end

  def test_errors_leave_the_context_usable
    model = load_stories
    _, path = saved_session(model)
    context = new_context(model)
    e = assert_raises(ArgumentError) { context.load_session_file(session_path: 1) }
    assert_equal 'session_path must be a String', e.message
    e = assert_raises(ArgumentError) { context.load_session_file }
    assert_equal 'missing keyword: :session_path', e.message
    e = assert_raises(ArgumentError) { context.save_session_file(session_path: nil, session_tokens: []) }
    assert_equal 'session_path must be a String', e.message
    e = assert_raises(ArgumentError) { context.save_session_file(session_path: path, session_tokens: 1) }
    assert_equal 'session_tokens must be an Array', e.message
    assert_raises(ArgumentError) { context.load_session_file(session_path: "a\0b") }
    e = assert_raises(RuntimeError) { context.load_session_file(session_path: tmp_path('missing.bin')) }
    assert_match(/\AFailed to load session file/, e.message)
    e = assert_raises(RuntimeError) do
      context.save_session_file(session_path: '/nonexistent-dir/s.bin', session_tokens: [1])
    end
    assert_match(/\AFailed to save session file/, e.message)

    bytes = File.binread(path)
    corruptions = {
      'truncated' => bytes.byteslice(0, bytes.bytesize / 2),
      'header only' => bytes.byteslice(0, 8),
      'bad magic' => 'xxxx'.b + bytes.byteslice(4..),
      'bad version' => bytes.byteslice(0, 4) + [3].pack('V') + bytes.byteslice(8..),
      'huge token count' => bytes.byteslice(0, 92) + [0x7fffffff].pack('V') + bytes.byteslice(96..)
    }
    corruptions.each do |name, content|
      File.binwrite(tmp_path('bad.bin'), content)
      e = assert_raises(RuntimeError, name) { context.load_session_file(session_path: tmp_path('bad.bin')) }
      assert_match(/\AFailed to load session file/, e.message)
    end
    # another context size: b1892 aborted the process here
    other = new_context(model, n_ctx: 128)
    assert_raises(RuntimeError) { other.load_session_file(session_path: path) }

    decode_tokens(context, data['tokens'])
    assert_equal data['greedy20_original_ctx'], greedy_tokens(context, data['tokens'].size, 20)
  end
end
