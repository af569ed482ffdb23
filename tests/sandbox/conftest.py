"""What the tests of ``ctrlz run --sandbox`` share beyond ``test_run_sandbox``'s areas."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from ctrlz import platform

TYPE_CHECKING = False
if TYPE_CHECKING:
    from tests.sandbox.test_run_sandbox import Area


@pytest.fixture
def native(area: Area) -> Iterator[None]:
    """The native launcher beside the interpreter the test user runs ctrlz with (a copy of
    this checkout's for uid 65534's venv, for this test only: a C program needs nothing
    more)."""
    if area.user is None:
        if platform.native_launcher() is None:
            pytest.skip("no native launcher was built (no C compiler?)")
        yield
        return
    with area.user.native_launcher():
        yield
