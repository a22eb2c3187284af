"""The training user (up --user NAME), its docker membership, the homes (--shared-home) and the keys
sshd lets in with."""

import grp
import os
import pwd
import shutil
from pathlib import Path

from .core import (
    AUTHORIZED_KEYS, LabError, REPO, SHARED_HOME, STATE_ROOT, USER_KEYS_DIR, ensure_dir, run, write_if_changed)


HOME_MODE = 0o700


def user_entry(name):
    try:
        return pwd.getpwnam(name)
    except KeyError:
        return None


def user_entry_by_uid(uid):
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)


def group_gid(name):
    try:
        return grp.getgrnam(name).gr_gid
    except KeyError:
        return None


def path_dirs(path):
    """Every directory a lookup of ``path`` walks through, the targets of symlinks on the way included."""
    dirs, current = [], Path("/")
    for part in Path(os.path.abspath(path)).parts[1:]:
        dirs.append(current)
        step = current / part
        if step.is_symlink():
            dirs += path_dirs(current / os.readlink(step))
            step = step.resolve()
        current = step
    return dirs


def permits(path, bits, uid, gids):
    """``bits`` (4 read, 1 search/execute) of ``path`` allow the user (uid None: a user not made yet,
    so the bits for others)."""
    st = os.stat(path)
    if uid is not None and st.st_uid == uid:
        shift = 6
    elif uid is not None and st.st_gid in gids:
        shift = 3
    else:
        shift = 0
    return (st.st_mode >> shift) & bits == bits


def unreachable_for(user):
    """Why ``user`` could not run the checkout's .venv/bin/python or read the repository on the nodes
    (they share the machine's files), or None: the first directory on the way it cannot search."""
    entry = user_entry(user)
    uid = entry.pw_uid if entry else None
    gids = set(os.getgrouplist(user, entry.pw_gid)) if entry else set()
    python = REPO / ".venv" / "bin" / "python"
    for target, bits in ((REPO, 5), (python, 1)):
        if not target.exists():
            return "%s does not exist" % target
        for directory in path_dirs(target) + [target.resolve()]:
            need = bits if directory == target.resolve() else 1
            if not permits(directory, need, uid, gids):
                st = os.stat(directory)
                owner = user_entry_by_uid(st.st_uid)
                return ("%s cannot %s %s%s: %s (mode %04o, owner %s) is not %s by others, and the nodes run the "
                        "repository's Ansible modules as %s with that interpreter. Fix: chmod o+%s %s (or use a "
                        "checkout and venv whose every directory is)" % (
                            user, "read" if need == 5 else "reach", target,
                            " (-> %s)" % target.resolve() if target.resolve() != target else "", directory,
                            st.st_mode & 0o7777, owner, "readable" if need == 5 else "searchable",
                            user, "rx" if need == 5 else "x", directory))
    return None


def login_shell():
    for shell in ("/bin/bash", "/bin/sh"):
        if os.access(shell, os.X_OK):
            return shell
    raise LabError("no /bin/bash or /bin/sh for the training user's login shell")


def existing_user_problem(entry):
    """Why an existing account cannot be the lab's training user (sshd must let it in), or None."""
    name = entry.pw_name
    if entry.pw_dir != "/home/" + name:
        return "its home is %s; the lab's training user has /home/%s (userdel it or pick another name)" % (
            entry.pw_dir, name)
    if entry.pw_shell.endswith(("nologin", "false")) or not os.access(entry.pw_shell, os.X_OK):
        return "its login shell is %s (usermod -s /bin/bash %s)" % (entry.pw_shell, name)
    try:
        shadow = {line.split(":")[0]: line.split(":")[1] for line in Path("/etc/shadow").read_text().splitlines()
                  if line.count(":") >= 2}
    except OSError:
        shadow = {}
    if shadow.get(name, "").startswith("!"):
        return "its password is locked (!), and sshd without PAM refuses locked accounts (usermod -p '*' %s)" % name
    return None


def ensure_user(name, state):
    """The training user exists (useradd when missing, recorded in ``state["created_user"]``); True
    when created."""
    entry = user_entry(name)
    if entry is not None:
        problem = existing_user_problem(entry)
        if problem:
            raise LabError("--user %s: the account exists, but %s" % (name, problem))
        return False
    # not locked ('*': no password works, keys do), home /home/NAME made by the lab on the nodes
    run(["useradd", "--no-create-home", "--home-dir", "/home/" + name, "--shell", login_shell(),
         "--user-group", "--password", "*", name])
    state["created_user"] = name
    return True


def ensure_docker_member(name, state):
    """--engine docker with a training user: it is in group docker (made if missing) and so may use its
    node's daemon socket. Returns the changes."""
    changes = []
    if group_gid("docker") is None:
        run(["groupadd", "--system", "docker"])
        state["created_group"] = "docker"
        changes.append("group docker")
    if name not in grp.getgrnam("docker").gr_mem:
        run(["gpasswd", "--add", name, "docker"])
        state["docker_member"] = name
        changes.append("%s in group docker" % name)
    return changes


