# -*- coding: utf-8 -*-

# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!

"""The git state of a checkout on a node, and the comparison of every node's state with the controller's.

:func:`collect` reads one checkout with at most four read-only git commands, all through
:meth:`Runner.git` (the one place tests replace)::

    git -C <path> -c safe.directory=* rev-parse --show-toplevel        is it a work tree, and its top
    git -C <top> ... status --porcelain=v2 --branch -z                  branch, commit, upstream, ahead/behind, changes
    git -C <top> ... log -1 --format=%H%x00%h%x00%s%x00%cI HEAD --      subject and date (skipped without commits)
    git -C <top> ... remote get-url <remote>                            remote URL, credentials removed

Every command runs with ``LANG=C``/``LC_ALL=C`` (messages are parsed), ``GIT_OPTIONAL_LOCKS=0`` (status never
refreshes or writes the index), ``-c safe.directory=<top>`` (a checkout owned by another user of the node still
reads) and ``-c core.fsmonitor=false`` (no fsmonitor hook from that user's repository configuration is run).

:func:`compare` is pure: it takes the state dicts (the controller's and every node's) and returns
``(ok, problems, table)``.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from urllib.parse import unquote

STATE_REPOSITORY = 'repository'
STATE_NOT_A_REPOSITORY = 'not_a_repository'
STATE_MISSING = 'missing'
STATE_NOT_A_DIRECTORY = 'not_a_directory'
STATE_BARE = 'bare'
STATE_ERROR = 'error'

GIT_ENV = {
    'LANG': 'C',
    'LC_ALL': 'C',
    'LANGUAGE': 'C',
    'GIT_OPTIONAL_LOCKS': '0',
    'GIT_TERMINAL_PROMPT': '0',
    'GIT_PAGER': 'cat',
    'PAGER': 'cat',
}
"""Environment added to every git command."""

REDIRECTING_ENV = ('GIT_DIR', 'GIT_WORK_TREE', 'GIT_INDEX_FILE', 'GIT_OBJECT_DIRECTORY', 'GIT_COMMON_DIR',
                   'GIT_NAMESPACE', 'GIT_ALTERNATE_OBJECT_DIRECTORIES')
"""Variables that would make git read another repository than the one at the path; the local runner drops them."""

LOG_FORMAT = '%H%x00%h%x00%s%x00%cI'
SHORT_LEN = 12
CREDENTIAL_SCHEMES = ('http', 'https', 'ftp', 'ftps')
"""URL schemes whose user name alone may be a token (``https://<token>@host``): the whole user part is removed."""


class GitStateError(Exception):
    """Git could not tell the state of the path; ``state`` is the partial state (``state: error``)."""

    def __init__(self, msg, state=None):
        super(GitStateError, self).__init__(msg)
        self.msg = msg
        self.state = state


class Runner(object):
    """Runs git; :meth:`git` is the one method unit tests replace.

    ``run_command(argv, environ_update)`` returns ``(rc, stdout, stderr)`` as text; in the module it is
    ``AnsibleModule.run_command``, on the controller :meth:`local` uses :mod:`subprocess`.
    """

    def __init__(self, run_command, git='git'):
        self._run_command = run_command
        self.git_bin = git

    def git(self, args):
        """Run ``git <args>`` with :data:`GIT_ENV`; return ``(rc, stdout, stderr)``."""
        return self._run_command([self.git_bin] + list(args), dict(GIT_ENV))

    def path_kind(self, path):
        """``dir``, ``not_dir`` or ``missing`` for ``path`` (symlinks followed)."""
        if os.path.isdir(path):
            return 'dir'
        if os.path.exists(path):
            return 'not_dir'
        return 'missing'

    @classmethod
    def local(cls, git=None):
        """A runner for this machine without Ansible (the controller's reference state, tests).

        Raises :class:`GitStateError` when there is no git in ``PATH``.
        """
        git = git or shutil.which('git')
        if not git:
            raise GitStateError('git is not installed (no git in PATH)')

        def run_command(argv, environ_update):
            env = dict((k, v) for k, v in os.environ.items() if k not in REDIRECTING_ENV)
            env.update(environ_update)
            proc = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                  env=env, check=False)
            return (proc.returncode, proc.stdout.decode('utf-8', 'replace'), proc.stderr.decode('utf-8', 'replace'))

        return cls(run_command, git=git)


