"""Who may talk to a run: loopback listeners, the per-run secret, HMAC-SHA256 on everything peers send.

* **Listeners bind loopback** unless the user names another address. torch's TCPStore master listens on
  every interface whatever host it is given, so :func:`listen_store` binds the socket itself and hands
  the file descriptor to TCPStore (``master_listen_fd``); the gloo / NCCL transports are pinned to the
  interface that reaches the store, loopback when the store is on loopback (:func:`pin_transport`).
* **The per-run secret** (32 random bytes) is made by the launcher (``run_local``) or read by the
  coordinator of a several-machines run, and reaches workers through the environment
  (``DISPERSAL_RUN_SECRET``, hex) or a file readable by its owner only (``DISPERSAL_RUN_SECRET_FILE``,
  mode 0600), never the command line (other users can read every process's argv).
* **Every message is authenticated** with HMAC-SHA256 (RFC 2104, FIPS 198-1) under that secret: store
  values (:class:`SignedStore`), relay messages and frames (``wire.py``). A value or message whose tag
  does not verify is ignored and reported; it never raises into the training loop.

What this does not do: the store's counters (``add``) cannot carry a tag, so the membership protocol
uses none whose forgery matters (barriers and the generation are signed keys, see membership.py); torch's
own rendezvous keys for gloo are unsigned, so a forger can disturb a group's formation (a denial of
service, bounded by the collective timeout) but every frame and state transfer it could inject fails
its tag. Replays of an old value under the same key are possible, so every value whose freshness
matters carries its own: heartbeats a counter checked to rise (membership.heartbeat_value), the
incarnation a signed claim key that is only ever created (membership.claim_incarnation), frames their
generation, round and sender, the relay's hello the nonce of its connection (netlink.hello_problem).
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
import socket
import stat
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

from dispersal.testbed.iface import Transport, pin

SECRET_ENV = "DISPERSAL_RUN_SECRET"
SECRET_FILE_ENV = "DISPERSAL_RUN_SECRET_FILE"
SECRET_BYTES = 32
"""256-bit key: HMAC-SHA256's block-size-independent security level (RFC 2104 sec. 3)."""
SECRET_FILE_MAX_BYTES = 256
"""Largest run-secret file read (64 hex digits plus whitespace fit many times over)."""
MAC_BYTES = 32
"""HMAC-SHA256 tag length."""


class SecretError(ValueError):
    """The run secret is missing or unsafe (message names the variable or file)."""


def new_secret() -> bytes:
    return secrets.token_bytes(SECRET_BYTES)


def secret_env(secret: bytes) -> dict[str, str]:
    """Environment entries that hand ``secret`` to a child process."""
    return {SECRET_ENV: secret.hex()}


