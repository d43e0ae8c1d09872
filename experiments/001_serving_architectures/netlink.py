"""A client on "another host": a network namespace joined to this one by a veth pair capped with tc.

    with veth_link("1gbit") as link:
        server binds link.host_ip (this namespace); the client runs as link.exec([...])

Both ends of the pair get a token-bucket filter (tc tbf) at the given rate, so requests and
responses each cross a link of that bandwidth. Everything (namespace, veth pair, qdiscs) is removed
on exit, also after an error or Ctrl-C. Needs root and iproute2 (`ip`, `tc`); `missing()` says what
is lacking instead of failing half-way.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass


@dataclass(frozen=True)
class Link:
    namespace: str
    host_if: str
    client_if: str
    host_ip: str
    client_ip: str
    rate: str

    def exec(self, command: list[str]) -> list[str]:
        """The command line that runs `command` on the client side of the link."""
        return ["ip", "netns", "exec", self.namespace, *command]


def _run(*args: str) -> None:
    subprocess.run(args, check=True, capture_output=True, text=True, timeout=30)


def missing() -> str | None:
    """Why a link cannot be made here (not root, no iproute2, namespaces not allowed), or None."""
    if os.geteuid() != 0:
        return "needs root (network namespaces and tc)"
    for tool in ("ip", "tc"):
        if shutil.which(tool) is None:
            return f"`{tool}` is not installed (apt-get install iproute2)"
    probe = f"pmprobe{os.getpid()}"
    try:
        _run("ip", "netns", "add", probe)
    except (subprocess.CalledProcessError, subprocess.TimeoutExpired, OSError) as exc:
        return f"cannot create a network namespace ({getattr(exc, 'stderr', '') or exc})".strip()
    finally:
        subprocess.run(["ip", "netns", "del", probe], capture_output=True, timeout=30)
    return None


def rate_bits(rate: str) -> float:
    """'5gbit' -> 5e9 (tc's units: bit, kbit, mbit, gbit)."""
    match = re.fullmatch(r"(\d+(?:\.\d+)?)(bit|kbit|mbit|gbit)", rate.strip().lower())
    if not match:
        raise ValueError(f"rate {rate!r}: write it as tc does, e.g. 1gbit or 500mbit")
    return float(match.group(1)) * {"bit": 1, "kbit": 1e3, "mbit": 1e6, "gbit": 1e9}[match.group(2)]


@contextlib.contextmanager
def veth_link(rate: str = "1gbit", tag: str | None = None) -> Iterator[Link]:
    tag = tag or str(os.getpid() % 100000)
    subnet = f"10.77.{os.getpid() % 250}"
    link = Link(f"pm-client-{tag}", f"pmh{tag}"[:15], f"pmc{tag}"[:15], f"{subnet}.1", f"{subnet}.2", rate)
    # tbf needs a bucket of at least one timer tick of traffic; 10 ms of it is plenty.
    burst = max(int(rate_bits(rate) / 8 / 100), 64 * 1024)
    qdisc = ["root", "tbf", "rate", rate, "burst", str(burst), "latency", "50ms"]
    try:
        _run("ip", "netns", "add", link.namespace)
        _run("ip", "link", "add", link.host_if, "type", "veth", "peer", "name", link.client_if)
        _run("ip", "link", "set", link.client_if, "netns", link.namespace)
        _run("ip", "addr", "add", f"{link.host_ip}/24", "dev", link.host_if)
        _run("ip", "link", "set", link.host_if, "up")
        _run(*link.exec(["ip", "addr", "add", f"{link.client_ip}/24", "dev", link.client_if]))
        _run(*link.exec(["ip", "link", "set", link.client_if, "up"]))
        _run(*link.exec(["ip", "link", "set", "lo", "up"]))
        _run("tc", "qdisc", "add", "dev", link.host_if, *qdisc)
        _run(*link.exec(["tc", "qdisc", "add", "dev", link.client_if, *qdisc]))
        yield link
    finally:
        # Deleting the namespace deletes its end of the pair, and with it the other end and both qdiscs.
        subprocess.run(["ip", "netns", "del", link.namespace], capture_output=True, timeout=30)
        subprocess.run(["ip", "link", "del", link.host_if], capture_output=True, timeout=30)


def leftovers(link: Link) -> list[str]:
    """What of `link` still exists (for checks after tear-down)."""
    found = []
    namespaces = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, timeout=30).stdout
    if any(line.split()[0] == link.namespace for line in namespaces.splitlines() if line.strip()):
        found.append(f"namespace {link.namespace}")
    if subprocess.run(["ip", "link", "show", link.host_if], capture_output=True, timeout=30).returncode == 0:
        found.append(f"interface {link.host_if}")
    return found
