# orrery: the two commands a new machine needs are `make run` and `make test`.
BUILD      ?= build
ASAN_BUILD ?= build-asan
JOBS       ?= $(shell nproc)
CMAKE_GEN  := -G Ninja

.PHONY: all deps build run test bench asan fuzz format clean

all: build

deps:
	@./scripts/install-deps.sh

$(BUILD)/build.ninja: | deps
	cmake -S . -B $(BUILD) $(CMAKE_GEN) -DCMAKE_BUILD_TYPE=Release

build: deps $(BUILD)/build.ninja
	cmake --build $(BUILD) -j $(JOBS)

# The main job on a bundled example.
run: build
	./$(BUILD)/orrery run -q --workload-configuration=examples/llama_dp2tp2pp2/workload \
	  --comm-group-configuration=examples/llama_dp2tp2pp2/workload.json \
	  --system-configuration=examples/llama_dp2tp2pp2/system.json \
	  --network-configuration=examples/llama_dp2tp2pp2/network.yml

test: build
	ctest --test-dir $(BUILD) --output-on-failure -j $(JOBS)

bench: build
	./scripts/run-benchmarks.sh $(BUILD)

# Every test under AddressSanitizer and UndefinedBehaviorSanitizer. -O1 -g1 (line tables) compiles
# in about half the time of -O2 -g and keeps the CI run well inside its budget. The fuzz targets
# build here too (GCC, replaying their corpus under ctest); `make fuzz` fuzzes them with clang.
asan: deps
	cmake -S . -B $(ASAN_BUILD) $(CMAKE_GEN) -DCMAKE_BUILD_TYPE=RelWithDebInfo \
	  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1 -DNDEBUG" \
	  -DORRERY_SANITIZE=ON -DORRERY_BUILD_BENCH=OFF
	cmake --build $(ASAN_BUILD) -j $(JOBS)
	ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	  ctest --test-dir $(ASAN_BUILD) --output-on-failure -j $(JOBS)

# Every fuzz target for FUZZ_SECONDS each (ASan + UBSan, clang), in its own tree of libraries and
# fuzzers only; inputs it finds go to $(FUZZ_BUILD)/fuzz/run_<target>, crashes to the working folder.
ASAN_CXX     ?= clang++-14
FUZZ_BUILD   ?= build-fuzz
FUZZ_SECONDS ?= 60
fuzz: deps
	@./scripts/install-deps.sh --fuzz
	cmake -S . -B $(FUZZ_BUILD) $(CMAKE_GEN) -DCMAKE_BUILD_TYPE=RelWithDebInfo \
	  -DCMAKE_CXX_COMPILER=$(ASAN_CXX) \
	  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1 -DNDEBUG" \
	  -DORRERY_SANITIZE=ON -DORRERY_FUZZ=ON -DORRERY_BUILD_TESTS=OFF -DORRERY_BUILD_BENCH=OFF
	cmake --build $(FUZZ_BUILD) -j $(JOBS) --target fuzz_all
	FUZZ_BUILD=$(FUZZ_BUILD) FUZZ_SECONDS=$(FUZZ_SECONDS) ./fuzz/run.sh

format:
	find src tests bench fuzz -name '*.cpp' -o -name '*.h' | xargs clang-format -i

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) $(FUZZ_BUILD)
