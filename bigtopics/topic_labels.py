"""Topic labels: one name per topic, shared by every output that names topics (dfr-browser,
topics.jsonl, the report). By default a topic's label is its LABEL_WORDS most probable words; a
user's file (`--topic-labels FILE`) replaces them, in one of two forms:

  one label per line, in topic order (line 1 is topic 0), exactly one line per topic; an empty
  line keeps that topic's top words
  TSV `topic<TAB>label` (topic numbered from 0, as everywhere in bigtopics; an optional header
  `topic<TAB>label`), for some or all topics; topics not listed keep their top words

Topics are numbered from 0 everywhere; dfr-browser, which numbers from 1, is given the ids
(export/dfr.py).
"""

from __future__ import annotations

from pathlib import Path

from .model import Model
from .options import OptionError
from .places import what_is

LABEL_WORDS = 3
MAX_LABEL_CHARS = 200
FLAG = "--topic-labels"


def default_label(model: Model, k: int) -> str:
    """Topic k's LABEL_WORDS most probable words."""
    return " ".join(word for word, _ in model.top_words(k, LABEL_WORDS))


def topic_labels(model: Model, path: str | Path | None = None) -> list[str]:
    """Every topic's label, topic 0 first: the user's from `path` where it gives one, else the top words."""
    given = read_labels(path, model.n_topics) if path is not None else {}
    return [given.get(k) or default_label(model, k) for k in range(model.n_topics)]


def read_labels(path: str | Path, n_topics: int) -> dict[int, str]:
    """{topic: label} from a labels file (module docstring); OptionError, one line naming the file
    and line, for anything else."""
    def fail(what: str) -> OptionError:
        return OptionError(f"{FLAG} {path}: {what}")

    kind = what_is(path)
    if kind != "a regular file":  # a FIFO would block the read, a device such as /dev/zero never end it
        raise fail(f"{kind}, not a file of labels")
    size = Path(path).stat().st_size
    if size > n_topics * (MAX_LABEL_CHARS * 4 + 16) + 4096:
        raise fail(f"{size:,} bytes, more than labels of at most {MAX_LABEL_CHARS} characters for {n_topics:,} topics")
    try:
        text = Path(path).read_text(encoding="utf-8")
    except UnicodeDecodeError as e:
        raise fail(f"not UTF-8 text (byte {e.start:,})") from e
    except OSError as e:
        raise fail(e.strerror or type(e).__name__) from e
    lines = text.splitlines()
    if any("\t" in line for line in lines):
        labels = _tsv_labels(lines, n_topics, fail)
    else:
        if len(lines) != n_topics:
            raise fail(f"{len(lines):,} lines for {n_topics:,} topics (one label per line, topic 0 first; "
                       "or TSV topic<TAB>label)")
        labels = {k: line.strip() for k, line in enumerate(lines) if line.strip()}
    for k, label in labels.items():
        if len(label) > MAX_LABEL_CHARS:
            raise fail(f"the label of topic {k} has {len(label):,} characters (at most {MAX_LABEL_CHARS})")
        if any(ord(c) < 32 for c in label):
            raise fail(f"the label of topic {k} holds a control character")
    return labels


def _tsv_labels(lines: list[str], n_topics: int, fail) -> dict[int, str]:
    labels: dict[int, str] = {}
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        topic, tab, label = line.partition("\t")
        if number == 1 and topic.strip().lower() == "topic":  # a header
            continue
        if not tab:
            raise fail(f"line {number} has no TAB (TSV lines are topic<TAB>label)")
        try:
            k = int(topic.strip())
        except ValueError:
            raise fail(f"line {number}: {topic.strip()[:40]!r} is not a topic number") from None
        if not 0 <= k < n_topics:
            raise fail(f"line {number}: topic {k} is not one of the model's topics 0 to {n_topics - 1}")
        if k in labels:
            raise fail(f"line {number}: topic {k} is labelled twice")
        labels[k] = label.strip()
    return labels
