#!/usr/bin/env bash
# Builds (or reuses) the provision ramdisk: vmlinuz + initramfs + manifest.json.
#
# Two cached layers, so a code change costs seconds, not a full rebuild:
#   base     Debian rootfs + kernel modules (build-base.sh), keyed by packages.txt, build-base.sh,
#            the apt sources and the suite;
#   project  this working tree as a wheel, /init and SSH config (build-project.sh), keyed by
#            their contents. initramfs = base.cpio.zst + project.cpio.zst (concatenated).
#
# Usage: sudo ramdisk/build.sh [--conductor-key FILE]... [--authorized-key FILE]...
#                              [--update-key FILE]...
#                              [--mirror URL|SOURCES_FILE]
#                              [--suite bookworm] [--out DIR] [--rebuild] [--no-host-key]
#                              [--module PATH]... [--firmware-package PKG]... [--no-firmware]
#                              [--extra-package PKG|FILE.deb]... [--extra-wheel FILE.whl]...
#                              [--extra-file SRC:DEST]...
#   --conductor-key FILE             the conductor's public key, forced into provision-dispatch
#                                    (registered commands only: docs/security.md; the conductor
#                                    needs [provision_agent]ramdisk_commands = true)
#   --update-key FILE                a public key (ssh-keygen) an update in place of provision must
#                                    be signed with (docs/ironic.md, "Signed in-place update");
#                                    none: this ramdisk never takes an update
#   --authorized-key FILE            an unrestricted root key: an operator's debug shell, or a
#                                    conductor without ramdisk_commands (warned about)
#   --module kernel/drivers/...      keep another kernel module file or directory (a NIC or HBA
#                                    driver this ramdisk leaves out); its dependencies come along
#   --firmware-package PKG           take the firmware files the kept modules name from one more
#                                    Debian package (ramdisk/README.md, "Hardware")
#   --no-firmware                    no firmware packages and no non-free-firmware source
#   --extra-package PKG|FILE.deb     one more Debian package in the base layer: a name from the
#                                    mirror or a local .deb (its dependencies come from the mirror)
#   --extra-wheel FILE.whl           a Python wheel installed beside provision (a plug-in); its
#                                    dependencies are not fetched: give each with --extra-wheel, or
#                                    Debian's python3-* with --extra-package
#   --extra-file SRC:DEST            a file copied to the absolute path DEST, mode kept (a vendor
#                                    tool); docs/extending.md walks through all three
# Output: $PROVISION_AGENT_CACHE/ramdisk/current/{vmlinuz,initramfs,manifest.json,
#         ssh_host_ed25519_key.pub} unless --out; the path is printed last on stdout.
set -euo pipefail
source "$(dirname "$0")/../scripts/lib.sh"
here=$REPO_ROOT/ramdisk
source "$here/extras.sh"

keys=() conductor_keys=() update_keys=() mirror="" suite=bookworm out="" rebuild=0 hostkey=1 modules=() fwpkgs=() nofw=""
xpkgs=() xwheels=() xfiles=()
while [ $# -gt 0 ]; do
  case $1 in
    --authorized-key) keys+=("$(realpath "$2")"); shift 2 ;;
    --conductor-key) conductor_keys+=("$(realpath "$2")"); shift 2 ;;
    --update-key) update_keys+=("$(realpath "$2")"); shift 2 ;;
    --mirror) mirror=$2; shift 2 ;;
    --suite) suite=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --rebuild) rebuild=1; shift ;;
    --no-host-key) hostkey=0; shift ;;
    --module) modules+=("$2"); shift 2 ;;
    --firmware-package) fwpkgs+=("$2"); shift 2 ;;
    --no-firmware) nofw=1; shift ;;
    --extra-package) extra_package "$2"; xpkgs+=("$extra"); shift 2 ;;
    --extra-wheel) extra_wheel "$2"; xwheels+=("$extra"); shift 2 ;;
    --extra-file) extra_file "$2"; xfiles+=("$extra"); shift 2 ;;
    -h|--help) sed -n '2,38p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "unknown option: $1" >&2; exit 2 ;;
  esac
