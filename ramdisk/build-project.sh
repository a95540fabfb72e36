#!/usr/bin/env bash
# Builds the small, often changing layer of the ramdisk: this project (a wheel of the working
# tree), /init and the SSH configuration, as a cpio archive appended after the base one
# (the kernel unpacks concatenated archives in order, later files win).
# Usage (normally called by ramdisk/build.sh): build-project.sh OUT.cpio.zst REPO HOSTKEY_DIR [KEYFILE...]
set -euo pipefail

out=$1 repo=$2 hostkeys=$3
shift 3
here=$(cd "$(dirname "$0")" && pwd)
venv=${PROVISION_AGENT_CACHE:?}/ramdisk/build-venv
work=$(mktemp -d "${TMPDIR:-/tmp}/provision-ramdisk-project.XXXXXX")
trap 'rm -rf "$work"' EXIT
stage=$work/stage

# A copy of the working tree (tracked + untracked, not ignored): building in the clone would
# write build/ and *.egg-info where other people are working.
mkdir -p "$work/src"
(cd "$repo" && git ls-files -co --exclude-standard -z | xargs -0 tar -cf - --no-recursion) \
  | tar -xf - -C "$work/src"

if [ ! -x "$venv/bin/pip" ]; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q --upgrade pip setuptools wheel
fi
# The version comes from git (setuptools-scm, pyproject.toml); the copy has no .git, so it is
# read from the clone and handed to the build, and `provision --version` in the ramdisk says
# the same as on the conductor.
if ! "$venv/bin/python" -c 'import setuptools_scm' 2>/dev/null; then
  "$venv/bin/pip" install -q --upgrade setuptools 'setuptools-scm>=8' \
    2> >(grep -v "^WARNING: Location" >&2)
fi
SETUPTOOLS_SCM_PRETEND_VERSION_FOR_PROVISION_AGENT=$(cd "$repo" && "$venv/bin/python" -m setuptools_scm)
export SETUPTOOLS_SCM_PRETEND_VERSION_FOR_PROVISION_AGENT
# setuptools' warnings are for the integrator's packaging, not for every build: keep them in
# the log and show them only when the build fails.
if ! "$venv/bin/pip" wheel -q --no-deps --no-build-isolation -w "$work/wheels" "$work/src" \
     > "$work/wheel.log" 2>&1; then
  cat "$work/wheel.log" >&2
  exit 1
fi

