"""What bigtopics writes, and how it recognises its own output before it replaces anything.

--overwrite must replace earlier results, never a user's files: a directory counts as bigtopics'
output only if its marker says so, not merely by a file name that other tools use too.
"""

from __future__ import annotations

import json
from pathlib import Path

# The attribute in a Zarr group's zarr.json that tells each kind bigtopics writes from the others.
KIND_ATTRIBUTES = {"format_version": "a store", "model_format_version": "a model",
                   "doc_topics_format_version": "document topics (bigtopics infer)"}


def read_json(path: Path) -> dict:
    """A JSON object from a file; {} if it is missing, unreadable or not an object."""
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return value if isinstance(value, dict) else {}


def written_by_bigtopics(folder: Path) -> bool:
    """Whether `folder` is a store (a Zarr group created_by bigtopics), a model or document topics
    (a Zarr group with their format attribute), a training run (settings.json with the store's
    fingerprint) or an export. A store's generic "format_version" alone is not enough."""
    folder = Path(folder)
    attributes = read_json(folder / "zarr.json").get("attributes")
    if isinstance(attributes, dict) and (attributes.get("created_by") == "bigtopics" or any(
            key in attributes for key in KIND_ATTRIBUTES if key != "format_version")):
        return True
    if "store_fingerprint" in read_json(folder / "settings.json"):
        return True
    return (folder / "topic_keys.tsv").is_file() and (folder / "topic_word.zarr").is_dir()


# Entries that leave a folder as good as empty: a refused start's lock, macOS's folder settings.
# (Any other hidden entry, such as .git, is the user's.)
LEFTOVERS = (".lock", ".DS_Store")


def holds_files(folder: Path) -> bool:
    """Whether `folder` holds anything but LEFTOVERS."""
    return any(entry.name not in LEFTOVERS for entry in Path(folder).iterdir())


def check_output(path, overwrite: bool, inputs=()) -> None:
    """Refuse to write `path` where that would destroy anything but bigtopics' earlier output.

    Raises if an input is `path` or lies inside it, if `path` exists as something else than a
    directory that is empty or written by bigtopics, or if it exists and overwrite is not given.
    """
    path = Path(path)
    target = path.resolve()
    for source in map(Path, inputs):
        source = source.resolve()
        if source == target or target in source.parents:
            raise ValueError(f"{path} holds the input {source}: choose another output")
    if not path.exists() and not path.is_symlink():
        return
    if not path.is_dir() or (holds_files(path) and not written_by_bigtopics(path)):
        raise FileExistsError(f"{path} exists and is not bigtopics output, so bigtopics will not replace it: "
                              "remove it yourself or choose another output")
    if not overwrite:
        raise FileExistsError(f"{path} already exists (use --overwrite to replace it)")
