# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Note that this plugin util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!

"""The collection's filters check the shape of what a task gives them here, one rule for all: a value of the wrong
type fails the filter with ``<filter>: <what> must be <kind>, not <its type>``. The type, not the value: a value may
hold what a node wrote, or a secret."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ansible.errors import AnsibleFilterError


def _refuse(name, what, kind, value, optional):
    raise AnsibleFilterError('%s: %s must be %s%s, not %s'
                             % (name, what, kind, ' or null' if optional else '', type(value).__name__))


def mapping(name, value, what='the input', kind='a mapping', optional=False):
    """``value`` when it is a mapping (or None where ``optional``), else the filter ``name`` fails naming ``what``."""
    if isinstance(value, Mapping) or (optional and value is None):
        return value
    return _refuse(name, what, kind, value, optional)


def sequence(name, value, what='the input', kind='a list'):
    """``value`` as a list when it is a sequence other than a string, else the filter ``name`` fails naming ``what``."""
    if isinstance(value, Sequence) and not isinstance(value, (str, bytes)):
        return list(value)
    return _refuse(name, what, kind, value, False)
