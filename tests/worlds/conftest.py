"""Fixtures for the world tests."""

from __future__ import annotations

import pytest

from contextdelta.worlds import ProtectionMode


@pytest.fixture(params=list(ProtectionMode))
def mode(request: pytest.FixtureRequest) -> ProtectionMode:
    return ProtectionMode(request.param)
