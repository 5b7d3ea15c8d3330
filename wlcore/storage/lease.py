"""A lock on an object store: a lease object taken and renewed by conditional writes.

The lease is a small JSON object naming its holder and when it expires. It is taken by a
create-if-absent PUT (``If-None-Match: *``), renewed every third of its life by a PUT that
replaces it only if it is still the one this holder wrote (``If-Match: <ETag>``), and
released by a delete with the same condition; an expired lease (its holder died) is taken
over by the same conditional replace, so two contenders never both win. A lease whose holder
ran on this machine and whose process is gone (killed, crashed) is taken over at once, as the
OS lets go of a file lock when its process ends; the machine is named by host name, boot id
and process namespace, so a holder elsewhere is never judged by a local process id. This is the lock
pattern AWS describes for S3 conditional writes (and Litestream's lease on object stores).
Expiry compares the holder's clock with the reader's: hosts must agree within
:data:`LEASE_SECONDS`.
"""

from __future__ import annotations

import functools
import json
import logging
import os
import socket
import threading
import time
import uuid
from datetime import datetime, timezone
from typing import Protocol

from ..errors import LockHeldError
from .lock import HeldLock

log = logging.getLogger("wlcore.storage.lease")

LEASE_SECONDS = 30.0  # a lease not renewed for this long is taken over
POLL_SECONDS = 0.5  # between two tries of a blocking take


class ConditionalStore(Protocol):
    """The conditional writes a lease needs (implemented by :class:`wlcore.storage.s3.S3Storage`)."""

    def put_if_absent(self, path: str, data: bytes) -> str | None:
        """Create ``path`` (``If-None-Match: *``).

        Args:
            path (str): the object.
            data (bytes): its contents.

        Returns:
            str | None: its ETag, or None when it exists.
        """

    def put_if_match(self, path: str, data: bytes, etag: str) -> str | None:
        """Replace ``path`` if its ETag is ``etag`` (``If-Match``).

        Args:
            path (str): the object.
            data (bytes): its new contents.
            etag (str): the ETag it must still have.

        Returns:
            str | None: the new ETag, or None when it changed or went.
        """

    def delete_if_match(self, path: str, etag: str) -> bool:
        """Delete ``path`` if its ETag is ``etag``.

        Args:
            path (str): the object.
            etag (str): the ETag it must still have.

        Returns:
            bool: False when it changed or went.
        """

    def read_with_etag(self, path: str) -> tuple[bytes, str] | None:
        """The object and the ETag of what was read.

        Args:
            path (str): the object.

        Returns:
            tuple[bytes, str] | None: ``(contents, ETag)``, None when it is not there.
        """


class Lease:
    """The lease at ``path`` of ``store``, for ``what`` (a few words for messages).

    Args:
        store (ConditionalStore): the object store.
        path (str): the lease object.
        what (str): what the lease guards.
        seconds (float): its life in seconds without renewal.
    """

    def __init__(self, store: ConditionalStore, path: str, what: str, seconds: float = LEASE_SECONDS):
        self.store, self.path, self.what, self.seconds = store, path, what, seconds
        self.token = uuid.uuid4().hex
        self._etag: str | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def acquire(self, *, blocking: bool, timeout: float | None) -> HeldLock:
        """Take the lease, waiting (polled every :data:`POLL_SECONDS`) when ``blocking``.

        Args:
            blocking (bool): wait for another holder to let go (False: one try).
            timeout (float | None): seconds to wait when ``blocking``; None waits for ever.

        Returns:
            HeldLock: held and renewed in the background (every third of its life) until released.

        Raises:
            LockHeldError: another holder's lease is live (after ``timeout`` seconds when blocking).
            OSError: the store cannot be reached.
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            holder = self._try()
            if holder is None:
                break
            if not blocking or (deadline is not None and time.monotonic() >= deadline):
                raise LockHeldError(self.path, self.what, holder)
            time.sleep(POLL_SECONDS)  # polling the store for the holder to let go
        self._thread = threading.Thread(target=self._renew, name=f"lease {self.path}", daemon=True)
        self._thread.start()
        return HeldLock(self.path, self._release)

    def _record(self) -> bytes:
        return json.dumps(
            {
                "holder": self.token,
                "host": socket.gethostname(),
                "machine": machine(),
                "pid": os.getpid(),
                "what": self.what,
                "expires": time.time() + self.seconds,
                "write": uuid.uuid4().hex,
            }
        ).encode()  # every write differs: its ETag too

    def _try(self) -> str | None:
        """One try: None when taken, else who holds it."""
        etag = self.store.put_if_absent(self.path, self._record())
        if etag is not None:
            self._etag = etag
            return None
        found = self.store.read_with_etag(self.path)
        if found is None:
            return self._try()  # released meanwhile
        data, etag = found
        try:
            rec = json.loads(data)
            expires = float(rec["expires"])
        except (ValueError, KeyError, TypeError):
            rec, expires = {}, 0.0  # unreadable: as good as expired
        if expires < time.time() or _dead_here(rec):
            new = self.store.put_if_match(self.path, self._record(), etag)
            if new is not None:
                log.warning(
                    "%s: took over the lease %s of %s (expired, or its process is gone)",
                    self.what,
                    self.path,
                    _holder(rec),
                )
                self._etag = new
                return None
        return _holder(rec)

    def _renew(self) -> None:
        while not self._stop.wait(self.seconds / 3):
            try:
                etag = self.store.put_if_match(self.path, self._record(), self._etag or "")
            except OSError as exc:
                log.warning("%s: could not renew the lease %s (%s); trying again", self.what, self.path, exc)
                continue
            if etag is None:
                log.error("%s: lost the lease %s (it expired and another process took it)", self.what, self.path)
                return
            self._etag = etag

    def _release(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        if self._etag is not None and not self.store.delete_if_match(self.path, self._etag):
            log.error("%s: the lease %s was no longer ours when released", self.what, self.path)


def _holder(rec: dict) -> str:
    if not rec:
        return ""
    until = datetime.fromtimestamp(float(rec.get("expires", 0)), timezone.utc).isoformat(timespec="seconds")
    return f"{rec.get('what', '?')} on {rec.get('host', '?')}, process {rec.get('pid', '?')}, lease until {until}"


@functools.lru_cache(maxsize=1)
def machine() -> str:
    """This machine and process namespace: host name, kernel boot id (Linux), pid namespace
    (Linux), so that process ids in a lease are compared only where they mean the same process."""
    parts = [socket.gethostname()]
    try:
        with open("/proc/sys/kernel/random/boot_id") as fh:
            parts.append(fh.read().strip())
        parts.append(os.readlink("/proc/self/ns/pid"))
    except OSError:
        return ""  # no way to tell: leases of this machine expire as any other
    return "/".join(parts)


def _dead_here(rec: dict) -> bool:
    """True when the lease's holder ran on this machine and its process is gone."""
    here = machine()
    if not here or rec.get("machine") != here:
        return False
    try:
        os.kill(int(rec["pid"]), 0)
    except ProcessLookupError:
        return True
    except (OSError, KeyError, TypeError, ValueError):
        return False
    return False
