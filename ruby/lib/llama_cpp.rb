# frozen_string_literal: true

require_relative 'llama_cpp/version'
require 'llama_cpp/llama_cpp'

# LLaMACpp: the llama_cpp.rb 0.12.2 API over llamac (see README.md for the
# differences from 0.12.2). The classes are defined by the C extension;
# text generation is written here in Ruby on top of them.
module LLaMACpp
  # Text generation over a context (adds Context#generate).
  class Context
    # Generates up to n_predict tokens after prompt and returns their text.
    # With a block, yields each piece of text as it is generated (whole UTF-8
    # characters only). Sampling: repetition penalties over the last
    # repeat_last_n tokens, then the grammar (a Grammar, used on a copy so the
    # caller's stays unchanged, or GBNF text), then top-k, tail-free, typical, top-p and
    # temperature, drawn from the context's RNG (ContextParams#seed);
    # temperature <= 0 picks the most likely token. Stops at the end-of-text
    # token. The KV cache is cleared first; when the context is full, the
    # first n_keep prompt tokens are kept and half of the rest is dropped.
    def generate(prompt, n_predict: 128, n_keep: 10, n_batch: 512, repeat_last_n: 64, repeat_penalty: 1.1,
                 frequency: 0.0, presence: 0.0, top_k: 40, top_p: 0.95, tfs_z: 1.0, typical_p: 1.0,
                 temperature: 0.8, grammar: nil, &block)
      raise ArgumentError, 'prompt must be a String' unless prompt.is_a?(String)

      grammar = Grammar.parse(grammar) if grammar.is_a?(String)
      raise ArgumentError, 'grammar must be a Grammar or GBNF text' unless grammar.nil? || grammar.is_a?(Grammar)

      sampling = {
        repeat_penalty: Float(repeat_penalty), frequency: Float(frequency), presence: Float(presence),
        top_k: Integer(top_k), top_p: Float(top_p), tfs_z: Float(tfs_z), typical_p: Float(typical_p),
        temperature: Float(temperature), grammar: grammar&.dup
      }
      n_predict = Integer(n_predict)
      n_batch = Integer(n_batch).clamp(1, self.n_batch)

      prompt_tokens = model.tokenize(text: prompt, add_bos: model.add_bos_token?)
      raise ArgumentError, 'prompt must not be empty' if prompt_tokens.empty?

      n_ctx = self.n_ctx
      if prompt_tokens.size > n_ctx - 4
        raise ArgumentError, "prompt is too long #{prompt_tokens.size} tokens, maximum is #{n_ctx - 4}"
      end

      n_keep = Integer(n_keep)
      n_keep = prompt_tokens.size if n_keep.negative? || n_keep > prompt_tokens.size
      repeat_last_n = Integer(repeat_last_n)
      repeat_last_n = n_ctx if repeat_last_n.negative? || repeat_last_n > n_ctx
      last_n_tokens = Array.new(repeat_last_n, 0)

      kv_cache_clear
      n_past = 0
      prompt_tokens.each_slice(n_batch) do |chunk|
        decode(Batch.get_one(tokens: chunk, n_tokens: chunk.size, pos_zero: n_past, seq_id: 0))
        n_past += chunk.size
        last_n_tokens.concat(chunk).shift(chunk.size)
      end

      output = String.new(encoding: Encoding::BINARY)
      stream = block && Utf8Stream.new(block)
      eos = model.token_eos
      n_generated = 0
      while n_predict.negative? || n_generated < n_predict
        id = sample_next_token(last_n_tokens, **sampling)
        break if id == eos

        n_generated += 1
        last_n_tokens.push(id).shift
        grammar_accept_token(grammar: sampling[:grammar], token: id) if sampling[:grammar]
        piece = model.token_to_piece(id)
        output << piece.b
        stream&.push(piece)
        break if n_generated == n_predict

        n_past = shift_context(n_past, n_keep) if n_past + 1 > n_ctx
        decode(Batch.get_one(tokens: [id], n_tokens: 1, pos_zero: n_past, seq_id: 0))
        n_past += 1
      end
      stream&.finish
      output.force_encoding(Encoding::UTF_8).scrub('?')
    end

    private

    def sample_next_token(last_n_tokens, repeat_penalty:, frequency:, presence:, top_k:, top_p:, tfs_z:, typical_p:,
                          temperature:, grammar:)
      candidates = TokenDataArray.new(logits.each_with_index.map { |logit, id| TokenData.new(id: id, logit: logit, p: 0.0) })
      sample_repetition_penalties(candidates, last_n_tokens, penalty_repeat: repeat_penalty, penalty_freq: frequency,
                                                             penalty_present: presence)
      sample_grammar(candidates, grammar: grammar) if grammar
      return sample_token_greedy(candidates) if temperature <= 0

      sample_top_k(candidates, k: top_k)
      sample_tail_free(candidates, z: tfs_z)
      sample_typical(candidates, prob: typical_p)
      sample_top_p(candidates, prob: top_p)
      sample_temp(candidates, temp: temperature)
      sample_token(candidates)
    end

    # Keeps BOS and n_keep prompt tokens, drops half of the rest (as b1892's main does).
    def shift_context(n_past, n_keep)
      n_discard = (n_past - n_keep - 1) / 2
      kv_cache_seq_rm(0, n_keep + 1, n_keep + n_discard + 1)
      kv_cache_seq_shift(0, n_keep + 1 + n_discard, n_past, -n_discard)
      n_past - n_discard
    end

    # Hands pieces of text to a block, holding back a UTF-8 character split
    # across tokens (byte-fallback tokens carry one byte each).
    class Utf8Stream
      def initialize(block)
        @block = block
        @pending = String.new(encoding: Encoding::BINARY)
      end

      def push(piece)
        @pending << piece.b
        cut = complete_length(@pending)
        return if cut.zero?

        emit(@pending.byteslice(0, cut))
        @pending = @pending.byteslice(cut, @pending.bytesize - cut)
      end

      def finish
        emit(@pending) unless @pending.empty?
        @pending = String.new(encoding: Encoding::BINARY)
      end

      private

      def emit(bytes)
        @block.call(bytes.dup.force_encoding(Encoding::UTF_8).scrub('?'))
      end

      # Bytes up to the start of an unfinished multi-byte sequence at the end.
      def complete_length(bytes)
        i = bytes.bytesize - 1
        i -= 1 while i >= 0 && i > bytes.bytesize - 4 && (bytes.getbyte(i) & 0xC0) == 0x80
        return bytes.bytesize if i.negative?

        lead = bytes.getbyte(i)
        needed = if lead >= 0xF0 then 4
                 elsif lead >= 0xE0 then 3
                 elsif lead >= 0xC0 then 2
                 else 1
                 end
        bytes.bytesize - i < needed ? i : bytes.bytesize
      end
    end
    private_constant :Utf8Stream
  end

  module_function

  # llama_cpp.rb 0.12.2's LLaMACpp.generate: the text generated after prompt,
  # stripped. Options as in Context#generate (grammar: and the block are
  # additions); see README.md for what changed from 0.12.2.
  def generate(context, prompt, **options, &block)
    raise ArgumentError, 'context must be an instance of LLaMACpp::Context' unless context.is_a?(LLaMACpp::Context)
    raise ArgumentError, 'prompt must be a String' unless prompt.is_a?(String)

    context.generate(prompt, **options, &block).strip
  end
end

LLaMACpp.backend_init
at_exit { LLaMACpp.backend_free }
