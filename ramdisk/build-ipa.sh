#!/usr/bin/env bash
# Builds (or reuses) an ironic-python-agent (IPA) ramdisk the way ours is built, for the
# head-to-head benchmark: the same Debian base recipe and kernel (build-base.sh, from
# packages.txt plus ipa/packages.txt), IPA and its dependencies from PyPI as pinned wheels
# (ipa/wheels.txt) in their own venv /opt/ipa, and a shell /init (ipa/init) that brings up DHCP
# and starts ironic-python-agent, which reads ipa-api-url etc. from /proc/cmdline itself.
#
#   base   $CACHE/ipa-ramdisk/base-<key>/   keyed by build-base.sh, the package and firmware lists, apt
#          sources and suite (~1 min cold)
#   ipa    /opt/ipa, /init, poweroff/reboot: one cpio after the base one, keyed by ipa/*, this
#          script and the Python that precompiles
#   out    $CACHE/ipa-ramdisk/<key>/{vmlinuz,initramfs,manifest.json}, <key> from all of the
#          above; the path is printed last on stdout.
#
# Usage: sudo ramdisk/build-ipa.sh [--mirror URL|SOURCES_FILE] [--suite bookworm] [--rebuild]
set -euo pipefail
source "$(dirname "$0")/../scripts/lib.sh"
here=$REPO_ROOT/ramdisk
ipa=$here/ipa

mirror="" suite=bookworm rebuild=0
while [ $# -gt 0 ]; do
  case $1 in
    --mirror) mirror=$2; shift 2 ;;
    --suite) suite=$2; shift 2 ;;
    --rebuild) rebuild=1; shift ;;
    -h|--help) sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "unknown option: $1" >&2; exit 2 ;;
  esac
done
[ "$(id -u)" -eq 0 ] || { echo "build-ipa.sh must run as root (mmdebstrap --mode=root)" >&2; exit 1; }

cache=$PROVISION_AGENT_CACHE/ipa-ramdisk
mkdir -p "$cache"
exec 9>"$cache/.lock"
flock 9

