"""Issue 44, the fault campaign's checker (bench/fault_load.py `check`): judged on made-up keys and
a made-up executions file, so each verdict is pinned without a cluster. The campaign itself
(bench/cluster_faults.py) needs root, namespaces and FUSE; `make faults` runs it."""

import sys

from conftest import REPO

sys.path.insert(0, str(REPO / "bench"))

from fault_load import KeyRecord, check, value_of  # noqa: E402


def record(key, answered_at=None, answer=None, recheck=None):
    r = KeyRecord(key, 0.5, 100.0)
    if answered_at is not None:
        r.answers.append((answered_at, value_of(key) if answer is None else answer))
        r.rechecked = True
        r.recheck_answer = value_of(key) if recheck is None else recheck
    return r


def executions_file(tmp_path, lines):
    log = tmp_path / "executions.log"
    log.write_text("".join(f"{line}\n" for line in lines))
    return log


def test_an_answer_kept_and_run_once_is_clean(tmp_path):
    log = executions_file(tmp_path, ["start a 100.1 n1", "end a 100.6 n1"])
    v = check([record("a", answered_at=100.7)], log, killed={})
    assert (v.requests, v.answered, v.unanswered, v.lost, v.changed, v.duplicated) == (1, 1, 0, 0, 0, 0)
    assert v.suspects == []


def test_a_run_after_the_answer_is_lost_and_duplicated(tmp_path):
    log = executions_file(tmp_path, ["start a 100.1 n1", "end a 100.6 n1", "start a 105.0 n2", "end a 105.5 n2"])
    v = check([record("a", answered_at=100.7)], log, killed={})
    assert (v.lost, v.duplicated, v.allowance) == (1, 1, 0)
    assert v.suspects == ["a"]  # its trail is printed when the campaign fails


def test_a_retry_after_healing_that_gets_nothing_is_lost(tmp_path):
    log = executions_file(tmp_path, ["start a 100.1 n1", "end a 100.6 n1"])
    r = record("a", answered_at=100.7)
    r.recheck_answer = None
    assert check([r], log, killed={}).lost == 1


def test_a_run_cut_short_by_a_node_kill_allows_one_duplicate(tmp_path):
    log = executions_file(tmp_path, ["start a 100.1 n1", "start a 106.0 n2", "end a 106.5 n2"])
    v = check([record("a", answered_at=106.6)], log, killed={"n1": 100.3})
    assert (v.lost, v.duplicated, v.allowance) == (0, 1, 1)
    assert v.suspects == []  # within its allowance


def test_a_kill_after_the_answer_allows_nothing(tmp_path):
    log = executions_file(tmp_path, ["start a 100.1 n1", "end a 100.6 n1", "start a 101.0 n2", "end a 101.5 n2"])
    v = check([record("a", answered_at=100.7)], log, killed={"n1": 102.0})
    assert (v.duplicated, v.allowance) == (1, 0)
    assert v.suspects == ["a"]


def test_two_answers_that_differ_are_changed(tmp_path):
    log = executions_file(tmp_path, ["start a 100.1 n1", "end a 100.6 n1"])
    v = check([record("a", answered_at=100.7, recheck="something else")], log, killed={})
    assert (v.changed, v.suspects) == (1, ["a"])
    assert check([record("b", answered_at=100.7, answer="not b's value")], log, killed={}).changed == 1


def test_no_answer_by_the_deadline_is_unanswered_not_lost(tmp_path):
    log = executions_file(tmp_path, ["start a 100.1 n1", "end a 100.6 n1", "start a 106.0 n2"])
    v = check([record("a")], log, killed={})
    assert (v.answered, v.unanswered, v.lost, v.duplicated) == (0, 1, 0, 1)
