# frozen_string_literal: true

require_relative 'test_helper'

# LLaMACpp::Batch (spec §3.8): every index checked against its buffer.
class TestBatch < Minitest::Test
  def test_new_and_accessors
    batch = LLaMACpp::Batch.new(max_n_token: 4, n_embd: 0, max_n_seq: 2)
    assert_equal 0, batch.n_tokens
    assert_equal [0, 0, 0, false], [batch.get_token(3), batch.get_pos(3), batch.get_n_seq_id(3), batch.get_logits(3)]
    assert_equal 0, batch.get_seq_id(3, 1) # zeroed (0.12.2 left garbage)
    assert_equal 7, batch.set_token(0, 7)
    assert_equal 5, batch.set_pos(0, 5)
    assert_equal 2, batch.set_n_seq_id(0, 2)
    assert_equal 9, batch.set_seq_id(0, 1, 9)
    assert_equal true, batch.set_logits(0, 1)
    assert_equal [7, 5, 2, 9, true],
                 [batch.get_token(0), batch.get_pos(0), batch.get_n_seq_id(0), batch.get_seq_id(0, 1), batch.get_logits(0)]
    batch.n_tokens = 4
    batch.all_pos_zero = 1
    batch.all_pos_one = 2
    batch.all_seq_id = 3
    assert_equal [4, 1, 2, 3], [batch.n_tokens, batch.all_pos_zero, batch.all_pos_one, batch.all_seq_id]
  end

  def test_index_checks
    batch = LLaMACpp::Batch.new(max_n_token: 4, n_embd: 0, max_n_seq: 2)
    %i[get_token get_pos get_n_seq_id get_logits].each do |getter|
      e = assert_raises(ArgumentError) { batch.public_send(getter, -1) }
      assert_equal 'id must be greater or equal to 0', e.message
      assert_raises(IndexError) { batch.public_send(getter, 4) }
      assert_raises(IndexError) { batch.public_send(getter, 1_000_000) }
    end
    %i[set_token set_pos set_n_seq_id set_logits].each do |setter|
      assert_raises(ArgumentError) { batch.public_send(setter, -1, 1) }
      assert_raises(IndexError) { batch.public_send(setter, 4, 1) }
    end
    e = assert_raises(ArgumentError) { batch.get_seq_id(-1, 0) }
    assert_equal 'i must be greater or equal to 0', e.message
    e = assert_raises(ArgumentError) { batch.set_seq_id(0, -1, 0) }
    assert_equal 'j must be greater or equal to 0', e.message
    assert_raises(IndexError) { batch.get_seq_id(4, 0) }
    assert_raises(IndexError) { batch.set_seq_id(0, 2, 0) }
    assert_raises(RangeError) { batch.get_token(2**40) }
    assert_raises(TypeError) { batch.set_token(0, 'x') }
    e = assert_raises(ArgumentError) { batch.n_tokens = 5 }
    assert_match(/n_tokens \(5\) must be between 0 and/, e.message)
    assert_raises(ArgumentError) { batch.n_tokens = -1 }
  end

  def test_new_argument_errors
    e = assert_raises(ArgumentError) { LLaMACpp::Batch.new(max_n_token: 1.0, n_embd: 0, max_n_seq: 1) }
    assert_equal 'max_n_token must be an integer', e.message
    e = assert_raises(ArgumentError) { LLaMACpp::Batch.new(max_n_token: 1, n_embd: nil, max_n_seq: 1) }
    assert_equal 'n_embd must be an integer', e.message
    e = assert_raises(ArgumentError) { LLaMACpp::Batch.new(max_n_token: 1, n_embd: 0, max_n_seq: '1') }
    assert_equal 'max_n_seq must be an integer', e.message
    assert_raises(ArgumentError) { LLaMACpp::Batch.new(max_n_token: 0, n_embd: 0, max_n_seq: 1) }
    assert_raises(ArgumentError) { LLaMACpp::Batch.new(max_n_token: 1, n_embd: -1, max_n_seq: 1) }
    assert_raises(ArgumentError) { LLaMACpp::Batch.new(max_n_token: 2**30, n_embd: 2**30, max_n_seq: 1) }
    GC.start # 0.12.2 crashed collecting the half-built objects
  end

  def test_get_one
    batch = LLaMACpp::Batch.get_one(tokens: [1, 2, 3], n_tokens: 2, pos_zero: 4, seq_id: 1)
    assert_equal [2, 4, 1, 1], [batch.n_tokens, batch.all_pos_zero, batch.all_pos_one, batch.all_seq_id]
    assert_equal 3, batch.get_token(2)
    assert_raises(IndexError) { batch.get_token(3) }
    assert_raises(IndexError) { batch.get_pos(0) } # no per-token arrays in a get_one batch
    assert_raises(IndexError) { batch.get_seq_id(0, 0) }
    e = assert_raises(ArgumentError) { LLaMACpp::Batch.get_one(tokens: 1, n_tokens: 1, pos_zero: 0, seq_id: 0) }
    assert_equal 'tokens must be an array', e.message
    e = assert_raises(ArgumentError) { LLaMACpp::Batch.get_one(tokens: [1], n_tokens: 1.0, pos_zero: 0, seq_id: 0) }
    assert_equal 'n_tokens must be an integer', e.message
    e = assert_raises(ArgumentError) { LLaMACpp::Batch.get_one(tokens: [1], n_tokens: 1, pos_zero: nil, seq_id: 0) }
    assert_equal 'pos_zero must be an integer', e.message
    e = assert_raises(ArgumentError) { LLaMACpp::Batch.get_one(tokens: [1], n_tokens: 1, pos_zero: 0, seq_id: :a) }
    assert_equal 'seq_id must be an integer', e.message
    e = assert_raises(ArgumentError) { LLaMACpp::Batch.get_one(tokens: [1], n_tokens: 2, pos_zero: 0, seq_id: 0) }
    assert_match(/n_tokens \(2\) must be between 0 and tokens.size \(1\)/, e.message)
    assert_raises(TypeError) { LLaMACpp::Batch.get_one(tokens: ['a'], n_tokens: 1, pos_zero: 0, seq_id: 0) }
  end

  def test_decode_checks_the_batch
    context = new_context(load_stories)
    batch = LLaMACpp::Batch.new(max_n_token: 2, n_embd: 0, max_n_seq: 1)
    batch.set_token(0, 1)
    batch.set_pos(0, 0)
    batch.set_seq_id(0, 0, 0)
    batch.set_logits(0, true)
    batch.n_tokens = 1
    e = assert_raises(ArgumentError) { context.decode(batch) } # n_seq_id 0
    assert_match(/n_seq_id of token 0 is 0/, e.message)
    batch.set_n_seq_id(0, 5) # beyond max_n_seq: the library would read past seq_id[0]
    assert_raises(ArgumentError) { context.decode(batch) }
    batch.set_n_seq_id(0, 1)
    context.decode(batch)
    assert_equal 512, context.logits.size
    e = assert_raises(RuntimeError) { context.decode(LLaMACpp::Batch.allocate) }
    assert_equal 'Batch is not initialized', e.message
    batch.set_logits(0, false)
    context.decode(batch)
    e = assert_raises(RuntimeError) { context.logits }
    assert_equal 'the last batch requested no logits', e.message
  end
end
