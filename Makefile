# The two commands of README.md: `make run` and `make test`. Everything else is a helper.
PRESET ?= release
MAKEFLAGS += --no-print-directory
BUILD  := build/$(PRESET)
JOBS   ?= $(shell nproc)
BIN    := $(BUILD)/cli/sdpa-bench

.PHONY: setup configure build run test test-arm64 bench results report schemas fuzz lint clean

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

# The test suite cross-built for aarch64 (the arm64 preset, Debian's cross toolchain) and run
# under qemu user emulation: NEON as a Neoverse N1, and the kernels again on SVE and SVE2.
test-arm64:
	@tools/setup.sh --arm64
	@cmake --preset arm64 >/dev/null
	@cmake --build build/arm64 -j $(JOBS)
	ctest --preset arm64 -j $(JOBS)

bench: build
	$(BUILD)/tests/bench_kernels

# Reference results of this machine (about twelve minutes: run it on an idle machine, timings
# are in it), and the tables, plots and claims generated from them. `make report` regenerates
# only the tables, plots and claims from the committed files.
RESULT_CONFIGS ?= quick seeds hardware models training stability precision paper
results: build
	$(eval MACHINE := $(shell $(BIN) info --machine-id))
	@for c in $(RESULT_CONFIGS); do \
	  $(BIN) run configs/$$c.json -o results/$(MACHINE)/$$c.json >/dev/null || exit 1; \
	done
	@$(MAKE) report

# Reference results are results/<machine>/<config>.json; runs named <config>-<UTC time>.json
# (what `sdpa-bench run` writes by default, e.g. `make run`) are a user's own and left out.
# The claims read the first reference result of each config `claims --list-inputs` names (the
# claims' registry, analysis/claims.cpp), in that order.
REFERENCE_RESULTS = $(shell ls results/*/*.json | grep -Ev -- '-[0-9]{8}T[0-9]{6}Z\.json$$')
report: build
	$(BIN) report $(REFERENCE_RESULTS) --format both --plots --out results
	$(BIN) claims $(foreach c,$(shell $(BIN) claims --list-inputs),$(firstword $(filter %/$(notdir $(c)),$(REFERENCE_RESULTS)))) -o results/claims.md

# configs/schema.json and results/schema.json, assembled from kinds/config.schema.json,
# kinds/result.schema.json and each kind's parts (tests/test_kinds.cpp checks they are current).
schemas: build
	$(BUILD)/tools/write_schemas configs/schema.json results/schema.json

# libFuzzer targets (fuzz/), each run for FUZZ_SECONDS from its seeds in fuzz/corpus/<target>/;
# what they learn goes to build/fuzz/corpus/, a crash to build/fuzz/crash-* (and fails).
FUZZERS      ?= config result npy journal
FUZZ_SECONDS ?= 120
fuzz: setup
	@cmake --preset fuzz >/dev/null
	@cmake --build build/fuzz -j $(JOBS) --target $(addprefix fuzz_,$(FUZZERS))
	@for f in $(FUZZERS); do \
	  mkdir -p build/fuzz/corpus/$$f; \
	  echo "fuzz_$$f: $(FUZZ_SECONDS) s"; \
	  build/fuzz/fuzz/fuzz_$$f -max_total_time=$(FUZZ_SECONDS) -timeout=10 -rss_limit_mb=2048 \
	    -dict=fuzz/$$f.dict -artifact_prefix=build/fuzz/ -print_final_stats=1 \
	    build/fuzz/corpus/$$f fuzz/corpus/$$f 2>build/fuzz/fuzz_$$f.log \
	    || { tail -60 build/fuzz/fuzz_$$f.log; exit 1; }; \
	  grep -E "^stat::number_of_executed_units|Done" build/fuzz/fuzz_$$f.log; \
	done

# clang-tidy (.clang-tidy, compile commands of build/release) on the project's sources, and
# clang-format (.clang-format) on them and the fuzz targets.
LINT_DIRS    := kernels input experiments analysis kinds cli tools
LINT_SOURCES  = $(shell git ls-files --cached --others --exclude-standard $(addsuffix /*.cpp,$(LINT_DIRS)))
FORMAT_FILES  = $(shell git ls-files --cached --others --exclude-standard \
                  $(foreach d,$(LINT_DIRS) fuzz,$(d)/*.cpp $(d)/*.hpp))
lint: setup
	@cmake --preset release >/dev/null
	@echo "clang-tidy on $(words $(LINT_SOURCES)) files"
	@clang-tidy -p build/release --quiet --extra-arg=-Wno-unknown-warning-option $(LINT_SOURCES) \
	  2>build/release/clang-tidy.stderr || { cat build/release/clang-tidy.stderr; exit 1; }
	@echo "clang-format on $(words $(FORMAT_FILES)) files"
	@clang-format --dry-run -Werror $(FORMAT_FILES)

clean:
	rm -rf build
