"""What is at a local path, and where bigtopics may write an output: the rule every command follows.

Recognising: bigtopics' own output is told by its markers, not by file names other tools use too
(`output_kind`): a store, a model or document topics by the attributes of their Zarr group, a run
by its settings.json, an export by topic_keys.tsv beside topic_word.zarr, a site by site.json;
OWN_ENTRIES lists what a run, an export and a site folder hold.

The rule for an output (`check_output_place`, then outputs.check_output for a folder or Zarr
group, `check_output_file` for a single file), whatever the flags: never inside a Zarr group or
array (any folder above the output holding zarr.json, .zgroup or .zarray, ours or anyone's: a
store, a model, document topics), never one of the files of a run, an export or a site (a run's
evaluation.json and report.html aside, which evaluate and report replace when they are their
own); and a user's file or folder only with --overwrite. A refusal --overwrite cannot lift does
not suggest it.
"""

from __future__ import annotations

import errno
import fnmatch
import json
import os
import stat
from pathlib import Path

# The attribute in a Zarr group's zarr.json that tells each kind bigtopics writes from the others.
KIND_ATTRIBUTES = {"format_version": "a store", "model_format_version": "a model",
                   "doc_topics_format_version": "document topics (bigtopics infer)"}
# The kinds of output, as check_output's `kind` names them.
KINDS = {"store": "a store", "model": "a model", "doc_topics": "document topics", "run": "a training run",
         "export": "an export", "site": "a site"}
# What a run directory and an export directory hold (top-level entries; fnmatch patterns), so
# that --overwrite can tell a file a user added from bigtopics' own. A file the trainer or export
# newly writes there must be added here. Hidden temporaries: atomic.temporary_sibling names
# (".<name>.<tag>-..."); an infer whose output is a URL keeps its parts and lock in the run.
RUN_FILES = ("settings.json", "metrics.jsonl", "checkpoints", "table", "assignments", "model.zarr",
             "evaluation.json", "report.html")
RUN_ENTRIES = RUN_FILES + (".lock", ".infer-*.parts", ".infer-*.lock") + tuple(f".{name}.*" for name in RUN_FILES)
EXPORT_ENTRIES = ("topic_word.zarr", "vocab.txt", "topic_keys.tsv", "word_topic_counts.txt", "topics.jsonl",
                  "pyldavis.json", "doc_topics.txt", "search.jsonl", "search_solr.jsonl", "dfr-browser",
                  "topic_word_weights.txt", "state.gz", "state_instances.txt", "diagnostics.xml", "tw.json",
                  "dt.json.zip")  # (last 2: old)
SITE_ENTRIES = ("index.html", "topic.html", "doc.html", "site.js", "site.css", "site.json", "data", "csv")
OWN_ENTRIES = {"run": RUN_ENTRIES, "export": EXPORT_ENTRIES, "site": SITE_ENTRIES}
# The files that make a folder a Zarr group or array (v3; v2 groups and arrays).
ZARR_MARKERS = ("zarr.json", ".zgroup", ".zarray")
# What stat says a path is, for messages.
FILE_TYPES = ((stat.S_ISREG, "a regular file"), (stat.S_ISDIR, "a directory"), (stat.S_ISCHR, "a character device"),
              (stat.S_ISBLK, "a block device"), (stat.S_ISFIFO, "a named pipe (FIFO)"), (stat.S_ISSOCK, "a socket"))


def read_json(path: Path) -> dict:
    """A JSON object from a file; {} if it is missing, unreadable or not an object."""
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):  # RecursionError: a crafted file nested deeply
        return {}
    return value if isinstance(value, dict) else {}


