#!/usr/bin/env bash
# Run ansible-lint (production profile, offline) on this checkout.
#
#   hack/lint.sh                         # the whole collection, as configured in .ansible-lint
#   hack/lint.sh playbooks/launch.yml    # any ansible-lint arguments pass through
#
# Exit status: ansible-lint's (0 clean, 2 violations, other non-zero: could not lint).
#
# How trainops.multinode.* resolves (offline, without Ansible Galaxy):
#   With `offline: true` ansible-lint does not install the collection under test (it would do that
#   from galaxy.yml into a cache dir and fetch galaxy.yml `dependencies` from Galaxy).  So this
#   script links the checkout into a private collections path,
#   <tmp>/collections/ansible_collections/<namespace>/<name> -> repo root, and points
#   ANSIBLE_COLLECTIONS_PATH there.  Dependencies (ansible.posix, community.docker,
#   community.crypto, ...) are found by Ansible's sys.path scan in the `ansible` package's
#   site-packages/ansible_collections.  ANSIBLE_HOME is a fresh temp dir too, so ansible-lint's
#   cache dir (its first collections path) is empty and no stale, previously installed copy of
#   trainops.multinode under ~/.ansible/collections can shadow the checkout.
#
# Environment:
#   PYTHON         interpreter that has ansible-lint installed (default: python3)
#   ANSIBLE_LINT   ansible-lint executable (default: the one next to $PYTHON, else from PATH)
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(git -C "$here" rev-parse --show-toplevel)"
PYTHON="$("${PYTHON:-python3}" -c 'import sys; print(sys.executable)')"

if [[ -z "${ANSIBLE_LINT:-}" ]]; then
    if [[ -x "$(dirname "$PYTHON")/ansible-lint" ]]; then
        ANSIBLE_LINT="$(dirname "$PYTHON")/ansible-lint"
    else
        ANSIBLE_LINT="$(command -v ansible-lint)" || { echo "lint.sh: ansible-lint not found" >&2; exit 2; }
    fi
fi

read -r namespace name < <(
    "$PYTHON" - "$root/galaxy.yml" <<'PY'
import sys, yaml
g = yaml.safe_load(open(sys.argv[1]))
print(g["namespace"], g["name"])
PY
)

tmp="$(mktemp -d "${TMPDIR:-/tmp}/${namespace}-${name}-lint.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT

mkdir -p "$tmp/collections/ansible_collections/$namespace" "$tmp/ansible-home"
ln -s "$root" "$tmp/collections/ansible_collections/$namespace/$name"

export ANSIBLE_COLLECTIONS_PATH="$tmp/collections"
export ANSIBLE_HOME="$tmp/ansible-home"
# the collection's ansible.cfg (inventory, callbacks, ...) applies, as when running the playbooks
if [[ -f "$root/ansible.cfg" ]]; then
    export ANSIBLE_CONFIG="$root/ansible.cfg"
fi

# ansible-lint runs ansible-playbook/ansible-galaxy/ansible-config from PATH and warns when the
# directory of its own interpreter is not first: put it first (same interpreter, same tools).
py_bin_dir="$(dirname "$PYTHON")"
export PATH="$py_bin_dir:$PATH"

cd "$root"
set +e
"$ANSIBLE_LINT" --config-file "$root/.ansible-lint" --project-dir "$root" "$@"
rc=$?
set -e
exit "$rc"
