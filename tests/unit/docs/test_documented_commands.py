# -*- coding: utf-8 -*-
# Copyright (c) 2026, trainops maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Every command the docs show works as written, and the docs and the argument specs name the same variables.

Cheap: no playbook runs. Each ``ansible-playbook`` command of README.md, docs/ (every page, however deep), the
roles' READMEs, molecule/'s pages and the comments of playbooks/ is joined across its line continuations, split as
a shell would (shlex) and parsed by ansible-playbook's own parser (``PlaybookCLI``); each playbook it names must be
one of the repository's, and each ``-e`` must parse as Ansible parses it (``parse_kv`` for ``key=value``, YAML for
``{...}``; an ``@file`` is read at run time and skipped) into variables that are declared: an option of an entry
point of a role's meta/argument_specs.yml, a short knob of the registry (module_utils/_knobs.py), or a variable of
the named playbook's plays. Every ``trainops_*`` variable the docs name in code is declared in an argument spec,
and every knob of the job role's launch (its ``main`` entry point, and every short knob) is named in a doc page.
Each ``make`` command of the docs names a target of the Makefile, and each benchmark command (``bench/<script> ...``)
parses with that script's own options.

A failure names the file and line, the command and what is wrong with it.
"""

from __future__ import annotations

import contextlib
import glob
import importlib.machinery
import importlib.util
import io
import os
import re
import shlex

import pytest
import yaml

from ansible.cli.playbook import PlaybookCLI
from ansible.parsing.splitter import parse_kv

from ansible_collections.trainops.multinode.plugins.module_utils import _knobs, _launcher_steps

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), '..', '..', '..'))

PAGE_GLOBS = ('README.md', 'docs/**/*.md', 'roles/*/README.md', 'molecule/**/*.md')
"""The doc pages (globbed: pages move between folders of docs/)."""

COMMENT_GLOBS = ('playbooks/*.yml',)
"""Files whose ``#`` comments show commands."""

PLACEHOLDER = re.compile(r'<[^<>\n]+>')
"""``<experiment name>``, ``<run>``: a word the user fills in."""

OPTIONAL = re.compile(r'\[(-[^\[\]]*)\]')
"""``[-e follow=true]``: an optional part of a command, checked as if given."""

COMMAND = re.compile(r'(?:^|(?<=\s))(?:\$\s+)?(?:[\w.~-]*/)*ansible-playbook'
                     r'(?=\s+(?:-|\S*\.ya?ml\b|trainops\.multinode\.|\S*/))')
"""Where a command starts: ``ansible-playbook`` (or a path to it, or a ``$`` prompt) first on a line, or after a
blank (printed hints: ``stop: ansible-playbook ...``); not within a word or a path (a script's ``(/x/ansible-playbook``),
and followed by an option or a playbook (not prose: ``the directory ansible-playbook runs from``)."""

MAKE = re.compile(r'(?:^|(?<=\s))(?:\$\s+)?make\s+([^#\n]*)')

FENCE = re.compile(r'^\s*(```|~~~)')


def _rel(path):
    return os.path.relpath(path, ROOT)


def _files(globs):
    found = set()
    for pattern in globs:
        found.update(path for path in glob.glob(os.path.join(ROOT, pattern), recursive=True) if os.path.isfile(path))
    return sorted(found)


def _read(path):
    with open(path, encoding='utf-8') as handle:
        return handle.read()


# --- where commands and names are shown: code blocks and code spans --------------------------------------------

def code_lines(text):
    """The code block lines of a Markdown page: ``(line number, text)`` of each line in a fenced block or an
    indented one (4 spaces or a tab, starting after a blank line)."""
    lines = text.splitlines()
    result = []
    fenced = False
    indented = False
    previous_blank = True
    for number, line in enumerate(lines, 1):
        if FENCE.match(line):
            fenced = not fenced
            previous_blank = False
            continue
        if fenced:
            result.append((number, line))
            continue
        blank = not line.strip()
        if line.startswith(('    ', '\t')) and (indented or previous_blank) and not blank:
            indented = True
            result.append((number, line))
        elif not blank:
            indented = False
        previous_blank = blank
    return result


