#!/usr/bin/env bash
# Prints the Debian packages to install for the build, or nothing when every
# tool and header is already there (so machines without apt access, such as
# the GPU machine, build with what they have).
have_header() { [ -f "/usr/include/$1" ] || [ -f "/usr/local/include/$1" ]; }
missing=()
command -v cmake >/dev/null || missing+=(cmake)
command -v ninja >/dev/null || missing+=(ninja-build)
command -v g++ >/dev/null || missing+=(g++)
boost=$(sed -n 's/^#define BOOST_VERSION \([0-9]*\)/\1/p' /usr/include/boost/version.hpp 2>/dev/null)
[ "${boost:-0}" -ge 108100 ] || missing+=(libboost1.81-dev)
have_header nlohmann/json.hpp || missing+=(nlohmann-json3-dev)
have_header CLI/CLI.hpp || missing+=(libcli11-dev)
have_header openssl/evp.h || missing+=(libssl-dev)     # SHA-256, and TLS (src/tls)
command -v openssl >/dev/null || missing+=(openssl)     # the TLS tests' CA (tests/e2e/pki.py)
have_header gtest/gtest.h || missing+=(libgtest-dev)
have_header seccomp.h || [ -f "${KCORAL_SECCOMP_ROOT:-/nonexistent}/usr/include/seccomp.h" ] || missing+=(libseccomp-dev)
have_header nats/nats.h || missing+=(libnats-dev)      # the cluster layer (docs/cluster.md)
command -v nft >/dev/null || missing+=(nftables)            # the fault campaign's partitions
command -v fusermount3 >/dev/null || missing+=(fuse3)       # and its lazy stores (bench/cluster_faults.py)
command -v chromium >/dev/null || missing+=(chromium)           # the dashboard's browser test
[ -x /usr/bin/chromedriver ] || missing+=(chromium-driver)       # (tests/e2e/test_dashboard.py)
python3 -c "import pybind11" 2>/dev/null || have_header pybind11/pybind11.h || missing+=(pybind11-dev)
echo "${missing[@]}"
