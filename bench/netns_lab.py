"""A network lab on one machine for the fault campaign (bench/cluster_faults.py): `NetnsLab(3)`
gives each of three hosts a network namespace of its own, joined by veth links to a bridge in a
hub namespace; one more veth link puts the root namespace (where the KCoral nodes and the load
run) on the same bridge. So a partition is real: a host's packets are dropped by nftables in its
own namespace (nftables), and the kernel's TCP sees what it would see between machines: no
reset, only silence (no netem in this kernel, so no delay or loss rates, only cuts).

    lab = NetnsLab(3)                  # 10.X.Y.1 = the root namespace, 10.X.Y.11.. the hosts
    lab.wrap(0, ["nats-server", ...])  # the command run inside host 0's namespace
    lab.isolate([0], [1, 2])           # host 0 hears neither 1 nor 2, and they not it
    lab.isolate_root([0, 1, 2])        # the hosts hear nothing from the root namespace
    lab.heal()
    lab.remove()                       # also at exit (atexit), and on SIGTERM through SystemExit

Every name holds this process's pid, so two labs never meet; `remove()` deletes by name
exactly what this lab made. Needs root, `ip` and `nft` (Debian nftables); a RuntimeError says
which is missing or what the kernel refused.
"""

from __future__ import annotations

import atexit
import contextlib
import ipaddress
import os
import shutil
import subprocess

TABLE = "kcoral_faults"


def _run(*command: str, check: bool = True) -> subprocess.CompletedProcess:
    done = subprocess.run(command, capture_output=True, text=True, timeout=30)
    if check and done.returncode != 0:
        raise RuntimeError(f"{' '.join(command)}: {done.stderr.strip() or done.stdout.strip()}")
    return done


def _free_subnet() -> ipaddress.IPv4Network:
    """A /24 in 10.0.0.0/8 that no address of the root namespace is in, chosen by the pid."""
    taken = _run("ip", "-4", "-o", "addr").stdout
    pid = os.getpid()
    for attempt in range(256):
        third, fourth = (pid + attempt * 7919) % 250 + 1, (pid // 250 + attempt) % 250 + 1
        net = ipaddress.ip_network(f"10.{third}.{fourth}.0/24")
        if f" 10.{third}.{fourth}." not in taken:
            return net
    raise RuntimeError("no free 10.x.y.0/24 for the lab")


class NetnsLab:
    def __init__(self, hosts: int):
        if os.geteuid() != 0:
            raise RuntimeError("the network lab needs root (network namespaces, veth links, nftables)")
        for tool, package in (("ip", "iproute2"), ("nft", "nftables")):
            if shutil.which(tool) is None:
                raise RuntimeError(f"`{tool}` not found: apt-get install {package}")
        tag = f"kf{os.getpid()}"
        self.hub = f"{tag}-hub"
        self.namespaces = [f"{tag}-h{i}" for i in range(hosts)]
        self.root_link = f"{tag}r"  # interface names: 15 characters at most
        self.host_links = [f"{tag}h{i}" for i in range(hosts)]  # the hub's end of host i's link
        net = _free_subnet()
        self.prefix = net.prefixlen
        self.root_address = str(net.network_address + 1)
        self.addresses = [str(net.network_address + 11 + i) for i in range(hosts)]
        self._made_namespaces: list[str] = []
        self._made_root_link = False
        atexit.register(self.remove)
        try:
            self._build()
        except BaseException:
            self.remove()
            raise

    def _build(self) -> None:
        for ns in [self.hub, *self.namespaces]:
            _run("ip", "netns", "add", ns)
            self._made_namespaces.append(ns)
            _run("ip", "-n", ns, "link", "set", "lo", "up")
        _run("ip", "-n", self.hub, "link", "add", "br0", "type", "bridge")
        _run("ip", "-n", self.hub, "link", "set", "br0", "up")
        # The root's link: made in the root namespace, its far end moved into the hub.
        _run("ip", "link", "add", self.root_link, "type", "veth", "peer", "name", self.root_link + "p")
        self._made_root_link = True
        self._attach(self.root_link + "p")
        _run("ip", "addr", "add", f"{self.root_address}/{self.prefix}", "dev", self.root_link)
        _run("ip", "link", "set", self.root_link, "up")
        for ns, link, address in zip(self.namespaces, self.host_links, self.addresses):
            _run("ip", "-n", self.hub, "link", "add", link, "type", "veth", "peer", "name", "eth0", "netns", ns)
            _run("ip", "-n", self.hub, "link", "set", link, "master", "br0")
            _run("ip", "-n", self.hub, "link", "set", link, "up")
            _run("ip", "-n", ns, "addr", "add", f"{address}/{self.prefix}", "dev", "eth0")
            _run("ip", "-n", ns, "link", "set", "eth0", "up")
            self._reset_rules(ns)

    def _attach(self, link: str) -> None:
        _run("ip", "link", "set", link, "netns", self.hub)
        _run("ip", "-n", self.hub, "link", "set", link, "master", "br0")
        _run("ip", "-n", self.hub, "link", "set", link, "up")

    def wrap(self, host: int, command: list[str]) -> list[str]:
        """`command` as run inside host's namespace."""
        return ["ip", "netns", "exec", self.namespaces[host], *command]

    # Partitions: each host drops, in its own namespace, what comes from or goes to the far
    # side, so a cut is symmetric and other hosts' traffic is untouched.

    def _reset_rules(self, ns: str) -> None:
        script = (
            f"table inet {TABLE} {{}}\ndelete table inet {TABLE}\n"
            f"table inet {TABLE} {{\n"
            "  set cut { type ipv4_addr; }\n"
            "  chain input { type filter hook input priority 0; ip saddr @cut drop; }\n"
            "  chain output { type filter hook output priority 0; ip daddr @cut drop; }\n"
            "}\n"
        )
        subprocess.run(["ip", "netns", "exec", ns, "nft", "-f", "-"], input=script, text=True, check=True, timeout=30)

    def _cut(self, host: int, addresses: list[str]) -> None:
        if addresses:
            elements = ", ".join(addresses)
            _run("ip", "netns", "exec", self.namespaces[host], "nft", "add", "element", "inet", TABLE, "cut",
                 f"{{ {elements} }}")  # fmt: skip

    def isolate(self, side: list[int], other: list[int]) -> None:
        """No packet between a host of `side` and a host of `other`."""
        for a in side:
            self._cut(a, [self.addresses[b] for b in other])
        for b in other:
            self._cut(b, [self.addresses[a] for a in side])

    def isolate_root(self, hosts: list[int]) -> None:
        """No packet between these hosts and the root namespace (the KCoral nodes, the load)."""
        for host in hosts:
            self._cut(host, [self.root_address])

    def heal(self) -> None:
        """Every cut gone."""
        for ns in self.namespaces:
            _run("ip", "netns", "exec", ns, "nft", "flush", "set", "inet", TABLE, "cut")

    def remove(self) -> None:
        """Deletes what this lab made, by name; safe to call twice. A namespace goes once no
        process is left in it (the caller stops its hosts' processes first)."""
        if self._made_root_link:
            _run("ip", "link", "del", self.root_link, check=False)  # takes its peer with it
            self._made_root_link = False
        while self._made_namespaces:
            with contextlib.suppress(Exception):
                _run("ip", "netns", "del", self._made_namespaces.pop(), check=False)
