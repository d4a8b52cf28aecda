# frozen_string_literal: true

require_relative 'lib/llama_cpp/version'

# Inside a checkout, package the engine's current C sources (see scripts/sync-sources).
if File.directory?(File.join(__dir__, '..', 'src')) && File.file?(File.join(__dir__, '..', 'include', 'llama.h'))
  Kernel.load(File.join(__dir__, 'scripts', 'sync-sources')) # Kernel: a bare load here is Gem::Specification.load
end

Gem::Specification.new do |spec|
  spec.name = 'llamac'
  spec.version = LLaMACpp::VERSION
  spec.authors = ['llamac developers']
  spec.summary = 'LLaMACpp (the llama_cpp.rb 0.12.2 API) over llamac, a C11 rebuild of llama.cpp b1892'
  spec.description = <<~DESC
    require "llama_cpp" gives the LLaMACpp module of llama_cpp.rb 0.12.2: models, contexts,
    batches, samplers, grammars, sessions and quantization, running on llamac, an LLM
    inference engine in C11 compiled into the extension (no C++, no prebuilt library).
    Long calls release the GVL and can be interrupted.
  DESC
  spec.license = 'MIT'
  spec.required_ruby_version = '>= 3.0'

  spec.files = Dir.chdir(__dir__) do
    Dir['lib/**/*.rb', 'sig/**/*.rbs', 'ext/llama_cpp/*.{c,h,rb}', 'ext/llama_cpp/vendor/**/*.{c,h}',
        'README.md', 'llamac.gemspec']
  end
  spec.require_paths = ['lib']
  spec.extensions = ['ext/llama_cpp/extconf.rb']
end
