"""What bigtopics writes, where, and how it recognises its own output before it replaces anything.

Where: a Zarr group bigtopics reads or writes (a store, document topics) lives at a *location*:
a local directory (a path, or a file:// URL), a URL of any fsspec filesystem
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

Replacing: --overwrite must replace earlier results, never a user's files: a directory (or a
prefix) counts as bigtopics' output only if its marker says so, not merely by a file name that
other tools use too. Each command replaces only output of its own kind (`check_output`'s `kind`:
ingest a store, train a run, infer document topics, export an export), never a store from
another command, and never a run or export folder holding entries it did not write (RUN_ENTRIES,
EXPORT_ENTRIES): those are named and left alone. Nor, whatever the flags, is anything written
inside a Zarr group or among a run's, an export's or a site's own files (places.py: the rule for
every output, a single file's included). `OutputLock` keeps two processes from writing one
output at once.

Writing: `NewGroup` writes a group so that readers never take a half-written one for finished.
Locally it is built under a temporary name and renamed into place. Object storage has no rename:
the group is written in place, its attributes say UNFINISHED until `publish` writes the final
ones last, and readers refuse it until then.
"""

from __future__ import annotations

import contextlib
import fnmatch
import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .atomic import publish_dir, temporary_sibling

# (re-exported: callers import the names of bigtopics' own output from here too)
from .places import (  # noqa: F401
    EXPORT_ENTRIES,
    KIND_ATTRIBUTES,
    KINDS,
    OWN_ENTRIES,
    RUN_ENTRIES,
    RUN_FILES,
    SITE_ENTRIES,
    attributes_kind,
    check_output_file,
    check_output_place,
    output_kind,
    read_json,
)


class StoreError(Exception):
    """A store is missing, incomplete, of another format, or otherwise unreadable."""


# Which command writes each kind of output (KINDS), for messages.
KIND_COMMANDS = {"store": "ingest", "run": "train", "doc_topics": "infer", "export": "export", "site": "site"}
# The attributes of a group while it is being written in place (object storage): complete groups
# never carry "unfinished", since `NewGroup.publish` replaces all attributes at once.
UNFINISHED = {"created_by": "bigtopics",
              "unfinished": "bigtopics is writing this group; it is complete once its final attributes are written"}
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


# -- recognising and replacing bigtopics' output ----------------------------------------------
def attributes_by_bigtopics(attributes: dict | None) -> bool:
    """Whether a Zarr group's attributes mark it as bigtopics' (a store, a model, document
    topics, or one of them unfinished). A store's generic "format_version" alone is not enough."""
    return isinstance(attributes, dict) and (attributes.get("created_by") == "bigtopics" or any(
        key in attributes for key in KIND_ATTRIBUTES if key != "format_version"))


def written_by_bigtopics(folder: Path) -> bool:
    """Whether `folder` is a store (a Zarr group created_by bigtopics), a model or document topics
    (a Zarr group with their format attribute), a training run (settings.json with the store's
    fingerprint) or an export. A store's generic "format_version" alone is not enough."""
    folder = Path(folder)
    if attributes_by_bigtopics(read_json(folder / "zarr.json").get("attributes")):
        return True
    return output_kind(folder) is not None


def foreign_entries(folder: Path, kind: str) -> list[str]:
    """The top-level entries of a run or export `folder` that its kind does not write (besides
    LEFTOVERS), sorted: what a user added."""
    patterns = OWN_ENTRIES.get(kind)
    if patterns is None:
        return []
    return sorted(entry.name for entry in Path(folder).iterdir() if entry.name not in LEFTOVERS
                  and not any(fnmatch.fnmatchcase(entry.name, pattern) for pattern in patterns))


def _names(names: list[str], most: int = 5) -> str:
    shown = ", ".join(names[:most])
    return shown + (f" and {len(names) - most} more" if len(names) > most else "")


def _wrong_kind(location, found: str, kind: str) -> FileExistsError:
    command = KIND_COMMANDS.get(kind, "this command")
    return FileExistsError(f"{location} is {KINDS[found]}, which bigtopics {command} never replaces (its --overwrite "
                           f"replaces only {KINDS[kind]}): choose another output")


# Entries that leave a folder as good as empty: a refused start's lock, macOS's folder settings.
# (Any other hidden entry, such as .git, is the user's.)
LEFTOVERS = (".lock", ".DS_Store")


def holds_files(folder: Path) -> bool:
    """Whether `folder` holds anything but LEFTOVERS."""
    return any(entry.name not in LEFTOVERS for entry in Path(folder).iterdir())


