"""Invariants of every verified benchmark report (issue 40), for any GPU test to apply.

`assert_report_invariants(timing)` checks one result dict that carries `integrity`;
`assert_results_invariants(value)` walks a program's results (dicts, lists, tuples) and checks
every such dict, a paired result's `reference` included. The `report_invariants` fixture wraps
`kcoral.Client.execute` (and `AsyncClient.execute`) so that every result a test receives is
checked; tests/gpu/conftest.py turns it on for the whole directory with

    from invariants import report_invariants  # noqa: F401 - autouse: every benchmark report is checked
"""

from __future__ import annotations

import functools

import pytest


def assert_report_invariants(timing: dict) -> None:
    """For a verified report: trusted means nothing flagged and nothing left unchecked, and a
    trusted median is never below the floor that the bytes the call changed impose; a median of
    0 is trusted only when the checked outputs have no elements."""
    integrity = timing.get("integrity")
    if not isinstance(integrity, dict) or integrity.get("verified") is not True:
        return  # a hand-made or unverified dict: never trusted (the server says so)
    if integrity.get("trusted") is not True:
        return
    assert integrity.get("flags") == [], f"trusted with flags: {integrity.get('flags')}"
    assert (
        integrity.get("outputs_unchecked", []) == []
    ), f"trusted with outputs unchecked: {integrity.get('outputs_unchecked')}"
    median = timing.get("latency_ms_median")
    floor = integrity.get("floor")
    if isinstance(floor, dict) and isinstance(median, (int, float)):
        assert median >= floor["floor_ms"], f"trusted median {median} ms below the floor {floor}"
        if median == 0:
            assert floor["checked_bytes"] == 0, f"trusted median of 0 for outputs with elements: {floor}"


def assert_results_invariants(value) -> int:
    """Checks every dict with an `integrity` member in `value`, recursively; returns how many."""
    checked = 0
    if isinstance(value, dict):
        if isinstance(value.get("integrity"), dict):
            assert_report_invariants(value)
            checked += 1
        for key, item in value.items():
            if key != "integrity":
                checked += assert_results_invariants(item)
    elif isinstance(value, (list, tuple)):
        for item in value:
            checked += assert_results_invariants(item)
    return checked


@pytest.fixture(autouse=True)
def report_invariants(monkeypatch):
    """Every ProgramResult a test gets through Client/AsyncClient.execute has its benchmark
    reports checked (the FAILED ones' partial results too)."""
    from kcoral import AsyncClient, Client

    genuine = Client.execute

    @functools.wraps(genuine)
    def execute(self, program, *args, **kwargs):
        result = genuine(self, program, *args, **kwargs)
        assert_results_invariants(result.results)
        return result

    genuine_async = AsyncClient.execute

    @functools.wraps(genuine_async)
    async def execute_async(self, program, *args, **kwargs):
        result = await genuine_async(self, program, *args, **kwargs)
        assert_results_invariants(result.results)
        return result

    monkeypatch.setattr(Client, "execute", execute)
    monkeypatch.setattr(AsyncClient, "execute", execute_async)
    yield
