"""Train from the CLI and kill this process (SIGKILL, as `kill -9`) at the nth occurrence of a
named event, for test_resume.py's fault-injection test:

    python tests/fault_harness.py EVENT N -- <arguments of `bigtopics train`>

Events: where a multi-day run can be cut short between two of its writes.
    checkpoint-write    a checkpoint fully written under its temporary name, not yet renamed
    checkpoint-rename   just renamed into place, before its folder is synced and old ones removed
    model-aside         a model snapshot: the old model.zarr renamed aside, the new one not yet in place
    model-rename        a model snapshot just renamed into place
    reset               the table just reset (its entries rescaled and small ones dropped)
    epoch-end           an epoch ended, the next one not yet started

For the model events, models are snapshotted after every minibatch (snapshot_seconds=0), so
that they happen mid-run; that changes no result."""

import os
import signal
import sys
from pathlib import Path

from bigtopics import topic_word, trainer
from bigtopics.cli import main

EVENT, NTH = sys.argv[1], int(sys.argv[2])
seen = 0


def occurred() -> None:
    global seen
    seen += 1
    if seen == NTH:
        os.kill(os.getpid(), signal.SIGKILL)


real_fsync, real_replace = os.fsync, os.replace
real_reset, real_minibatches = topic_word.TopicWordTable.reset, trainer.Trainer.minibatches
real_init = trainer.Trainer.__init__


def fsync(fd):
    real_fsync(fd)
    name = Path(os.readlink(f"/proc/self/fd/{fd}")).name
    if EVENT == "checkpoint-write" and name.startswith(".step-") and ".ckpt.tmp-" in name:
        occurred()


def replace(src, dst):
    real_replace(src, dst)
    name = Path(dst).name
    if ((EVENT == "checkpoint-rename" and name.endswith(".ckpt"))
            or (EVENT == "model-aside" and name.startswith(".model.zarr.old-"))
            or (EVENT == "model-rename" and name == "model.zarr")):
        occurred()


def reset(self, *args, **kwargs):
    result = real_reset(self, *args, **kwargs)
    if EVENT == "reset":
        occurred()
    return result


def minibatches(self, epoch, skip=0):
    if EVENT == "epoch-end" and epoch > 0 and skip == 0:
        occurred()
    return real_minibatches(self, epoch, skip)


def init(self, *args, **kwargs):
    real_init(self, *args, **kwargs)
    if EVENT.startswith("model-"):
        self.snapshot_seconds = 0.0


os.fsync, os.replace = fsync, replace
topic_word.TopicWordTable.reset, trainer.Trainer.minibatches, trainer.Trainer.__init__ = reset, minibatches, init
main(sys.argv[sys.argv.index("--") + 1:], prog_name="bigtopics")
