"""S3 and S3-compatible object stores (s3fs): Spark reaches them as ``s3a://``; locks are
leases by S3's conditional writes (``If-None-Match: *``, ``If-Match``), refused on a store that
does not honour them.

A lease is a small JSON object naming its holder and when it expires. It is taken by a
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
import posixpath
import socket
import threading
import time
import uuid
from datetime import datetime, timezone
from typing import Protocol

from ..errors import BucketNotFoundError, LockHeldError, LockUnsupportedError
from .base import HeldLock
from .remote import ObjectStorage

log = logging.getLogger("wlcore.storage.lease")  # the lease's lines

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


_honours: dict[str, bool] = {}  # bucket -> whether it honours If-None-Match (asked once a process)
_honours_lock = threading.Lock()


class S3Storage(ObjectStorage):
    """An S3 or S3-compatible bucket through s3fs."""

    s3 = True

    def __init__(self, fs) -> None:
        super().__init__(fs)
        self._buckets: set[str] = set()  # buckets seen to exist

    def read_bytes(self, path: str) -> bytes:
        """The whole object in one GET (s3fs's ``cat_file`` asks for its size first, a HEAD, to
        split big objects into ranges; the files read here are small: commits, manifests, state
        files). An object replaced while it is read gives the old or the new contents whole.

        Args:
            path (str): the object (``s3://bucket/key``).

        Returns:
            bytes: its contents.

        Raises:
            FileNotFoundError: it is not there.
        """
        return self.fs.cat_file(path, max_concurrency=1)

    def makedirs(self, path: str) -> None:
        """Nothing to make on S3 (a folder is a prefix of keys), once its bucket exists: s3fs
        would create a missing bucket (or fail with the store's raw error); it is refused.

        Args:
            path (str): the folder (``s3://bucket/key``).

        Raises:
            BucketNotFoundError: the bucket does not exist, or the credentials cannot see it.
        """
        self.require_bucket(path)
        super().makedirs(path)

    def require_bucket(self, path: str) -> None:
        """Check that the bucket of ``path`` exists (asked once a process per bucket).

        Args:
            path (str): a URL or ``bucket/key`` in the bucket.

        Raises:
            BucketNotFoundError: it does not exist, or the credentials cannot see it.
        """
        bucket = self.fs.split_path(path)[0]
        if bucket in self._buckets:
            return
        try:
            found = self.fs.exists(bucket)
        except PermissionError:
            found = False
        if not found:
            raise BucketNotFoundError(
                f"the bucket {bucket} does not exist (or the credentials of storage.s3 cannot see it): "
                f"create the bucket first (e.g. aws s3 mb s3://{bucket}), or name an existing one"
            )
        self._buckets.add(bucket)

    def isdir(self, path: str) -> bool:
        """True when some key starts with ``<path>/``: one ListObjectsV2 asking for one key (s3fs's
        ``isdir`` lists the whole folder: every page of a long Delta log, at every scan).

        Args:
            path (str): the folder (``s3://bucket/key``).

        Returns:
            bool: the folder holds an object (a bucket: it exists); False when missing.
        """
        bucket, key, _version = self.fs.split_path(path)
        if not key:
            return self.fs.isdir(path)
        try:
            page = self.fs.call_s3("list_objects_v2", Bucket=bucket, Prefix=key.rstrip("/") + "/", MaxKeys=1)
        except FileNotFoundError:  # no such bucket
            return False
        return bool(page.get("KeyCount") or page.get("Contents"))

    def listdir_after(self, path: str, after: str) -> list[str]:
        """The keys directly in the folder ``path`` after ``<path>/<after>``: a ListObjectsV2 with
        ``StartAfter`` (a thousand names a request), so a long Delta log read up to a version
        costs one request, not one for every thousand commits and checksums it holds.

        Args:
            path (str): the folder (``s3://bucket/key``).
            after (str): a base name (it need not exist).

        Returns:
            list[str]: the base names after it, sorted (files and folders); empty when none.
        """
        bucket, key, _version = self.fs.split_path(path)
        prefix = key.rstrip("/") + "/"
        names: list[str] = []
        token = None
        while True:
            kwargs = {"Bucket": bucket, "Prefix": prefix, "Delimiter": "/", "StartAfter": prefix + after}
            if token:
                kwargs["ContinuationToken"] = token
            page = self.fs.call_s3("list_objects_v2", **kwargs)
            names += [o["Key"][len(prefix) :] for o in page.get("Contents", [])]
            names += [p["Prefix"][len(prefix) :].rstrip("/") for p in page.get("CommonPrefixes", [])]
            token = page.get("NextContinuationToken")
            if not page.get("IsTruncated") or not token:
                break
        return sorted(n for n in names if n and n > after)

    def uri(self, path: str) -> str:
        """``s3a://bucket/key``: the URL Spark's S3A filesystem reads.

        Args:
            path (str): ``s3://bucket/key``, ``s3a://bucket/key`` or ``bucket/key``.

        Returns:
            str: ``s3a://bucket/key``.
        """
        return "s3a://" + (path.split("://", 1)[1] if "://" in path else path.lstrip("/"))

    def url(self, path: str) -> str:
        """``s3://bucket/key`` (a path without a scheme gets ``s3://``).

        Args:
            path (str): ``bucket/key`` or a URL (returned as it is).

        Returns:
            str: the URL s3fs opens again.
        """
        if "://" in path:
            return path
        return f"s3://{path.lstrip('/')}"

    # conditional writes (ConditionalStore) ----------------------
    def put_if_absent(self, path: str, data: bytes) -> str | None:
        """Create ``path`` with a conditional PUT (``If-None-Match: *``).

        Args:
            path (str): the object.
            data (bytes): its contents.

        Returns:
            str | None: the new object's ETag; None when the object exists.
        """
        try:
            return self.fs.pipe_file(path, data, mode="create")["ETag"]
        except FileExistsError:
            return None

    def put_if_match(self, path: str, data: bytes, etag: str) -> str | None:
        """Replace ``path`` if its ETag is ``etag`` (a PUT with ``If-Match``).

        Args:
            path (str): the object.
            data (bytes): its new contents.
            etag (str): the ETag the object must still have.

        Returns:
            str | None: the new ETag; None when the object changed (412 PreconditionFailed) or went.

        Raises:
            OSError: any other failure of the store.
        """
        try:
            return self.fs.pipe_file(path, data, IfMatch=etag)["ETag"]
        except FileNotFoundError:
            return None
        except OSError as exc:
            if _precondition_failed(exc):
                return None
            raise

    def delete_if_match(self, path: str, etag: str) -> bool:
        """Delete ``path`` if its ETag is ``etag`` (a DELETE with ``If-Match``).

        Args:
            path (str): the object.
            etag (str): the ETag the object must still have.

        Returns:
            bool: True when deleted; False when it changed or went.

        Raises:
            OSError: any other failure of the store.
        """
        bucket, key, _ = self.fs.split_path(path)
        try:
            self.fs.call_s3("delete_object", Bucket=bucket, Key=key, IfMatch=etag)
        except FileNotFoundError:
            return False
        except OSError as exc:
            if _precondition_failed(exc):
                return False
            raise
        finally:
            self.fs.invalidate_cache(path)
        return True

    def read_with_etag(self, path: str) -> tuple[bytes, str] | None:
        """The object and an ETag no newer than what was read (the ETag is asked first, so a
        replace conditional on it fails if the object changed in between).

        Args:
            path (str): the object.

        Returns:
            tuple[bytes, str] | None: ``(contents, ETag)``; None when the object is missing.
        """
        try:
            etag = self.fs.info(path)["ETag"]
            return self.fs.cat_file(path), etag
        except FileNotFoundError:
            return None

    def append_text(self, path: str, text: str) -> None:
        """Reads the object with its ETag and replaces it with ``text`` added, on condition
        that it is unchanged (``If-Match``; a new object: ``If-None-Match: *``); read again
        when another writer came first. A bucket without conditional writes gets
        :meth:`RemoteStorage.append_text`'s read-modify-write."""
        if not self.honours_conditional_writes(path):
            super().append_text(path, text)
            return
        data = text.encode("utf-8")
        while True:  # a try fails only when another append succeeded: every round, one goes in
            got = self.read_with_etag(path)
            if got is None:
                if self.put_if_absent(path, data) is not None:
                    return
            elif self.put_if_match(path, got[0] + data, got[1]) is not None:
                return

    def honours_conditional_writes(self, path: str) -> bool:
        """True when the bucket of ``path`` refuses a second create-if-absent of one key
        (some S3-compatible stores ignore ``If-None-Match`` and would let two holders in);
        asked once a process per bucket with a probe object beside ``path``, deleted after.

        Args:
            path (str): an object of the bucket (the probe is written in its folder).

        Returns:
            bool: the bucket honours ``If-None-Match: *`` (False too when the probe fails).
        """
        bucket = self.fs.split_path(path)[0]
        with _honours_lock:
            if bucket not in _honours:
                probe = posixpath.join(posixpath.dirname(path), f".wlc-lease-probe-{uuid.uuid4().hex}")
                try:
                    first = self.put_if_absent(probe, b"probe")
                    second = self.put_if_absent(probe, b"probe") if first is not None else "failed"
                except OSError:  # e.g. NotImplemented from a store without conditional writes
                    first, second = None, "failed"
                finally:
                    if self.fs.exists(probe):
                        self.fs.rm_file(probe)
                _honours[bucket] = first is not None and second is None
            return _honours[bucket]

    def lock(self, path: str, *, blocking: bool, timeout: float | None = None, what: str) -> HeldLock:
        """A lease (:class:`Lease`, :data:`LEASE_SECONDS`
        long, renewed while held) at ``path``; see :meth:`Storage.lock`.

        Args:
            path (str): the lease object.
            blocking (bool): wait for another holder to let go (False: one try).
            timeout (float | None): seconds to wait when ``blocking``; None waits for ever.
            what (str): what the lock guards, written into the lease and named by errors.

        Returns:
            HeldLock: the lease, held; release it with ``release()`` or a ``with`` block.

        Raises:
            LockHeldError: another holder's lease is live (and the wait, if any, ran out).
            LockUnsupportedError: the bucket does not honour conditional writes.
        """
        if not self.honours_conditional_writes(path):
            raise LockUnsupportedError(
                f"{what}: the S3 store of {self.url(path)} does not honour conditional writes "
                "(If-None-Match: *), so no lease can be taken there and the work is not done "
                "unlocked; use a store that honours them (AWS S3 does) or a mounted folder"
            )
        return Lease(self, path, what).acquire(blocking=blocking, timeout=timeout)


def _precondition_failed(exc: OSError) -> bool:
    """True when s3fs's OSError stands for S3's 412 PreconditionFailed."""
    response = getattr(exc.__cause__, "response", None) or {}
    return response.get("Error", {}).get("Code") == "PreconditionFailed" or "pre-condition" in str(exc)
