#!/usr/bin/env bash
# Prepares the alternative Node runtimes for the engine test matrix, without changing the system:
#   - a side-by-side glibc (Debian 13's libc6, unpacked, never installed): uWebSockets.js 20.57 needs
#     glibc >= 2.38 and Debian 12 has 2.36;
#   - NODE20_UWS: a copy of the system node (Node 20) patched to use that glibc;
#   - NODE24 / NODE24_UWS: Node 24 from the npm registry (node-linux-<arch>), plain and patched.
# Only the apt mirror the machine already uses and the npm registry are contacted.
#
# Usage: .ci/runtimes.sh [DIR]      (default DIR: .cache/runtimes, relative to the repository)
# Idempotent: what is already in DIR is kept. Writes DIR/env (sourceable) and prints it.
# Env: NODE24_VERSION (default below), RUNTIMES_VERBOSE=1 for apt/npm output.
set -euo pipefail
cd "$(dirname "$0")/.."
REPO=$PWD
DIR=${1:-.cache/runtimes}
mkdir -p "$DIR"
DIR=$(cd "$DIR" && pwd)
# Pinned so CI runs are reproducible; bump deliberately.
NODE24_VERSION=${NODE24_VERSION:-24.22.3}
GLIBC_SUITE=trixie # Debian 13: glibc 2.41

log() { printf '[runtimes %ss] %s\n' "$SECONDS" "$*" >&2; }
quiet() { if [ "${RUNTIMES_VERBOSE:-0}" = 1 ]; then "$@"; else "$@" >/dev/null; fi; }

case "$(dpkg --print-architecture)" in
  amd64) MA=x86_64-linux-gnu LOADER=ld-linux-x86-64.so.2 NPM_ARCH=x64 ;;
  arm64) MA=aarch64-linux-gnu LOADER=ld-linux-aarch64.so.1 NPM_ARCH=arm64 ;;
  *) echo "runtimes.sh: unsupported architecture $(dpkg --print-architecture)" >&2; exit 1 ;;
esac

# Does this machine's own glibc already satisfy uWS? Then no patching is needed.
host_glibc=$(getconf GNU_LIBC_VERSION | awk '{print $2}')
need_glibc=0
if [ "$(printf '%s\n2.38\n' "$host_glibc" | sort -V | head -1)" != 2.38 ]; then need_glibc=1; fi

G=$DIR/glibc/usr/lib/$MA
APT=$DIR/apt

# The machine's own Debian mirror (deb822 or one-line sources).
mirror() {
  local u=""
  if [ -f /etc/apt/sources.list.d/debian.sources ]; then
    u=$(awk '/^URIs:/{print $2; exit}' /etc/apt/sources.list.d/debian.sources)
  fi
  if [ -z "$u" ] && [ -f /etc/apt/sources.list ]; then
    u=$(awk '$1=="deb" && $0 ~ /debian/ && $0 !~ /security/ {for(i=2;i<=NF;i++) if ($i ~ /^https?:/) {print $i; exit}}' /etc/apt/sources.list)
  fi
  echo "${u:-http://deb.debian.org/debian}"
}

# apt with a private source list, lists and cache under DIR: nothing outside DIR changes.
apt_private() {
  apt-get -q -o Dir::Etc::SourceList="$APT/sources.list" -o Dir::Etc::SourceParts="$APT/empty" \
    -o Dir::Etc::Preferences="$APT/empty/none" -o Dir::Etc::PreferencesParts="$APT/empty" \
    -o Dir::State::Lists="$APT/lists" -o Dir::Cache="$APT/cache" -o Acquire::Languages=none \
    -o APT::Sandbox::User="$(id -un)" "$@"
}

apt_ready=0
apt_update() {
  [ "$apt_ready" = 1 ] && return 0
  mkdir -p "$APT/lists/partial" "$APT/cache/archives/partial" "$APT/dl" "$APT/empty"
  local u codename
  u=$(mirror)
  codename=$(. /etc/os-release && echo "${VERSION_CODENAME:-bookworm}")
  {
    echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $u $GLIBC_SUITE main"
    echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $u $codename main"
  } >"$APT/sources.list"
  log "apt update (private lists: $u $GLIBC_SUITE + $codename)"
  quiet apt_private update
  apt_ready=1
}