def drop_docker_member(state):
    """Take back the docker membership (and group) the lab gave; the changes."""
    changes = []
    member = state.pop("docker_member", None)
    if member and user_entry(member) and member in grp.getgrnam("docker").gr_mem:
        run(["gpasswd", "--delete", member, "docker"], check=False)
        changes.append("%s out of group docker" % member)
    return changes


def remove_user(name):
    """userdel a user the lab created (its homes go with the lab's state)."""
    if user_entry(name) is not None:
        run(["userdel", name])
    for home in [SHARED_HOME / name] + list(STATE_ROOT.glob("node[0-9]*/home/" + name)):
        if home.is_dir() and not home.is_symlink():
            shutil.rmtree(home)


def ensure_owned_dir(path, mode, uid, gid):
    """A directory with this mode and owner; True when created or changed."""
    created = ensure_dir(path, mode)
    st = os.stat(path)
    if (st.st_uid, st.st_gid) != (uid, gid):
        os.chown(path, uid, gid)
        return True
    return created


def ensure_user_keys(user, public_key):
    """The training user's authorized keys (sshd_config: AuthorizedKeysFile <dir>/%u, Match User root:
    the lab's authorized_keys): <dir> root's 0755, the file the user's own, 0600. The changes."""
    changes = []
    if ensure_dir(USER_KEYS_DIR, 0o755):
        changes.append("authorized_keys.d")
    for path in USER_KEYS_DIR.iterdir():
        if path.name != user:
            path.unlink()
    if user == "root":
        return changes
    entry = user_entry(user)
    path = USER_KEYS_DIR / user
    if write_if_changed(path, public_key, 0o600):
        changes.append("authorized_keys.d/%s" % user)
    if (path.stat().st_uid, path.stat().st_gid) != (entry.pw_uid, entry.pw_gid):
        os.chown(path, entry.pw_uid, entry.pw_gid)
    return changes


def keys_file(user):
    return AUTHORIZED_KEYS if user == "root" else USER_KEYS_DIR / user


def converge_user(shape, state):
    """The training user and its docker membership as the shape says; a user or membership an earlier
    `up` made and the shape no longer has goes. The changes (``state`` records what the lab made)."""
    changes = []
    member = state.get("docker_member")
    if member and (shape.engine == "none" or member != shape.user):
        changes += drop_docker_member(state)
    created = state.get("created_user")
    if created and created != shape.user:
        remove_user(created)
        del state["created_user"]
        changes.append("user %s removed" % created)
    if shape.user != "root":
        if ensure_user(shape.user, state):
            changes.append("user %s" % shape.user)
        if shape.engine == "docker":
            changes += ensure_docker_member(shape.user, state)
    return changes


def ensure_homes(nodes, shape):
    """The homes: the shared /home (and root's home in it) or each node's own, and the training user's
    home in them, /home/NAME 0700 owned by the user. The changes (per node ones go to the node)."""
    changes = []
    if shape.shared_home:
        if ensure_dir(SHARED_HOME, 0o755):
            changes.append("shared home")
        if shape.shared_root_home:
            ensure_dir(SHARED_HOME / "root", HOME_MODE)
            ensure_dir(SHARED_HOME / "root" / ".ansible", 0o700)  # the mount point of the node's own
    if not shape.shared_root_home and (SHARED_HOME / "root").is_dir():
        shutil.rmtree(SHARED_HOME / "root")  # root's shared home goes with the shape
        changes.append("root's shared home removed")
    for node in nodes:
        if not shape.shared_home and ensure_dir(node.home_dir, 0o755):
            node.changes.append("home")
    if shape.user == "root":
        return changes
    entry = user_entry(shape.user)
    for home in sorted({node.home_on_host for node in nodes}):
        if ensure_owned_dir(home, HOME_MODE, entry.pw_uid, entry.pw_gid):
            changes.append("home %s" % home)
    return changes


def owner_of_node_root(shape):
    """The training user owns each node's /srv/trainops (the node's scratch, as an admin would give it)."""
    entry = user_entry(shape.user)
    return entry.pw_uid, entry.pw_gid


def forget_accounts(state):
    """Undo what `up --user` did to the machine's accounts: userdel the user it created, take back
    the docker membership it gave, groupdel the docker group it made. What it undid."""
    undone = drop_docker_member(state)
    created = state.get("created_user")
    if created and user_entry(created) is not None:
        remove_user(created)
        undone.append("user %s removed" % created)
    group = state.get("created_group")
    if group and group_gid(group) is not None and not grp.getgrnam(group).gr_mem:
        run(["groupdel", group], check=False)
        undone.append("group %s removed" % group)
    return undone
