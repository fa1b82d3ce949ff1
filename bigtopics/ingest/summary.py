"""What an ingest read, dropped and wrote (`IngestReport`), filled in by every step of it and
printed at the end by `bigtopics ingest`."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from ..memory import format_bytes
from .vocabulary import Pruning

MAX_NAMED = 10  # files named in the summary (the store's settings name all)


@dataclass
class IngestReport:
    """What an ingest read, dropped and wrote; `summary()` is printed at the end."""

    output: Path | str  # the store's path, or its URL
    n_files: int = 0
    input_bytes: int = 0
    stats: Counter = field(default_factory=Counter)
    pruned: dict = field(default_factory=dict)  # rule -> (words, tokens)
    pruning: Pruning = field(default_factory=Pruning)
    vocabulary_from: str | None = None
    n_docs: int = 0
    n_words: int = 0
    n_tokens: int = 0
    seconds: float = 0.0
    phase_seconds: dict = field(default_factory=dict)  # tokenize, merge, write
    n_workers: int = 0
    peak_rss: int = 0
    memory_budget: int = 0
    n_distinct: int = 0  # distinct words seen (stop words excepted), before pruning
    n_runs: int = 0  # vocabulary spills of the workers (runs.py)
    run_bytes: int = 0
    bad_files: list = field(default_factory=list)  # (name, reason): files and folders skipped (--skip-bad)
    notes: list = field(default_factory=list)  # (name, reason): folders reached twice, read once

    def summary(self) -> str:
        s = self.stats
        lines = [
            f"wrote {self.output}: {self.n_docs:,} documents, {self.n_words:,} words, {self.n_tokens:,} tokens",
            f"read {self.n_files:,} files ({format_bytes(self.input_bytes)}), {s['records']:,} source documents"
            + (f" cut into {s['rows']:,} sections" if s["sections"] else "")
            + f", {s['raw_tokens']:,} tokens, in {self.seconds:.1f} s "
            f"({self.input_bytes / 1e6 / max(self.seconds, 1e-9):.1f} MB/s; "
            + ", ".join(f"{k} {v:.1f} s" for k, v in self.phase_seconds.items())
            + f"; workers: {self.n_workers}); peak memory {format_bytes(self.peak_rss)} a process "
            f"(budget {format_bytes(self.memory_budget)} in all)",
            f"vocabulary: {self.n_distinct:,} distinct words seen, spilled in {self.n_runs:,} runs "
            f"({format_bytes(self.run_bytes)}) and merged from disk",
            f"dropped: {s['empty_docs_dropped']:,} empty documents, "
            f"{s['binary_files_skipped']:,} binary-looking files, {s['bad_lines_skipped']:,} bad lines skipped; "
            f"{s['invalid_utf8_docs']:,} documents had invalid UTF-8 (replaced)",
        ]
        if self.bad_files:
            shown = "; ".join(f"{name}: {reason}" for name, reason in self.bad_files[:MAX_NAMED])
            more = f"; and {len(self.bad_files) - MAX_NAMED:,} more (the store's settings list them all)" \
                if len(self.bad_files) > MAX_NAMED else ""
            lines.append(f"skipped {len(self.bad_files):,} files or folders that could not be read whole: "
                         f"{shown}{more}")
        if self.notes:
            lines.append(f"read once {len(self.notes):,} folders reached twice through symbolic links: "
                         + ", ".join(name for name, _ in self.notes[:MAX_NAMED]))
        if self.vocabulary_from:
            words, tokens = self.pruned["out_of_vocabulary"]
            lines.append(f"vocabulary of {self.vocabulary_from}: {words:,} words ({tokens:,} tokens) "
                         f"out of it dropped; stop words removed {s['stop_tokens']:,} tokens")
            return "\n".join(lines)
        p = self.pruning
        rules = {"zero": "stop words", "min_df": f"min-df {p.min_df}", "max_df": f"max-df {p.max_df}",
                 "max_vocab": f"max-vocab {p.max_vocab or 0} (0: all)"}
        lines.append("pruned: " + "; ".join(
            f"{words:,} words ({tokens:,} tokens) by {rules[rule]}" for rule, (words, tokens) in self.pruned.items()
            if rule != "zero"
        ) + f"; stop words removed {s['stop_tokens']:,} tokens")
        return "\n".join(lines)