# patchelf: the system's, else the host release's package unpacked under DIR.
PATCHELF=$(command -v patchelf || true)
if [ "$need_glibc" = 1 ] && [ -z "$PATCHELF" ]; then
  if [ ! -x "$DIR/patchelf/usr/bin/patchelf" ]; then
    apt_update
    codename=$(. /etc/os-release && echo "${VERSION_CODENAME:-bookworm}")
    rm -f "$APT/dl"/patchelf_*.deb
    (cd "$APT/dl" && quiet apt_private download "patchelf/$codename")
    dpkg -x "$APT"/dl/patchelf_*.deb "$DIR/patchelf"
  fi
  PATCHELF=$DIR/patchelf/usr/bin/patchelf
fi

if [ "$need_glibc" = 1 ] && [ ! -e "$G/$LOADER" ]; then
  apt_update
  rm -rf "$DIR/glibc.tmp" && rm -f "$APT/dl"/libc6_*.deb
  (cd "$APT/dl" && quiet apt_private download "libc6/$GLIBC_SUITE")
  dpkg -x "$APT"/dl/libc6_*.deb "$DIR/glibc.tmp"
  rm -rf "$DIR/glibc" && mv "$DIR/glibc.tmp" "$DIR/glibc"
  log "glibc $(basename "$APT"/dl/libc6_*.deb) unpacked in $DIR/glibc"
fi

# Copies a node binary and points it at the side-by-side glibc (the copy, never the original).
# Running node through the loader directly would break child_process.fork and vitest workers.
patched_copy() {
  local src=$1 dst=$2 stamp
  stamp="$(stat -c '%s %Y' "$src") $("$src" --version)"
  if [ -x "$dst" ] && [ "$(cat "$dst.stamp" 2>/dev/null)" = "$stamp" ]; then return 0; fi
  mkdir -p "$(dirname "$dst")"
  cp "$src" "$dst.tmp"
  "$PATCHELF" --set-interpreter "$G/$LOADER" --set-rpath "$G:/usr/lib/$MA:/lib/$MA" "$dst.tmp"
  mv "$dst.tmp" "$dst"
  echo "$stamp" >"$dst.stamp"
  log "patched $src -> $dst"
}

# Node 20: the system node.
NODE20=$(readlink -f "$(command -v node)")
case "$("$NODE20" --version)" in v20.*) ;; *) log "warning: the system node is $("$NODE20" --version), not Node 20" ;; esac
if [ "$need_glibc" = 1 ]; then
  patched_copy "$NODE20" "$DIR/node20-uws/bin/node"
  NODE20_UWS=$DIR/node20-uws/bin/node
else
  NODE20_UWS=$NODE20
fi

# Node 24: the npm registry's node-linux-<arch> package (a plain tarball with bin/node).
NODE24=$DIR/node24/bin/node
if [ ! -x "$NODE24" ] || [ "$("$NODE24" --version)" != "v$NODE24_VERSION" ]; then
  mkdir -p "$DIR/dl"
  log "npm pack node-linux-$NPM_ARCH@$NODE24_VERSION"
  tgz=$(cd "$DIR/dl" && npm pack --silent "node-linux-$NPM_ARCH@$NODE24_VERSION" | tail -1)
  rm -rf "$DIR/node24.tmp" && mkdir -p "$DIR/node24.tmp"
  tar -xzf "$DIR/dl/$tgz" -C "$DIR/node24.tmp" --strip-components=1
  chmod +x "$DIR/node24.tmp/bin/node"
  rm -rf "$DIR/node24" && mv "$DIR/node24.tmp" "$DIR/node24"
  rm -rf "$DIR/dl"
fi
if [ "$need_glibc" = 1 ]; then
  patched_copy "$NODE24" "$DIR/node24-uws/bin/node"
  NODE24_UWS=$DIR/node24-uws/bin/node
else
  NODE24_UWS=$NODE24
fi

# The apt lists (~55 MB) are only needed to fetch; what was fetched is unpacked.
rm -rf "$APT"

# Check that each runtime runs, and that uWS loads in the patched ones (when it is installed).
uws_check() {
  if [ ! -d "$REPO/node_modules/uWebSockets.js" ]; then echo "not installed"; return 0; fi
  (cd "$REPO" && "$1" -e "require('uWebSockets.js'); process.stdout.write('loads')" 2>/dev/null) || echo "does not load"
}
for n in "$NODE20" "$NODE20_UWS" "$NODE24" "$NODE24_UWS"; do
  log "$n: $("$n" --version), uWebSockets.js $(uws_check "$n")"
done

cat >"$DIR/env" <<EOF
NODE20=$NODE20
NODE20_UWS=$NODE20_UWS
NODE24=$NODE24
NODE24_UWS=$NODE24_UWS
EOF
cat "$DIR/env"
