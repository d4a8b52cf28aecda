#!/usr/bin/env bash
# The Ruby gem's tests (scripts/test.sh runs this):
#   1. build the extension from the repository into build-ruby/ (mkmf, outside the source tree)
#   2. the minitest suite in ruby/test/
#   3. gem build + gem install into a temporary GEM_HOME, then a fresh
#      `ruby -e 'require "llama_cpp"'` process generates text from stories260K
#   4. with LLAMAC_RUBY_ASAN=1: the suite again with the extension built under
#      AddressSanitizer + UBSan (build-ruby-asan/; Ruby itself is not
#      instrumented, so stack checks are off: Ruby longjmps over C frames)
# The shared models come from $LLAMAC_SHARED or ../shared; without them the
# model tests skip, unless LLAMAC_REQUIRE_SHARED=1 (CI) makes that a failure.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
jobs=${JOBS:-2}
build=$root/build-ruby
shared=${LLAMAC_SHARED:-$(cd .. && pwd)/shared}

echo "== ruby extension (build-ruby/)"
mkdir -p "$build/ext" "$build/lib/llama_cpp"
(cd "$build/ext" && ruby "$root/ruby/ext/llama_cpp/extconf.rb" >/dev/null && make -j"$jobs" >/dev/null)
cp "$build/ext/llama_cpp.so" "$build/lib/llama_cpp/llama_cpp.so"

run_suite() { # $1: the directory holding llama_cpp/llama_cpp.so
  ruby -I"$1" -I"$root/ruby/lib" -I"$root/ruby/test" \
    -e 'Dir[File.join(ARGV.shift, "test_*.rb")].sort.each { |f| require f }' "$root/ruby/test"
}

echo "== ruby minitest"
run_suite "$build/lib"

if [ "${LLAMAC_RUBY_ASAN:-0}" = 1 ]; then
  echo "== ruby minitest, extension under AddressSanitizer + UBSan (build-ruby-asan/)"
  asan=$root/build-ruby-asan
  mkdir -p "$asan/ext" "$asan/lib/llama_cpp"
  (cd "$asan/ext" && ruby "$root/ruby/ext/llama_cpp/extconf.rb" \
      --with-cflags="-O1 -g -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=all --param asan-stack=0" \
      --with-ldflags="-fsanitize=address,undefined" >/dev/null && make -j"$jobs" >/dev/null)
  cp "$asan/ext/llama_cpp.so" "$asan/lib/llama_cpp/llama_cpp.so"
  ASAN_OPTIONS=detect_leaks=0:use_sigaltstack=0:handle_segv=0 \
    LD_PRELOAD="$(gcc -print-file-name=libasan.so) $(gcc -print-file-name=libubsan.so)${LD_PRELOAD:+ $LD_PRELOAD}" \
    run_suite "$asan/lib"
fi

echo "== gem build, gem install, require in a fresh process"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
(cd ruby && gem build llamac.gemspec --output "$tmp/llamac.gem" >/dev/null)
MAKEFLAGS=-j$jobs GEM_HOME=$tmp/gems GEM_PATH=$tmp/gems gem install --local --no-document "$tmp/llamac.gem" >/dev/null
model=$shared/models/stories260K.gguf
if [ ! -f "$model" ]; then
  if [ "${LLAMAC_REQUIRE_SHARED:-0}" = 1 ]; then echo "missing $model" >&2; exit 1; fi
  echo "skipped: $model is absent"
  exit 0
fi
(cd "$tmp" && env -u RUBYLIB -u RUBYOPT GEM_HOME="$tmp/gems" GEM_PATH="$tmp/gems" ruby -e '
  require "llama_cpp"
  abort "loaded from #{$LOADED_FEATURES.grep(/llama_cpp\.so/)}" unless $LOADED_FEATURES.grep(/llama_cpp\.so/).all? { |f| f.start_with?(ENV["GEM_HOME"]) }
  model = LLaMACpp::Model.new(model_path: ARGV[0], params: LLaMACpp::ModelParams.new)
  params = LLaMACpp::ContextParams.new
  params.seed = 42
  text = LLaMACpp.generate(LLaMACpp::Context.new(model: model, params: params), "Once upon a time", n_predict: 32)
  abort "no text generated" if text.strip.empty?
  puts "installed gem generated: #{text.inspect}"
' "$model")
