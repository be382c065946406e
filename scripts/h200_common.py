"""What the observe-only H200 scripts share, now in the package: ``hw_backend.observe.observe_only_block``."""

from __future__ import annotations

from hw_backend.observe import observe_only_block

__all__ = ["observe_only_block"]
