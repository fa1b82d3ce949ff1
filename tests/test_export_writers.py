"""The contract of every export writer (export/base.Writer, registered in export.WRITERS), one
case each: into an empty folder it writes exactly the files it declares, the same bytes each
time, and the export writes it only when its option is on and what it needs is there."""

import hashlib
from pathlib import Path

import pytest

from bigtopics.export import WRITERS, ExportOptions, export, export_context, wanted
from bigtopics.infer import infer
from bigtopics.model import load_model
from bigtopics.settings import TrainSettings
from bigtopics.synth import CorpusSpec, write_corpus
from bigtopics.trainer import train

SPEC = CorpusSpec(n_docs=300, n_topics=3, n_words=60, mean_length=20, alpha=0.1, eta=0.05, seed=7)
ALL_ON = ExportOptions(top_words=5, topic_word_weights=True, state=True, diagnostics=True)
CASES = [(writer.files[0], writer) for writer in WRITERS]


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """A run that kept its assignments (two epochs: exclude-own), with document topics."""
    root = tmp_path_factory.mktemp("writers")
    store, run, dt = root / "corpus.zarr", root / "run", root / "doc_topics.zarr"
    write_corpus(SPEC, store, "store")
    train(store, run, TrainSettings(n_topics=SPEC.n_topics, epochs=2, batch_size=100, scale_docs=0), quiet=True)
    infer(run, store, dt, quiet=True)
    return run, store, dt


def _context(run, options=ALL_ON, with_doc_topics=True):
    path, store, dt = run
    return export_context(path, load_model(path), options, doc_topics=dt if with_doc_topics else None,
                          store=store if with_doc_topics else None, log=lambda message: None)


def _digests(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def test_every_file_an_export_can_write_is_declared_by_one_writer():
    declared = [name for writer in WRITERS for name in writer.files]
    assert len(declared) == len(set(declared))


@pytest.mark.parametrize("name, writer", CASES, ids=[name for name, _ in CASES])
def test_a_writer_writes_exactly_its_files_and_the_same_bytes_twice(run, tmp_path, name, writer):
    ctx = _context(run)
    assert wanted(writer, ctx)
    first, second = tmp_path / "first", tmp_path / "second"
    for folder in (first, second):
        folder.mkdir()
        writer.write(ctx, folder)
    written = sorted(p.name for p in first.iterdir())
    assert written == sorted(writer.files)
    assert _digests(first) == _digests(second)


@pytest.mark.parametrize("name, writer", CASES, ids=[name for name, _ in CASES])
def test_a_writer_runs_only_with_its_option_and_what_it_needs(run, name, writer):
    off = ExportOptions(top_words=5)
    expected = writer.option is None and writer.needs != "doc_topics"
    assert wanted(writer, _context(run, off, with_doc_topics=False)) == expected
    if writer.option is not None:
        assert not wanted(writer, _context(run, off))
        assert wanted(writer, _context(run, ExportOptions(top_words=5, **{writer.option: True})))


def test_the_export_is_the_union_of_the_wanted_writers_files(run, tmp_path):
    path, store, dt = run
    names = export(path, tmp_path / "out", doc_topics=dt, store=store, options=ALL_ON, log=lambda message: None)
    assert set(names) == {name for writer in WRITERS for name in writer.files
                          if (tmp_path / "out" / name).exists()}
    assert set(names) >= {writer.files[0] for writer in WRITERS}
