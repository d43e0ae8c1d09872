"""The remote-server experiment's network link: a namespace and a tc-capped veth pair, always torn down.

Skips (saying why) without root, iproute2 or permission to create network namespaces, as on CI.
"""

from __future__ import annotations

import importlib.util
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parents[3] / "experiments" / "001_serving_architectures" / "netlink.py"
_spec = importlib.util.spec_from_file_location("netlink", HERE)
netlink = sys.modules.setdefault("netlink", importlib.util.module_from_spec(_spec))  # dataclasses need it there
_spec.loader.exec_module(netlink)

_why = netlink.missing()
pytestmark = pytest.mark.skipif(_why is not None, reason=f"no network namespaces here: {_why}")


def _echo_server(host: str) -> tuple[socket.socket, threading.Thread]:
    server = socket.socket()
    server.bind((host, 0))
    server.listen(1)
    server.settimeout(20)

    def serve() -> None:
        conn, _ = server.accept()
        with conn:
            conn.sendall(conn.recv(1024).upper())

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    return server, thread


@pytest.mark.integration
def test_client_namespace_reaches_the_host_across_a_capped_link():
    with netlink.veth_link("1gbit", tag="t1") as link:
        qdisc = subprocess.run(["tc", "qdisc", "show", "dev", link.host_if], capture_output=True, text=True).stdout
        assert "tbf" in qdisc and "1Gbit" in qdisc
        server, thread = _echo_server(link.host_ip)
        port = server.getsockname()[1]
        client = (
            f"import socket; s = socket.create_connection(('{link.host_ip}', {port}), timeout=10); "
            "s.sendall(b'ping'); print(s.recv(16).decode())"
        )
        done = subprocess.run(link.exec([sys.executable, "-c", client]), capture_output=True, text=True, timeout=30)
        thread.join(10)
        server.close()
        assert done.stdout.strip() == "PING", done.stderr
        # The namespace has no other way out: its only address is the link's.
        addresses = subprocess.run(link.exec(["ip", "-o", "-4", "addr"]), capture_output=True, text=True).stdout
        assert link.client_ip in addresses and "127.0.0.1" in addresses
    assert netlink.leftovers(link) == []


@pytest.mark.integration
def test_link_is_torn_down_after_an_error():
    with pytest.raises(RuntimeError):
        with netlink.veth_link("5gbit", tag="t2") as link:
            raise RuntimeError("the experiment failed")
    assert netlink.leftovers(link) == []


def test_rates_are_read_as_tc_writes_them():
    assert netlink.rate_bits("5gbit") == 5e9 and netlink.rate_bits("500mbit") == 5e8
    with pytest.raises(ValueError):
        netlink.rate_bits("5 GB/s")
