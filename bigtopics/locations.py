"""Where a Zarr group bigtopics reads or writes (a store, a model's tables, document topics) lives.

A *location* is a local directory (a path, or a file:// URL), a URL of any fsspec filesystem
(s3://bucket/prefix/books.zarr, gs://..., memory://...), or a zarr store object
(zarr.abc.store.Store). `locate` makes a Location of any of them. A URL's credentials and
endpoint come from the standard environment of its filesystem (for s3://: AWS_ACCESS_KEY_ID,
AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN, AWS_DEFAULT_REGION, AWS_PROFILE, AWS_ENDPOINT_URL or
AWS_ENDPOINT_URL_S3, as botocore reads them) and from `storage_options`, the keyword arguments of
the fsspec filesystem (e.g. {"endpoint_url": ..., "key": ..., "secret": ..., "anon": True} for
s3fs). fsspec and the filesystem's package (s3fs, gcsfs, ...) are imported only for a URL.

Errors of object storage become one line each, through the exception types the CLI reports:
FileNotFoundError (a missing bucket or prefix), PermissionError (wrong or missing credentials),
StoreError (an unreachable endpoint, a filesystem whose package is not installed, any other
failure of the storage). Before anything else a URL is probed with a short connect timeout and
no retries, so an unreachable endpoint fails in seconds, not after botocore's retries.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .places import read_json


class StoreError(Exception):
    """A store is missing, incomplete, of another format, or otherwise unreadable."""


# How to install the filesystem of a protocol, where fsspec's own hint is not the best advice.
INSTALL_HINTS = {"s3fs": "pip install 'bigtopics[distributed]'"}
# Probing a URL first: a short connect timeout and no retries, so an unreachable endpoint fails fast.
PROBE_S3_CONFIG = {"connect_timeout": 3, "read_timeout": 20, "retries": {"total_max_attempts": 1}}
# The environment a filesystem's credentials and endpoint may come from.
ENVIRONMENT_PREFIXES = ("AWS_", "GOOGLE_", "GCS", "AZURE_")
_FILESYSTEMS: dict = {}
STORAGE_MODULES = {"botocore", "aiobotocore", "s3fs", "aiohttp", "gcsfs", "google", "adlfs", "azure", "fsspec"}


def is_url(location) -> bool:
    """Whether `location` is a URL of an fsspec filesystem (file:// URLs included)."""
    return isinstance(location, str) and "://" in location


def canonical_location(location) -> str:
    """The text that names a location: the absolute local path, or the URL without a trailing "/".
    No I/O: for comparing locations recorded in settings with the ones given."""
    if is_url(location) and not location.startswith("file://"):
        return location.rstrip("/")
    if isinstance(location, str) and location.startswith("file://"):
        location = location[len("file://"):]
    return str(Path(location).expanduser().resolve())


@dataclass
class Location:
    """Where a Zarr group lives: `text` is the absolute local path or the URL; `path` is set for a
    local directory only (as given, not resolved); `store` is a zarr store object given by the
    caller (then `text` describes it). `storage_options` (URLs only) are the fsspec filesystem's
    keyword arguments."""

    text: str
    path: Path | None = None
    storage_options: dict | None = None
    store: Any = None

    @property
    def protocol(self) -> str | None:
        return self.text.split("://", 1)[0] if self.path is None and self.store is None else None

    def __str__(self) -> str:
        return self.text

    def spec(self) -> dict:
        """What reopens this location in another process: locate(**spec)."""
        return {"location": self.store if self.store is not None else self.text,
                "storage_options": self.storage_options}

    # -- filesystems ---------------------------------------------------------------------
    def _options(self, probe: bool = False) -> dict:
        options = dict(self.storage_options or {})
        if self.protocol in ("s3", "s3a"):
            # botocore reads AWS_ENDPOINT_URL(_S3) itself since 1.31; older ones do not, so pass it on.
            endpoint = os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL")
            if os.environ.get("AWS_IGNORE_CONFIGURED_ENDPOINT_URLS", "").lower() == "true":
                endpoint = None
            if endpoint and "endpoint_url" not in options and "endpoint_url" not in options.get("client_kwargs", {}):
                options["endpoint_url"] = endpoint
            if probe:
                options["config_kwargs"] = {**options.get("config_kwargs", {}), **PROBE_S3_CONFIG}
        # Not fsspec's instance cache: it would hand out a filesystem made with the credentials of
        # an earlier environment (zarr_store keeps its own cache, keyed by the environment too).
        return options | {"skip_instance_cache": True}

    def endpoint(self) -> str:
        """The service a URL's requests go to, for messages."""
        options = self._options()
        endpoint = options.get("endpoint_url") or options.get("client_kwargs", {}).get("endpoint_url")
        return endpoint or ("AWS S3" if self.protocol in ("s3", "s3a") else f"{self.protocol}://")

    def _filesystem_class(self):
        try:
            import fsspec
        except ImportError:
            raise StoreError(f"{self.protocol}:// needs fsspec: pip install 'bigtopics[distributed]'") from None
        try:
            return fsspec.get_filesystem_class(self.protocol)
        except ImportError:
            from fsspec.registry import known_implementations

            package = known_implementations[self.protocol]["class"].split(".")[0]
            hint = INSTALL_HINTS.get(package, f"pip install {package}")
            raise StoreError(f"{self.protocol}:// needs {package}: {hint}") from None
        except ValueError:
            raise StoreError(f"{self.text}: no filesystem for {self.protocol}:// is known to fsspec") from None

    def probe_filesystem(self):
        """(a synchronous filesystem that fails fast, the root path in it)."""
        cls = self._filesystem_class()
        options = self._options(probe=True)
        with self.errors():
            fs = cls(**{**cls._get_kwargs_from_urls(self.text), **options})
        if hasattr(fs, "retries"):
            fs.retries = 1  # s3fs's own retry loop, besides botocore's
        return fs, fs._strip_protocol(self.text).rstrip("/")

    def zarr_store(self, read_only: bool):
        """A zarr store object for this location: LocalStore, FsspecStore or the given object."""
        if self.store is not None:
            return self.store
        import zarr.storage

        if self.path is not None:
            return zarr.storage.LocalStore(self.path, read_only=read_only)
        self._filesystem_class()  # a clear message if the package is missing
        options = self._options()
        # One asynchronous filesystem (and connection pool) per process, protocol, options and
        # environment, kept open: one made per store would leave unclosed sessions behind, and
        # fsspec's own cache would not see a change of credentials in the environment.
        key = (os.getpid(), self.text.split("://", 1)[0], json.dumps(options, sort_keys=True, default=repr),
               tuple(sorted((k, v) for k, v in os.environ.items() if k.startswith(ENVIRONMENT_PREFIXES))))
        with self.errors():
            if key not in _FILESYSTEMS:
                _FILESYSTEMS[key] = zarr.storage.FsspecStore.from_url(f"{self.protocol}://", storage_options=options).fs
            fs = _FILESYSTEMS[key]
            return zarr.storage.FsspecStore(fs, read_only=read_only, path=fs._strip_protocol(self.text).rstrip("/"))

    # -- inspecting, sizing, deleting -----------------------------------------------------
    def inspect(self) -> tuple[dict | None, bool]:
        """(the attributes of the Zarr group here, or None if there is no zarr.json; whether
        anything at all is here). Raises FileNotFoundError for a URL whose bucket is missing."""
        if self.path is not None:
            if not (self.path / "zarr.json").is_file():
                return None, self.path.exists() or self.path.is_symlink()
            attributes = read_json(self.path / "zarr.json").get("attributes")
            return (attributes if isinstance(attributes, dict) else {}), True
        if self.store is not None:
            return self._inspect_store()
        fs, root = self.probe_filesystem()
        with self.errors():
            try:
                raw = fs.cat_file(f"{root}/zarr.json")
            except FileNotFoundError:
                raw = None
            if raw is not None:
                return _attributes(raw), True
            try:
                occupied = bool(fs.ls(root, detail=False))
            except FileNotFoundError:
                occupied = False
            bucket = root.split("/")[0]
            if not occupied and not fs.root_marker and bucket and bucket != root:  # an object store: bucket/key
                try:
                    fs.info(bucket)
                except FileNotFoundError:
                    missing = FileNotFoundError(f"{self.text}: there is no bucket {bucket!r} at {self.endpoint()}")
                    raise _final(missing) from None
        return None, occupied

    def _inspect_store(self) -> tuple[dict | None, bool]:
        from zarr.core.buffer import default_buffer_prototype
        from zarr.core.sync import sync

        with self.errors():
            raw = sync(self.store.get("zarr.json", prototype=default_buffer_prototype()))
            if raw is not None:
                return _attributes(raw.to_bytes()), True
            return None, not sync(self.store.is_empty(""))

    def stored_bytes(self, prefix: str = "") -> int:
        """Bytes stored under `prefix` (a relative path inside the group; "" for all of it)."""
        if self.path is not None:
            return sum(f.stat().st_size for f in (self.path / prefix).rglob("*") if f.is_file())
        from zarr.core.sync import sync

        with self.errors():
            if self.store is not None:
                return sync(self.store.getsize_prefix(prefix)) if prefix else sync(self._store_size())
            fs, root = self.probe_filesystem()
            found = fs.find(f"{root}/{prefix}".rstrip("/"), detail=True)
            return sum(int(info.get("size") or 0) for info in found.values())

    async def _store_size(self) -> int:
        return sum([await self.store.getsize(key) async for key in self.store.list()])

    def delete(self) -> None:
        """Remove everything here (callers check first that it is bigtopics' own output)."""
        if self.path is not None:
            shutil.rmtree(self.path, ignore_errors=True)
            return
        from zarr.core.sync import sync

        with self.errors():
            if self.store is not None:
                sync(self.store.delete_dir(""))
                return
            fs, root = self.probe_filesystem()
            with contextlib.suppress(FileNotFoundError):
                fs.rm(root, recursive=True)

    # -- errors ---------------------------------------------------------------------------
    @contextlib.contextmanager
    def errors(self):
        """Turn a failure of remote storage into one clear line (see the module's docstring)."""
        try:
            yield
        except Exception as e:
            translated = None if self.path is not None else storage_error(e, self)
            if translated is None:
                raise
            raise translated from e


def _attributes(raw: bytes) -> dict:
    try:
        attributes = json.loads(raw).get("attributes")
    except (ValueError, AttributeError, RecursionError):
        return {}
    return attributes if isinstance(attributes, dict) else {}


def storage_error(e: Exception, location: Location) -> Exception | None:
    """The one-line error to raise for an error of remote storage at `location`, or None to let
    `e` through (an error of bigtopics' own, or one already clear)."""
    if isinstance(e, (StoreError, ValueError, KeyError, TypeError, AttributeError, MemoryError)) or getattr(
            e, "_bigtopics_location", False):
        return None
    name, module = type(e).__name__, type(e).__module__.split(".")[0]
    text = str(e).strip()
    first = text.splitlines()[0] if text else name
    hint = ("AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (or AWS_PROFILE), or storage_options"
            if location.protocol in ("s3", "s3a") else "storage_options or the filesystem's environment")
    if isinstance(e, FileNotFoundError):
        out = FileNotFoundError(f"{location}: {first}")
    elif "NoCredentials" in name:
        out = PermissionError(f"{location}: no credentials for {location.endpoint()}: set {hint}")
    elif isinstance(e, PermissionError) or "Credentials" in name or "AccessDenied" in text:
        out = PermissionError(f"{location}: access denied at {location.endpoint()} ({first}): "
                              f"check the credentials, {hint}")
    elif (isinstance(e, (ConnectionError, TimeoutError)) or "Connect" in name or "Timeout" in name
          or module == "aiohttp"):
        out = StoreError(f"{location}: cannot reach {location.endpoint()} ({first})")
    elif module in STORAGE_MODULES or isinstance(e, OSError):
        out = StoreError(f"{location}: the storage failed ({name}: {first})")
    else:
        return None
    return _final(out)


def _final(error: Exception) -> Exception:
    error._bigtopics_location = True  # says where already: not translated again by an outer errors()
    return error


def locate(location, storage_options: dict | None = None) -> Location:
    """A Location from a local path (str or Path), a file:// URL, an fsspec URL, a zarr store
    object, or a Location. storage_options apply to URLs of remote filesystems only."""
    if isinstance(location, Location):
        return location
    if isinstance(location, os.PathLike) or (isinstance(location, str) and not is_url(location)) or (
            isinstance(location, str) and location.startswith("file://")):
        given = os.fspath(location)
        given = given[len("file://"):] if given.startswith("file://") else given
        return Location(canonical_location(given), path=Path(given).expanduser())
    if isinstance(location, str):
        return Location(canonical_location(location),
                        storage_options=dict(storage_options) if storage_options else None)
    try:
        from zarr.abc.store import Store as ZarrStore
        from zarr.storage import FsspecStore, LocalStore
    except ImportError:  # pragma: no cover
        ZarrStore = FsspecStore = LocalStore = ()
    if isinstance(location, LocalStore):
        return locate(Path(location.root))
    if isinstance(location, FsspecStore):
        return Location(location.fs.unstrip_protocol(location.path).rstrip("/"), store=location)
    if isinstance(location, ZarrStore):
        return Location(str(location), store=location)
    raise TypeError(f"a location is a path, a URL or a zarr store, not {type(location).__name__}")
