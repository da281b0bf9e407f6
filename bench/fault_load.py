"""The fault campaign's load and its checker (bench/cluster_faults.py), in Jepsen's spirit: the
outcome of every request is judged from what clients saw and from a side effect outside the
nodes, never from the nodes' own word.

Each request is its own program under a unique Idempotency-Key. The program appends
"start <key> <unix time> <node tag>" to a shared file (O_APPEND, then fsync) before anything
else, sleeps a little (so some runs are mid-flight when a node dies), appends "end ...", and
returns the first 16 hex digits of SHA-256(key). The nodes run with `--sandbox none`, so the
program writes the file itself, and each node life's tag (cluster_harness.TAG in its
environment) tells which life ran it. A client retries its key until answered or its deadline.

`check` then judges every key of a run:
- unanswered: no answer by the deadline (availability: reported, not judged);
- lost: answered (or its program finished), yet after healing a retry with the key does not get
  that answer back, or the program started again after the first answer;
- changed: two answers for one key differ, or an answer is not the key's value;
- duplicated: runs of a program beyond its first. Allowed up to the runs that were on a node
  life killed before their key was answered: that work (or its unstored outcome) died with its
  node and is redone.
"""

from __future__ import annotations

import contextlib
import hashlib
import random
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from kcoral import Client, Program

SOURCE = (
    "import os, time\n"
    "def note(log, line):\n"
    "    fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)\n"
    "    try:\n"
    "        os.write(fd, line.encode())\n"
    "        os.fsync(fd)\n"
    "    finally:\n"
    "        os.close(fd)\n"
    "def main(key, log, seconds, value):\n"
    "    tag = os.environ.get('KCORAL_CLUSTER_BENCH', '-')\n"
    "    note(log, f'start {key} {time.time():.3f} {tag}\\n')\n"
    "    time.sleep(seconds)\n"
    "    note(log, f'end {key} {time.time():.3f} {tag}\\n')\n"
    "    return value\n"
)
# In the program's options, so the same for every attempt of a key. Longer than KCoral's default
# AckWait (30 s) and a run: with 30, a killed node's run handed on after AckWait found its
# deadline passed, and every retry of its key got the stored 504 until the client gave up.
PROGRAM_TIMEOUT_S = 120


