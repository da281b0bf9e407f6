"""scripts/check_layers.py: the real tree passes; a planted upward include, an unknown layer, a
server file outside the rooms or reaching up to a later room (the composition root above all),
and a planted import cycle (through a lazy import, and through a relative one) each fail it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "check_layers.py"


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=60)


def write(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


# A small tree in order: base <- protocol, base <- ipc <- pool, both <- server (whose rooms go
# core <- execute <- transport <- root), and a package without cycles.
CLEAN = {
    "src/base/status.h": "#pragma once\n#include <string>\n",
    "src/protocol/program.h": '#pragma once\n#include "base/status.h"\n#include "nlohmann/json.hpp"\n',
    "src/ipc/frame.h": '#pragma once\n#include "base/status.h"\n',
    "src/pool/seat.h": '#pragma once\n#include "ipc/frame.h"\n#include "pool/other.h"\n',
    "src/server/core/http_reply.h": "#pragma once\n",
    "src/server/execute/execute_route.h": '#pragma once\n#include "server/core/http_reply.h"\n',
    "src/server/transport/routes.cc": '#include "pool/seat.h"\n#include "protocol/program.h"\n'
    '#include "server/execute/execute_route.h"\n',
    "src/server/root/app.h": '#pragma once\n#include "server/transport/routes.h"\n',
    "python/kcoral/__init__.py": "",
    "python/kcoral/errors.py": "class ExecutionError(Exception):\n    pass\n",
    "python/kcoral/builtins.py": "from kcoral.errors import ExecutionError\n\n"
    "def benchmark():\n    from kcoral._worker import gpu_benchmark\n",
    "python/kcoral/_worker/__init__.py": "",
    "python/kcoral/_worker/gpu_benchmark.py": "from kcoral import errors\nfrom . import timing\n",
    "python/kcoral/_worker/timing.py": "from kcoral.errors import ExecutionError\n",
}


def test_help_describes_the_checks():
    result = run("--help")
    assert result.returncode == 0
    assert "--root" in result.stdout and "import cycle" in result.stdout


def test_the_repository_passes():
    result = run()
    assert result.returncode == 0, result.stdout + result.stderr


def test_a_clean_planted_tree_passes(tmp_path):
    result = run("--root", str(write(tmp_path, CLEAN)))
    assert result.returncode == 0, result.stdout + result.stderr


def test_an_upward_include_fails(tmp_path):
    tree = dict(CLEAN)
    tree["src/protocol/validate.cc"] = '#include "protocol/program.h"\n\n#include "server/transport/routes.h"\n'
    result = run("--root", str(write(tmp_path, tree)))
    assert result.returncode == 1
    assert "src/protocol/validate.cc:3: includes server/transport/routes.h" in result.stdout, result.stdout


def test_an_arrow_the_code_does_not_use_fails(tmp_path):
    """The table holds only the arrows the code uses: the pool reads no program (issue 41)."""
    tree = dict(CLEAN)
    tree["src/pool/seat.cc"] = '#include "pool/seat.h"\n#include "protocol/program.h"\n'
    result = run("--root", str(write(tmp_path, tree)))
    assert result.returncode == 1
    assert "src/pool/seat.cc:2: includes protocol/program.h" in result.stdout, result.stdout


def test_a_layer_missing_from_the_table_fails(tmp_path):
    tree = dict(CLEAN)
    tree["src/dashboard/page.cc"] = '#include "base/status.h"\n'
    result = run("--root", str(write(tmp_path, tree)))
    assert result.returncode == 1
    assert "src/dashboard/" in result.stdout


def test_a_server_file_outside_the_rooms_fails(tmp_path):
    tree = dict(CLEAN)
    tree["src/server/helpers.cc"] = '#include "server/core/http_reply.h"\n'
    result = run("--root", str(write(tmp_path, tree)))
    assert result.returncode == 1
    assert "src/server/helpers.cc: not in a room of src/server/" in result.stdout, result.stdout


def test_a_route_that_includes_the_composition_root_fails(tmp_path):
    tree = dict(CLEAN)
    tree["src/server/execute/execute_route.cc"] = (
        '#include "server/execute/execute_route.h"\n#include "server/root/app.h"\n'
    )
    result = run("--root", str(write(tmp_path, tree)))
    assert result.returncode == 1
    assert (
        "src/server/execute/execute_route.cc:2: includes server/root/app.h, but the server's execute room may use"
        " only core, tenancy, status" in result.stdout
    ), result.stdout


def test_a_room_that_reaches_a_later_one_fails(tmp_path):
    """The order of the rooms holds everywhere, not only at the root: status comes before execute."""
    tree = dict(CLEAN)
    tree["src/server/status/metrics.cc"] = '#include "server/execute/execute_route.h"\n'
    result = run("--root", str(write(tmp_path, tree)))
    assert result.returncode == 1
    assert "src/server/status/metrics.cc:1: includes server/execute/execute_route.h" in result.stdout, result.stdout


def test_an_import_cycle_through_a_lazy_import_fails(tmp_path):
    # The circle kcoral.builtins <-> kcoral._worker.gpu_benchmark had before issue 24: one side
    # imports lazily, inside a function, and still counts.
    tree = dict(CLEAN)
    tree["python/kcoral/_worker/gpu_benchmark.py"] = "from kcoral import _core, builtins\n"
    result = run("--root", str(write(tmp_path, tree)))
    assert result.returncode == 1
    assert "import cycle: kcoral._worker.gpu_benchmark -> kcoral.builtins -> kcoral._worker.gpu_benchmark" in (
        result.stdout
    ), result.stdout


def test_a_longer_cycle_through_relative_imports_fails(tmp_path):
    tree = dict(CLEAN)
    tree["python/kcoral/_worker/engine.py"] = "from .runtime import make_runtime\n"
    tree["python/kcoral/_worker/runtime.py"] = "def make_runtime():\n    from . import integrity\n"
    tree["python/kcoral/_worker/integrity.py"] = "def bind():\n    from kcoral._worker.engine import Engine\n"
    result = run("--root", str(write(tmp_path, tree)))
    assert result.returncode == 1
    assert (
        "import cycle: kcoral._worker.engine -> kcoral._worker.runtime -> kcoral._worker.integrity"
        " -> kcoral._worker.engine" in result.stdout
    ), result.stdout


def test_type_checking_imports_do_not_count(tmp_path):
    tree = dict(CLEAN)
    tree["python/kcoral/errors.py"] = (
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from kcoral.builtins import benchmark\n"
    )
    result = run("--root", str(write(tmp_path, tree)))
    assert result.returncode == 0, result.stdout + result.stderr
