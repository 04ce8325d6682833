# The two commands of the README, and the build they share.
#   make        build the pipetrain command and the library (build/)
#   make run    install what is missing, build, run the demo training job
#   make check  install what is missing, build, run every test, then again
#               under AddressSanitizer + UndefinedBehaviorSanitizer
#   make bench  build and run the benchmarks
JOBS ?= $(shell nproc)
BUILD ?= build
ASAN_BUILD ?= build-asan

.PHONY: all deps run check check-asan bench clean

all:
	@cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release >/dev/null
	@cmake --build $(BUILD) -j $(JOBS)

deps:
	@bash scripts/install-deps.sh

run: deps all
	@bash scripts/demo.sh $(BUILD)/pipetrain

check: deps all
	@cmake -S . -B $(ASAN_BUILD) -DCMAKE_BUILD_TYPE=Debug -DPT_SANITIZE=ON >/dev/null
	@cmake --build $(ASAN_BUILD) -j $(JOBS)
	@echo "== tests under AddressSanitizer + UndefinedBehaviorSanitizer"
	@cd $(ASAN_BUILD) && ctest -L fast --output-on-failure -j $(JOBS)
	@echo "== tests"
	@cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

bench: deps all
	@cmake --build $(BUILD) --target benches -j $(JOBS)
	@for b in $(BUILD)/bench/bench_*; do echo "== $$b"; $$b || exit 1; done

clean:
	rm -rf $(BUILD) $(ASAN_BUILD)