# The mirror: the building machine's own apt sources, as ramdisk/build.sh finds them.
if [ -z "$mirror" ]; then
  for f in /etc/apt/sources.list.d/*.sources /etc/apt/sources.list; do
    [ -s "$f" ] && grep -qE "^(Suites:.*\b$suite\b|deb .* $suite )" "$f" && { mirror=$f; break; }
  done
  [ -n "$mirror" ] || { echo "no apt source for $suite found; pass --mirror" >&2; exit 1; }
fi
mirror_id=$mirror
[ -f "$mirror" ] && mirror_id=$(grep -v '^\s*#' "$mirror")

# The Python that precompiles the bytecode must be the ramdisk's minor version (3.11).
pyc=""
for py in python3.11 python3; do
  if command -v "$py" >/dev/null && "$py" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 11))'; then
    pyc=$(command -v "$py"); break
  fi
done

sha() { sha256sum | cut -c1-16; }
base_key=$( { cat "$here/build-base.sh" "$here/packages.txt" "$here/firmware-packages.txt" "$ipa/packages.txt"; echo "$mirror_id" "$suite"; } | sha)
key=$( { echo "$base_key"; cat "$here/build-ipa.sh"; find "$ipa" -type f ! -name '*.pyc' ! -name '*.md' | LC_ALL=C sort | xargs cat; echo "${pyc:+precompiled}"; } | sha)
base=$cache/base-$base_key
out=$cache/$key

t0=$(date +%s.%N)
if [ "$rebuild" = 1 ] || [ ! -f "$base/base.cpio.zst" ]; then
  # build-base.sh reads its package lists beside itself: run it from a directory holding it,
  # ours' firmware list and the union of both package lists, so the recipe (mmdebstrap options,
  # kernel, module trim, NIC firmware) is ours.
  recipe=$(mktemp -d "${TMPDIR:-/tmp}/ipa-ramdisk-recipe.XXXXXX")
  trap 'rm -rf "$recipe"' EXIT
  cp "$here/build-base.sh" "$here/firmware-packages.txt" "$recipe/"
  cat "$here/packages.txt" "$ipa/packages.txt" > "$recipe/packages.txt"
  rm -rf "$base.tmp" && mkdir -p "$base.tmp"
  # fd 9 (the cache's lock) closed in the ticker, and the ticker killed when a failed base
  # build exits through set -e: else it outlives the script and the next build waits for ever
  ( while sleep 20; do echo "ipa base: still building ($(( $(date +%s) - ${t0%.*} )) s)" >&2; done ) 9>&- &
  ticker=$!
  trap 'kill "$ticker" 2>/dev/null || true; rm -rf "$recipe"' EXIT
  "$recipe/build-base.sh" "$base.tmp" "$mirror" "$suite" 2>&1 | grep -v 'filename containing newline' >&2
  kill "$ticker" 2>/dev/null || true
  echo "$(date +%s.%N) - $t0" > "$base.tmp/build-time"
  rm -rf "$base" && mv "$base.tmp" "$base"
  base_state=built
else
  base_state=cached
fi
t1=$(date +%s.%N)

layer=$cache/ipa-$key.cpio.zst
if [ "$rebuild" = 1 ] || [ ! -f "$layer" ]; then
  work=$(mktemp -d "${TMPDIR:-/tmp}/ipa-ramdisk-layer.XXXXXX")
  trap 'rm -rf "$work" "${recipe:-}"' EXIT
  stage=$work/stage
  venv=$cache/build-venv
  if [ ! -x "$venv/bin/pip" ]; then
    python3 -m venv "$venv"
    "$venv/bin/pip" install -q --upgrade pip
  fi
  # /opt/ipa: a venv for the ramdisk's /usr/bin/python3 (a pyvenv.cfg beside bin/ is all that
  # makes one), so IPA sees only its own pinned libraries, not the Debian ones provision uses.
  site=$stage/opt/ipa/lib/python3.11/site-packages
  "$venv/bin/pip" install -q --no-deps --no-compile --require-hashes --only-binary=:all: \
    --target "$site" --python-version 3.11 --implementation cp --abi cp311 \
    --platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64 \
    --platform manylinux_2_28_x86_64 -r "$ipa/wheels.txt" 2> >(grep -v "^WARNING: Location" >&2)
  rm -rf "$site/bin"
  mkdir -p "$stage/opt/ipa/bin" "$stage/usr/local/bin" "$stage/usr/local/sbin"
  ln -s /usr/bin/python3 "$stage/opt/ipa/bin/python3"
  printf 'home = /usr/bin\ninclude-system-site-packages = false\n' > "$stage/opt/ipa/pyvenv.cfg"
  for script in ironic-python-agent:ironic_python_agent.cmd.agent \
                ironic-collect-introspection-data:ironic_python_agent.cmd.inspect; do
    printf '#!/opt/ipa/bin/python3\nimport sys\nfrom %s import run\nsys.exit(run())\n' \
      "${script#*:}" > "$stage/usr/local/bin/${script%%:*}"
    chmod 755 "$stage/usr/local/bin/${script%%:*}"
  done
  if [ -n "$pyc" ]; then
    # A missing pin shows here, not at the first boot: import what IPA loads at start-up.
    "$pyc" -I -c 'import sys; sys.path.insert(0, sys.argv[1])
import ironic_python_agent.cmd.agent, ironic_python_agent.hardware, ironic_python_agent.extensions.standby
import ironic_python_agent.extensions.image, ironic_python_agent.inspector, stevedore
for ns in ("ironic_python_agent.extensions", "ironic_python_agent.hardware_managers"):
    stevedore.ExtensionManager(ns, invoke_on_load=False, on_load_failure_callback=lambda m, e, x: sys.exit(f"{e}: {x}"))' "$site"
    # Bytecode now, not at every boot (seconds under TCG), as the provision ramdisk does.
    "$pyc" -m compileall -q -j 0 --invalidation-mode unchecked-hash -x '/tests/' "$site" >/dev/null
  else
    echo "ipa: no Python 3.11 here to check imports and precompile with" >&2
  fi
  rm -rf "$site"/ironic_python_agent/tests
  install -D -m 755 "$ipa/init" "$stage/init"
  install -D -m 755 "$ipa/power" "$stage/usr/local/sbin/poweroff"
  install -D -m 755 "$ipa/power" "$stage/usr/local/sbin/reboot"
  (cd "$stage" && find . -print0 | LC_ALL=C sort -z | cpio --null -o -H newc -R 0:0 --quiet) \
    | zstd -q -T0 -10 -o "$layer.tmp"
  mv "$layer.tmp" "$layer"
  layer_state=built
else
  layer_state=cached
fi
t2=$(date +%s.%N)

mkdir -p "$out"
cp "$base/vmlinuz" "$out/vmlinuz.tmp" && mv "$out/vmlinuz.tmp" "$out/vmlinuz"
cat "$base/base.cpio.zst" "$layer" > "$out/initramfs.tmp" && mv "$out/initramfs.tmp" "$out/initramfs"
ln -sfn "$key" "$cache/current"
# Old outputs are ~120 MB each: keep this one, its base and the two newest others.
for old in "$cache"/base-*; do [ "$old" = "$base" ] || rm -rf "$old"; done
ls -td "$cache"/* | grep -E '/[0-9a-f]{16}$' | tail -n +4 | xargs -r rm -rf
ls -t "$cache"/ipa-*.cpio.zst | tail -n +4 | xargs -r rm -f

python3 "$ipa/manifest.py" --out "$out" --base "$base" --layer "$layer" \
  --base-state "$base_state" --layer-state "$layer_state" --times "$t0" "$t1" "$t2" \
  --mirror "$mirror" --suite "$suite" --wheels "$ipa/wheels.txt" \
  --ours "$PROVISION_AGENT_CACHE/ramdisk/current/manifest.json" >&2
echo "$out"
