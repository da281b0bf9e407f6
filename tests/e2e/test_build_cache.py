"""The sandbox's build cache (store/build_cache.h): compile caches survive from
one run of a program to the next run of the byte-identical program, and to no
other program, so none can plant a build that another one loads."""

import pytest

from test_sandbox import report

# Writes a marker where tvm_ffi keeps its builds (TVM_FFI_CACHE_DIR, under
# HOME's cache) and says what it found there first.
PLANTS_A_BUILD = r"""
import os
def main(tag):
    d = os.path.join(os.environ["TVM_FFI_CACHE_DIR"], "example_add_one_d56ca4f7e88cc5b2")
    found = {}
    if os.path.isdir(d):
        for name in sorted(os.listdir(d)):
            found[name] = open(os.path.join(d, name)).read()
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "example_add_one.so"), "w") as f:
        f.write("planted by " + tag)
    return found
"""


@pytest.fixture
def cached(make_server):
    return make_server("--num-workers", "1")  # conftest gives each server its own --build-cache-dir


def test_the_same_program_finds_its_own_build_again(cached):
    assert report(cached, PLANTS_A_BUILD, "run") == {}
    assert report(cached, PLANTS_A_BUILD, "run") == {"example_add_one.so": "planted by run"}


def test_another_program_never_sees_a_planted_build(cached):
    # Without the cache's keying, the attacker's library would be loaded by the victim's
    # identical tvm_ffi build key; with it, the victim (a different program) starts empty.
    assert report(cached, PLANTS_A_BUILD, "attacker") == {}
    assert report(cached, PLANTS_A_BUILD, "victim") == {}
    assert report(cached, PLANTS_A_BUILD, "victim") == {"example_add_one.so": "planted by victim"}
