# Thin wrapper over CMake for the README's commands.
JOBS ?= 2

.PHONY: all test test-arm64 run clean default-model
all:
	@bash scripts/install-deps.sh build
	cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
	cmake --build build -j$(JOBS)

# The main job: build, then generate text with the bundled default model
# (models/kjv-llama.gguf, trained by this project on the King James Bible).
PROMPT ?= And God said
run: all
	build/llamac run -m models/kjv-llama.gguf -p "$(PROMPT)" -n 200

# Every test, C and Ruby (installs missing Debian packages first).
test:
	JOBS=$(JOBS) bash scripts/test.sh

# Only the arm64 suite: cross-built, run under qemu-user (part of `make test`).
test-arm64:
	JOBS=$(JOBS) bash scripts/test-arm64.sh

# Trains the default model from scratch: corpus, tokenizer, training, plot, card
# (about an hour with 2 threads; see docs/training.md).
default-model:
	bash scripts/train-default-model.sh

clean:
	rm -rf build build-asan build-fuzz build-arm64 build-arm64-dotprod
