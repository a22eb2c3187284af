"""Offline stand-in for ``get-pip.py``, used by ``ansible-test``'s pip bootstrap.

``ansible-test`` creates its sanity-test virtual environments with ``--without-pip``
and then "bootstraps" pip into them by running a ``get-pip.py`` script that it
downloads from ``https://ci-files.testing.ansible.com/ansible-test/get-pip-<ver>.py``.
That host is not reachable from our build machines.  ``ansible-test`` first looks for
a cached copy at ``~/.ansible/test/cache/get_pip_<ver with . replaced by _>.py``
(see ``ansible_test/_util/target/setup/requirements.py``: ``bootstrap()``), so
``hack/sanity.sh`` installs *this* file at that path.

How ansible-test runs it: ``ansible_test/_util/target/setup/quiet_pip.py`` executes
the cached file as ``__main__`` (``runpy.run_module``) with the virtual environment's
interpreter as ``sys.executable`` and ``sys.argv[1:]`` set to the get-pip options, e.g.::

    --disable-pip-version-check pip==24.2 --no-setuptools --no-wheel

What it does (same contract as the real get-pip.py, without the network download):

1. ``python -m ensurepip`` -- puts the pip wheel bundled with CPython into the
   environment; this needs no network.
2. Drops ``PIP_CONFIG_FILE`` from the environment if it is ``os.devnull``:
   ``ensurepip`` sets it to ``/dev/null`` (it must not read user config while it
   installs from its bundled wheels); leaking that into step 3 would hide this
   machine's pip settings (index/mirror, find-links, CA bundle), and the install of
   the wanted pip version would then try the default index only.
3. ``python -m pip install --upgrade --force-reinstall <args>`` -- installs the pip
   version ansible-test asked for, through the configured index, plus setuptools /
   wheel unless ``--no-setuptools`` / ``--no-wheel`` were given (like get-pip.py).
4. Removes setuptools again if ``--no-setuptools`` was given and only ensurepip put it
   there (CPython <= 3.11's ensurepip always installs it), so the environment holds
   what ansible-test asked for and nothing more.

It is also usable by hand: ``python hack/get_pip_offline.py pip==24.2 --no-setuptools``.
"""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys

_NAME_SPLIT = re.compile(r'[\s<>=!~;@\[(]')


def _requirement_name(arg: str) -> str | None:
    """Return the normalized project name of a requirement argument, or None for options."""
    if arg.startswith('-'):
        return None
    name = _NAME_SPLIT.split(arg, maxsplit=1)[0]
    return re.sub(r'[-_.]+', '-', name).lower() or None


def _installed(name: str) -> bool:
    return importlib.util.find_spec(name) is not None


def _run(cmd: list[str], env: dict[str, str]) -> None:
    result = subprocess.run(cmd, env=env, check=False)
    if result.returncode != 0:
        sys.stderr.write(f'get_pip_offline: command failed ({result.returncode}): {" ".join(cmd)}\n')
        sys.exit(result.returncode)


def main(argv: list[str]) -> None:
    args = list(argv)

    no_setuptools = '--no-setuptools' in args or bool(os.environ.get('PIP_NO_SETUPTOOLS'))
    no_wheel = '--no-wheel' in args or bool(os.environ.get('PIP_NO_WHEEL'))
    args = [arg for arg in args if arg not in ('--no-setuptools', '--no-wheel')]

    requested = {name for name in map(_requirement_name, args) if name}
    had_setuptools = _installed('setuptools')

    env = dict(os.environ)

    # 1. pip from the wheel bundled with this interpreter -- offline.
    _run([sys.executable, '-m', 'ensurepip', '--default-pip'], env)

    # 2. ensurepip points PIP_CONFIG_FILE at /dev/null; do not let that hide pip.conf.
    #    (ensurepip runs in a child process here, but be robust to a caller that ran it in-process.)
    if env.get('PIP_CONFIG_FILE') == os.devnull:
        del env['PIP_CONFIG_FILE']

    # 3. the pip version (and extras) that the caller asked for, through the configured index.
    packages = []
    if 'pip' not in requested:
        packages.append('pip')
    if not no_setuptools and 'setuptools' not in requested:
        packages.append('setuptools')
    if not no_wheel and 'wheel' not in requested:
        packages.append('wheel')

    _run([sys.executable, '-m', 'pip', 'install', '--upgrade', '--force-reinstall'] + args + packages, env)

    # 4. ensurepip (CPython <= 3.11) always installs setuptools; take it out again if unwanted.
    if no_setuptools and not had_setuptools and 'setuptools' not in requested:
        importlib.invalidate_caches()
        if _installed('setuptools'):
            _run([sys.executable, '-m', 'pip', 'uninstall', '--yes', '--disable-pip-version-check', 'setuptools'], env)


if __name__ == '__main__':
    main(sys.argv[1:])
