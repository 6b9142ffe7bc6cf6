# Entry points a new user needs. Each installs missing Debian packages first (scripts/install-deps.sh).
BUILD ?= build
ASAN_BUILD ?= build-asan
TSAN_BUILD ?= build-tsan
JOBS ?= $(shell nproc)
REPORT ?= reports/colo-sim-thesis-90.html

.PHONY: deps configure build install demo test asan tsan bench format clean

deps:
	./scripts/install-deps.sh

$(BUILD)/build.ninja: | deps
	cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Release

build: deps $(BUILD)/build.ninja
	cmake --build $(BUILD) -j $(JOBS)

# Programs, data, systemd unit, sample config, man pages and completions under $(PREFIX)
# (staged below $(DESTDIR) when set, as packagers do).
PREFIX ?= /usr/local
install: build
	DESTDIR=$(DESTDIR) cmake --install $(BUILD) --prefix $(PREFIX)

# The main job on the embedded default: the thesis' 90-task trace on a simulated 4xA100-40GB server,
# every policy side by side, and an HTML report.
demo: build
	./$(BUILD)/bin/colo sim --trace thesis-90 --server a100x4 --compare thesis --report $(REPORT)

test: build
	ctest --test-dir $(BUILD) --output-on-failure -j $(JOBS)

# The tests again under AddressSanitizer and UndefinedBehaviorSanitizer.
asan: deps
	cmake -S . -B $(ASAN_BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Debug -DCOLO_SANITIZE=ON -DCOLO_BENCHMARKS=OFF
	cmake --build $(ASAN_BUILD) -j $(JOBS)
	ctest --test-dir $(ASAN_BUILD) --output-on-failure -j $(JOBS)

# colod's threads (the job store's thread and the loop that waits on it) under ThreadSanitizer:
# the daemon's unit tests, then the end-to-end tests that flood colod from several users. A race
# ends the program that has it (halt_on_error), so the test fails; the report is left in
# $(TSAN_BUILD)/tsan.PID.
TSAN_OPTIONS ?= halt_on_error=1 second_deadlock_stack=1 log_path=$(abspath $(TSAN_BUILD))/tsan
tsan: deps
	cmake -S . -B $(TSAN_BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Debug -DCOLO_SANITIZE=thread -DCOLO_BENCHMARKS=OFF
	cmake --build $(TSAN_BUILD) -j $(JOBS) --target daemon_test colod colo colo-shim colo-python-tools
	rm -f $(TSAN_BUILD)/tsan.*
	TSAN_OPTIONS="$(TSAN_OPTIONS)" $(TSAN_BUILD)/bin/daemon_test
	TSAN_OPTIONS="$(TSAN_OPTIONS)" ctest --test-dir $(TSAN_BUILD) --output-on-failure \
	  -R '^e2e_(fair_share|multi_user|faults)$$'
	@! ls $(TSAN_BUILD)/tsan.* 2>/dev/null

bench: build
	./$(BUILD)/bin/colo_bench
	./scripts/bench-sim.sh $(BUILD)

format:
	clang-format -i $$(git ls-files '*.cc' '*.h')

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) $(TSAN_BUILD) reports
