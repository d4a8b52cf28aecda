# Thin wrapper over CMake for the README's commands.
JOBS ?= 2

.PHONY: all test run clean default-model
all:
	cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
	cmake --build build -j$(JOBS)

# Every test, C and Ruby (installs missing Debian packages first).
test:
	JOBS=$(JOBS) bash scripts/test.sh

# Trains the default model from scratch: corpus, tokenizer, training, plot, card
# (about an hour with 2 threads; see docs/training.md).
default-model:
	bash scripts/train-default-model.sh

clean:
	rm -rf build build-asan build-fuzz
