"""Fail when a change under plugins/ or roles/ comes without a changelog fragment.

    python hack/check_fragments.py [--base REF]

A change to what the collection ships (``plugins/``, ``roles/``) must add or edit a fragment in
``changelogs/fragments/`` (antsibull-changelog's format; ``antsibull-changelog lint`` checks its content;
a change users do not see gets a ``trivial:`` entry). What counts as "the change" is the difference between
a base commit and the working tree (commits, uncommitted edits and new files that git does not ignore):

* ``--base REF`` (or ``TRAINOPS_FRAGMENT_BASE=REF``): everything since the merge base of REF and HEAD.
* otherwise, on a branch that has commits of its own beside the main branch (``main``, else ``origin/main``;
  ``TRAINOPS_MAIN_BRANCH`` names another): everything since the merge base, the whole branch.
* otherwise (HEAD is the main branch, as in CI's fresh clone of it): uncommitted changes when there are
  any, else the last commit against its first parent, which for a merge is the whole branch it merged.

A shallow clone that lacks the base commit is an error (exit 2) naming what to fetch; a repository whose
only commit is HEAD has nothing to compare and passes. Exit status: 0 when a fragment came with the change
(or nothing under plugins/ or roles/ changed), 1 when one is missing, 2 when the base cannot be found.
"""

import argparse
import os
import subprocess
import sys

SHIPPED = ('plugins/', 'roles/')
FRAGMENTS = 'changelogs/fragments/'
FRAGMENT_SUFFIXES = ('.yml', '.yaml')


class NoBase(Exception):
    """The commit to compare against is not in this clone."""


def git(*args, check=True):
    proc = subprocess.run(('git',) + args, capture_output=True, text=True, check=False)
    if check and proc.returncode != 0:
        raise subprocess.CalledProcessError(proc.returncode, ('git',) + args, proc.stdout, proc.stderr)
    return proc


def rev(ref):
    """The commit id of ``ref``, or None when this clone does not have it."""
    proc = git('rev-parse', '--verify', '--quiet', ref + '^{commit}', check=False)
    return proc.stdout.strip() or None


def main_branch():
    names = [os.environ['TRAINOPS_MAIN_BRANCH']] if os.environ.get('TRAINOPS_MAIN_BRANCH') else ['main', 'origin/main']
    for name in names:
        if rev(name):
            return name
    return None


def uncommitted():
    """Whether the working tree or the index differ from HEAD, or hold new files git does not ignore."""
    changed = git('status', '--porcelain', '--untracked-files=normal').stdout
    return bool(changed.strip())


def shallow():
    return git('rev-parse', '--is-shallow-repository').stdout.strip() == 'true'


def base_of_branch(ref):
    """The merge base of ``ref`` and HEAD, or NoBase."""
    if not rev(ref):
        raise NoBase('%s is not in this clone' % ref)
    proc = git('merge-base', ref, 'HEAD', check=False)
    if proc.returncode != 0:
        raise NoBase('no merge base of %s and HEAD%s' % (ref, ' (shallow clone)' if shallow() else ''))
    return proc.stdout.strip(), 'the merge base of %s and HEAD' % ref


def base_on_main():
    """HEAD is the main branch: its uncommitted changes, else its last commit (first parent)."""
    if uncommitted():
        return rev('HEAD'), 'HEAD (uncommitted changes)'
    parent = rev('HEAD^1')
    if parent:
        return parent, 'the first parent of HEAD (the last commit)'
    if shallow():
        raise NoBase('the parent of HEAD is not in this shallow clone')
    return None, 'nothing: HEAD is the first commit'


def choose_base(explicit):
    """(commit, description) of what the change is compared against; commit None when there is nothing."""
    if explicit:
        return base_of_branch(explicit)
    main = main_branch()
    if main:
        merge_base, what = base_of_branch(main)
        if merge_base != rev('HEAD'):
            return merge_base, what
    return base_on_main()


def changed_paths(base):
    """{path: status letter} of the working tree against ``base`` (A added, M modified, D deleted, ...)."""
    changes = {}
    diff = git('diff', '--name-status', '--no-renames', '-z', base).stdout.split('\0')
    for status, path in zip(diff[0::2], diff[1::2]):
        if path:
            changes[path] = status[:1]
    for path in git('ls-files', '--others', '--exclude-standard', '-z').stdout.split('\0'):
        if path:
            changes[path] = 'A'
    return changes


def shipped_changes(changes):
    return sorted(p for p in changes if p.startswith(SHIPPED))


def fragments(changes):
    return sorted(p for p, status in changes.items()
                  if p.startswith(FRAGMENTS) and p.endswith(FRAGMENT_SUFFIXES) and status in ('A', 'M'))


def check(explicit_base):
    base, what = choose_base(explicit_base)
    if base is None:
        print('check_fragments: compared against %s; nothing to check' % what)
        return 0
    changes = changed_paths(base)
    shipped, added = shipped_changes(changes), fragments(changes)
    print('check_fragments: compared against %s (%s): %d changed under %s, fragments: %s'
          % (what, base[:12], len(shipped), ' '.join(SHIPPED), ', '.join(added) or 'none'))
    if shipped and not added:
        print('check_fragments: these changes need a changelog fragment in %s (see docs/contributing/development.md):' % FRAGMENTS,
              file=sys.stderr)
        for path in shipped:
            print('check_fragments:   %s %s' % (changes[path], path), file=sys.stderr)
        return 1
    return 0


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n', 1)[0])
    parser.add_argument('--base', default=os.environ.get('TRAINOPS_FRAGMENT_BASE') or None,
                        help='compare against the merge base of this ref and HEAD')
    args = parser.parse_args(argv)
    top = git('rev-parse', '--show-toplevel', check=False)
    if top.returncode != 0:
        print('check_fragments: not in a git repository', file=sys.stderr)
        return 2
    os.chdir(top.stdout.strip())
    try:
        return check(args.base)
    except NoBase as err:
        print('check_fragments: cannot tell what changed: %s; fetch the history (git fetch --unshallow) or name '
              'a base that is in this clone with --base / TRAINOPS_FRAGMENT_BASE' % err, file=sys.stderr)
        return 2


if __name__ == '__main__':
    sys.exit(main())
