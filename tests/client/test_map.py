"""Client.map and AsyncClient.map against a scripted server (`make_client`
runs each case with both): bounded concurrency, outcomes as they finish,
failures as values, arguments checked up front, programs taken lazily."""

from __future__ import annotations

import threading
import time

import pytest

from kcoral import Client, KCoralError, Program, ProgramResult, ProtocolError
from kcoral.connections import SHARD_REQUESTS
from wire_helpers import FakeServer, json_reply, outcome
from wire_helpers import make_client  # noqa: F401  (the fixture: each test runs with both clients)


def indexed_program(index: int, delay: float = 0.0) -> Program:
    """A program the fake server answers with `index`, after `delay` seconds."""
    p = Program()
    m = p.upload(id="m", kind="module", source="def main(i, d):\n    return i\n")
    f = p.get_function(id="f", module=m, name="main")
    p.return_(key="out", value=p.run(id="r", fn=f, args=[index, delay]))
    return p


FAILED = {
    "kind": "runtime",
    "message": "boom",
    "instruction_index": 2,
    "instruction_op": "run",
    "instruction_id": "r",
    "traceback": "",
}


class Answers:
    """Answers each indexed program after its delay, or with `replies[index]`;
    records the most requests it held at once."""

    def __init__(self, replies: dict | None = None) -> None:
        self.replies = replies or {}
        self.lock = threading.Lock()
        self.now = self.most = 0

    def __call__(self, rec):
        index, delay = rec.program["instructions"][2]["args"]
        with self.lock:
            self.now += 1
            self.most = max(self.most, self.now)
        try:
            time.sleep(delay)
            if index in self.replies:
                return self.replies[index]
            return json_reply(outcome(results={"out": {"type": "integer", "value": index}}))
        finally:
            with self.lock:
                self.now -= 1


def test_map_yields_every_index_once_as_they_finish(make_client):
    answers = Answers()
    programs = [indexed_program(0, delay=0.4)] + [indexed_program(i, delay=0.02) for i in range(1, 9)]
    with FakeServer(answers) as srv:
        with make_client(srv.url) as client:
            pairs = list(client.map(programs, concurrency=3))
    indices = [index for index, _ in pairs]
    assert sorted(indices) == list(range(9))
    assert indices[0] != 0 and indices.index(0) > 3  # the slow one finished late, and later ones were not held back
    assert all(isinstance(r, ProgramResult) and r["out"] == i for i, r in pairs)
    assert answers.most == 3  # the bound, and reached


def test_map_yields_failures_as_values_and_keeps_the_rest(make_client):
    error = json_reply(
        {"status": "ERROR", "request_id": "rid", "error": {"kind": "engine", "message": "down"}}, status=500
    )
    answers = Answers({2: error, 4: json_reply(outcome("FAILED", error=FAILED)), 5: json_reply([1])})
    programs: list = [indexed_program(i) for i in range(8)]
    programs[6] = {"instructions": []}  # not a Program: that one fails, alone
    with FakeServer(answers) as srv:
        with make_client(srv.url) as client:
            outcomes = dict(client.map(programs, concurrency=4))
    assert sorted(outcomes) == list(range(8))
    assert isinstance(outcomes[2], KCoralError) and outcomes[2].status_code == 500 and outcomes[2].kind == "engine"
    assert outcomes[4].status == "FAILED" and outcomes[4].error["message"] == "boom"
    assert isinstance(outcomes[5], ProtocolError)
    assert isinstance(outcomes[6], TypeError)
    assert [outcomes[i]["out"] for i in (0, 1, 3, 7)] == [0, 1, 3, 7]


@pytest.mark.parametrize(
    "arguments, error",
    [
        ({"concurrency": 0}, ValueError),
        ({"concurrency": True}, ValueError),
        ({"concurrency": 1.5}, ValueError),
        ({"gpu_count": 0}, ValueError),
        ({"timeout": 3}, TypeError),
    ],
)
def test_map_checks_its_arguments_before_anything_runs(make_client, arguments, error):
    with FakeServer([]) as srv:
        with make_client(srv.url) as client:
            with pytest.raises(error):
                client.map([indexed_program(0)], **arguments)
    assert srv.requests == []


def test_map_passes_execute_options_to_every_program(make_client):
    with FakeServer(Answers()) as srv:
        with make_client(srv.url) as client:
            assert len(list(client.map([indexed_program(i) for i in range(3)], timeout_seconds=7, gpu_count=1))) == 3
    assert [r.program["options"] for r in srv.requests] == [{"timeout_seconds": 7, "gpu_count": 1}] * 3


def test_map_takes_programs_lazily(make_client):
    taken = []

    def programs():
        for i in range(10):
            taken.append(i)
            yield indexed_program(i, delay=0.3)

    with FakeServer(Answers()) as srv:
        with make_client(srv.url) as client:
            results = client.map(programs(), concurrency=2)
            next(results)
            # Two in flight, and one taken as each of them finished (they
            # started together, so the second may be done too): never all ten.
            assert len(taken) <= 4
            assert len(list(results)) == 9
    assert len(taken) == 10


def test_map_of_nothing_yields_nothing(make_client):
    with make_client("http://127.0.0.1:9") as client:
        assert list(client.map([])) == []


def test_progress_bar_only_where_asked_or_on_a_terminal(make_client, capsys):
    answers = Answers({1: json_reply(outcome("FAILED", error=FAILED))})
    with FakeServer(answers) as srv:
        with make_client(srv.url) as client:
            list(client.map([indexed_program(i) for i in range(3)], progress=True))
            bar = capsys.readouterr().err
            assert "3/3" in bar and "failed=1" in bar
            list(client.map([indexed_program(i) for i in range(3)]))  # stderr is no terminal here
            list(client.map([indexed_program(i) for i in range(3)], progress=False))
            assert capsys.readouterr().err == ""


def test_the_pool_holds_more_than_a_hundred_requests_at_once():
    # Each request waits until all have arrived: a client whose pool queued
    # some (httpx's default is 100 connections) would never get there.
    # AsyncClient's pool: test_async_only.py, with gather.
    count = 150
    barrier = threading.Barrier(count, timeout=20)

    def answer(rec):
        barrier.wait()
        return json_reply(outcome())

    with FakeServer(answer) as srv:
        with Client(srv.url) as client:
            outcomes = [o for _, o in client.map([indexed_program(i) for i in range(count)], concurrency=count)]
            shards = client._http._transport._shards  # connections.py: pools of SHARD_REQUESTS at most
            assert len(shards) == -(-count // SHARD_REQUESTS) and all(shard.active == 0 for shard in shards)
    assert all(isinstance(o, ProgramResult) for o in outcomes), [o for o in outcomes if isinstance(o, Exception)][:1]
    assert len(outcomes) == count
