"""Real NATS JetStream servers for the cluster tests: `NatsCluster(tmp, size=3)` starts `size`
nats-server processes on 127.0.0.1 (kcoral.tools.nats_brokers: each syncs before it
acknowledges), routed into one cluster with JetStream on (an R3 cluster survives losing one),
and waits until JetStream has a leader. `stop()` stops each by its pid.
"""

import hashlib
import hmac
import json
import signal
import time

from kcoral.tools.nats_brokers import NatsBrokers
from kcoral.tools.nats_wire import NatsWire  # noqa: F401 - the tests import it from here


# The cluster secret of every test cluster, and the X-KCoral-Peer header a node signs with it.
CLUSTER_SECRET = "test-cluster-secret-0123456789"


def peer_signature(method: str, target: str, secret: str = CLUSTER_SECRET) -> str:
    """X-KCoral-Peer for a request, as cluster/peer_auth.cc signs one."""
    now = str(int(time.time()))
    message = f"{now}\n{method}\n{target}".encode()
    return now + "." + hmac.new(secret.encode(), message, hashlib.sha256).hexdigest()


def cluster_key(idempotency_key: str, tenant: str = "") -> str:
    """The key a node files a request under (server/cluster_entry.cc ClusterKey): the client's
    Idempotency-Key under its tenant ("" without an access key)."""
    return "k-" + hashlib.sha256(f"{tenant}\n{idempotency_key}".encode()).hexdigest()[:48]


class NatsCluster(NatsBrokers):
    """The brokers of one test (or module): `processes[i]` may be killed and set to None by a
    test; `urls` and `flag` name them for the nodes."""


class AuthorizedNats(NatsCluster):
    """One nats-server with a user per node (`password` for each): `reload(user, publish=[...],
    subscribe=[...])` makes it deny that user those subjects (authorization reloaded on SIGHUP),
    `reload(None)` gives every right back. Connections without a user count as `users[0]`'s."""

    def __init__(self, tmp, users: tuple[str, ...], password: str):
        self.users, self.password = users, password
        self.denied: tuple[str | None, dict[str, list[str]]] = (None, {})
        super().__init__(tmp, size=1)

    def _config(self, i, store, route_ports):
        denied_user, rules = self.denied

        def user(name: str) -> str:
            deny = ""
            if name == denied_user:
                deny = ", permissions: {" + ", ".join(f"{k}: {{deny: {json.dumps(v)}}}" for k, v in rules.items()) + "}"
            return f"{{user: {name}, password: {json.dumps(self.password)}{deny}}}"

        users = ", ".join(user(name) for name in self.users)
        return (
            super()._config(i, store, route_ports)
            + f"authorization {{ users: [{users}] }}\nno_auth_user: {self.users[0]}\n"
        )

    def reload(self, user: str | None, **deny: list[str]) -> None:
        """deny: publish=[subjects], subscribe=[subjects]."""
        self.denied = (user, {k: v for k, v in deny.items() if v})
        self.configs[0].write_text(self._config(0, self.stores[0], []))
        self.processes[0].send_signal(signal.SIGHUP)