# --- URLs ---------------------------------------------------------------------------------------

_URL_RE = re.compile(r'^(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*)://(?P<authority>[^/?#]*)(?P<rest>.*)$', re.DOTALL)
_REST_RE = re.compile(r'^(?P<path>[^?#]*)(?:\?(?P<query>[^#]*))?(?P<fragment>#.*)?$', re.DOTALL)
# Query parameters that carry a credential, by name (case-insensitive, percent-decoded): OAuth's access_token
# (RFC 6750) and its refresh/id tokens, GitLab's private_token/job_token, any *token*, *secret*, *password*,
# *passwd*, *credential*, *signature* and api_key; the short names key (API keys: Google's ?key=), sig (Azure
# SAS), pwd and auth. X-Amz-Signature/-Credential/-Security-Token (S3 pre-signed URLs) and X-Goog-Signature/
# -Credential match the patterns.
_SECRET_QUERY_NAME = re.compile(r'token|secret|passw(?:or)?d|credential|signature|api[-_]?key', re.IGNORECASE)
_SECRET_QUERY_NAMES = frozenset(('key', 'sig', 'pwd', 'auth'))


def is_secret_query_name(name):
    """Whether a URL query parameter of this name carries a credential (see _SECRET_QUERY_NAME)."""
    name = unquote(name).strip().lower()
    return name in _SECRET_QUERY_NAMES or bool(_SECRET_QUERY_NAME.search(name))


def _redact_query(rest):
    """The path, query and fragment of a URL without the query parameters that carry a credential."""
    match = _REST_RE.match(rest)
    if not match or match.group('query') is None:
        return rest
    kept = [part for part in match.group('query').split('&') if not is_secret_query_name(part.split('=', 1)[0])]
    query = '&'.join(kept)
    return '{0}{1}{2}'.format(match.group('path'), '?' + query if query else '', match.group('fragment') or '')


def redact_url(url):
    """Remove credentials from a remote URL.

    ``scheme://user:secret@host/...`` loses its whole user part for every scheme; for http(s) and ftp(s)
    a user name alone is removed too, since it is often a token (``https://<token>@github.com/...``).
    ``ssh://git@host/...`` and scp-like ``git@host:org/repo.git`` keep their user name (never a secret).
    Query parameters that carry a credential (``?access_token=...``, ``private_token``, ``key``, ``sig``,
    ``X-Amz-Signature``, ...: is_secret_query_name) are removed, the others kept in their order.
    """
    if url is None:
        return None
    match = _URL_RE.match(url)
    if not match:
        return url
    authority = match.group('authority')
    if '@' in authority:
        userinfo, host = authority.rsplit('@', 1)
        if ':' in userinfo or match.group('scheme').lower() in CREDENTIAL_SCHEMES:
            authority = host
    return '{0}://{1}{2}'.format(match.group('scheme'), authority, _redact_query(match.group('rest')))


_URL_IN_TEXT_RE = re.compile(r'''[A-Za-z][A-Za-z0-9+.-]*://[^\s'"<>`]+''')


def redact_urls_in(text):
    """A text (a message, git's stderr) with every ``scheme://...`` URL in it through redact_url; a lone URL gives
    what redact_url gives. git leaves a URL's query string in its messages (``unable to access '...?token=...'``)."""
    if text is None:
        return None
    return _URL_IN_TEXT_RE.sub(lambda match: redact_url(match.group(0)), text)


# --- parsing ------------------------------------------------------------------------------------

def _int_or_none(text):
    try:
        return int(text)
    except (TypeError, ValueError):
        return None


