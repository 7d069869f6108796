"""What every state owner raises when asked for a transition its current state does not have."""

from __future__ import annotations

from collections.abc import Collection
from enum import Enum


class IllegalTransition(RuntimeError):
    """A state owner was asked for a transition its current state does not allow: a bug."""


def require(owner: str, current: Enum, allowed: Collection[Enum], transition: str) -> None:
    if current not in allowed:
        raise IllegalTransition(f"{owner}: {transition} is no transition of {current.name}")