done
[ ${#keys[@]} -eq 0 ] || echo "build.sh: WARNING: --authorized-key gives its holder an" \
  "unrestricted root shell in every ramdisk booted from this build (a debug key); a conductor's" \
  "key belongs in --conductor-key (docs/security.md)" >&2
[ "$(id -u)" -eq 0 ] || { echo "build.sh must run as root (mmdebstrap --mode=root)" >&2; exit 1; }

cache=$PROVISION_AGENT_CACHE/ramdisk
out=${out:-$cache/current}
mkdir -p "$cache" "$out"
exec 9>"$cache/.lock"
flock 9   # two test sessions building at once would trample each other's layers

# The mirror: the building machine's own apt sources unless told otherwise.
if [ -z "$mirror" ]; then
  for f in /etc/apt/sources.list.d/*.sources /etc/apt/sources.list; do
    [ -s "$f" ] && grep -qE "^(Suites:.*\b$suite\b|deb .* $suite )" "$f" && { mirror=$f; break; }
  done
  [ -n "$mirror" ] || { echo "no apt source for $suite found; pass --mirror" >&2; exit 1; }
fi
mirror_id=$mirror
[ -f "$mirror" ] && mirror_id=$(grep -v '^\s*#' "$mirror")

sha() { sha256sum | cut -c1-16; }
export EXTRA_MODULES="${modules[*]}" EXTRA_FIRMWARE_PACKAGES="${fwpkgs[*]}" NO_FIRMWARE=$nofw
export EXTRA_PACKAGES="${xpkgs[*]}" EXTRA_WHEELS="${xwheels[*]}" EXTRA_FILES="${xfiles[*]}"
base_key=$( { cat "$here/build-base.sh" "$here/packages.txt" "$here/firmware-packages.txt"
              echo "$mirror_id" "$suite" "$EXTRA_MODULES" "$EXTRA_FIRMWARE_PACKAGES" "$NO_FIRMWARE"
              extras_digest "${xpkgs[@]}"; } | sha)
base=$cache/base-$base_key

t0=$(date +%s.%N)
if [ "$rebuild" = 1 ] || [ ! -f "$base/base.cpio.zst" ]; then
  rm -rf "$base.tmp" && mkdir -p "$base.tmp"
  # A minute or two with little output: say it is still going.
  ( while sleep 20; do echo "base: still building ($(( $(date +%s) - ${t0%.*} )) s)" >&2; done ) &
  ticker=$!
  # a failed base build exits through set -e: the ticker must not outlive it
  trap 'kill "$ticker" 2>/dev/null || true' EXIT
  "$here/build-base.sh" "$base.tmp" "$mirror" "$suite" 2>&1 | grep -v 'filename containing newline' >&2
  kill "$ticker" 2>/dev/null || true
  echo "$(date +%s.%N) - $t0" > "$base.tmp/build-time"
  rm -rf "$base" && mv "$base.tmp" "$base"
  base_state=built
else
  base_state=cached
fi
t1=$(date +%s.%N)

# A fixed host key, made once per cache, so clients can pin it across rebuilds.
hostkeys=$cache/hostkeys
if [ "$hostkey" = 1 ] && [ ! -f "$hostkeys/ssh_host_ed25519_key" ]; then
  mkdir -p "$hostkeys"
  ssh-keygen -q -t ed25519 -N '' -C provision-ramdisk -f "$hostkeys/ssh_host_ed25519_key"
fi
[ "$hostkey" = 1 ] || hostkeys=/nonexistent

project_key=$( {
  cd "$REPO_ROOT" && git ls-files -co --exclude-standard -z | LC_ALL=C sort -z \
    | xargs -0 sha256sum 2>/dev/null
  cat "${keys[@]}" /dev/null; cat "$hostkeys"/*.pub 2>/dev/null || true
  extras_digest "${xwheels[@]}" "${xfiles[@]}"
  echo forced; cat "${conductor_keys[@]}" /dev/null
  echo update; cat "${update_keys[@]}" /dev/null
} | sha)
project=$cache/project-$project_key.cpio.zst
if [ "$rebuild" = 1 ] || [ ! -f "$project" ]; then
  CONDUCTOR_KEYS="${conductor_keys[*]}" UPDATE_KEYS="${update_keys[*]}" \
    "$here/build-project.sh" "$project" "$REPO_ROOT" "$hostkeys" "${keys[@]}"
  project_state=built
else
  project_state=cached
fi
t2=$(date +%s.%N)

# Old layers are ~100 MB each: keep this base, the newest other one (a build with --extra-package
# beside the plain one, or two branches, would otherwise rebuild each other's for minutes each
# time) and the few newest project layers.
kept_other=""
for old in $(ls -dt "$cache"/base-*); do   # newest first; under the lock no build is running
  [ "$old" = "$base" ] && continue
  if [ -z "$kept_other" ] && [ -f "$old/base.cpio.zst" ]; then kept_other=$old; else rm -rf "$old"; fi
done
ls -t "$cache"/project-*.cpio.zst | tail -n +6 | xargs -r rm -f

cp "$base/vmlinuz" "$out/vmlinuz.tmp" && mv "$out/vmlinuz.tmp" "$out/vmlinuz"
cat "$base/base.cpio.zst" "$project" > "$out/initramfs.tmp" && mv "$out/initramfs.tmp" "$out/initramfs"
rm -f "$out/ssh_host_ed25519_key.pub"
[ "$hostkey" = 1 ] && cp "$hostkeys/ssh_host_ed25519_key.pub" "$out/"

python3 "$here/manifest.py" --out "$out" --base "$base" --project "$project" \
  --base-state "$base_state" --project-state "$project_state" --times "$t0" "$t1" "$t2" \
  --mirror "$mirror" --suite "$suite" >&2
echo "$out"