def parse_status(output):
    """Parse ``git status --porcelain=v2 --branch -z``.

    Returns a dict: ``oid`` (None for ``(initial)``), ``head`` (None for ``(detached)``), ``detached``,
    ``upstream``, ``ab`` (whether git printed ``# branch.ab``: it does not when the upstream is gone),
    ``ahead``, ``behind`` (None without ``# branch.ab`` or with ``+? -?``), ``entries`` (every change, in
    git's order) and ``submodules`` (the submodules among the entries).

    Each entry is ``{path, orig_path, status, kind, submodule}``: ``status`` is git's two letters ``XY``
    (``.`` for unmodified, ``??`` for untracked), ``kind`` one of ``changed``, ``renamed``, ``copied``,
    ``unmerged``, ``untracked``.
    """
    result = dict(oid=None, head=None, detached=False, upstream=None, ab=False, ahead=None, behind=None, entries=[],
                  submodules=[])
    tokens = output.split('\0')
    i = 0
    while i < len(tokens):
        token = tokens[i]
        i += 1
        if not token:
            continue
        if token.startswith('# '):
            key, _sep, value = token[2:].partition(' ')
            if key == 'branch.oid':
                result['oid'] = None if value == '(initial)' else value
            elif key == 'branch.head':
                if value == '(detached)':
                    result['detached'] = True
                else:
                    result['head'] = value
            elif key == 'branch.upstream':
                result['upstream'] = value
            elif key == 'branch.ab':
                result['ab'] = True
                parts = value.split()
                if len(parts) == 2:
                    result['ahead'] = _int_or_none(parts[0].lstrip('+'))
                    result['behind'] = _int_or_none(parts[1].lstrip('-'))
            continue
        kind = token[0]
        if kind == '?':
            result['entries'].append(dict(path=token[2:], orig_path=None, status='??', kind='untracked',
                                          submodule=False))
            continue
        if kind == '!':
            continue
        if kind == '1':
            # 1 <XY> <sub> <mH> <mI> <mW> <hH> <hI> <path>
            fields = token.split(' ', 8)
            entry = dict(path=fields[8], orig_path=None, status=fields[1], kind='changed')
        elif kind == '2':
            # 2 <XY> <sub> <mH> <mI> <mW> <hH> <hI> <X><score> <path>\0<origPath>
            fields = token.split(' ', 9)
            orig = tokens[i] if i < len(tokens) else None
            i += 1
            entry = dict(path=fields[9], orig_path=orig, status=fields[1],
                         kind='copied' if fields[8].startswith('C') else 'renamed')
        elif kind == 'u':
            # u <XY> <sub> <m1> <m2> <m3> <mW> <h1> <h2> <h3> <path>
            fields = token.split(' ', 10)
            entry = dict(path=fields[10], orig_path=None, status=fields[1], kind='unmerged')
        else:
            continue
        sub = fields[2]
        entry['submodule'] = sub.startswith('S')
        result['entries'].append(entry)
        if entry['submodule'] and len(sub) == 4:
            result['submodules'].append(dict(path=entry['path'], commit_changed=sub[1] == 'C',
                                             modified=sub[2] == 'M', untracked=sub[3] == 'U'))
    return result


def count_changes(entries):
    """``{staged, unstaged, untracked, unmerged}`` counts of :func:`parse_status` entries."""
    counts = dict(staged=0, unstaged=0, untracked=0, unmerged=0)
    for entry in entries:
        if entry['kind'] == 'untracked':
            counts['untracked'] += 1
        elif entry['kind'] == 'unmerged':
            counts['unmerged'] += 1
        else:
            if entry['status'][0] != '.':
                counts['staged'] += 1
            if entry['status'][1] != '.':
                counts['unstaged'] += 1
    return counts


def parse_log(output):
    """Parse ``git log -1 --format=%H%x00%h%x00%s%x00%cI``: ``(commit, short, subject, date)``."""
    parts = output.rstrip('\n').split('\0')
    parts += [None] * (4 - len(parts))
    return parts[0] or None, parts[1] or None, parts[2], parts[3] or None


