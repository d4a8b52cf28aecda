# Thin wrapper over CMake for the README's commands.
JOBS ?= 2

.PHONY: all test run clean
all:
	cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
	cmake --build build -j$(JOBS)

# Every test, C and Ruby (installs missing Debian packages first).
test:
	JOBS=$(JOBS) bash scripts/test.sh

clean:
	rm -rf build build-asan build-fuzz
