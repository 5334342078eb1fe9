"""Which network interface a worker's gloo / NCCL transport binds to on a several-machines run.

gloo and NCCL, left alone, advertise the address the host name resolves to. On a stock Debian host
that is 127.0.1.1 and in a container 127.0.0.1: loopback, which no other machine can reach, so every
peer's ``connectFullMesh`` is refused and the group re-forms until the run times out (issue 33). The
right interface is the one that routes to the store's host: the store is the one address every
worker is already known to reach. The kernel picks it: a UDP socket ``connect``\\ ed to the store (no
packet is sent) gets the source address the routing table would use, and that address's interface
is the one to bind. A user's own ``GLOO_SOCKET_IFNAME`` / ``NCCL_SOCKET_IFNAME`` wins.
"""

from __future__ import annotations

import fcntl
import ipaddress
import os
import socket
import struct
from dataclasses import dataclass
from pathlib import Path

GLOO_ENV = "GLOO_SOCKET_IFNAME"
NCCL_ENV = "NCCL_SOCKET_IFNAME"
SIOCGIFADDR = 0x8915
"""Linux ioctl: the primary IPv4 address of an interface (linux/sockios.h)."""


class TransportError(ValueError):
    """No usable interface for the transport; the message says what to set."""


@dataclass(frozen=True, kw_only=True)
class Transport:
    """The interface gloo / NCCL bind to and its address; ``source`` says why it was chosen."""

    ifname: str
    address: str
    source: str  # "loopback run" | "route to the store" | "GLOO_SOCKET_IFNAME"

    def line(self, who: str, store: str) -> str:
        """The line a process prints when it starts (which address its peers will reach it on)."""
        return f"{who}: gloo/nccl on {self.ifname} ({self.address}, {self.source}); store {store}"


def resolve(host: str) -> str:
    """``host`` as an IP address string (a name is resolved once); TransportError if it does not resolve."""
    try:
        infos = socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)
    except OSError as exc:
        raise TransportError(f"store: cannot resolve {host!r}: {exc.strerror or exc}") from None
    return str(infos[0][4][0])


def route_source(address: str) -> str:
    """The local address the kernel would send from to reach ``address`` (no packet is sent)."""
    family = socket.AF_INET6 if ":" in address else socket.AF_INET
    with socket.socket(family, socket.SOCK_DGRAM) as s:
        try:
            s.connect((address, 9))  # discard port; UDP connect only consults the routing table
        except OSError as exc:
            raise TransportError(
                f"store: no route to {address} ({exc.strerror or exc}); check the network, or set "
                f"{GLOO_ENV} to the interface that reaches the store's host"
            ) from None
        return str(s.getsockname()[0])


def interface_addresses() -> dict[str, list[str]]:
    """Every interface's addresses: IPv4 primary (ioctl SIOCGIFADDR) and IPv6 (/proc/net/if_inet6)."""
    out: dict[str, list[str]] = {name: [] for _, name in socket.if_nameindex()}
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        for name in out:
            try:
                raw = fcntl.ioctl(s.fileno(), SIOCGIFADDR, struct.pack("256s", name.encode()[:15]))
            except OSError:
                continue  # no IPv4 address on it
            out[name].append(socket.inet_ntoa(raw[20:24]))
    v6 = Path("/proc/net/if_inet6")
    if v6.exists():
        for line in v6.read_text().splitlines():
            parts = line.split()
            if len(parts) >= 6 and parts[5] in out:
                out[parts[5]].append(str(ipaddress.IPv6Address(bytes.fromhex(parts[0]))))
    return out


def interface_of(address: str) -> str:
    """The interface that holds ``address``; TransportError if none does."""
    want = ipaddress.ip_address(address)
    for name, addrs in interface_addresses().items():
        if any(ipaddress.ip_address(a) == want for a in addrs):
            return name
    raise TransportError(
        f"store: no interface holds the route's source address {address}; set {GLOO_ENV} "
        f"(and {NCCL_ENV} on GPUs) to the interface that reaches the store's host"
    )


def choose(store_host: str, environ: dict[str, str] | None = None) -> Transport:
    """The transport interface for a run whose store is on ``store_host`` (see the module docstring).

    Loopback store: the loopback interface (a one-machine run). Otherwise the interface of the local
    address that routes to the store. A user's GLOO_SOCKET_IFNAME is checked (it must exist) and kept.
    Raises TransportError (one line, naming what to set) when the store cannot be routed to, or when
    the only route is through loopback while the store is not loopback (peers could never connect)."""
    env = os.environ if environ is None else environ
    addrs = interface_addresses()
    given = env.get(GLOO_ENV)
    if given:
        names = given.split(",")
        missing = [n for n in names if n not in addrs]
        if missing:
            raise TransportError(
                f"{GLOO_ENV}: no interface {missing[0]!r} on this host (have: {', '.join(sorted(addrs))})"
            )
        first = addrs[names[0]]
        return Transport(ifname=given, address=first[0] if first else "?", source=GLOO_ENV)
    target = resolve(store_host)
    if ipaddress.ip_address(target).is_loopback:
        lo = next((n for n in addrs if n.startswith("lo")), "lo")
        return Transport(ifname=lo, address=target, source="loopback run")
    src = route_source(target)
    if ipaddress.ip_address(src).is_loopback:
        raise TransportError(
            f"store: the route to {target} leaves through loopback ({src}), which other hosts cannot "
            f"reach; set {GLOO_ENV} (and {NCCL_ENV} on GPUs) to this host's outside interface"
        )
    return Transport(ifname=interface_of(src), address=src, source="route to the store")


def pin(store_host: str) -> Transport:
    """Choose the interface (:func:`choose`) and export it to gloo and NCCL in this process's
    environment (read when the process group is created). A user's own variables are kept."""
    t = choose(store_host)
    os.environ.setdefault(GLOO_ENV, t.ifname)
    os.environ.setdefault(NCCL_ENV, t.ifname)
    return t
