# -*- coding: utf-8 -*-
# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!

"""A declaration (:class:`Var`) and the helper the tables call (see __init__.py)."""

from __future__ import annotations

from collections import namedtuple

Var = namedtuple('Var', ['name', 'default', 'doc', 'entries', 'role_default', 'option', 'spec'])

NO_DEFAULT = '<no default>'
"""A variable without a default (``default`` of a :class:`Var`); null is a default (``None``)."""

SPEC_KEYS = ('type', 'elements', 'choices', 'required', 'no_log', 'options')


def _var(name, default=NO_DEFAULT, doc=(), entries=None, role_default=True, option=None, **spec):
    unknown = sorted(set(spec) - set(SPEC_KEYS))
    if unknown:
        raise TypeError('%s: no such argument spec key %s' % (name, ', '.join(unknown)))
    return Var(name, default, doc, dict(entries or {}), role_default, option, spec)
