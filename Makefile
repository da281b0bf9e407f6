# KCoral: `make build` installs what it needs and builds; `make test` runs every
# test; `make demo` shows the main job end to end. All targets are idempotent.
PYTHON ?= python3
BUILD_DIR ?= build/dev
JOBS ?= $(shell nproc)
PIP_PACKAGES = httpx numpy pytest apache-tvm-ffi ml_dtypes pybind11 scikit-build-core

.PHONY: build deps test unit e2e demo bench format clean

deps:
	@missing=$$(bash scripts/missing_build_deps.sh); \
	if [ -n "$$missing" ]; then \
	  echo ">> installing Debian packages:" $$missing; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing; \
	fi
	@$(PYTHON) -c "import httpx, numpy, pytest, tvm_ffi, ml_dtypes, pybind11" 2>/dev/null || \
	  { echo ">> installing Python packages"; $(PYTHON) -m pip install -q $(PIP_PACKAGES); }

build: deps
	@echo ">> building the C++ server, worker core and unit tests ($(BUILD_DIR))"
	@cmake -S . -B $(BUILD_DIR) -G Ninja -DKCORAL_BUILD_TESTS=ON \
	  -DPython_EXECUTABLE=$$($(PYTHON) -c 'import sys; print(sys.executable)') >/dev/null
	@cmake --build $(BUILD_DIR) -j $(JOBS)
	@$(PYTHON) scripts/dev_install.py

unit: build
	@echo ">> unit tests (GoogleTest)"
	@cd $(BUILD_DIR) && ctest --output-on-failure -j $(JOBS)

e2e: build
	@echo ">> end-to-end tests (pytest, real servers on 127.0.0.1)"
	@$(PYTHON) -m pytest -q tests/client tests/e2e

test: unit e2e

demo: build
	@bash scripts/demo.sh

bench: build
	@$(PYTHON) bench/roundtrip.py

format:
	@git ls-files '*.h' '*.cc' '*.cu' | xargs clang-format -i

clean:
	rm -rf build python/kcoral/bin python/kcoral/_core.*.so
