"""The local steps, by name: a new one is a module with a LocalStep class and a line here."""

from .base import LocalStep
from .gibbs import GibbsStep
from .lsparse import LSparseStep
from .scvb0 import SCVB0Step
from .vb import VBStep

LOCAL_STEPS: dict[str, type[LocalStep]] = {step.name: step for step in (GibbsStep, VBStep, LSparseStep, SCVB0Step)}

__all__ = ["LOCAL_STEPS", "LocalStep"]