def code_spans(text):
    """The inline code spans of a Markdown page outside code blocks: ``(line number, text)``, a span over several
    lines joined with blanks."""
    block_lines = set(number for number, _line in code_lines(text))
    fence_lines = set(number for number, line in enumerate(text.splitlines(), 1) if FENCE.match(line))
    prose = '\n'.join('' if number in block_lines or number in fence_lines else line
                      for number, line in enumerate(text.splitlines(), 1))
    spans = []
    for match in re.finditer(r'(`+)(.+?)\1', prose, re.S):
        spans.append((prose.count('\n', 0, match.start()) + 1, ' '.join(match.group(2).split())))
    return spans


def comment_lines(text):
    """The ``#`` comments of a YAML file, ``(line number, text after the #)``."""
    return [(number, line.split('#', 1)[1]) for number, line in enumerate(text.splitlines(), 1)
            if line.lstrip().startswith('#')]


def _joined(lines, index):
    """A code line joined with the lines it continues onto (a trailing backslash), and the lines it took."""
    number, text = lines[index]
    taken = 1
    while text.rstrip().endswith('\\') and index + taken < len(lines) and lines[index + taken][0] == number + taken:
        text = text.rstrip()[:-1] + ' ' + lines[index + taken][1].strip()
        taken += 1
    return text, taken


def _commands_in(lines, pattern, inline=False):
    """``(line number, command text)`` of each match of ``pattern`` in code lines, continuations joined."""
    found = []
    index = 0
    while index < len(lines):
        text, taken = (lines[index][1], 1) if inline else _joined(lines, index)
        for match in pattern.finditer(text):
            found.append((lines[index][0], text[match.start():].strip(), match))
        index += taken
    return found


def documented(pattern, comments=True):
    """Every command the docs show that ``pattern`` finds, in code blocks, code spans and (``comments``) the
    comments of COMMENT_GLOBS: ``(file:line, command, match, whether it is a code span)``."""
    found = []
    for path in _files(PAGE_GLOBS):
        text = _read(path)
        for lines, inline in ((code_lines(text), False), (code_spans(text), True)):
            for number, command, match in _commands_in(lines, pattern, inline):
                found.append(('%s:%d' % (_rel(path), number), command, match, inline))
    if comments:
        for path in _files(COMMENT_GLOBS):
            for number, command, match in _commands_in(comment_lines(_read(path)), pattern):
                found.append(('%s:%d' % (_rel(path), number), command, match, False))
    return found


# --- what is declared -----------------------------------------------------------------------------------------

def _specs():
    """``{(role, entry point): options}`` of every role's meta/argument_specs.yml."""
    specs = {}
    for path in _files(('roles/*/meta/argument_specs.yml',)):
        role = _rel(path).split(os.sep)[1]
        for entry, spec in (yaml.safe_load(_read(path))['argument_specs'] or {}).items():
            specs[(role, entry)] = spec.get('options') or {}
    return specs


SPECS = _specs()
SPEC_VARIABLES = set(name for options in SPECS.values() for name in options)
SHORT_KNOBS = set(knob.short for knob in _knobs.SHORT)


def play_variables(playbook):
    """The variables a playbook's plays declare (``vars:``)."""
    names = set()
    for play in yaml.safe_load(_read(playbook)) or ():
        names.update((play.get('vars') or {}) if isinstance(play, dict) else ())
    return names


def playbook_path(name):
    """The repository's playbook a command names, or None: a path in the checkout, ``trainops.multinode.<name>``
    (an installed collection's playbook), a path that ends in ``playbooks/<name>.yml`` (the installed collection's
    directory, a hint's ``.../playbooks/status.yml``), or a Molecule scenario's own playbook (``converge.yml``)."""
    candidates = [os.path.join(ROOT, name)]
    if name.startswith('trainops.multinode.'):
        candidates.append(os.path.join(ROOT, 'playbooks', name.split('.', 2)[2] + '.yml'))
    parts = name.replace('\\', '/').split('/')
    if len(parts) >= 2 and parts[-2] == 'playbooks':
        candidates.append(os.path.join(ROOT, 'playbooks', parts[-1]))
    if '/' not in name:
        candidates.extend(sorted(glob.glob(os.path.join(ROOT, 'molecule', '*', name))))
    for candidate in candidates:
        if os.path.isfile(candidate):
            return candidate
    return None


