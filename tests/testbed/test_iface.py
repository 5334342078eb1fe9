"""Which interface gloo / NCCL bind to (iface.py): loopback runs, the route to the store, the user's
own GLOO_SOCKET_IFNAME, and the one-line errors. The several-hosts path itself is test_multihost.py."""

from __future__ import annotations

import ipaddress
import json
import os
from pathlib import Path

import pytest

from dispersal.testbed import iface
from dispersal.testbed.iface import TransportError, choose


def _outside() -> tuple[str, str] | None:
    """An interface of this machine with a non-loopback IPv4 address, if any."""
    for name, addrs in iface.interface_addresses().items():
        for a in addrs:
            ip = ipaddress.ip_address(a)
            if ip.version == 4 and not ip.is_loopback and not ip.is_link_local:
                return name, a
    return None


def test_loopback_store_pins_loopback() -> None:
    t = choose("127.0.0.1", environ={})
    assert t.ifname.startswith("lo") and t.address == "127.0.0.1" and t.source == "loopback run"
    assert choose("localhost", environ={}).source == "loopback run"


def test_outside_store_binds_the_interface_that_holds_the_route_source() -> None:
    got = _outside()
    if got is None:
        pytest.skip("no non-loopback IPv4 interface on this machine")
    name, addr = got
    # The store on this host's own outside address: the route's source is that address (Linux picks
    # the destination itself for a local address), and its interface is the one to bind, not lo.
    t = choose(addr, environ={})
    assert (t.ifname, t.address, t.source) == (name, addr, "route to the store")


def test_users_own_variable_wins_and_is_checked() -> None:
    assert choose("203.0.113.7", environ={"GLOO_SOCKET_IFNAME": "lo"}).ifname == "lo"
    with pytest.raises(TransportError, match=r"^GLOO_SOCKET_IFNAME: no interface 'nosuch0' on this host"):
        choose("127.0.0.1", environ={"GLOO_SOCKET_IFNAME": "nosuch0"})


def test_a_route_through_loopback_is_an_error_that_says_what_to_set(monkeypatch: pytest.MonkeyPatch) -> None:
    # What gloo's own choice did on a stock Debian host: the host name at 127.0.1.1.
    monkeypatch.setattr(iface, "route_source", lambda address: "127.0.1.1")
    with pytest.raises(TransportError) as err:
        choose("198.18.0.1", environ={})
    msg = str(err.value)
    assert "\n" not in msg and "loopback (127.0.1.1)" in msg and "set GLOO_SOCKET_IFNAME" in msg


def test_an_unresolvable_store_is_one_line() -> None:
    with pytest.raises(TransportError, match=r"^store: cannot resolve 'no-such-host\.invalid'"):
        choose("no-such-host.invalid", environ={})


def test_pin_exports_the_choice_and_keeps_the_users(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GLOO_SOCKET_IFNAME", "")  # recorded, so teardown restores the real state
    monkeypatch.delenv("GLOO_SOCKET_IFNAME")
    monkeypatch.setenv("NCCL_SOCKET_IFNAME", "mine0")
    t = iface.pin("127.0.0.1")
    assert os.environ["GLOO_SOCKET_IFNAME"] == t.ifname and os.environ["NCCL_SOCKET_IFNAME"] == "mine0"


@pytest.mark.torch
def test_supervisor_refuses_an_address_it_cannot_listen_on_and_a_missing_out(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--host`` that is not this machine's (198.51.100.7, TEST-NET-2) and a decoupled config without
    ``--out`` (where the syncer keeps its outputs): one line each, exit 2, nothing listening.

    In-process (the entry point ``python -m dispersal.testbed.supervisor`` calls, with its argv): the
    check is the command's answer, not the interpreter start-up, which cost two torch imports here.
    Anything but SystemExit(2) (a traceback in the subprocess) propagates and fails the test."""
    pytest.importorskip("torch")
    from dispersal.testbed.config import TestbedConfig
    from dispersal.testbed.supervisor import main

    monkeypatch.setenv("DISPERSAL_RUN_SECRET", "ab" * 32)
    for algorithm, extra, want in (
        ("diloco", ["--host", "198.51.100.7"], "error: --host/--port: cannot listen on 198.51.100.7:29600"),
        ("decoupled", [], "error: --out: decoupled and link_mode 'real'"),
    ):
        cfg = tmp_path / f"{algorithm}.json"
        cfg.write_text(json.dumps(TestbedConfig(algorithm=algorithm, workers=2).to_dict()))
        capsys.readouterr()
        with pytest.raises(SystemExit) as exc:
            main(["--config", str(cfg), *extra])
        err = capsys.readouterr().err
        assert exc.value.code == 2 and err.strip().splitlines() == [err.strip()], err
        assert err.startswith(want), err
