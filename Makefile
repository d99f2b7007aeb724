# Thin wrapper over Meson. `make demo` and `make test` install what they need.
BUILD ?= build
GPU_ARCH ?= 80;90
MOEKIT := $(BUILD)/src/moekit
# The kernel families (families.txt): folder names of kernels/, src/, tests/, bench/.
FAMILIES := $(shell grep -v '^\s*\#' families.txt)
export PATH := $(PATH):/usr/local/cuda/bin

.PHONY: all deps build demo test gpu-test gpu-verify bench render charts baseline regress clean

all: build

deps:
	@bash .ci/install-deps

$(BUILD)/build.ninja:
	@$(MAKE) --no-print-directory deps
	@mkdir -p $(BUILD)
	@# nvcc through .ci/nvcc-deps: Meson 1.0 does not ask nvcc for the header
	@# dependencies ninja needs to rebuild a .cu when a .cuh it includes changes.
	@printf "[binaries]\ncuda = '%s/.ci/nvcc-deps'\n" "$(CURDIR)" > $(BUILD)/native.ini
	meson setup $(BUILD) -Dgpu_arch='$(GPU_ARCH)' --native-file $(BUILD)/native.ini

build: $(BUILD)/build.ninja
	ninja -C $(BUILD)

# The main job: moe_align_block_size on a recorded router trace (DeepSeek-V2-Lite,
# MoE layer 13, 1024 prefill tokens, top-6 of 64 experts; data/README.md),
# validated, timed.
demo: build
	$(MOEKIT) info
	$(MOEKIT) align --topk-ids data/deepseek_v2_lite_l13_prefill1024.npy --num-experts 64 --block-size 64 \
	  --variant auto --out $(BUILD)/demo --bench --iters 50

# Every test (CPU suite; the GPU suite skips without a device), then one line:
# tests: N passed, M failed, K skipped
test: build
	-@meson test -C $(BUILD) --print-errorlogs --num-processes 2
	@python3 .ci/summarize $(BUILD)/meson-logs/testlog.json

# GPU suite only (run on a machine with a GPU).
gpu-test: build
	meson test -C $(BUILD) --suite gpu --print-errorlogs

# Everything a kernel change must pass on a GPU machine: the CLI on the GPU,
# each family's GPU test, compute-sanitizer memcheck + racecheck, ncu capture.
gpu-verify: build
	@mkdir -p $(BUILD)/gpu-bin
	cp $(MOEKIT) $(BUILD)/tests/resources/gpu_resources $(foreach f,$(FAMILIES),$(BUILD)/tests/$(f)/gpu_$(f)) $(BUILD)/gpu-bin/
	bash .ci/gpu-verify $(BUILD)/gpu-bin $(BUILD)/gpu-logs

# Runs the bench program of every family in families.txt (GPU machine; several
# minutes), each writing its records (the --results record schema,
# docs/regression.md) to bench/results/<family>.jsonl, then draws the charts and
# renders docs/bench/. A family without a bench program is named and skipped.
bench: build
	@for f in $(FAMILIES); do \
	  b=$(BUILD)/bench/$$f/bench_$$f; \
	  if [ ! -x $$b ]; then echo "bench: no bench program for $$f"; continue; fi; \
	  $$b --json bench/results/$$f.jsonl || exit 1; \
	done
	@$(MAKE) --no-print-directory charts

# docs/bench/<family>.md from bench/results/<family>.jsonl (no GPU, no build).
render:
	python3 bench/render.py

# docs/bench/<family>.svg (moekit plot of bench/results/<family>.jsonl; no GPU), then
# render, which links each chart from its doc.
charts: build
	@for f in $(FAMILIES); do \
	  [ -f bench/results/$$f.jsonl ] || continue; \
	  $(MOEKIT) plot bench/results/$$f.jsonl -o docs/bench/$$f.svg || exit 1; \
	done
	@$(MAKE) --no-print-directory render

# Regression check (docs/regression.md), on a GPU machine: `make baseline` records
# REGRESS_SWEEP into BASELINE; after a change, `make regress` runs the same sweep,
# plots it and fails when `moekit compare` finds a cell that regressed.
BASELINE ?= bench/baseline.jsonl
REGRESS_THRESHOLD ?= 0.05
REGRESS_DEVICE ?= gpu
REGRESS_SWEEP ?= align --tokens 1,16,256,4096,16384 -E 64,256 --topk 8 --variant auto --bench --iters 50

baseline: build
	rm -f $(BASELINE).tmp
	$(MOEKIT) $(REGRESS_SWEEP) --device $(REGRESS_DEVICE) --results $(BASELINE).tmp --format json > /dev/null
	mv $(BASELINE).tmp $(BASELINE)

regress: build
	rm -f $(BUILD)/regress.jsonl
	$(MOEKIT) $(REGRESS_SWEEP) --device $(REGRESS_DEVICE) --results $(BUILD)/regress.jsonl --format json > /dev/null
	$(MOEKIT) plot $(BUILD)/regress.jsonl -o $(BUILD)/regress.svg
	$(MOEKIT) compare $(BASELINE) $(BUILD)/regress.jsonl --threshold $(REGRESS_THRESHOLD)

clean:
	rm -rf $(BUILD)