# --- one command ----------------------------------------------------------------------------------------------

def _parser():
    cli = PlaybookCLI(['ansible-playbook'])
    cli.init_parser()
    return cli.parser


PARSER = _parser()


def parse(command):
    """ansible-playbook's options for a command line (its text from ``ansible-playbook`` on), or the parser's
    error: ``(namespace, None)`` or ``(None, error)``."""
    text = OPTIONAL.sub(r'\1', PLACEHOLDER.sub('PLACEHOLDER', command))
    try:
        argv = shlex.split(text, comments=True)
    except ValueError as exc:
        return None, 'a shell cannot split it: %s' % exc
    stderr = io.StringIO()
    try:
        with contextlib.redirect_stderr(stderr):
            return PARSER.parse_args(argv[[word.endswith('ansible-playbook') for word in argv].index(True) + 1:]), None
    except SystemExit:
        error = stderr.getvalue().strip().splitlines()[-1]
        if 'unrecognized arguments' in error and '=' in error:
            error += ': a word after -e key=value is read as another argument; give each variable its own -e'
        return None, 'ansible-playbook refuses it: %s' % error


def extra_vars(value):
    """The variables one ``-e`` value sets, as Ansible reads it (ansible.utils.vars.load_extra_vars), or a
    problem: ``(names, problem)``; ``(None, reason)`` for what cannot be checked here."""
    if value.startswith('@'):
        return None, 'a vars file (%s), read when the playbook runs' % value
    if value[:1] in ('/', '.'):
        return (), '-e %s: Ansible refuses a file name without @' % value
    if value[:1] in ('{', '['):
        try:
            data = yaml.safe_load(value)
        except yaml.YAMLError as exc:
            return (), '-e %s: not YAML: %s' % (value, ' '.join(str(exc).split()))
        if not isinstance(data, dict):
            return (), '-e %s: not a mapping' % value
        return list(data), None
    data = parse_kv(value)
    if '_raw_params' in data:
        key = list(data)[0]
        return list(data), ('-e %r: Ansible reads only key=value words, so %r is dropped (the value of %s ends at '
                            'the first blank): quote the value inside, -e \'%s="..."\', or give a mapping, '
                            '-e \'{"%s": "..."}\'' % (value, data['_raw_params'], key, key, key))
    return list(data), None


def command_problems(command, inline=False):
    """What is wrong with one documented command, one line each (empty: it works as written); and the -e values
    not checked, with the reason."""
    options, error = parse(command)
    if error:
        if inline and 'the following arguments are required' in error:
            return [], ['names options only, no playbook: a mention, not a command']
        return [error], []
    problems = []
    skipped = []
    declared = SPEC_VARIABLES | SHORT_KNOBS
    for name in options.args:
        path = playbook_path(name)
        if path is None:
            problems.append('%s is no playbook of the repository (playbooks/, trainops.multinode.<name>)%s' % (
                name, ': a word after -e key=value is read as a playbook; give each variable its own -e'
                if '=' in name else ''))
        else:
            declared = declared | play_variables(path)
    for value in options.extra_vars:
        names, problem = extra_vars(value)
        if names is None:
            skipped.append(problem)
            continue
        if problem:
            problems.append(problem)
        for name in names:
            if name != '_raw_params' and name not in declared:
                problems.append('-e %s: %s is declared nowhere (no argument spec option, short knob of '
                                'module_utils/_knobs.py or variable of the playbook)' % (value, name))
    return problems, skipped


def all_commands():
    return [(where, command, inline) for where, command, _match, inline in documented(COMMAND)]


# --- the tests ------------------------------------------------------------------------------------------------

def test_every_documented_ansible_playbook_command_parses_names_real_playbooks_and_declared_variables():
    commands = all_commands()
    lines = []
    skipped = []
    for where, command, inline in commands:
        problems, skips = command_problems(command, inline)
        lines.extend('%s: %s\n    %s' % (where, command, problem) for problem in problems)
        skipped.extend('%s: %s' % (where, skip) for skip in skips)
    mentions = [line for line in skipped if 'a mention' in line]
    print('%d documented ansible-playbook commands checked; not checked: %s' % (
        len(commands) - len(mentions), '; '.join(skipped) or 'none'))
    assert len(commands) > 50, 'the docs show %d commands: is the search broken?' % len(commands)
    assert not lines, 'documented commands that do not work as written:\n' + '\n'.join(lines)