def _first_error(err, out=''):
    lines = [line.strip() for line in (err or out or '').splitlines() if line.strip()]
    for line in lines:
        if line.startswith(('fatal:', 'error:')):
            return line
    return lines[0] if lines else 'no output'


# --- collecting ---------------------------------------------------------------------------------

def empty_state(path, remote='origin', untracked=True):
    """The state dict with every key, for a path that is not (yet known to be) a work tree."""
    return dict(
        path=path, state=None, is_repo=False, message=None, toplevel=None,
        branch=None, detached=False, commit=None, short=None, initial=False, subject=None, date=None,
        upstream=None, upstream_gone=False, ahead=None, behind=None,
        remote=remote, remote_url=None,
        dirty=False, files=[], files_total=0, files_truncated=False,
        counts=dict(staged=0, unstaged=0, untracked=0, unmerged=0), untracked_checked=untracked,
        submodules=[],
    )


def collect(runner, path, remote='origin', max_files=50, untracked=True, scope=False):
    """Return the git state of ``path`` (see the module's RETURN for every key).

    With ``scope``, only changes under ``path`` count as dirty (``path`` may be a subdirectory of the work
    tree, e.g. the training code inside a larger repository); the commit is the whole repository's.

    A path that is missing, not a directory, not inside a work tree, or a bare repository is a normal answer
    (``state`` says which). :class:`GitStateError` is raised when git itself fails.
    """
    if max_files < 0:
        raise GitStateError('max_files must be 0 or more, not {0}'.format(max_files))
    state = empty_state(path, remote, untracked)
    kind = runner.path_kind(path)
    if kind == 'missing':
        state.update(state=STATE_MISSING, message='{0} does not exist'.format(path))
        return state
    if kind == 'not_dir':
        state.update(state=STATE_NOT_A_DIRECTORY, message='{0} is not a directory'.format(path))
        return state

    # safe.directory is matched against the work tree's top, unknown yet when path is a subdirectory
    rc, out, err = runner.git(['-C', path, '-c', 'safe.directory=*', 'rev-parse', '--show-toplevel'])
    if rc != 0:
        message = _first_error(err, out)
        if 'not a git repository' in message:
            state.update(state=STATE_NOT_A_REPOSITORY, message='{0} is not in a git work tree'.format(path))
            return state
        if 'must be run in a work tree' in message:
            state.update(state=STATE_BARE,
                         message='{0} is a bare repository or a .git directory, not a work tree'.format(path))
            return state
        return _fail(state, 'git rev-parse failed in {0} (rc={1}): {2}'.format(path, rc, message))
    top = out.rstrip('\n')
    if not top:
        state.update(state=STATE_BARE, message='{0} is not inside a work tree'.format(path))
        return state
    state.update(state=STATE_REPOSITORY, is_repo=True, toplevel=top)

    base = ['-C', top, '-c', 'safe.directory=' + top, '-c', 'core.fsmonitor=false',
            '-c', 'core.abbrev={0}'.format(SHORT_LEN)]
    pathspec = []
    if scope:
        relative = os.path.relpath(os.path.realpath(path), os.path.realpath(top))
        pathspec = ['--', relative] if relative != '.' else []
    rc, out, err = runner.git(base + ['status', '--porcelain=v2', '--branch', '-z',
                                      '--untracked-files=' + ('normal' if untracked else 'no')] + pathspec)
    if rc != 0:
        return _fail(state, 'git status failed in {0} (rc={1}): {2}'.format(top, rc, _first_error(err, out)))
    status = parse_status(out)
    entries = status['entries']
    state.update(
        branch=status['head'], detached=status['detached'], commit=status['oid'],
        initial=status['oid'] is None and not status['detached'],
        upstream=status['upstream'], ahead=status['ahead'], behind=status['behind'],
        upstream_gone=status['upstream'] is not None and not status['ab'],
        dirty=bool(entries), files=entries[:max_files], files_total=len(entries),
        files_truncated=len(entries) > max_files, counts=count_changes(entries), submodules=status['submodules'],
    )
    if state['commit']:
        state['short'] = state['commit'][:SHORT_LEN]
        rc, out, err = runner.git(base + ['log', '-1', '--no-show-signature', '--format=' + LOG_FORMAT, 'HEAD', '--'])
        if rc != 0:
            return _fail(state, 'git log failed in {0} (rc={1}): {2}'.format(top, rc, _first_error(err, out)))
        commit, short, subject, date = parse_log(out)
        if commit and commit != state['commit']:
            return _fail(state, 'HEAD moved while it was read in {0} ({1} then {2})'.format(top, state['commit'], commit))
        state.update(short=short or state['short'], subject=subject, date=date)

    rc, out, err = runner.git(base + ['remote', 'get-url', remote])
    if rc == 0 and out.strip():
        state['remote_url'] = redact_url(out.strip())
    return state


