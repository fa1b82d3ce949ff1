"""bigtopics: topic models for million-book digital libraries on one workstation.

    import bigtopics
    bigtopics.ingest(["books/"], "library.zarr", section_tokens=2000)
    bigtopics.train("library.zarr", "run/", bigtopics.TrainSettings(n_topics=2000))
    model = bigtopics.load_model("run/")
    bigtopics.infer("run/", "library.zarr", "doc_topics.zarr")
    bigtopics.export("run/", "export/", doc_topics="doc_topics.zarr", store="library.zarr")
"""

from .startup import quiet_interrupts_while_starting

quiet_interrupts_while_starting()  # first: the imports below take a second or more

from .export import export
from .infer import InferSettings, infer
from .ingest import ingest
from .model import Model, load_model
from .settings import TrainSettings
from .store import CSRBlock, Store, StoreError, StoreWriter, open_store
from .trainer import Trainer, resume, train

__all__ = [
    "CSRBlock", "InferSettings", "Model", "Store", "StoreError", "StoreWriter", "TrainSettings", "Trainer",
    "export", "infer", "ingest", "load_model", "open_store", "resume", "train",
]
__version__ = "0.1.0"