@pytest.mark.parametrize('command, wrong', [
    ('ansible-playbook playbooks/launch.yml -e channels=42 threads=256 nproc=2',
     'unrecognized arguments: threads=256 nproc=2: a word after -e key=value'),
    ('ansible-playbook -e channels=42 threads=256 playbooks/launch.yml', 'threads=256 is no playbook of the repository'),
    ("ansible-playbook playbooks/launch.yml -e 'args=--lr 3e-4 --epochs 2'", "'3e-4 --epochs 2' is dropped"),
    ('ansible-playbook playbooks/launch.yml -e chanels=42', 'chanels is declared nowhere'),
    ('ansible-playbook playbooks/lanch.yml', 'playbooks/lanch.yml is no playbook'),
    ('ansible-playbook playbooks/launch.yml -e', 'expected one argument'),
    ("ansible-playbook playbooks/launch.yml -e '{\"sweep\": [1'", 'not YAML'),
    ("ansible-playbook playbooks/launch.yml -e 'args=\"--lr 3e-4\"", 'a shell cannot split it'),
    ('ansible-playbook playbooks/logs.yml -e rnak=3', 'rnak is declared nowhere'),
])
def test_a_command_that_does_not_work_as_written_is_named_with_what_is_wrong(command, wrong):
    problems, _skipped = command_problems(command)
    assert any(wrong in problem for problem in problems), problems


@pytest.mark.parametrize('command', [
    'ansible-playbook -i node_ip_list.txt playbooks/launch.yml -e channels=42 -e threads=256 -e nproc=2',
    "ansible-playbook playbooks/launch.yml -e 'args=\"--lr 3e-4 --epochs 2\"' -e src=~/src/x  # a comment",
    "ansible-playbook playbooks/launch.yml -e '{\"trainops_script_args\": [\"--lr\", \"3e-4\"]}' --check",
    'ansible-playbook -i hosts.yml trainops.multinode.status [-e run_id=<experiment name>]',
    'ansible-playbook playbooks/hostfile.yml -e hostfile_format=mpich -e @vars.yml',
])
def test_a_command_that_works_has_no_problem(command):
    problems, skipped = command_problems(command)
    assert problems == []
    assert [line.startswith('a vars file (@') and line.endswith('vars.yml), read when the playbook runs')
            for line in skipped] == ([True] if '@vars.yml' in command else [])


def test_commands_are_found_in_code_blocks_spans_and_comments_with_their_continuations():
    page = ('Run `ansible-playbook playbooks/stop.yml` or see the `ansible-playbook` docs.\n\n'
            '    ansible-playbook playbooks/launch.yml \\\n      -e channels=42\n\n'
            '```\nhint: ansible-playbook playbooks/status.yml -e run_id=<run>\n'
            'playbook=(/x/bin/ansible-playbook -i h)\n```\n')
    blocks = [(n, c) for n, c, _m in _commands_in(code_lines(page), COMMAND)]
    spans = [(n, c) for n, c, _m in _commands_in(code_spans(page), COMMAND, inline=True)]
    assert blocks == [(3, 'ansible-playbook playbooks/launch.yml  -e channels=42'),
                      (7, 'ansible-playbook playbooks/status.yml -e run_id=<run>')]
    assert spans == [(1, 'ansible-playbook playbooks/stop.yml')]
    assert _commands_in(comment_lines('# x\n#   ansible-playbook playbooks/bench.yml -e iters=5\n'), COMMAND)[0][:2] == \
        (2, 'ansible-playbook playbooks/bench.yml -e iters=5')


# --- variables the docs name, knobs the docs leave out ------------------------------------------------------------

VARIABLE = re.compile(r'(?<![\w.])trainops_[a-z0-9_]*[a-z0-9](?![\w(/]|\.py|\.json)')
"""A ``trainops_`` name in code (not ``__trainops_``, a file or directory such as ``trainops_run.py`` or
``trainops_heartbeat.json``, a call)."""