# Debian's python3 looks in /usr/lib/python3/dist-packages; the dependencies come from Debian
# packages in the base layer, so only this project goes in here.
site=$stage/usr/lib/python3/dist-packages
"$venv/bin/pip" install -q --no-deps --no-compile --target "$site" "$work"/wheels/*.whl
rm -rf "$site/bin"
# Binary wheels for the ramdisk's python3 (bookworm: CPython 3.11, glibc 2.36), whatever
# Python builds the ramdisk.
for_ramdisk=(--no-deps --no-compile --only-binary=:all: --target "$site" --python-version 3.11
             --implementation cp --abi cp311 --platform manylinux2014_x86_64
             --platform manylinux_2_17_x86_64 --platform manylinux_2_28_x86_64)
"$venv/bin/pip" install -q "${for_ramdisk[@]}" -r "$here/wheels.txt" \
  2> >(grep -v "^WARNING: Location" >&2)

# A site's or vendor's wheels (build.sh --extra-wheel), beside provision and for the same Python;
# --no-deps: what they need comes as more wheels or Debian packages, never fetched here.
read -r -a extra_wheels <<< "${EXTRA_WHEELS:-}"
if [ "${#extra_wheels[@]}" -gt 0 ]; then
  "$venv/bin/pip" install -q "${for_ramdisk[@]}" --platform any --no-index \
    "${extra_wheels[@]}" 2> >(grep -v "^WARNING: Location" >&2)
fi

# Bytecode now, not at the first run: the project layer has no __pycache__ (--no-compile), so a
# freshly booted ramdisk compiled ~100 modules on every deploy's one and only provision run,
# seconds under TCG. unchecked-hash: the ramdisk never changes, so no mtime to compare. Needs
# the ramdisk's Python minor version (bookworm: 3.11; one magic number for all of 3.11.x).
pyc=""
for py in "$venv/bin/python" python3.11; do
  if command -v "$py" >/dev/null && "$py" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 11))'; then
    pyc=$py
    break
  fi
done
if [ -n "$pyc" ]; then
  "$pyc" -m compileall -q -j 0 --invalidation-mode unchecked-hash "$site" >/dev/null
else
  echo "build-project: no Python 3.11 here to precompile with; the ramdisk compiles at first run" >&2
fi

# Console scripts for the ramdisk's python3 (pip would write the build venv's path). Each puts
# the code of an update in place first on its path, resolved once at its start, so a process
# runs one version from start to end (provision_agent/agent/update.py makes it current).
mkdir -p "$stage/usr/bin"
for ep in "$site"/*.dist-info/entry_points.txt; do
  [ -f "$ep" ] || continue
  awk '/^\[/ {s = ($0 == "[console_scripts]")} s && / = / {print $1, $3}' "$ep" |
  while read -r name target; do
    cat > "$stage/usr/bin/$name" <<PY
#!/usr/bin/python3
import os
import sys
sys.path.insert(0, os.path.realpath("/run/provision-agent/current"))
from ${target%%:*} import ${target##*:}
sys.exit(${target##*:}())
PY
    chmod 755 "$stage/usr/bin/$name"
  done
done

install -D -m 755 "$here/init" "$stage/init"
install -D -m 644 "$here/cmdline.sh" "$stage/usr/lib/provision/cmdline.sh"
install -D -m 644 "$here/netdiag.sh" "$stage/usr/lib/provision/netdiag.sh"
install -D -m 644 "$here/netup.sh" "$stage/usr/lib/provision/netup.sh"
install -D -m 755 "$here/poweroff" "$stage/usr/local/sbin/poweroff"
install -D -m 644 "$here/sshd_config" "$stage/etc/ssh/sshd_config.d/provision.conf"
install -D -m 644 "$here/multipath.conf" "$stage/etc/multipath.conf"
if [ -f "$hostkeys/ssh_host_ed25519_key" ]; then
  install -D -m 600 "$hostkeys/ssh_host_ed25519_key" "$stage/etc/ssh/ssh_host_ed25519_key"
  install -D -m 644 "$hostkeys/ssh_host_ed25519_key.pub" "$stage/etc/ssh/ssh_host_ed25519_key.pub"
fi
mkdir -p "$stage/etc/provision"
# A site's or vendor's files (build.sh --extra-file SRC:DEST, checked there), mode kept.
read -r -a extra_files <<< "${EXTRA_FILES:-}"
for pair in "${extra_files[@]}"; do
  install -D -m "$(stat -c %a "${pair%%:*}")" "${pair%%:*}" "$stage${pair#*:}"
done
# --authorized-key: unrestricted (a debug shell); --conductor-key (CONDUCTOR_KEYS): forced into
# provision-dispatch, which runs registered commands only; `restrict` takes away the pty and
# every forward (docs/security.md).
{
  for key in "$@"; do cat "$key"; echo; done
  for key in ${CONDUCTOR_KEYS:-}; do
    grep -Ev '^[[:space:]]*(#|$)' "$key" | sed 's|^|restrict,command="/usr/bin/provision-dispatch" |'
  done
} > "$stage/etc/provision/authorized_keys"

# --update-key (UPDATE_KEYS): the keys an update in place must be signed with, as an
# allowed_signers file for ssh-keygen -Y verify; none: the ramdisk takes no update.
if [ -n "${UPDATE_KEYS:-}" ]; then
  mkdir -p "$stage/etc/provision/update-keys"
  for key in $UPDATE_KEYS; do
    grep -Ev '^[[:space:]]*(#|$)' "$key" |
      sed 's|^|provision-agent-update namespaces="provision-agent-update" |'
  done > "$stage/etc/provision/update-keys/allowed_signers"
fi

(cd "$stage" && find . -print0 | LC_ALL=C sort -z | cpio --null -o -H newc -R 0:0 --quiet) \
  | zstd -q -T0 -10 -o "$out.tmp"
mv "$out.tmp" "$out"
