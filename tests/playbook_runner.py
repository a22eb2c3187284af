"""Run the project's playbooks the way CI does: through tools/trainops_run.py (ansible-runner).

Shared by the end-to-end tests on the local default (tests/e2e) and on the lab (tests/lab).
"""
import json
import os
import socket
import subprocess
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ENTRY = os.path.join(REPO, 'tools', 'trainops_run.py')


def free_port():
    with socket.socket() as sock:
        sock.bind(('127.0.0.1', 0))
        return sock.getsockname()[1]


def entry_argv(playbook, workdir, extravars, inventory=None):
    """The command line of one run, its extra vars written to a file in ``workdir``."""
    stamp = '%d' % time.monotonic_ns()
    varfile = os.path.join(workdir, 'vars-%s.json' % stamp)
    with open(varfile, 'w') as handle:
        json.dump(extravars, handle)
    argv = [sys.executable, ENTRY, playbook, '-e', '@' + varfile,
            '--summary', os.path.join(workdir, 'summary-%s.json' % stamp),
            '--junit', os.path.join(workdir, 'junit-%s.xml' % stamp),
            '--artifacts', os.path.join(workdir, 'artifacts')]
    if inventory:
        argv += ['-i', inventory]
    return argv


def finish(proc, argv, started):
    """Attach the elapsed time and the parsed JSON summary to a finished run."""
    summary = argv[argv.index('--summary') + 1]
    proc.elapsed = time.monotonic() - started
    proc.summary = {}
    if os.path.exists(summary):
        with open(summary) as handle:
            proc.summary = json.load(handle)
    proc.failure_text = ' '.join('[%s] %s' % (f.get('host'), f.get('msg') or '') for f in proc.summary.get('failures', []))
    return proc


def run_playbook(playbook, workdir, extravars, inventory=None, timeout=420, env=None, verbose=0):
    """Run a playbook to the end; returns the CompletedProcess with .summary, .elapsed, .failure_text.

    ``env`` adds to this process's environment (a token the playbook reads with the env lookup);
    ``verbose`` passes -v that many times to ansible-playbook.
    """
    argv = entry_argv(playbook, workdir, extravars, inventory) + (['-' + 'v' * verbose] if verbose else [])
    started = time.monotonic()
    proc = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=timeout, check=False,
                          env=dict(os.environ, **(env or {})))
    return finish(proc, argv, started)


def start_playbook(playbook, workdir, extravars, inventory=None, env=None):
    """Start a playbook in the background; ``wait_playbook`` collects it. ``env`` adds to this process's environment."""
    argv = entry_argv(playbook, workdir, extravars, inventory)
    proc = subprocess.Popen(argv, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env=dict(os.environ, **(env or {})))
    proc.argv, proc.started = argv, time.monotonic()
    return proc


def wait_playbook(proc, timeout=420):
    out, _err = proc.communicate(timeout=timeout)
    done = subprocess.CompletedProcess(proc.argv, proc.returncode, out, '')
    return finish(done, proc.argv, proc.started)


def wait_until(predicate, timeout, interval=0.5, what=None):
    """Poll ``predicate`` until it returns something true, for at most ``timeout`` seconds.

    Returns that value; at the deadline returns the predicate's last value, or raises AssertionError
    naming ``what`` when given.
    """
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    value = predicate()
    if not value and what is not None:
        raise AssertionError('timed out after %ss waiting for %s' % (timeout, what))
    return value


def path_without(bindir, *names):
    """A PATH with every command of this machine but ``names`` (a machine without rsync, say): this Python's
    directory, then ``bindir`` filled with links to the commands of the usual directories."""
    os.makedirs(bindir, exist_ok=True)
    for directory in ('/usr/local/bin', '/usr/bin', '/bin'):
        if not os.path.isdir(directory):
            continue
        for name in os.listdir(directory):
            link = os.path.join(bindir, name)
            if name not in names and not os.path.lexists(link):
                os.symlink(os.path.join(directory, name), link)
    path = os.path.dirname(sys.executable) + os.pathsep + str(bindir)
    for name in names:
        assert subprocess.run(['sh', '-c', 'command -v %s' % name], env={'PATH': path}, capture_output=True,
                              check=False).returncode != 0, '%s is still on %s' % (name, path)
    return path