def write_secret_file(path: Path, secret: bytes) -> None:
    """Write the secret (hex) to a new file created with mode 0600."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.fchmod(fd, 0o600)
        os.write(fd, secret.hex().encode())
    finally:
        os.close(fd)


def load_secret(environ: dict[str, str] | None = None) -> bytes:
    """The run secret from ``DISPERSAL_RUN_SECRET`` (hex) or the 0600 file ``DISPERSAL_RUN_SECRET_FILE``.

    Raises SecretError naming the variable when neither is set, the value is not 64 hex digits, or the
    file is readable by group or others."""
    env = os.environ if environ is None else environ
    text = env.get(SECRET_ENV)
    where = SECRET_ENV
    if not text and env.get(SECRET_FILE_ENV):
        path = Path(env[SECRET_FILE_ENV])
        where = f"{SECRET_FILE_ENV} ({path})"
        try:
            mode = path.stat().st_mode
            if mode & (stat.S_IRWXG | stat.S_IRWXO):
                raise SecretError(f"{where}: the secret file must be mode 0600 (is {oct(mode & 0o777)})")
            # Read at most a little more than a secret (64 hex digits, a newline, some spaces): a path
            # pointed at a huge or endless file (/dev/zero) fails fast instead of filling memory.
            with path.open("rb") as fh:
                raw = fh.read(SECRET_FILE_MAX_BYTES + 1)
            if len(raw) > SECRET_FILE_MAX_BYTES:
                raise SecretError(
                    f"{where}: the secret file holds more than {SECRET_FILE_MAX_BYTES} bytes "
                    f"(expected {2 * SECRET_BYTES} hex digits)"
                )
            text = raw.decode("ascii", errors="replace").strip()
        except OSError as exc:
            raise SecretError(f"{where}: {exc.strerror or exc}") from None
    if not text:
        raise SecretError(
            f"{SECRET_ENV}: a run secret is required (64 hex digits, or a 0600 file named by {SECRET_FILE_ENV})"
        )
    try:
        secret = bytes.fromhex(text)
    except ValueError:
        raise SecretError(f"{where}: expected {2 * SECRET_BYTES} hex digits") from None
    if len(secret) != SECRET_BYTES:
        raise SecretError(f"{where}: expected {2 * SECRET_BYTES} hex digits, got {len(text)}")
    return secret


def mac(secret: bytes, *parts: bytes | bytearray | memoryview) -> bytes:
    """HMAC-SHA256 over the parts, each preceded by its 8-byte length (so parts cannot slide)."""
    h = hmac.new(secret, digestmod=hashlib.sha256)
    for p in parts:
        h.update(len(memoryview(p).cast("B")).to_bytes(8, "big"))
        h.update(p)
    return h.digest()


def verify(
    secret: bytes, tag: bytes | bytearray | memoryview, *parts: bytes | bytearray | memoryview
) -> bool:
    """Constant-time check of an HMAC-SHA256 tag."""
    return len(tag) == MAC_BYTES and hmac.compare_digest(bytes(tag), mac(secret, *parts))


# ---------------------------------------------------------------------- listeners
def listen_store(host: str, port: int, timeout_s: float = 30.0) -> Any:
    """A TCPStore master that listens on ``host`` only (torch's own master binds every interface).

    The socket is bound here and its descriptor handed over (``master_listen_fd``, libuv backend);
    the store owns and closes it. ``port`` 0 picks a free one (``store.port``)."""
    import torch.distributed as dist

    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(128)
        bound_port = sock.getsockname()[1]
        store = dist.TCPStore(  # type: ignore[attr-defined]  # torch re-export
            host,
            bound_port,
            is_master=True,
            wait_for_workers=False,
            timeout=timedelta(seconds=timeout_s),
            master_listen_fd=sock.fileno(),
            use_libuv=True,
        )
    except BaseException:
        sock.close()
        raise
    sock.detach()  # the store owns the descriptor now
    return store


def pin_transport(store_host: str) -> Transport:
    """Bind gloo and NCCL to the interface that reaches the store (iface.pin): loopback when the
    run is on loopback, else the interface whose address routes to the store's host (left alone they
    pick the address the hostname resolves to, loopback on many hosts, which peers cannot reach).
    A user's own GLOO_SOCKET_IFNAME / NCCL_SOCKET_IFNAME wins. Returns the iface.Transport;
    raises iface.TransportError (one line, says what to set) when there is no usable interface."""
    return pin(store_host)


# ---------------------------------------------------------------------- the signed store
class SignedStore:
    """Store values carry an HMAC-SHA256 tag over (key, value); a value whose tag fails is forged.

    Wraps a TCPStore client. ``get`` returns the verified value or None (and reports the key once
    through ``on_forged``); ``raw`` is the TCPStore itself (torch's rendezvous, counters)."""

    def __init__(self, raw: Any, secret: bytes, on_forged: Callable[[str], None] | None = None) -> None:
        self.raw, self.secret, self.on_forged = raw, secret, on_forged
        self._reported: set[tuple[str, bytes]] = set()

    def seal(self, key: str, value: bytes) -> bytes:
        """What ``set`` stores under ``key``: the tag over (key, value), then the value."""
        return mac(self.secret, key.encode(), value) + value

    def set(self, key: str, value: str | bytes) -> None:
        data = value.encode() if isinstance(value, str) else value
        self.raw.set(key, self.seal(key, data))

    def _open(self, key: str, sealed: bytes) -> bytes | None:
        tag, value = sealed[:MAC_BYTES], sealed[MAC_BYTES:]
        if verify(self.secret, tag, key.encode(), value):
            return value
        seen = (key, bytes(sealed[:64]))
        if seen not in self._reported:
            self._reported.add(seen)
            if self.on_forged is not None:
                self.on_forged(key)
        return None

    def get(self, key: str) -> bytes | None:
        """The verified value, or None when the key is absent or its tag does not verify."""
        if not self.raw.check([key]):
            return None
        return self._open(key, self.raw.get(key))

    def get_str(self, key: str) -> str | None:
        v = self.get(key)
        return None if v is None else v.decode(errors="replace")

    def get_int(self, key: str) -> int | None:
        v = self.get(key)
        try:
            return None if v is None else int(v)
        except ValueError:
            return None

    def valid(self, key: str) -> bool:
        """The key is present with a valid tag."""
        return self.get(key) is not None

    def all_valid(self, keys: list[str]) -> bool:
        return self.raw.check(keys) and all(self.get(k) is not None for k in keys)

    def wait_valid(self, keys: list[str], timeout_s: float) -> bool:
        """Wait up to ``timeout_s`` for every key to be present and genuine."""
        try:
            self.raw.wait(keys, timedelta(seconds=timeout_s))
        except Exception:  # torch raises its own DistStoreError (a RuntimeError) on timeout
            return False
        return self.all_valid(keys)

    def delete(self, key: str) -> None:
        self.raw.delete_key(key)
