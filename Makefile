# The two commands of README.md: `make run` and `make test`. Everything else is a helper.
PRESET ?= release
BUILD  := build/$(PRESET)
JOBS   ?= $(shell nproc)
BIN    := $(BUILD)/cli/sdpa-bench

.PHONY: setup configure build run test bench results clean

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

# Reference results of this machine, and the tables, plots and claims generated from them.
results: build
	$(eval MACHINE := $(shell $(BIN) info --machine-id))
	$(BIN) run configs/quick.json -o results/$(MACHINE)/quick.json
	$(BIN) run configs/seeds.json -o results/$(MACHINE)/seeds.json
	$(BIN) report results/*/*.json --format both --plots --out results
	$(BIN) claims results/$(MACHINE)/seeds.json -o results/claims.md

clean:
	rm -rf build
