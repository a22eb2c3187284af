# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
import pytest

from module_harness import patched_exits


@pytest.fixture(autouse=True)
def patch_exit():
    """Every module test: exit_json/fail_json raise ExitJson/FailJson (tests/module_harness.py)."""
    with patched_exits():
        yield