def check_output(path, overwrite: bool, inputs=(), storage_options: dict | None = None,
                 kind: str | None = None) -> None:
    """Refuse to write `path` (a local path, a URL or a Location) where that would destroy
    anything but bigtopics' earlier output of `kind` (a key of KINDS; None: of any kind, the
    behaviour of callers that do not say).

    Raises if an input is `path` or lies inside it, if a local `path` is in a place no output
    may go (places.check_output_place: inside a Zarr group, among a run's files), if `path`
    exists as something else than a directory (or prefix) that is empty or written by
    bigtopics, if it is bigtopics output of another kind than `kind`, if it is a run or export
    folder holding entries its kind does not write (named in the message), or if it exists and
    overwrite is not given. A group an interrupted write left unfinished on object storage is
    replaced without overwrite, as a local one never shows under its final name. Inputs may be
    paths, URLs or None (skipped).
    """
    if kind is not None and kind not in KINDS:
        raise ValueError(f"unknown kind of output {kind!r}; one of {', '.join(KINDS)}")
    location = locate(path, storage_options)
    target = location.text
    for source in inputs:
        if source is None or (not isinstance(source, (str, os.PathLike, Location))):
            continue
        source = locate(source).text if isinstance(source, Location) else canonical_location(os.fspath(source))
        if source == target or source.startswith(target.rstrip("/") + "/"):
            raise ValueError(f"{path} holds the input {source}: choose another output")
    if location.path is None:
        attributes, occupied = location.inspect()
        if not occupied or (attributes is not None and "unfinished" in attributes):
            return
        if not attributes_by_bigtopics(attributes):
            raise FileExistsError(f"{location} exists and is not bigtopics output, so bigtopics will not replace it: "
                                  "remove it yourself or choose another output")
        found = attributes_kind(attributes)
        if kind is not None and found is not None and found != kind:
            raise _wrong_kind(location, found, kind)
        if not overwrite:
            raise FileExistsError(f"{location} already exists (use --overwrite to replace it)")
        return
    path = location.path
    check_output_place(path)
    if not path.exists() and not path.is_symlink():
        return
    if not path.is_dir() or (holds_files(path) and not written_by_bigtopics(path)):
        raise FileExistsError(f"{path} exists and is not bigtopics output, so bigtopics will not replace it: "
                              "remove it yourself or choose another output")
    if kind is not None and holds_files(path):
        found = output_kind(path)
        if found is not None and found != kind:
            raise _wrong_kind(path, found, kind)
        foreign = foreign_entries(path, kind)
        if foreign:
            raise FileExistsError(f"{path} holds {len(foreign)} entr{'y' if len(foreign) == 1 else 'ies'} bigtopics "
                                  f"did not write ({_names(foreign)}), which --overwrite would delete: move "
                                  f"{'it' if len(foreign) == 1 else 'them'} out or choose another output")
    if not overwrite:
        raise FileExistsError(f"{path} already exists (use --overwrite to replace it)")


class OutputLock:
    """An exclusive lock (flock) on a lock file next to an output, so that two processes never
    write one output at once: `acquire` refuses with one line if another process holds it.
    `release` deletes the lock file; a process that opened the file before it was deleted sees
    that the file it locked is no longer the one at the path and tries again."""

    def __init__(self, path: Path, what: str):
        self.path, self.what = Path(path), what
        self.handle = None

    def acquire(self) -> "OutputLock":
        import fcntl

        while True:
            handle = open(self.path, "a")
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                handle.close()
                raise FileExistsError(f"{self.what} is being written by another bigtopics process (it holds "
                                      f"{self.path}); wait for it to finish or stop it") from None
            try:
                same = os.stat(self.path).st_ino == os.fstat(handle.fileno()).st_ino
            except FileNotFoundError:
                same = False
            if same:
                self.handle = handle
                return self
            handle.close()  # the holder released and deleted it in between: lock the new one

    def release(self) -> None:
        if self.handle is not None:
            with contextlib.suppress(OSError):
                os.unlink(self.path)
            self.handle.close()
            self.handle = None

    def __enter__(self) -> "OutputLock":
        return self.acquire()

    def __exit__(self, *exc) -> None:
        self.release()


class NewGroup:
    """A new Zarr group at `location`, seen as finished only once `publish` has run.

    A local directory is built under a hidden temporary name next to it and renamed into place by
    `publish` (atomic.publish_dir; an existing one is replaced only with overwrite). A URL or a
    zarr store object has no rename: what is there is checked (check_output: bigtopics' own
    output, of `kind` if given, and overwrite given), deleted, and the group is written in place
    with the UNFINISHED attributes; `publish` writes the final attributes last. `abort` removes
    what was written.
    """

    def __init__(self, location, overwrite: bool = False, storage_options: dict | None = None,
                 kind: str | None = None):
        import zarr

        self.location, self.overwrite = locate(location, storage_options), overwrite
        path = self.location.path
        if path is not None:
            if path.exists() and not overwrite:
                raise FileExistsError(f"{path} already exists (use --overwrite to replace it)")
            self.tmp = temporary_sibling(path)
            self.group = zarr.open_group(self.tmp, mode="w")
            return
        self.tmp = None
        check_output(self.location, overwrite, kind=kind)
        with self.location.errors():
            self.location.delete()
            self.group = zarr.open_group(self.location.zarr_store(read_only=False), mode="w",
                                         attributes=dict(UNFINISHED))

    def errors(self):
        return self.location.errors()

    def publish(self, attributes: dict) -> None:
        """Write the group's final attributes (all at once, replacing UNFINISHED) and publish it."""
        with self.errors():
            self.group.attrs.put(dict(attributes))
        if self.tmp is not None:
            publish_dir(self.tmp, self.location.path, self.overwrite)

    def abort(self) -> None:
        if self.tmp is not None:
            shutil.rmtree(self.tmp, ignore_errors=True)
            return
        with contextlib.suppress(Exception):
            self.location.delete()
