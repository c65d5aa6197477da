"""receval: fair, label-efficient evaluation of many systems in shared tasks."""

from __future__ import annotations

__version__ = "0.1.0"
