# Keel top-level Makefile: drives CMake. `make demo` and `make test` are the
# two commands the README promises; both install missing Debian packages first.
BUILD      ?= build
BUILD_SAN  ?= build-asan
JOBS       ?= $(shell nproc 2>/dev/null || echo 2)
ARGS       ?=

DEB_PKGS := build-essential cmake pkg-config clang libclang-rt-14-dev \
            librocksdb-dev libuv1-dev libsqlite3-dev libssl-dev libhiredis-dev \
            libcmocka-dev libmicrohttpd-dev libcjson-dev libfaketime python3-cryptography \
            liblua5.1-0-dev lua-cjson-dev lua-bitop-dev libmsgpack-dev \
            libcurl4-openssl-dev etcd-server etcd-client \
            redis-tools redis-server python3-redis \
            libjs-dygraphs prometheus chromium nodejs
# The dashboard's browser test drives Debian's chromium with playwright-core
# from npm, installed under the build directory (never committed). npm comes
# with nodejs where nodejs is NodeSource's; Debian's own nodejs needs the
# separate npm package (not listed: it conflicts with NodeSource's nodejs).
PLAYWRIGHT := playwright-core@1.65.1

.PHONY: all deps npm-deps build build-asan test demo bench clean format sim-soak fuzz-soak compat

all: build

# Installs only what is missing; a no-op when every package is present.
deps:
	@missing=""; for p in $(DEB_PKGS); do \
	  dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q "ok installed" || missing="$$missing $$p"; \
	done; \
	if [ -n "$$missing" ]; then \
	  echo "deps: installing$$missing"; \
	  if [ "$$(id -u)" -ne 0 ]; then SUDO=sudo; fi; \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq --no-install-recommends $$missing; \
	fi

npm-deps:
	@if [ ! -f $(BUILD)/npm/node_modules/playwright-core/package.json ]; then \
	  if command -v npm >/dev/null; then \
	    mkdir -p $(BUILD)/npm && npm install --silent --no-audit --no-fund --prefix $(BUILD)/npm $(PLAYWRIGHT); \
	  else echo "npm-deps: no npm: the dashboard's browser test will be skipped"; fi; \
	fi

build: deps
	@cmake -S . -B $(BUILD) -DCMAKE_C_COMPILER=clang -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
	@cmake --build $(BUILD) -j $(JOBS)

build-asan: deps
	@cmake -S . -B $(BUILD_SAN) -DCMAKE_C_COMPILER=clang -DCMAKE_BUILD_TYPE=Debug -DKEEL_SANITIZE=ON >/dev/null
	@cmake --build $(BUILD_SAN) -j $(JOBS)

# Unit + integration + fuzz in the normal build, then the unit tests again
# under ASan/UBSan. The normal build's tests run 3 at a time (TEST_JOBS):
# most of them wait on processes and sockets, and on 2 cores the suite
# took 368 s at -j 3 against 574 s at -j 2 (machine 42 % busy at -j 2).
# The ASan units are CPU-bound and stay at 2.
TEST_JOBS ?= 3
test: build build-asan npm-deps
	cd $(BUILD) && ctest --output-on-failure -j $(TEST_JOBS)
	cd $(BUILD_SAN) && ctest --output-on-failure -L unit -j 2

# Random seeds of the three simulators for SECONDS (default 60), side by
# side; a failure prints its seed (replay: DETECTOR_SIM_SEED=S
# build/test-detector, MOVESIM_SEED=S MOVESIM_VERBOSE=1 build/test-movesim,
# REPSIM_SEED=S REPSIM_VERBOSE=1 build/test-repsim).
SECONDS ?= 60
sim-soak: build
	@DETECTOR_SIM_SECONDS=$(SECONDS) ./$(BUILD)/test-detector & d=$$!; \
	REPSIM_SECONDS=$(SECONDS) ./$(BUILD)/test-repsim & r=$$!; \
	MOVESIM_SECONDS=$(SECONDS) ./$(BUILD)/test-movesim; m=$$?; \
	wait $$d; dd=$$?; wait $$r; rr=$$?; \
	[ $$m -eq 0 ] && [ $$dd -eq 0 ] && [ $$rr -eq 0 ]

# Both fuzzers for SECONDS each (default 60), side by side, on temporary
# copies of their corpora; a finding prints its input (tests/fuzz/run_bounded.sh).
fuzz-soak: build
	@./tests/fuzz/run_bounded.sh ./$(BUILD)/fuzz_resp tests/fuzz/corpus $(SECONDS) & r=$$!; \
	./tests/fuzz/run_bounded.sh ./$(BUILD)/fuzz_keel tests/fuzz/corpus_keel $(SECONDS); k=$$?; \
	wait $$r; rr=$$?; [ $$k -eq 0 ] && [ $$rr -eq 0 ]

# Redis 7.0.15's own test files, unmodified, from ../shared when present,
# against a fresh keel node and a fresh redis-server per file; prints the
# [ok] counts of both. Not part of `make test`. FILES="unit/type/hash ..."
compat: build
	@./tests/compat/run.sh $(BUILD)/keel

demo: build
	@./build/keel demo $(ARGS)

bench: build
	@./bench/node_vs_redis
	@./bench/types
	@./bench/replication
	@./bench/planner
	@./bench/move
	@./bench/move_bighash
	@./bench/rebalance_vs_redis
	@./bench/coord_failover

format:
	@clang-format -i $$(git ls-files '*.c' '*.h')

clean:
	rm -rf $(BUILD) $(BUILD_SAN)