def _tasks(node):
    """Every task of a task file or playbook, blocks and plays opened."""
    if isinstance(node, list):
        for item in node:
            yield from _tasks(item)
    elif isinstance(node, dict):
        yield node
        for key in ('block', 'rescue', 'always', 'tasks', 'pre_tasks', 'post_tasks', 'handlers'):
            yield from _tasks(node.get(key) or [])


def published():
    """What the roles, playbooks and actions publish (``set_stats`` data, facts they set, what the launcher action
    publishes for them): results a doc may name."""
    names = set(_launcher_steps.published())
    for path in _files(('roles/*/tasks/*.yml', 'playbooks/*.yml')):
        for task in _tasks(yaml.safe_load(_read(path))):
            names.update((task.get('ansible.builtin.set_stats') or {}).get('data') or {})
            names.update(task.get('ansible.builtin.set_fact') or {})
    # an action that publishes its result itself (ansible_stats=dict(... data=dict(trainops_x=...)))
    for path in _files(('plugins/action/*.py',)):
        names.update(re.findall(r"ansible_stats[\]']*\s*=\s*dict\([^)]*?data\s*=\s*dict\((trainops_[a-z0-9_]+)=", _read(path), re.S))
    return names


def not_role_variables():
    """``trainops_`` names of the docs that are no role's input, with what they are instead."""
    names = dict((name, 'published by a role or playbook (set_stats, a fact)') for name in published())
    names[SPECS[('job', 'main')]['trainops_nodes_group']['default']] = 'the nodes\' inventory group'
    harness = '\n'.join(_read(path) for path in _files(('hack/**/*.py', 'molecule/**/*.yml')))
    for name in set(re.findall(r'trainops_(?:lab|molecule)_[a-z0-9_]+', harness)):
        names[name] = 'a variable of the lab\'s or Molecule\'s inventories (hack/, molecule/)'
    return names


def _page_code(path):
    text = _read(path)
    return code_lines(text) + code_spans(text)


def test_every_trainops_variable_the_docs_name_is_declared_in_an_argument_spec():
    lines = []
    others = not_role_variables()
    for path in _files(PAGE_GLOBS):
        for number, code in _page_code(path):
            for name in VARIABLE.findall(code):
                if name not in SPEC_VARIABLES and name not in others:
                    lines.append('%s:%d: %s is in no roles/*/meta/argument_specs.yml (in: %s)' % (
                        _rel(path), number, name, code.strip()[:120]))
    assert not lines, 'variables the docs name that no argument spec declares:\n' + '\n'.join(sorted(set(lines)))


def _mentioned(name, code):
    return re.search(r'(?<![\w.-])%s(?![\w])' % re.escape(name), code) is not None


KNOB_ENTRY_POINTS = (('job', 'main'), ('container', 'main'))
"""The entry points whose every option is a knob users set (the launch, the training container)."""


def user_knobs():
    """The knobs a doc page must name: every option of KNOB_ENTRY_POINTS, every short knob of the registry and
    every short form an argument spec declares (an option without the ``trainops_`` prefix: ``-e rank=5``)."""
    knobs = set(SHORT_KNOBS)
    for key, options in SPECS.items():
        knobs.update(name for name in options if key in KNOB_ENTRY_POINTS or not name.startswith('trainops_'))
    return sorted(knobs)


def test_every_knob_users_set_is_named_in_a_doc_page():
    code = '\n'.join(line for path in _files(PAGE_GLOBS) for _number, line in _page_code(path))
    missing = [name for name in user_knobs() if not _mentioned(name, code)]
    assert not missing, ('knobs (roles/job and roles/container meta/argument_specs.yml main, the short knobs of '
                         'module_utils/_knobs.py and of the argument specs) that no doc page names in code '
                         '(README.md, docs/, roles/*/README.md; a role README\'s knob table is the place):\n'
                         + '\n'.join(missing))


# --- make commands ------------------------------------------------------------------------------------------------

def makefile_targets():
    return set(re.findall(r'^([A-Za-z0-9][\w.-]*)\s*:(?!=)', _read(os.path.join(ROOT, 'Makefile')), re.M))


