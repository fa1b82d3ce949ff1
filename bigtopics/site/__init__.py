"""A static website for browsing a topic model of a library (`bigtopics site`; build.py)."""

from .build import build_site

__all__ = ["build_site"]
