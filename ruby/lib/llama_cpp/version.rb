# frozen_string_literal: true

# LLaMACpp: the llama_cpp.rb 0.12.2 API, provided by the llamac gem.
module LLaMACpp
  # The llama_cpp.rb version whose API this gem provides.
  VERSION = '0.12.2'

  # The llama.cpp version whose C API (llama.h) the engine implements.
  LLAMA_CPP_VERSION = 'b1892'
end
