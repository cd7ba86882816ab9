# The two commands of README.md: `make run` and `make test`. Everything else is a helper.
PRESET ?= release
MAKEFLAGS += --no-print-directory
BUILD  := build/$(PRESET)
JOBS   ?= $(shell nproc)
BIN    := $(BUILD)/cli/sdpa-bench

.PHONY: setup setup-test configure bin build run test test-arm64 bench results report site schemas seal fuzz lint clean

# What building and running need; setup-test adds the test suite's and the developer tools'.
setup:
	@tools/setup.sh
setup-test:
	@tools/setup.sh --test

configure: setup
	@cmake --preset $(PRESET) >/dev/null

# sdpa-bench alone (and the libraries it links): what `run`, `results` and `report` need.
bin: configure
	@cmake --build $(BUILD) -j $(JOBS) --target sdpa-bench

# Everything: sdpa-bench, the tests, the benchmarks and the tools.
build: configure
	@cmake --build $(BUILD) -j $(JOBS)

run: bin
	$(BIN) run configs/quick.json

test: setup-test build
	ctest --preset $(PRESET) -j $(JOBS)
	@$(BUILD)/tests/isa_summary

# The test suite cross-built for aarch64 (the arm64 preset, Debian's cross toolchain) and run
# under qemu user emulation: NEON as a Neoverse N1, and the kernels again on 128-bit SVE2;
# SVE256=ON adds 256-bit SVE (emulated ten times slower: tests/CMakeLists.txt).
SVE256 ?= OFF
SVE256_CPU := max,sve-default-vector-length=32
ARM64_CPUS := neoverse-n1 max,sve-default-vector-length=16 $(if $(filter ON,$(SVE256)),$(SVE256_CPU))
test-arm64:
	@tools/setup.sh --arm64
	@cmake --preset arm64 -DSDPA_TEST_SVE256=$(SVE256) >/dev/null
	@cmake --build build/arm64 -j $(JOBS)
	ctest --preset arm64 -j $(JOBS)
	@for cpu in $(ARM64_CPUS); do \
	  echo "QEMU_CPU=$$cpu:"; QEMU_CPU=$$cpu /usr/bin/qemu-aarch64-static build/arm64/tests/isa_summary; \
	done

bench: build
	$(BUILD)/tests/bench_kernels

# Reference results of this machine (about twenty minutes: run it on an idle machine, timings
# are in it), and the tables, plots and claims generated from them. `make report` regenerates
# only the tables, plots and claims from the committed files.
RESULT_CONFIGS ?= quick seeds hardware models training stability precision paper modifiers model-masks
results: bin
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
# The plots' gnuplot scripts go to the build folder: results/ holds what people open (.svg, .png).
report: bin
	$(BIN) report $(REFERENCE_RESULTS) --format both --plots --out-dir results --plot-scripts $(BUILD)/plot-scripts
	$(BIN) claims $(foreach c,$(shell $(BIN) claims --list-inputs),$(firstword $(filter %/$(notdir $(c)),$(REFERENCE_RESULTS)))) -o results/claims.md

# The committed results as a static site (open $(SITE)/index.html; nothing is fetched).
SITE ?= build/site
site: bin
	$(BIN) report $(REFERENCE_RESULTS) --html $(SITE) --plot-scripts $(BUILD)/site-plot-scripts

# configs/schema.json and results/schema.json, assembled from kinds/config.schema.json,
# kinds/result.schema.json and each kind's parts, and docs/configs.md written from the first
# (tests/test_kinds.cpp checks they are current).
schemas: configure
	@cmake --build $(BUILD) -j $(JOBS) --target write_schemas
	$(BUILD)/tools/write_schemas configs/schema.json results/schema.json docs/configs.md

# The reference result files rewritten with the checksum of their contents (contents_sha256),
# after an edit made on purpose (tools/seal_results.cpp); `make report` reads them unchanged.
seal: configure
	@cmake --build $(BUILD) -j $(JOBS) --target seal_results
	$(BUILD)/tools/seal_results $(REFERENCE_RESULTS)

# libFuzzer targets (fuzz/), each run for FUZZ_SECONDS from its seeds in fuzz/corpus/<target>/;
# what they learn goes to build/fuzz/corpus/, a crash to build/fuzz/crash-* (and fails).
FUZZERS      ?= config result npy journal report
FUZZ_SECONDS ?= 120
fuzz: setup-test
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
lint: setup-test
	@cmake --preset release >/dev/null
	@echo "clang-tidy on $(words $(LINT_SOURCES)) files"
	@clang-tidy -p build/release --quiet --extra-arg=-Wno-unknown-warning-option $(LINT_SOURCES) \
	  2>build/release/clang-tidy.stderr || { cat build/release/clang-tidy.stderr; exit 1; }
	@echo "clang-format on $(words $(FORMAT_FILES)) files"
	@clang-format --dry-run -Werror $(FORMAT_FILES)

clean:
	rm -rf build
