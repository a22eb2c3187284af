# -*- coding: utf-8 -*-

# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!

"""The training interpreter's Python and torch: a program the preflight runs with that interpreter.

Usage: ``python -c "$(source of this file)" [--import]``, on the node or in the training container
(``docker exec``): the preflight module imports this file (so AnsiballZ packs it) and passes its
source with ``-c``, so nothing is written anywhere. Standard library only. Prints one JSON object.

Without ``--import`` torch's installed version comes from its package metadata: importing torch costs
1-2 s of CPU per node (docs/benchmarks.md); ``--import`` (import_torch=true) does the full import.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from importlib import metadata

IMPORT_FLAG = '--import'


def probe(import_torch):
    """``{python, executable, version, location, imported, error}`` (``cuda`` and ``hip`` after an import)."""
    out = {'python': sys.version.split()[0], 'executable': sys.executable, 'version': None, 'location': None,
           'imported': False, 'error': None}
    try:
        spec = importlib.util.find_spec('torch')
        if spec is None:
            out['error'] = "No module named 'torch'"
        else:
            out['location'] = spec.origin
            if import_torch:
                import torch  # pylint: disable=import-error,import-outside-toplevel
                out['version'] = torch.__version__
                out['imported'] = True
                out['cuda'] = getattr(torch.version, 'cuda', None)
                out['hip'] = getattr(torch.version, 'hip', None)
            else:
                out['version'] = metadata.version('torch')
    except Exception as exc:  # pylint: disable=broad-except  # reported, never raised: the controller says what to fix
        out['error'] = '%s: %s' % (type(exc).__name__, exc)
    return out


def main(argv):
    """Print the probe's JSON for ``argv`` (``['-c']`` or ``['-c', '--import']``)."""
    sys.stdout.write(json.dumps(probe(IMPORT_FLAG in argv[1:])))
    return 0


if __name__ == '__main__':
    raise SystemExit(main(sys.argv))
