# Entry points a new user needs. Each installs missing Debian packages first (scripts/install-deps.sh).
BUILD ?= build
ASAN_BUILD ?= build-asan
JOBS ?= $(shell nproc)
REPORT ?= reports/colo-sim-thesis-90.html

.PHONY: deps configure build install demo test asan bench format clean

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

bench: build
	./$(BUILD)/bin/colo_bench
	./scripts/bench-sim.sh $(BUILD)

format:
	clang-format -i $$(git ls-files '*.cc' '*.h')

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) reports
