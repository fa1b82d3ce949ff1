"""The docs tied to the code (sqlite-utils' test_docs.py pattern): every command and option is
documented, the range table of docs/commands.md states options.py's bounds and the checks hold
at them, and the README's local-step table lists exactly the registered steps and samplers."""

import re
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from bigtopics import options
from bigtopics.cli import main
from bigtopics.local_steps import LOCAL_STEPS
from bigtopics.local_steps.gibbs import SAMPLERS
from bigtopics.options import OptionError
from bigtopics.settings import TrainSettings

ROOT = Path(__file__).resolve().parent.parent
COMMANDS_MD = (ROOT / "docs" / "commands.md").read_text(encoding="utf-8")
README = (ROOT / "README.md").read_text(encoding="utf-8")
ALL_DOCS = README + "".join(p.read_text(encoding="utf-8") for p in sorted((ROOT / "docs").glob("*.md")))
COMMANDS = sorted(main.commands.items())


def _options(command):
    return [p for p in command.params if isinstance(p, click.Option) and not p.hidden]


@pytest.mark.parametrize("name, command", COMMANDS, ids=[name for name, _ in COMMANDS])
def test_every_command_is_documented_with_every_option_and_has_help(name, command):
    assert f"bigtopics {name}" in COMMANDS_MD
    assert command.help
    undocumented = [p.opts for p in _options(command)
                    if not any(flag in ALL_DOCS for flag in p.opts + p.secondary_opts if flag.startswith("--"))]
    assert undocumented == []
    assert [p.opts for p in _options(command) if not p.help] == []
    result = CliRunner().invoke(main, [name, "--help"])
    assert result.exit_code == 0 and all(p.opts[-1] in result.output for p in _options(command))


def _range_row(flag: str) -> str:
    rows = [line for line in COMMANDS_MD.splitlines() if line.startswith("| `") and f"`{flag}`" in line]
    assert len(rows) == 1, flag
    return rows[0]


def _settings(**given) -> None:
    TrainSettings(**{"n_topics": 10, **given}).validate()


# (flag in the range table, what the row must say, a value just inside, one just outside, how to check it)
BOUNDS = [
    ("--alpha", f"{options.MIN_PRIOR:g} to {options.MAX_PRIOR:g}".replace("e+0", "e"),
     options.MAX_PRIOR, options.MAX_PRIOR * 2, lambda v: _settings(alpha=v)),
    ("--eta", f"at least {options.MIN_GEOMETRIC_ETA:g} with the geometric", options.MIN_GEOMETRIC_ETA,
     options.MIN_GEOMETRIC_ETA / 2, lambda v: _settings(eta=v, local_step="vb")),
    ("--tau0", f"0 to {options.MAX_TAU0:g}".replace("e+0", "e"), options.MAX_TAU0, options.MAX_TAU0 * 2,
     lambda v: _settings(tau0=v)),
    ("--reset-below", f"at least {options.MIN_RESET_BELOW:g}", options.MIN_RESET_BELOW,
     options.MIN_RESET_BELOW / 2, lambda v: _settings(reset_below=v)),
    ("--seed", "[0, 2**63)", options.SEED_LIMIT - 1, options.SEED_LIMIT, lambda v: _settings(seed=v)),
    ("-k/--topics", f"1 to {options.MAX_TOPICS:,}", options.MAX_TOPICS, options.MAX_TOPICS + 1,
     lambda v: options.check_integer(v, "-k/--topics", 1, options.MAX_TOPICS)),
    ("--epochs", f"1 to {options.MAX_EPOCHS:,}", options.MAX_EPOCHS, options.MAX_EPOCHS + 1,
     lambda v: _settings(epochs=v)),
    ("--burnin", f"up to {options.MAX_SWEEPS:,}", options.MAX_SWEEPS, options.MAX_SWEEPS + 1,
     lambda v: _settings(burnin=v)),
    ("--workers", f"to {options.MAX_WORKERS}", options.MAX_WORKERS, options.MAX_WORKERS + 1,
     lambda v: _settings(workers=v)),
    ("--max-docs", f"at most 2^{options.MAX_COUNT.bit_length() - 1}", options.MAX_COUNT, options.MAX_COUNT + 1,
     lambda v: _settings(max_docs=v)),
]


@pytest.mark.parametrize("flag, says, inside, outside, check", BOUNDS, ids=[b[0] for b in BOUNDS])
def test_the_range_table_states_the_bounds_the_checks_hold(flag, says, inside, outside, check):
    assert options.MAX_COUNT == 1 << (options.MAX_COUNT.bit_length() - 1)
    assert says in _range_row(flag)
    check(inside)
    with pytest.raises(OptionError):
        check(outside)


def test_the_readme_lists_exactly_the_registered_local_steps_and_samplers():
    table = [line for line in README.split("## Local steps", 1)[1].split("\n## ", 1)[0].splitlines()
             if line.startswith("| `")]
    listed = [re.match(r"\| `([^`]*)`", line).group(1) for line in table[1:]]  # [0]: the header
    steps = {entry.split()[0] for entry in listed}
    samplers = {entry.split("--sampler ")[1] for entry in listed if "--sampler" in entry}
    assert steps == set(LOCAL_STEPS)
    assert samplers == set(SAMPLERS)
