# The two commands of the README, and the build they share.
#   make        build the pipetrain command and the library (build/)
#   make run    install what is missing, build, run the demo training job
#   make check  install what is missing, build, compile the portable build
#               (PT_NATIVE=OFF: its kernels take their instruction sets from
#               target attributes alone), run the tests under
#               AddressSanitizer + UndefinedBehaviorSanitizer, the threaded ones
#               under ThreadSanitizer, then every test on the release build
#   make bench  build and run the benchmarks
#   make install PREFIX=DIR   install the header, libpipetrain (static and
#               shared), the command and pipetrain.pc under DIR (/usr/local)
#   make fuzz   build the fuzzers with clang (build-fuzz/) and run each for
#               FUZZ_SECONDS (or FUZZ_RUNS executions); docs/fuzzing.md
JOBS ?= $(shell nproc)
BUILD ?= build
ASAN_BUILD ?= build-asan
TSAN_BUILD ?= build-tsan
PORTABLE_BUILD ?= build-portable
FUZZ_BUILD ?= build-fuzz
FUZZ_SECONDS ?= 20
FUZZ_RUNS ?=
# the tests whose workers are threads of one process
MPIRUN = OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 mpirun --oversubscribe
THREADED_TESTS = ^test_(transport_threads|lend_idle|attention_threads|pass_threads|gemm|pipeline_matches_sequential|pipeline_memory|pipedream_trains|train_pipelined)$$

PREFIX ?= /usr/local

.PHONY: all deps run check bench fuzz clean install

all:
	@cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release >/dev/null
	@cmake --build $(BUILD) -j $(JOBS)

install: all
	@cmake --install $(BUILD) --prefix $(PREFIX)

deps:
	@bash scripts/install-deps.sh

run: deps all
	@bash scripts/demo.sh $(BUILD)/pipetrain

check: deps all
	@echo "== the portable build (PT_NATIVE=OFF) compiles"
	@cmake -S . -B $(PORTABLE_BUILD) -DCMAKE_BUILD_TYPE=Release -DPT_NATIVE=OFF >/dev/null
	@cmake --build $(PORTABLE_BUILD) --target pipetrain -j $(JOBS) >/dev/null
	@cmake -S . -B $(ASAN_BUILD) -DCMAKE_BUILD_TYPE=Debug -DPT_SANITIZE=ON >/dev/null
	@cmake --build $(ASAN_BUILD) -j $(JOBS)
	@echo "== tests under AddressSanitizer + UndefinedBehaviorSanitizer"
	@cd $(ASAN_BUILD) && ctest -L fast --output-on-failure -j $(JOBS)
	@cmake -S . -B $(TSAN_BUILD) -DCMAKE_BUILD_TYPE=Debug -DCMAKE_C_FLAGS="-fsanitize=thread -O1" \
	    -DCMAKE_EXE_LINKER_FLAGS=-fsanitize=thread >/dev/null
	@cmake --build $(TSAN_BUILD) -j $(JOBS)
	@echo "== threaded tests under ThreadSanitizer"
	@cd $(TSAN_BUILD) && TSAN_OPTIONS="suppressions=$(CURDIR)/tests/tsan.supp" \
	    ctest -R '$(THREADED_TESTS)' --output-on-failure -j $(JOBS)
	@echo "== tests"
	@cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

bench: deps all
	@cmake --build $(BUILD) --target benches -j $(JOBS)
	@for b in model pipeline transport plan_search; do echo "== bench_$$b"; $(BUILD)/bench/bench_$$b || exit 1; done
	@echo "== bench_mpi (2 ranks) and bench_transport over MPI"
	@$(MPIRUN) -np 2 $(BUILD)/bench/bench_mpi
	@$(MPIRUN) -np 2 $(BUILD)/bench/bench_transport
	@echo "== bench_tensor (2 tensor slices on threads, then on 2 MPI ranks)"
	@$(BUILD)/bench/bench_tensor 2
	@$(MPIRUN) -np 2 $(BUILD)/bench/bench_tensor 2
	@echo "== bench_memory (one process, threads, MPI ranks)"
	@bash bench/bench_memory.sh $(BUILD)/pipetrain
	@echo "== bench_tokenizer (pipetrain tokenize against PyPI's tokenizers, one thread)"
	@bash bench/bench_tokenizer.sh $(BUILD)/pipetrain

fuzz:
	@cmake -S . -B $(FUZZ_BUILD) -DCMAKE_BUILD_TYPE=Release -DCMAKE_C_COMPILER=clang -DPT_FUZZ=ON >/dev/null
	@cmake --build $(FUZZ_BUILD) --target fuzzers -j $(JOBS)
	@bash fuzz/run.sh $(FUZZ_BUILD) $(FUZZ_SECONDS) $(FUZZ_RUNS)

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) $(TSAN_BUILD) $(FUZZ_BUILD)
