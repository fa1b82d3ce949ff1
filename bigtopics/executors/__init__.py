"""Executors, by name: a new one is a module with an Executor class and a line here."""

from .base import Executor, StepTask
from .threads import LocalThreads

EXECUTORS: dict[str, type[Executor]] = {"threads": LocalThreads}

__all__ = ["EXECUTORS", "Executor", "LocalThreads", "StepTask"]
