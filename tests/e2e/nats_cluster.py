"""Real NATS JetStream servers for the cluster tests: `NatsCluster(tmp, size=3)` starts `size`
nats-server processes on 127.0.0.1 (kcoral.tools.nats_brokers: each syncs before it
acknowledges), routed into one cluster with JetStream on (an R3 cluster survives losing one),
and waits until JetStream has a leader. `stop()` stops each by its pid.
"""

import hashlib
import hmac
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
