# Entry points for a fresh machine: `make demo` runs the main job, `make test` runs the whole suite.
BUILD      ?= build
BUILD_TYPE ?= Release
JOBS       ?= $(shell nproc)
MODELS_DIR ?= $(abspath ../shared/models)
FUSELM      = $(BUILD)/fuselm
# nvcc is found on PATH; the toolkit's default location is added in case the shell lacks it.
export PATH := $(PATH):/usr/local/cuda/bin

.PHONY: all setup configure build demo test test-gpu clean

all: build

setup:
	@scripts/setup-deps.sh

configure: setup
	@test -f $(BUILD)/build.ninja || cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=$(BUILD_TYPE) -DFUSELM_MODELS_DIR=$(MODELS_DIR)

build: configure
	cmake --build $(BUILD) -j $(JOBS)

# The main job: generate from the small trained llama2.c model when the shared models are there,
# and always from a synthetic Llama-shaped model made in memory (no download needed).
demo: build
	$(FUSELM) inspect -m 'synthetic:llama-3.2-1b'
	$(FUSELM) generate -m 'synthetic:llama?hidden=256&layers=4&heads=8&kv_heads=2&ffn=688&vocab=512' --prompt-ids 1,17,42 -n 16 --temperature 0 --json
	@if [ -f $(MODELS_DIR)/aidreams260K/aidreams260K.bin ]; then \
	  $(FUSELM) generate -m $(MODELS_DIR)/aidreams260K/aidreams260K.bin --tokenizer $(MODELS_DIR)/aidreams260K/tok512.bin -p '' -n 40 --temperature 0; echo; \
	else echo "demo: $(MODELS_DIR)/aidreams260K not found; skipped the trained-model demo"; fi

test: build
	ctest --test-dir $(BUILD) --output-on-failure -j $(JOBS)

# On a machine with a GPU: only the GPU-labelled tests.
test-gpu: build
	ctest --test-dir $(BUILD) --output-on-failure -L gpu

clean:
	rm -rf $(BUILD)