def value_of(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()[:16]


def program_of(key: str, log: Path, seconds: float) -> Program:
    # The value rides in the arguments, so the program cannot compute anything else by mistake;
    # the checker compares the answer with value_of(key) all the same.
    program = Program()
    module = program.upload(id="m", kind="module", source=SOURCE)
    fn = program.get_function(id="f", module=module, name="main")
    program.return_(key="out", value=program.run(id="r", fn=fn, args=[key, str(log), seconds, value_of(key)]))
    return program


def answer_of(result) -> str:
    """What a client saw: the value, or FAILED with its error (a stored outcome too)."""
    if result.completed:
        return str(result.results.get("out"))
    return f"FAILED {str(result.error)[:120]}"


@dataclass
class KeyRecord:
    key: str
    seconds: float
    sent_at: float
    answers: list[tuple[float, str]] = field(default_factory=list)  # (unix time, answer) under load
    attempts: int = 0
    last_error: str = ""
    rechecked: bool = False
    recheck_answer: str | None = None  # the answer to the one retry after healing


def ask(urls: list[str], record: KeyRecord, log: Path, deadline: float, rotation: int = 0) -> str | None:
    """Retries record.key until answered or `deadline` (monotonic): the answer, or None."""
    program = program_of(record.key, log, record.seconds)
    turn = rotation
    while time.monotonic() < deadline:
        order = urls[turn % len(urls) :] + urls[: turn % len(urls)]
        turn += 1
        record.attempts += 1
        client = Client(urls=order, max_attempts=len(urls))
        try:
            result = client.execute(program, timeout_seconds=PROGRAM_TIMEOUT_S, idempotency_key=record.key)
            return answer_of(result)
        except Exception as exc:  # noqa: BLE001 - any failure is retried with the key
            record.last_error = f"{type(exc).__name__}: {exc}"[:300]
        finally:
            with contextlib.suppress(Exception):
                client.close()
        time.sleep(0.3)
    return None


class Load:
    """`concurrency` threads that send fresh keys for `seconds`, each retried until its answer or
    `deadline_s` after it was first sent."""

    def __init__(self, urls: list[str], log: Path, prefix: str, seconds: float, concurrency: int, deadline_s: float):
        self.urls, self.log, self.prefix = urls, log, prefix
        self.records: list[KeyRecord] = []
        self.lock = threading.Lock()
        self.deadline_s = deadline_s
        self.stop_sending_at = time.monotonic() + seconds
        self.threads = [threading.Thread(target=self._client, args=(n,), daemon=True) for n in range(concurrency)]
        for t in self.threads:
            t.start()

    def _client(self, n: int) -> None:
        rng = random.Random(f"{self.prefix}-{n}")
        while time.monotonic() < self.stop_sending_at:
            record = KeyRecord(
                f"{self.prefix}-{n}-{uuid.uuid4().hex[:8]}", round(rng.uniform(0.2, 1.0), 2), time.time()
            )
            with self.lock:
                self.records.append(record)
            answer = ask(self.urls, record, self.log, time.monotonic() + self.deadline_s, rotation=n)
            if answer is not None:
                record.answers.append((time.time(), answer))

    def wait(self) -> None:
        """Until every client is done; a client stuck past its deadline (a paused node holds its
        connection) is left behind, its key unanswered."""
        limit = self.stop_sending_at + self.deadline_s + 5
        for t in self.threads:
            t.join(max(0.0, limit - time.monotonic()))


def recovery_seconds(urls: list[str], log: Path, healed_at: float, prefix: str, limit_s: float) -> float | None:
    """Seconds from the heal (monotonic) until a fresh keyed request sent after it is answered."""
    n = 0
    while time.monotonic() < healed_at + limit_s:
        record = KeyRecord(f"probe-{prefix}-{n}", 0.0, time.time())
        n += 1
        if ask(urls, record, log, min(time.monotonic() + 5, healed_at + limit_s), rotation=n) is not None:
            return time.monotonic() - healed_at
    return None


@dataclass
class Execution:
    key: str
    started: float
    tag: str
    ended: bool = False


def executions(log: Path) -> dict[str, list[Execution]]:
    """Every run of every key, from the shared file: starts paired with their ends by tag."""
    runs: dict[str, list[Execution]] = {}
    if not log.exists():
        return runs
    for line in log.read_text().splitlines():
        parts = line.split()
        if len(parts) != 4:
            continue  # a line cut short by a kill
        kind, key, at, tag = parts
        if kind == "start":
            runs.setdefault(key, []).append(Execution(key, float(at), tag))
        elif kind == "end":
            for run in runs.get(key, []):
                if run.tag == tag and not run.ended:
                    run.ended = True
                    break
    return runs


@dataclass
class Verdict:
    requests: int = 0
    answered: int = 0
    unanswered: int = 0
    lost: int = 0
    changed: int = 0
    duplicated: int = 0
    allowance: int = 0
    examples: list[str] = field(default_factory=list)
    # Keys lost, changed or run more often than their own allowance: the ones to trace.
    suspects: list[str] = field(default_factory=list)

    def add(self, other: Verdict) -> None:
        for name in ("requests", "answered", "unanswered", "lost", "changed", "duplicated", "allowance"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.examples += other.examples[: max(0, 10 - len(self.examples))]
        self.suspects += other.suspects[: max(0, 10 - len(self.suspects))]


def recheck(urls: list[str], records: list[KeyRecord], log: Path, deadline_s: float, concurrency: int = 6) -> None:
    """After healing: each answered key (or one whose program finished) once more with its key;
    its answer is appended to its record."""
    ran = executions(log)
    todo = [r for r in records if r.answers or any(e.ended for e in ran.get(r.key, []))]
    lock = threading.Lock()

    def worker(n: int) -> None:
        while True:
            with lock:
                if not todo:
                    return
                record = todo.pop()
            record.rechecked = True
            record.recheck_answer = ask(urls, record, log, time.monotonic() + deadline_s, rotation=n)

    threads = [threading.Thread(target=worker, args=(n,), daemon=True) for n in range(concurrency)]
    for t in threads:
        t.start()
    for t in threads:  # each ask ends by its deadline; a join that gave up earlier judged keys still asked
        t.join()


def check(records: list[KeyRecord], log: Path, killed: dict[str, float]) -> Verdict:
    """The verdict on one run's keys (after `recheck`); `killed` maps the tag of each node life
    killed in the run to the (unix) time of its kill."""
    ran = executions(log)
    verdict = Verdict(requests=len(records))
    for record in records:
        runs = ran.get(record.key, [])
        if record.answers:
            verdict.answered += 1
        else:
            verdict.unanswered += 1
            verdict.examples.append(f"unanswered {record.key} after {record.attempts} attempts: {record.last_error}")
        suspect = False
        values = {answer for _, answer in record.answers}
        if record.recheck_answer is not None:
            values.add(record.recheck_answer)
        if len(values) > 1 or any(v != value_of(record.key) for v in values):
            verdict.changed += 1
            verdict.examples.append(f"changed {record.key}: {sorted(values)}")
            suspect = True
        if record.answers:  # a key answered must keep its answer and never run again
            first_answer_at = record.answers[0][0]
            again = any(r.started > first_answer_at for r in runs)
            if record.recheck_answer is None or again:
                verdict.lost += 1
                why = "ran again after its answer" if again else f"no answer on the retry ({record.last_error})"
                verdict.examples.append(f"lost {record.key}: {why}")
                suspect = True
        extra = max(0, len(runs) - 1)
        verdict.duplicated += extra
        # A run on a killed life is redone when its outcome was not stored before the kill: count
        # it unless the key was answered before that kill.
        answered_at = record.answers[0][0] if record.answers else float("inf")
        allowed = sum(1 for r in runs if r.tag in killed and answered_at > killed[r.tag])
        verdict.allowance += allowed
        if suspect or extra > allowed:
            verdict.suspects.append(record.key)
        if extra:
            verdict.examples.append(
                f"duplicated {record.key}: {len(runs)} runs, tags {[r.tag[:6] + ('' if r.ended else '(cut)') for r in runs]}"
            )
    return verdict
