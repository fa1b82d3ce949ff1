"""Resuming an interrupted ingest, and the hidden folders interruptions leave beside the output.

An ingest into a local store spills its work into a hidden sibling `.NAME.spill-PID-XXXXXXXX`
(atomic.temporary_sibling), which holds `ingest.json` (what the spills depend on: inputs,
formats, tokenizer, unit size) and, for each run a worker spilled (runs.py), `run-RUN.json`:
the summaries of the run's units and the size and CRC-32 of each of its files, written last.

A rerun of the same command (`prepare_spill_dir`) finds the spill folder of a process that is
gone, checks every run listed there (files present, sizes and checksums as recorded: checked, not
trusted) and continues with the units of the good runs already done; their runs are merged with
the new ones, which gives the same store as an uninterrupted ingest (the store depends neither on
which worker read a unit nor on how the vocabulary was cut into runs). The other leftovers of
dead processes are removed, or put back, and reported: spill folders of other settings, a
store's temporary folder (`.tmp-`), and the earlier store an `--overwrite` killed between its two
renames left only under its hidden `.old-` name (renamed back if nothing took its place).
"""

from __future__ import annotations

import json
import os
import shutil
import zlib
from pathlib import Path

from ..atomic import atomic_write_bytes, leftover_siblings, temporary_sibling
from ..memory import format_bytes

SETTINGS_FILE = "ingest.json"


def crc32_file(path: Path) -> int:
    crc = 0
    with open(path, "rb") as f:
        while block := f.read(1 << 22):
            crc = zlib.crc32(block, crc)
    return crc


def write_manifest(spill_dir: Path, run: dict, units: list[dict], files: dict[str, tuple[int, int]]) -> None:
    """Record a spilled run: its merge information, its units' summaries, its files' (size, crc32)."""
    payload = json.dumps({"run": run, "units": units, "files": files}, default=_jsonable).encode()
    atomic_write_bytes(Path(spill_dir) / f"run-{run['name']}.json", payload)


def _jsonable(value):
    return sorted(value) if isinstance(value, set) else int(value)


def _checked_runs(spill_dir: Path, log) -> tuple[list[dict], list[dict]]:
    """(runs, unit summaries) of the runs whose files are all there as recorded."""
    runs, units = [], []
    for manifest in sorted(spill_dir.glob("run-*.json")):
        try:
            record = json.loads(manifest.read_text())
            good = all((spill_dir / name).stat().st_size == size and crc32_file(spill_dir / name) == crc
                       for name, (size, crc) in record["files"].items())
        except (OSError, ValueError, KeyError):
            good = False
        if not good:
            log(f"note: {manifest.name} of the interrupted ingest does not check out; its units are read again")
            manifest.unlink(missing_ok=True)
            continue
        runs.append(record["run"])
        for summary in record["units"]:
            summary["field_kinds"] = {name: set(kinds) for name, kinds in summary["field_kinds"].items()}
        units.extend(record["units"])
    return runs, units


SIZES = ("unit_bytes", "max_document_bytes")  # set by the memory budget, whose work is resumed as it was


def _size(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) if path.is_dir() else path.stat().st_size


def prepare_spill_dir(output: Path, settings: dict, log) -> tuple[Path, dict, list[dict], list[dict]]:
    """(spill folder, settings, runs done, their unit summaries) for an ingest into `output`.

    `settings` is what the spills depend on (SIZES included); a resumed folder's own settings are
    returned instead, whose SIZES must be used (--memory-limit may differ from the first attempt's).
    Leftovers are cleaned up and reported."""
    resumed = None
    for tag, path in leftover_siblings(output, ("spill", "tmp", "old"), this_process=True):
        if tag == "old" and not output.exists():
            os.replace(path, output)
            log(f"note: put back {output}, left as {path.name} by an --overwrite that was interrupted")
            continue
        if tag == "spill" and resumed is None:
            try:
                recorded = json.loads((path / SETTINGS_FILE).read_text())
            except (OSError, ValueError):
                recorded = None
            if recorded is not None and {k: v for k, v in recorded.items() if k not in SIZES} == \
                    {k: v for k, v in settings.items() if k not in SIZES}:
                resumed, settings = path, recorded
                continue
        size = _size(path)
        shutil.rmtree(path, ignore_errors=True) if path.is_dir() else path.unlink(missing_ok=True)
        log(f"note: removed {path.name} ({format_bytes(size)}), left by an interrupted ingest")
    if resumed is None:
        spill_dir = temporary_sibling(output, "spill")
        spill_dir.mkdir(parents=True)
        atomic_write_bytes(spill_dir / SETTINGS_FILE, json.dumps(settings).encode())
        return spill_dir, settings, [], []
    runs, units = _checked_runs(resumed, log)
    log(f"note: resuming the interrupted ingest in {resumed.name}: {len(units):,} work units already done")
    return resumed, settings, runs, units
