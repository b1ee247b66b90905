"""Cluster bring-up and the engine handle: local GPU/CPU clusters, or an existing scheduler."""

from .engine import Engine, connect, current_engine
from .local import CpuFallbackWarning, start_cluster

__all__ = ["CpuFallbackWarning", "Engine", "connect", "current_engine", "start_cluster"]
