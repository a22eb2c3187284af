#!/usr/bin/env bash
# Build the test image of the container role without any registry: a Debian bookworm root filesystem
# (mmdebstrap, minbase + python3) with the pinned CPU torch of requirements.txt pip-installed into
# /usr/local/lib/python3.11/dist-packages, turned into an image with `docker import`, and saved with
# `docker save` as an image archive (the air-gapped path of roles/container loads exactly that).
#
#   hack/container_image.sh             # build once, then reuse: prints the archive's path last
#   hack/container_image.sh --force     # rebuild even when the cached archive is valid
#   hack/container_image.sh --path      # only print where the archive is (exit 1 if not built yet)
#
# Needs root, a docker daemon answering on the default socket (hack/engine.sh starts one), the
# Debian mirror of /etc/apt (mmdebstrap is installed from it when missing) and the Python package
# index of this machine's pip configuration (the CPU torch wheel). No registry is contacted.
#
# Cache: ${TRAINOPS_CACHE_DIR:-~/.cache/trainops-multinode}/images/
#   trainops-torch-cpu-<key>.tar          the archive (docker save format)
#   trainops-torch-cpu-<key>.tar.sha256   its sha256 (sha256sum format)
#   trainops-torch-cpu-<key>.json         image reference, image id, sizes, build time
# <key> is a hash of this script, the torch/numpy pins and the Python version, so a change to any of
# them builds a new archive; an archive whose checksum no longer matches is rebuilt.
#
# Environment:
#   PYTHON                  the interpreter whose pip installs torch (default: .venv/bin/python,
#                           else python3); it must be CPython 3.11 like bookworm's python3
#   TRAINOPS_DEBIAN_MIRROR  Debian mirror (default: the first URIs of /etc/apt, else deb.debian.org)
#   TRAINOPS_IMAGE_REF      the image's name (default: trainops/torch-cpu:<torch version>-py3.11)
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(dirname "$here")"
cache="${TRAINOPS_CACHE_DIR:-$HOME/.cache/trainops-multinode}/images"
suite=bookworm
mode=build
case "${1:-}" in
    --force) mode=force ;;
    --path) mode=path ;;
    "") ;;
    *) echo "usage: hack/container_image.sh [--force|--path]" >&2; exit 2 ;;
esac

say() { printf 'image: %s\n' "$*" >&2; }
die() { printf 'image: error: %s\n' "$*" >&2; exit 1; }

if [[ -z "${PYTHON:-}" ]]; then
    if [[ -x "$root/.venv/bin/python" ]]; then PYTHON="$root/.venv/bin/python"; else PYTHON=python3; fi
fi
torch_pin="$(grep -E '^torch==' "$root/requirements.txt" | head -n1 | sed 's/[[:space:]]*#.*//')"
numpy_pin="$(grep -E '^numpy' "$root/requirements.txt" | head -n1 | sed 's/[[:space:]]*#.*//')"
[[ -n "$torch_pin" ]] || die "no 'torch==<version>' pin in requirements.txt"
torch_version="${torch_pin#torch==}"
pyver="$("$PYTHON" -c 'import sys; print("%d.%d" % sys.version_info[:2])')"
[[ "$pyver" == 3.11 ]] || die "$PYTHON is Python $pyver; the image's python3 (Debian $suite) is 3.11, and pip must install for it"
ref="${TRAINOPS_IMAGE_REF:-trainops/torch-cpu:${torch_version}-py${pyver}}"
key="$( { cat "${BASH_SOURCE[0]}"; echo "$torch_pin $numpy_pin $pyver $suite $ref"; } | sha256sum | cut -c1-12)"
base="$cache/trainops-torch-cpu-$key"
archive="$base.tar"

valid() {
    [[ -s "$archive" && -s "$archive.sha256" && -s "$base.json" ]] || return 1
    (cd "$cache" && sha256sum --quiet --check "$(basename "$archive").sha256" >/dev/null 2>&1)
}

if [[ "$mode" == path ]]; then
    [[ -s "$archive" && -s "$base.json" ]] || { say "not built yet: $archive"; exit 1; }
    echo "$archive"
    exit 0
fi
# one build at a time (make test starts this next to the lab tests, whose container tests build the image
# through the same script when they get there first): a second run waits, then finds the archive cached
mkdir -p "$cache"
exec 9>"$cache/.build.lock"
flock -n 9 || { say "another build of the test image is running; waiting for it"; flock 9; }
if [[ "$mode" == build ]] && valid; then
    say "cached: $archive ($(du -h "$archive" | cut -f1)); --force rebuilds"
    echo "$archive"
    exit 0
fi

[[ "$(id -u)" == 0 ]] || die "must run as root (mmdebstrap in root mode, docker)"
timeout 10 docker info >/dev/null 2>&1 || die "no docker daemon answers (start one: bash hack/engine.sh)"
if ! command -v mmdebstrap >/dev/null 2>&1; then
    say "installing mmdebstrap (apt-get)"
    DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 update -qq
    DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends mmdebstrap >/dev/null