def test_every_documented_make_command_names_a_target_of_the_makefile():
    targets = makefile_targets()
    lines = []
    checked = 0
    for where, command, match, _inline in documented(MAKE, comments=False):
        words = [word for word in shlex.split(PLACEHOLDER.sub('X', match.group(1)), comments=True)
                 if not word.startswith('-') and '=' not in word]
        words = words[:next((i for i, w in enumerate(words) if w in ('&&', ';', '||', '|')), len(words))]
        if not words:
            continue
        checked += 1
        lines.extend('%s: %s\n    %s is no target of the Makefile' % (where, command, word)
                     for word in words if word not in targets)
    print('%d documented make commands checked' % checked)
    assert checked > 5
    assert not lines, 'documented make commands that name no target:\n' + '\n'.join(lines)


# --- benchmark commands -------------------------------------------------------------------------------------------

BENCH = re.compile(r'(?:^|(?<=\s))(?:\$\s+)?(?:sudo\s+)?(?:\./)?bench/(?P<script>[a-z_]+)(?![\w./-])')
"""A benchmark script of bench/ (``sudo bench/launch_latency --nodes 16``), not a file under it (bench/gpu/...)."""


def _bench_script(name, cache={}):  # pylint: disable=dangerous-default-value
    """bench/<name> loaded as a module (each once), or None when there is no such script."""
    if name not in cache:
        path = os.path.join(ROOT, 'bench', name)
        if not os.path.isfile(path):
            cache[name] = None
        else:
            loader = importlib.machinery.SourceFileLoader('documented_bench_' + name, path)
            spec = importlib.util.spec_from_loader(loader.name, loader)
            module = importlib.util.module_from_spec(spec)
            loader.exec_module(module)
            cache[name] = module
    return cache[name]


def bench_problems(command, inline=False):
    """What is wrong with one documented benchmark command: its script's own option parser (parse_args) refuses it,
    or bench/ has no such script. Empty: it parses as written, or it is a code span naming the script alone (a
    mention, not a command)."""
    match = BENCH.match(command)
    module = _bench_script(match.group('script'))
    if module is None:
        return ['bench/%s is no script of bench/' % match.group('script')]
    try:
        argv = shlex.split(PLACEHOLDER.sub('PLACEHOLDER', command[match.end():]), comments=True)
    except ValueError as exc:
        return ['a shell cannot split it: %s' % exc]
    argv = argv[:next((i for i, w in enumerate(argv) if w in ('&&', ';', '||', '|', '>', '2>')), len(argv))]
    if inline and not argv:
        return []
    stderr = io.StringIO()
    try:
        with contextlib.redirect_stderr(stderr):
            module.parse_args(argv)
    except SystemExit:
        return ['bench/%s refuses it: %s' % (match.group('script'), (stderr.getvalue().strip().splitlines() or ['?'])[-1])]
    return []


def test_every_documented_benchmark_command_parses_with_its_scripts_options():
    lines = []
    found = documented(BENCH, comments=False)
    for where, command, _match, inline in found:
        lines.extend('%s: %s\n    %s' % (where, command, problem) for problem in bench_problems(command, inline))
    scripts = set(BENCH.match(command).group('script') for _where, command, _match, _inline in found)
    print('%d documented benchmark commands checked (%s)' % (len(found), ', '.join(sorted(scripts))))
    assert {'launch_latency', 'sweep_overhead', 'watch_cost', 'scale_estimate'} <= scripts
    assert not lines, 'documented benchmark commands that do not parse as written:\n' + '\n'.join(lines)


@pytest.mark.parametrize('command, wrong', [
    ('sudo bench/launch_latency --nodez 4', 'unrecognized arguments: --nodez 4'),
    ('sudo bench/watch_cost --nodes 1', '--nodes must be 2-99'),
    ('bench/scale_estimate', 'give --launch, --watch or both'),
    ('bench/scale_estimate --watch', 'expected one argument'),
    ('sudo bench/lanch_latency', 'bench/lanch_latency is no script of bench/'),
])
def test_a_benchmark_command_that_does_not_parse_is_named_with_what_is_wrong(command, wrong):
    assert any(wrong in problem for problem in bench_problems(command)), bench_problems(command)
