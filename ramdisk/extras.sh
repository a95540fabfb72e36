# What a site or vendor adds to the ramdisk without forking it (build.sh --extra-*): each
# option's argument checked and made absolute here, so a typo fails the build before minutes of
# mmdebstrap, and hashed into the layer's cache key by content, not by path or mtime.
# Sourced by build.sh. Each check leaves its result in $extra (no subshell: its exit 2 must end
# the build, which a failed $(...) inside an array assignment would not). Paths travel to the layer scripts space-separated: none may hold a space.

extras_fail() { echo "build.sh: $*" >&2; exit 2; }

extras_path() {   # OPTION PATH: an existing regular file, made absolute
  [[ $2 != *[[:space:]]* ]] || extras_fail "$1 '$2': a path with white space is not taken; rename or link it"
  [ -f "$2" ] && [ -r "$2" ] || extras_fail "$1 '$2': no such readable file"
  extra=$(realpath "$2")
}

extra_package() {
  case $1 in
    *.deb) extras_path --extra-package "$1" ;;
    *) [[ $1 =~ ^[a-z0-9][a-z0-9+.-]+$ ]] \
         || extras_fail "--extra-package '$1': not a Debian package name or a .deb file"
       extra=$1 ;;
  esac
}

extra_wheel() {
  [[ $1 == *.whl ]] || extras_fail "--extra-wheel '$1': not a wheel (*.whl); build one with 'pip wheel --no-deps -w DIR PROJECT'"
  extras_path --extra-wheel "$1"
}

# The files the project layer writes itself: a vendor file there would silently replace
# provision's own init, keys or code, so it is refused instead.
extras_owned='^/init$|^/etc/ssh/|^/etc/provision/|^/usr/lib/provision/|^/usr/local/sbin/poweroff$|^/etc/multipath.conf$|^/usr/lib/python3/dist-packages/provision_agent|^/usr/bin/provision'

extra_file() {
  local src=${1%%:*} dest=${1#*:}
  [[ $1 == *:* && -n $src && -n $dest ]] || extras_fail "--extra-file '$1': give SRC:DEST, e.g. ./fwcli:/usr/local/sbin/fwcli"
  [[ $dest == /* && $dest != */ && $dest != *//* ]] || extras_fail "--extra-file '$1': DEST must be an absolute file path"
  [[ /$dest/ != */../* && /$dest/ != */./* && $dest != *[[:space:]]* ]] \
    || extras_fail "--extra-file '$1': DEST must not hold '.', '..' or white space"
  [[ ! $dest =~ $extras_owned ]] || extras_fail "--extra-file '$1': $dest is the ramdisk's own; pick another path"
  extras_path --extra-file "$src"
  extra=$extra:$dest
}

extras_digest() {   # ARG...: one line per extra, what it is called and what it holds
  local arg path
  for arg in "$@"; do
    path=${arg%%:*}
    if [ -f "$path" ]; then
      echo "${arg#"$path"} $(basename "$path") $(sha256sum < "$path" | cut -c1-64)"
    else
      echo "$arg"
    fi
  done
}
