# The two commands of README.md: `make run` and `make test`. Everything else is a helper.
PRESET ?= release
BUILD  := build/$(PRESET)
JOBS   ?= $(shell nproc)
BIN    := $(BUILD)/cli/sdpa-bench

.PHONY: setup configure build run test bench clean

setup:
	@tools/setup.sh

configure: setup
	@cmake --preset $(PRESET) >/dev/null

build: configure
	@cmake --build $(BUILD) -j $(JOBS)

run: build
	$(BIN) run configs/quick.json

test: build
	ctest --preset $(PRESET) -j $(JOBS)

bench: build
	$(BUILD)/tests/bench_kernels

clean:
	rm -rf build
