# -*- coding: utf-8 -*-
# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations


class ModuleDocFragment(object):
    # The attributes every module of the collection shares: none shows a diff, all run on POSIX nodes.
    # Each module still says its own check mode support; it lists this fragment next to
    # ansible.builtin.action_common_attributes, whose descriptions these values complete.
    DOCUMENTATION = r"""
attributes:
  diff_mode:
    support: none
  platform:
    platforms: posix
"""
