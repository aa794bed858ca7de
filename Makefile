# The two quick-start commands (see README):
#   make run    predict a DLRM iteration on a DGX H100 (8x H100) with the shipped configs
#   make test   build and run the whole test suite
# Both install missing Debian packages first (scripts/install_deps.sh) and build with
# CMake into build/ (the CUDA parts when /usr/local/cuda/bin/nvcc exists).

BUILD ?= build
CMAKE_FLAGS ?=
JOBS ?= $(shell nproc)
SYSTEM ?= configs/systems/dgx_h100.json
WORKLOAD ?= configs/workloads/dlrm_default.json

FUZZ_BUILD ?= build-fuzz
FUZZ_SECONDS ?= 600

.PHONY: run test build cli deps bench clean golden fuzz accuracy docs

deps:
	@scripts/install_deps.sh

$(BUILD)/build.ninja: CMakeLists.txt | deps
	cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo $(CMAKE_FLAGS)

build: deps $(BUILD)/build.ninja
	cmake --build $(BUILD) -j $(JOBS)

# Only what a prediction needs: the perfcast command (no tests, benches or CUDA kernels).
cli: deps $(BUILD)/build.ninja
	cmake --build $(BUILD) -j $(JOBS) --target perfcast

run: cli
	$(BUILD)/cli/perfcast predict --system $(SYSTEM) --workload $(WORKLOAD) \
	  --json $(BUILD)/prediction.json --trace $(BUILD)/prediction.trace.json
	@echo "wrote $(BUILD)/prediction.json and $(BUILD)/prediction.trace.json (open the trace in https://ui.perfetto.dev)"

test: build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

# Regenerate the accuracy tables (README "What is measured", docs/accuracy.md) from data/, and
# the example outputs of README.md and docs/ from the commands that print them; ctest
# (perfcast_accuracy_tables, perfcast_doc_examples) fails when the committed pages differ.
accuracy: deps $(BUILD)/build.ninja
	cmake --build $(BUILD) -j $(JOBS) --target perfcast_accuracy_tools
	python3 scripts/accuracy_tables.py $(BUILD)

docs: cli
	python3 scripts/doc_examples.py $(BUILD)

bench: build
	taskset -c 0 $(BUILD)/bench/perfcast_bench_predict
	taskset -c 0 $(BUILD)/bench/perfcast_bench_shard
	taskset -c 0 $(BUILD)/bench/perfcast_bench_plan

golden: build
	tests/update_golden.sh $(BUILD)/cli/perfcast

clean:
	rm -rf $(BUILD)

# libFuzzer targets (tests/fuzz): clang 14 build in $(FUZZ_BUILD), then FUZZ_SECONDS per
# target (default 10 minutes; CI runs 15 s). Findings are kept in $(FUZZ_BUILD)/fuzz-findings.
fuzz: deps
	@scripts/install_fuzz_deps.sh
	CXX=clang++-14 cmake -S . -B $(FUZZ_BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Fuzz -DCMAKE_CXX_FLAGS_FUZZ="-O1 -gline-tables-only" \
	  -DPERFCAST_ENABLE_CUDA=OFF \
	  -DPERFCAST_BUILD_TESTS=OFF -DPERFCAST_BUILD_BENCH=OFF -DPERFCAST_FUZZ=ON $(CMAKE_FLAGS)
	cmake --build $(FUZZ_BUILD) -j $(JOBS) --target perfcast_fuzz_targets
	tests/fuzz/run_fuzz.sh $(FUZZ_BUILD) $(FUZZ_SECONDS)
