"""bigtopics: topic models for million-book digital libraries on one workstation."""

from .ingest import ingest
from .store import CSRBlock, Store, StoreError, StoreWriter, open_store

__all__ = ["CSRBlock", "Store", "StoreError", "StoreWriter", "ingest", "open_store"]
__version__ = "0.1.0"
