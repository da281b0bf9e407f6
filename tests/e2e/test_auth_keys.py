"""Issue 27, keys and roles (src/server/tenancy/access_control.h): with --auth-keys, /health stays open,
a tenant's key runs programs and uploads blobs, an operator's key also reads /metrics; a missing
or unknown key is 401, a role's wrong route 403, repeated failures from one address 429; no
message echoes the key; SIGHUP reloads the file (a revoked key is refused). Our client takes
api_key= or KCORAL_API_KEY; the reference client works through its own headers=."""

import json
import os
import signal
import subprocess

import httpx
import pytest

from conftest import Server, call, wait_for
from test_reference_client import reference_environment, reference_python

from kcoral.keys import key_line, new_key

ADD = "def main(a, b):\n    return a + b\n"


@pytest.fixture(scope="module")
def keyed(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("auth")
    keys = {"alice": new_key(), "bob": new_key(), "ops": new_key()}
    path = tmp / "keys.txt"
    path.write_text(
        "# tenants and an operator\n"
        + "\n".join(
            [key_line("alice", keys["alice"]), key_line("bob", keys["bob"]), key_line("ops", keys["ops"], "operator")]
        )
        + "\n"
    )
    server = Server(tmp, "--auth-keys", str(path), "--num-workers", "2")
    yield server, keys, path
    server.stop()


def bearer(key: str) -> dict:
    return {"Authorization": f"Bearer {key}"}


def test_health_is_open_and_says_keys_are_on(keyed):
    server, _, _ = keyed
    health = httpx.get(server.url + "/health", timeout=10).json()
    assert health["status"] == "ok" and health["auth"] == "keys"


def test_no_key_and_a_wrong_key_are_401_without_echoing_it(keyed):
    from kcoral import Client, KCoralError

    server, _, _ = keyed
    with Client(server.url, max_attempts=1) as client, pytest.raises(KCoralError) as missing:
        client.execute(call(ADD, [1, 2]))
    assert missing.value.status_code == 401 and missing.value.kind == "unauthorized"
    wrong = "kc_wrong-" + "x" * 30
    with Client(server.url, api_key=wrong, max_attempts=1) as client, pytest.raises(KCoralError) as bad:
        client.execute(call(ADD, [1, 2]))
    assert bad.value.status_code == 401 and wrong not in str(bad.value)
    assert wrong not in server.stderr_path.read_text()
    for event in server.events():
        assert wrong not in json.dumps(event)


def test_a_tenant_runs_programs_and_uploads_blobs_but_reads_no_metrics(keyed):
    from kcoral import Client

    server, keys, _ = keyed
    with Client(server.url, api_key=keys["alice"]) as client:
        result = client.execute(call(ADD, [2, 3]))
    assert result.completed and result.results["out"] == 5
    assert httpx.get(server.url + "/metrics", headers=bearer(keys["alice"])).status_code == 403
    assert httpx.get(server.url + "/metrics").status_code == 401
    upload = httpx.post(server.url + "/blobs", content=b"abc", headers={
        **bearer(keys["bob"]), "Content-Type": "application/octet-stream"})  # fmt: skip
    assert upload.status_code == 200


def test_an_operator_reads_metrics(keyed):
    server, keys, _ = keyed
    metrics = httpx.get(server.url + "/metrics", headers=bearer(keys["ops"]))
    assert metrics.status_code == 200 and "kcoral_requests_total" in metrics.text


def test_the_key_can_come_from_the_environment(keyed, monkeypatch):
    from kcoral import Client

    server, keys, _ = keyed
    monkeypatch.setenv("KCORAL_API_KEY", keys["bob"])
    with Client(server.url) as client:
        assert client.execute(call(ADD, [4, 5])).results["out"] == 9


def test_the_reference_client_works_through_its_headers(keyed, tmp_path):
    server, keys, _ = keyed
    python = reference_python()
    script = tmp_path / "ref.py"
    script.write_text(
        "import sys, kcoral\n"
        "url, key = sys.argv[1], sys.argv[2]\n"
        "p = kcoral.Program()\n"
        "m = p.upload(id='m', kind='module', source='def main(a, b):\\n    return a + b\\n')\n"
        "f = p.get_function(id='f', module=m, name='main')\n"
        "p.return_(key='out', value=p.run(id='r', fn=f, args=[20, 22]))\n"
        "for headers in ({'Authorization': 'Bearer ' + key}, {}):\n"
        "    try:\n"
        "        r = kcoral.Client(url, headers=headers).execute(p)\n"
        "        print('ok', r.results['out'])\n"
        "    except Exception as e:\n"
        "        print('refused', type(e).__name__)\n"
    )
    run = subprocess.run(
        [str(python), str(script), server.url, keys["alice"]],
        capture_output=True, text=True, timeout=120, cwd="/", env=reference_environment(),
    )  # fmt: skip
    assert run.returncode == 0, run.stderr[-3000:]
    lines = run.stdout.strip().splitlines()
    assert lines[0] == "ok 42" and lines[1].startswith("refused"), lines


def test_sighup_reloads_the_keys_and_a_revoked_key_is_refused(tmp_path):
    from kcoral import Client, KCoralError

    keep, revoke = new_key(), new_key()
    path = tmp_path / "keys.txt"
    path.write_text(key_line("a", keep) + "\n" + key_line("b", revoke) + "\n")
    server = Server(tmp_path, "--auth-keys", str(path), "--num-workers", "1")
    try:
        with Client(server.url, api_key=revoke) as client:
            assert client.execute(call(ADD, [1, 1])).results["out"] == 2
        path.write_text(key_line("a", keep) + "\n")
        os.kill(server.process.pid, signal.SIGHUP)
        wait_for(lambda: any(e["event"] == "auth_keys_reloaded" for e in server.events()), 10, "the reload")
        with Client(server.url, api_key=revoke, max_attempts=1) as client, pytest.raises(KCoralError) as refused:
            client.execute(call(ADD, [1, 1]))
        assert refused.value.status_code == 401
        with Client(server.url, api_key=keep) as client:
            assert client.execute(call(ADD, [2, 2])).results["out"] == 4
    finally:
        server.stop()


def test_repeated_failures_from_one_address_are_429(tmp_path):
    path = tmp_path / "keys.txt"
    path.write_text(key_line("a", new_key()) + "\n")
    server = Server(tmp_path, "--auth-keys", str(path), "--num-workers", "1")
    try:
        codes = [httpx.get(server.url + "/metrics", headers=bearer(f"nope-{i}")).status_code for i in range(22)]
        assert codes[:20] == [401] * 20 and codes[-1] == 429, codes
        assert httpx.get(server.url + "/health").status_code == 200  # still open
    finally:
        server.stop()


def test_a_bad_keys_file_stops_the_server_naming_the_line(tmp_path):
    path = tmp_path / "keys.txt"
    path.write_text("alice my-plain-key tenant\n")
    with pytest.raises(RuntimeError) as failed:
        Server(tmp_path, "--auth-keys", str(path))
    assert "line 1" in str(failed.value) and "my-plain-key" not in str(failed.value)
