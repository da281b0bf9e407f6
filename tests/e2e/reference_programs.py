"""Programs run with the reference client (PyPI kcoral 0.1.1) against our server.

Runs inside a virtual environment that has only the reference client, so it
imports nothing from this repository. Prints one JSON line per check.
"""

import json
import sys
import tempfile
from pathlib import Path

from kcoral import Client, Program
import kcoral

# This must be the reference package of the venv, never this checkout's.
assert "reference-client-venv" in kcoral.__file__, f"imported {kcoral.__file__}, not the reference client"

url = sys.argv[1]
report = {}
with Client(url) as client:
    # 1. module / run / return
    program = Program()
    module = program.upload(
        kind="module", source="def add(a, b):\n    print('adding')\n    return {'sum': a + b, 'items': [a, b]}\n"
    )
    add = program.get_function(module=module, name="add")
    total = program.run(fn=add, args=[2, 40])
    program.return_(key="total", value=total)
    result = client.execute(program, timeout_seconds=30)
    report["module_run_return"] = {
        "status": result.status,
        "total": result.results.get("total"),
        "stdout": result.stdout,
    }

    # 2. bytes upload negotiated through CACHE_MISS (fresh random bytes: never cached)
    import os

    payload = os.urandom(4096)
    program = Program()
    blob = program.upload(kind="bytes", value=payload)
    module = program.upload(
        kind="module", source="import hashlib\ndef digest(b):\n    return hashlib.sha256(b).hexdigest()\n"
    )
    digest = program.get_function(module=module, name="digest")
    out = program.run(fn=digest, args=[blob])
    program.return_(key="digest", value=out)
    program.return_(key="echo", value=blob)
    result = client.execute(program)
    import hashlib

    report["bytes_cache_miss"] = {
        "status": result.status,
        "digest_ok": result.results.get("digest") == hashlib.sha256(payload).hexdigest(),
        "echo_ok": result.results.get("echo") == payload,
    }

    # 3. file upload + folder return
    program = Program()
    program.upload_file(blob=b"hello file", path="inputs/a.txt")
    module = program.upload(
        kind="module",
        source=(
            "import os\n"
            "def build():\n"
            "    os.makedirs('out/sub', exist_ok=True)\n"
            "    open('out/sub/b.txt', 'w').write(open('inputs/a.txt').read().upper())\n"
            "    open('out/.hidden', 'w').write('h')\n"
        ),
    )
    build = program.get_function(module=module, name="build")
    program.run(fn=build, args=[])
    program.return_folder(key="out", path="out")
    program.return_file(key="a", path="inputs/a.txt")
    result = client.execute(program)
    folder = result.results.get("out")
    with tempfile.TemporaryDirectory() as tmp:
        saved = folder.save(Path(tmp) / "saved")
        saved_text = (saved / "sub" / "b.txt").read_text()
    report["file_upload_folder_return"] = {
        "status": result.status,
        "files": sorted(folder.files),
        "directories": list(folder.directories),
        "b": saved_text,
        "a": result.results["a"].read_bytes().decode(),
    }

    # 4. the benchmark builtin, as the seed's programs call it (a handle from the uploaded module)
    program = Program()
    module = program.upload(
        kind="module",
        source="from kcoral.builtins import benchmark\ndef work(n):\n    return sum(range(n))\n",
    )
    benchmark = program.get_function(module=module, name="benchmark")
    work = program.get_function(module=module, name="work")
    timing = program.run(fn=benchmark, args=[work, 1000, {"warmup": 2, "repeat": 20}])
    program.return_(key="timing", value=timing)
    result = client.execute(program)
    report["benchmark"] = {"status": result.status, "timing": result.results.get("timing")}
print(json.dumps(report))
