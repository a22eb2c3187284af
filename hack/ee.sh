#!/usr/bin/env bash
# The execution environment's build context, from this checkout, without any registry:
#   1. `ansible-galaxy collection build` into build/ee/, as build/ee/trainops-multinode.tar.gz (the name
#      execution-environment.yml's additional_build_files and ee/requirements.yml use);
#   2. `ansible-builder create` on execution-environment.yml: validates the definition and writes the
#      Containerfile with the requirement files into the context directory.
#
#   hack/ee.sh [CONTEXT_DIR]       # default: build/ee/context
#
# Then: podman (or docker) build -f CONTEXT_DIR/Containerfile -t trainops-multinode-ee:latest CONTEXT_DIR
# (that step pulls the base image and installs from Galaxy and PyPI: it needs those registries).
#
# Environment:
#   PYTHON   interpreter that has ansible-core and ansible-builder installed (default: python3)
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/.." && pwd)"
PYTHON="$("${PYTHON:-python3}" -c 'import sys; print(sys.executable)')"
bin="$(dirname "$PYTHON")"
context="${1:-$root/build/ee/context}"

out="$root/build/ee"
mkdir -p "$out"
stage="$(mktemp -d "$out/collection.XXXXXX")"
trap 'rm -rf "$stage"' EXIT
"$bin/ansible-galaxy" collection build --output-path "$stage" "$root" >/dev/null
tarballs=("$stage"/*.tar.gz)
mv -f "${tarballs[0]}" "$out/trainops-multinode.tar.gz"
echo "ee.sh: $(basename "${tarballs[0]}") -> $out/trainops-multinode.tar.gz"

"$bin/ansible-builder" create --file "$root/execution-environment.yml" --context "$context" --output-filename Containerfile
