"""User code can write anything to its worker's IPC socket (it shares the
process). A forged frame header, whatever its fields' types, never takes the
server down: the request is answered and the next one is served."""

import pytest

from kcoral import Client, KCoralError, Program

FORGE = r'''
import fcntl, json, os, socket, time


def send_everywhere(header, fds=()):
    """Sends the frame on every SEQPACKET socket of this process: the worker's is one."""
    sent = 0
    for name in os.listdir("/proc/self/fd"):
        try:
            if not os.readlink(f"/proc/self/fd/{name}").startswith("socket:"):
                continue
            s = socket.socket(fileno=os.dup(int(name)))
        except OSError:
            continue
        try:
            if s.type == socket.SOCK_SEQPACKET:
                socket.send_fds(s, [json.dumps(header).encode()], list(fds))
                sent += 1
        except OSError:
            pass
        finally:
            s.close()
    return sent


def main(header):
    return send_everywhere(header)


def huge_outcome():
    """An outcome frame whose memfd claims a terabyte (sparse): it must not be read whole."""
    outcome = os.memfd_create("outcome")
    os.ftruncate(outcome, 1 << 40)
    parts = os.memfd_create("parts", os.MFD_ALLOW_SEALING)
    fcntl.fcntl(parts, fcntl.F_ADD_SEALS,
                fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_WRITE | fcntl.F_SEAL_SEAL)
    send_everywhere({"type": "outcome"}, [outcome, parts])
    time.sleep(5)
'''

FORGED = [
    {"type": "instruction", "index": "0"},
    {"type": "instruction", "index": 1.5},
    {"type": "instruction", "index": 2**70},
    {"type": "instruction", "index": [0]},
    {"type": "outcome", "retire": 7, "gpu_access_detected_ns": "now"},
    {"type": "instruction_end", "index": None},
    {"type": "span_begin"},
]


def forging_program(header: dict | None, name: str = "main") -> Program:
    program = Program()
    module = program.upload(kind="module", source=FORGE)
    sent = program.run(fn=program.get_function(module=module, name=name), args=[] if header is None else [header])
    program.return_(key="sent", value=sent)
    return program


def trivial() -> Program:
    program = Program()
    module = program.upload(kind="module", source="def main():\n    return 42\n")
    program.return_(key="out", value=program.run(fn=program.get_function(module=module, name="main"), args=[]))
    return program


@pytest.mark.parametrize("header", FORGED, ids=[f"{h['type']}-{i}" for i, h in enumerate(FORGED)])
def test_a_forged_frame_header_never_takes_the_server_down(shared_server, header):
    with Client(shared_server.url) as client:
        try:
            client.execute(forging_program(header), timeout_seconds=20)
        except KCoralError:
            pass  # answered: invalid worker response, or the like
        assert shared_server.process.poll() is None, "the server died"
        assert client.execute(trivial(), timeout_seconds=20).results["out"] == 42


def test_a_forged_outcome_of_a_terabyte_is_refused_unread(shared_server):
    with Client(shared_server.url) as client:
        with pytest.raises(KCoralError) as raised:
            client.execute(forging_program(None, "huge_outcome"), timeout_seconds=20)
        assert raised.value.kind == "response_too_large"
        assert shared_server.process.poll() is None, "the server died"
        assert client.execute(trivial(), timeout_seconds=20).results["out"] == 42


def test_a_forged_frame_type_is_quoted_only_in_part(shared_server):
    with Client(shared_server.url) as client:
        with pytest.raises(KCoralError) as raised:
            client.execute(forging_program({"type": "x" * 60000}), timeout_seconds=20)
        assert raised.value.kind == "engine"  # 500: invalid worker response
        assert "unexpected " + "x" * 64 + " frame" in raised.value.message
        assert len(raised.value.message) < 1000
