# frozen_string_literal: true

require_relative 'test_helper'

# Decoding releases the GVL and stops promptly on an interrupt, leaving the
# context usable.
class TestGvl < Minitest::Test
  class StopDecode < StandardError; end

  LONG_DECODE_SECONDS = 0.4

  def clock
    Process.clock_gettime(Process::CLOCK_MONOTONIC)
  end

  # A context and a batch whose decode takes at least LONG_DECODE_SECONDS
  # (the batch doubles until it does), measured once per process.
  def long_decode
    @@long_decode ||= begin # rubocop:disable Style/ClassVars -- one calibration per run
      path = File.join(LlamacTestHelper.shared_dir, 'models/synth-k/synth-k-F32.gguf')
      path = stories_path unless File.exist?(path)
      model = LLaMACpp::Model.new(model_path: path, params: LLaMACpp::ModelParams.new)
      n = 128
      loop do
        context = new_context(model, n_ctx: n, n_batch: n)
        tokens = Array.new(n) { |i| 3 + ((i * 37) % 500) }
        t0 = clock
        decode_tokens(context, tokens)
        seconds = clock - t0
        context.kv_cache_clear
        break [context, tokens, seconds] if seconds >= LONG_DECODE_SECONDS || n >= 8192

        n *= 2
      end
    end
  end

  def test_other_threads_run_during_a_decode
    context, tokens, = long_decode
    ticks = 0
    running = true
    ticker = Thread.new do
      while running
        ticks += 1
        sleep 0.001
      end
    end
    sleep 0.02
    before = ticks
    t0 = clock
    decode_tokens(context, tokens)
    elapsed = clock - t0
    during = ticks - before
    running = false
    ticker.join
    context.kv_cache_clear
    # holding the GVL, the ticker would not tick at all
    assert_operator during, :>=, [10, (elapsed / 0.001 * 0.2).floor].max,
                    "#{during} ticks during a #{elapsed.round(3)} s decode"
  end

  def test_thread_raise_stops_a_decode_promptly
    context, tokens, full = long_decode
    reference = new_context(context.model, n_ctx: tokens.size, n_batch: tokens.size)
    decode_tokens(reference, tokens.first(8))
    main = Thread.current
    raiser = Thread.new do
      sleep full / 10
      main.raise(StopDecode, 'stop')
    end
    t0 = clock
    assert_raises(StopDecode) do
      decode_tokens(context, tokens)
      sleep 5 # not stopped: the late exception lands here and the time check below fails
    end
    stopped_after = clock - t0
    raiser.join
    assert_operator stopped_after, :<, full * 0.6, "stopped after #{stopped_after.round(3)} s of a #{full.round(3)} s decode"
    # the stopped batch left no KV cells behind; the context decodes as a fresh one
    assert_equal 0, context.kv_cache_token_count
    decode_tokens(context, tokens.first(8))
    assert_equal reference.logits, context.logits
    context.kv_cache_clear
  end

  def test_thread_kill_and_raise_on_a_decoding_thread
    context, tokens, full = long_decode
    worker = Thread.new do
      Thread.current.report_on_exception = false
      decode_tokens(context, tokens)
    end
    sleep full / 10
    worker.raise(StopDecode)
    assert_raises(StopDecode) { worker.join }
    worker = Thread.new { decode_tokens(context, tokens) }
    sleep full / 10
    t0 = clock
    worker.kill
    worker.join
    assert_operator clock - t0, :<, full * 0.6
    assert_equal 0, context.kv_cache_token_count
  end

  def test_sigint_raises_interrupt
    context, tokens, full = long_decode
    # The sender stays alive, asleep: Ruby moves a signal to the main thread
    # (and calls its unblocking function) from a thread that gets to look at
    # it, which with several threads is a sleeping one. A thread that exits
    # right after kill can leave the signal unseen until the decode returns
    # (a single-threaded process takes the signal handler's direct path).
    sender = Thread.new do
      sleep full / 10
      Process.kill(:INT, Process.pid)
      sleep 2
    end
    t0 = clock
    assert_raises(Interrupt) do
      decode_tokens(context, tokens)
      sleep 5 # not stopped: the late Interrupt lands here and the time check below fails
    end
    assert_operator clock - t0, :<, full * 0.6
    assert_equal 0, context.kv_cache_token_count
  ensure
    sender&.kill
  end

  def test_a_trap_that_returns_lets_the_decode_finish
    context, tokens, full = long_decode
    reference = new_context(context.model, n_ctx: tokens.size, n_batch: tokens.size)
    decode_tokens(reference, tokens)
    trapped = 0
    previous = Signal.trap(:USR1) { trapped += 1 }
    Thread.new do
      sleep full / 10
      Process.kill(:USR1, Process.pid)
    end
    decode_tokens(context, tokens) # stopped by the signal, then run again
    deadline = clock + 2
    sleep 0.01 while trapped.zero? && clock < deadline
    assert_equal 1, trapped
    assert_equal tokens.size, context.kv_cache_token_count
    assert_equal reference.logits, context.logits
    context.kv_cache_clear
  ensure
    Signal.trap(:USR1, previous || 'DEFAULT')
  end

  def test_a_second_thread_cannot_use_a_busy_context
    context, tokens, = long_decode
    worker = Thread.new { decode_tokens(context, tokens) }
    refused = nil
    while refused.nil? && worker.alive?
      begin
        context.kv_cache_token_count
        sleep 0.001
      rescue RuntimeError => e
        refused = e
      end
    end
    worker.join
    refute_nil refused, 'the context was never reported busy'
    assert_equal 'LLaMA context is in use by another thread', refused.message
    context.kv_cache_clear
  end
end