def _fail(state, msg):
    state.update(state=STATE_ERROR, message=msg)
    raise GitStateError(msg, state)


# --- comparing ----------------------------------------------------------------------------------

_WHAT = {
    STATE_MISSING: 'path {path} does not exist',
    STATE_NOT_A_DIRECTORY: '{path} is not a directory',
    STATE_NOT_A_REPOSITORY: '{path} is not a git repository',
    STATE_BARE: '{path} is a bare repository or a .git directory, not a work tree',
}

_CELL = {
    STATE_MISSING: '(path missing)',
    STATE_NOT_A_DIRECTORY: '(not a directory)',
    STATE_NOT_A_REPOSITORY: '(not a repository)',
    STATE_BARE: '(bare repository)',
    STATE_ERROR: '(git failed)',
}


def _unwrap(value):
    """``(state, error)`` from a state dict, a registered module result (``{git: ...}``) or ``None``."""
    if not isinstance(value, dict):
        return None, 'no git state (nothing was returned)'
    if 'git' in value and isinstance(value['git'], dict):
        if value['git'].get('state') is None and value.get('failed'):
            return None, 'no git state: {0}'.format(value.get('msg') or 'the task failed')
        return value['git'], None
    if 'state' in value and 'path' in value:
        return value, None
    if value.get('unreachable'):
        return None, 'no git state: unreachable ({0})'.format(value.get('msg') or 'no message')
    if value.get('failed') or value.get('skipped'):
        return None, 'no git state: {0}'.format(value.get('msg') or ('skipped' if value.get('skipped') else 'failed'))
    return None, 'no git state (unrecognised result)'


def _describe_unusable(state):
    """Why ``state`` is not a work tree to compare, or None when it is one."""
    kind = state.get('state')
    if kind == STATE_REPOSITORY:
        return None
    if kind == STATE_ERROR:
        return 'git failed: {0}'.format(state.get('message') or 'no message')
    if kind in _WHAT:
        return _WHAT[kind].format(path=state.get('path'))
    return 'unknown git state {0!r}'.format(kind)


def _short(state):
    return state.get('short') or (state.get('commit') or '')[:SHORT_LEN] or None


def _dirty_problem(state):
    files = [f.get('path') for f in state.get('files') or []]
    total = state.get('files_total') or len(files)
    shown = ', '.join(files[:3]) + (', ...' if total > 3 else '')
    return 'dirty: {0} changed or untracked file{1} ({2})'.format(total, '' if total == 1 else 's', shown or 'not listed')


def _node_problems(state, reference, reference_name, allow_dirty):
    unusable = _describe_unusable(state)
    if unusable:
        return [unusable]
    problems = []
    if reference is not None:
        ref_branch = None if reference.get('detached') else reference.get('branch')
        if ref_branch is not None:
            # a detached HEAD at the reference's very commit is the same code (code_sync's git mode checks out
            # the exact commit, detached); at another commit it is a problem, said below
            if state.get('detached'):
                if state.get('commit') != reference.get('commit'):
                    problems.append('detached HEAD at {0} ({1} is on branch {2})'.format(
                        _short(state) or 'no commit', reference_name, ref_branch))
            elif state.get('branch') != ref_branch:
                problems.append('on branch {0} ({1} is on branch {2})'.format(
                    state.get('branch'), reference_name, ref_branch))
        if state.get('commit') != reference.get('commit'):
            problems.append('at commit {0} ({1} is at {2})'.format(
                _short(state) or '(no commits)', reference_name, _short(reference) or '(no commits)'))
    if state.get('dirty') and not allow_dirty:
        problems.append(_dirty_problem(state))
    return problems


