"""Where localenv finds the repository it belongs to."""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
"""The repository's root, of which localenv/ is a directory."""