def what_is(path) -> str:
    """What is at `path` (links followed), for messages: "a regular file", "a directory", "a
    character device", "a named pipe (FIFO)", ..., "a broken symbolic link" or "nothing"."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return "a broken symbolic link" if os.path.islink(path) else "nothing"
    except OSError as e:
        return "a symbolic link in a loop" if e.errno == errno.ELOOP else f"unreadable ({e.strerror or e})"
    return next((name for test, name in FILE_TYPES if test(mode)), "neither a file nor a directory")


def attributes_kind(attributes: dict | None) -> str | None:
    """The kind (a key of KINDS) of a Zarr group bigtopics wrote, by its attributes; None for a
    group bigtopics did not write or has not finished."""
    if not isinstance(attributes, dict):
        return None
    if "model_format_version" in attributes:
        return "model"
    if "doc_topics_format_version" in attributes:
        return "doc_topics"
    if "format_version" in attributes and attributes.get("created_by") == "bigtopics":
        return "store"
    return None


def output_kind(folder: Path) -> str | None:
    """The kind (a key of KINDS) of bigtopics output in a local `folder`: a store, a model or
    document topics (a Zarr group with their attributes), a training run (settings.json with the
    store's fingerprint) or an export (topic_keys.tsv beside topic_word.zarr); else None."""
    folder = Path(folder)
    kind = attributes_kind(read_json(folder / "zarr.json").get("attributes"))
    if kind is not None:
        return kind
    if "store_fingerprint" in read_json(folder / "settings.json"):
        return "run"
    if (folder / "topic_keys.tsv").is_file() and (folder / "topic_word.zarr").is_dir():
        return "export"
    if "site_format_version" in read_json(folder / "site.json"):
        return "site"
    return None


def _entry(path) -> Path:
    """The absolute name of what a write to `path` creates or replaces: its folder resolved
    (symbolic links followed), its own name kept (a link there is replaced, not followed)."""
    path = Path(path).expanduser().absolute()
    return path.parent.resolve() / path.name


def check_output_place(path, run_file: str | None = None) -> None:
    """Refuse, whatever the flags, an output at the local `path` inside a Zarr group or array, or
    among the files of a run, an export or a site (the module's docstring): FileExistsError.
    `run_file` is the one file of a run the caller writes there itself (evaluate evaluation.json,
    report report.html), never another's."""
    entry = _entry(path)
    zarr_around = [folder for folder in entry.parents if any((folder / m).exists() for m in ZARR_MARKERS)]
    if zarr_around:
        outermost = zarr_around[-1]
        kind = attributes_kind(read_json(outermost / "zarr.json").get("attributes"))
        raise FileExistsError(f"{path} lies inside {KINDS[kind] if kind else 'a Zarr group'} ({outermost}), "
                              "which no output may be written into: choose another output")
    for folder in entry.parents:
        kind = output_kind(folder)
        if kind not in OWN_ENTRIES:
            continue
        first = entry.relative_to(folder).parts[0]
        if not any(fnmatch.fnmatchcase(first, pattern) for pattern in OWN_ENTRIES[kind]):
            continue
        if kind == "run" and entry.parent == folder and first == run_file:
            continue
        owner = f"the {KINDS[kind].split(' ', 1)[1]} {folder}"
        if entry.parent == folder:
            raise FileExistsError(f"{path} is a file of {owner}, which no output may replace: choose another output")
        raise FileExistsError(f"{path} lies inside {first}, a folder of {owner}, which no output may be written "
                              "into: choose another output")


def check_output_file(path: Path, overwrite: bool, own, what: str, run_file: str | None = None) -> None:
    """Refuse to write the single file `path` (replaced whole: atomic.atomic_write_bytes) where
    that would destroy anything but an earlier file of the same kind (`own(path)` says whether it
    is one), unless overwrite is given. Refused even with overwrite: a place check_output_place
    refuses (`run_file`: the caller's own file in a run, evaluation.json or report.html); a
    directory, a device, a pipe or anything else that is not a regular file; and a run's
    `run_file` that is not `own`."""
    path = Path(path)
    check_output_place(path, run_file)
    if not path.exists() and not path.is_symlink():
        return
    kind = what_is(path)
    if kind == "a directory":
        raise FileExistsError(f"{path} is a directory: give a file name")
    if kind not in ("a regular file", "a broken symbolic link"):
        raise FileExistsError(f"{path} is {kind}, not a regular file: give a file name")
    if own(path):
        return
    entry = _entry(path)
    if entry.name == run_file and output_kind(entry.parent) == "run":
        raise FileExistsError(f"{path} is a file of the training run {entry.parent} and is not {what}, so it "
                              "is not replaced: choose another output")
    if not overwrite:
        raise FileExistsError(f"{path} exists and is not {what} (use --overwrite to replace it)")
