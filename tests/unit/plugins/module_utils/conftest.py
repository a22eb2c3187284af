# -*- coding: utf-8 -*-
# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Fixtures shared by the module_utils unit tests."""

from __future__ import annotations

import pytest


@pytest.fixture
def experiment(tmp_path):
    """An empty experiment directory as the experiment module creates it (``outputs/``, ``logs/``)."""
    path = tmp_path / 'exp'
    (path / 'outputs').mkdir(parents=True)
    (path / 'logs').mkdir()
    return path