fi

mirror="${TRAINOPS_DEBIAN_MIRROR:-}"
if [[ -z "$mirror" ]]; then
    mirror="$(grep -h -m1 -E '^URIs:' /etc/apt/sources.list.d/*.sources 2>/dev/null | awk '{print $2}' | grep -v security | head -n1 || true)"
    [[ -n "$mirror" ]] || mirror="$(grep -h -m1 -E '^deb ' /etc/apt/sources.list 2>/dev/null | awk '{print $2}' || true)"
    [[ -n "$mirror" ]] || mirror=http://deb.debian.org/debian
fi

mkdir -p "$cache"
work="$(mktemp -d "$cache/.build.XXXXXX")"
trap 'rm -rf "$work"' EXIT
started=$SECONDS
say "building $ref: Debian $suite minbase + python3 and python3-yaml (train.py reads YAML configs) from $mirror, $torch_pin ${numpy_pin:+and $numpy_pin} (pip)"

# The pip install runs on this machine (customize hook, $1 = the root filesystem): the target is the
# directory bookworm's python3 searches for locally installed packages. Console scripts (torchrun)
# move to /usr/local/bin with the image's interpreter in their #! line.
export TRAINOPS_PIP_PYTHON="$PYTHON" TRAINOPS_TORCH_PIN="$torch_pin" TRAINOPS_NUMPY_PIN="$numpy_pin"
# shellcheck disable=SC2016  # the hook is expanded by mmdebstrap's shell, with $1 = the root directory
hook='set -e
site="$1/usr/local/lib/python3.11/dist-packages"
"$TRAINOPS_PIP_PYTHON" -m pip install --quiet --no-cache-dir --no-compile --disable-pip-version-check \
    --target "$site" "$TRAINOPS_TORCH_PIN" ${TRAINOPS_NUMPY_PIN:+"$TRAINOPS_NUMPY_PIN"}
mkdir -p "$1/usr/local/bin"
for f in "$site"/bin/*; do
    [ -f "$f" ] || continue
    sed "1s|^#!.*python.*|#!/usr/bin/python3|" "$f" >"$1/usr/local/bin/$(basename "$f")"
    chmod 0755 "$1/usr/local/bin/$(basename "$f")"
done
rm -rf "$site/bin"
rm -rf "$1"/var/lib/apt/lists/* "$1"/var/cache/apt/* "$1"/var/log/*.log'

mmdebstrap --quiet --mode=root --variant=minbase --format=tar --include=python3,python3-yaml \
    --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-exclude=/usr/share/man/*' \
    --dpkgopt='path-exclude=/usr/share/locale/*' --dpkgopt='path-exclude=/usr/share/info/*' \
    --customize-hook="$hook" \
    "$suite" "$work/rootfs.tar" "deb $mirror $suite main"
say "root filesystem: $(du -h "$work/rootfs.tar" | cut -f1) in $((SECONDS - started))s"

imported=$SECONDS
docker import \
    --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --change 'ENV PYTHONDONTWRITEBYTECODE=1' \
    --change 'CMD ["sleep", "infinity"]' \
    --change "LABEL org.opencontainers.image.title=trainops-torch-cpu org.opencontainers.image.version=$torch_version" \
    --message "hack/container_image.sh $key" \
    "$work/rootfs.tar" "$ref" >/dev/null
rm -f "$work/rootfs.tar"
image_id="$(docker image inspect --format '{{.Id}}' "$ref")"
docker save -o "$work/image.tar" "$ref"
say "docker import + save: $((SECONDS - imported))s"

# the image must do what the role and the launch need: python3 with torch, and sleep
docker run --rm --network none "$ref" python3 -c \
    'import torch, torch.distributed as d; assert d.is_available() and d.is_gloo_available(); print("torch", torch.__version__)' >&2 \
    || die "the built image cannot import torch"

(cd "$work" && sha256sum image.tar | sed "s/image.tar/$(basename "$archive")/" >image.tar.sha256)
size="$(stat -c %s "$work/image.tar")"
seconds=$((SECONDS - started))
"$PYTHON" - "$ref" "$image_id" "$size" "$seconds" "$key" "$torch_version" "$archive" >"$work/image.json" <<'PY'
import json, sys
ref, image_id, size, seconds, key, torch_version, archive = sys.argv[1:]
print(json.dumps({"image": ref, "image_id": image_id, "archive": archive, "archive_bytes": int(size),
                  "build_seconds": int(seconds), "key": key, "torch": torch_version}, indent=2))
PY
mv "$work/image.tar" "$archive"
mv "$work/image.tar.sha256" "$archive.sha256"
mv "$work/image.json" "$base.json"
# older archives of this image (other keys) are not needed any more
for old in "$cache"/trainops-torch-cpu-*.tar; do
    [[ "$old" == "$archive" ]] || rm -f "$old" "$old.sha256" "${old%.tar}.json"
done
say "built $ref ($image_id) in ${seconds}s: $archive ($(du -h "$archive" | cut -f1))"
echo "$archive"