def _cells(state):
    if state is None:
        return '(no state)', '-'
    if state.get('state') != STATE_REPOSITORY:
        return _CELL.get(state.get('state'), '({0})'.format(state.get('state'))), '-'
    branch = '(detached)' if state.get('detached') else (state.get('branch') or '(unknown)')
    head = '{0} @ {1}'.format(branch, _short(state) or '(no commits)')
    if state.get('dirty'):
        total = state.get('files_total') or len(state.get('files') or [])
        return head, 'dirty ({0} file{1})'.format(total, '' if total == 1 else 's')
    return head, 'clean'


def format_table(rows):
    """Aligned plain text of ``rows`` (``(marked, node, head, dirty, verdict)``), with a header line.

    Marked rows start with ``!``; the last column is not padded.
    """
    header = ('node', 'branch @ commit', 'dirty', 'verdict')
    cells = [header] + [tuple(row[1:]) for row in rows]
    widths = [max(len(c[i]) for c in cells) for i in range(3)]
    lines = []
    for marked, cell in zip([False] + [row[0] for row in rows], cells):
        padded = [cell[i].ljust(widths[i]) for i in range(3)] + [cell[3]]
        lines.append(('! ' if marked else '  ') + ' | '.join(padded))
    return '\n'.join(lines)


def compare(reference, per_node, allow_dirty=False, reference_name='controller'):
    """Compare every node's git state with the reference (the controller's checkout).

    ``reference`` and the values of ``per_node`` (``{node name: state}``, in the order the table should
    list them) are dicts returned by :func:`collect`; a registered module result (``{'git': {...}, ...}``),
    a failed or unreachable task result, or ``None`` are accepted too and reported as having no state.

    A node is a problem when it is not a usable work tree (missing path, not a repository, bare, git
    failed, no result), when it is on a detached HEAD or another branch while the reference is on a
    branch (with a detached reference only commits are compared), when its commit differs from the
    reference's, or when it is dirty unless ``allow_dirty``. The reference itself fails when it is not
    a work tree, or dirty unless ``allow_dirty``. Every node is checked.

    Returns ``(ok, problems, table)``: ``ok`` is True when there is no problem; ``problems`` a list of
    ``"<node>: <what>"`` strings (reference first, then nodes in order); ``table`` plain text with a header
    and one row per node, the reference first: ``node | branch @ commit | dirty (N files) | verdict``,
    columns aligned, rows with a problem marked with a leading ``!`` and their problems in the verdict.
    """
    problems = []
    rows = []
    ref, error = _unwrap(reference)
    ref_problems = [error] if error else _node_problems(ref, None, reference_name, allow_dirty)
    problems.extend('{0}: {1}'.format(reference_name, p) for p in ref_problems)
    head, dirty = _cells(ref)
    rows.append((bool(ref_problems), str(reference_name), head, dirty,
                 'FAIL: ' + '; '.join(ref_problems) if ref_problems else 'reference'))
    usable_ref = ref if ref is not None and ref.get('state') == STATE_REPOSITORY else None
    for node, value in (per_node or {}).items():
        state, error = _unwrap(value)
        node_problems = [error] if error else _node_problems(state, usable_ref, reference_name, allow_dirty)
        if usable_ref is None and not node_problems:
            node_problems = ['cannot be compared: {0} has no usable git state'.format(reference_name)]
        problems.extend('{0}: {1}'.format(node, p) for p in node_problems)
        head, dirty = _cells(state)
        rows.append((bool(node_problems), str(node), head, dirty,
                     'FAIL: ' + '; '.join(node_problems) if node_problems else 'ok'))
    return not problems, problems, format_table(rows)
