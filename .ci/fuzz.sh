#!/usr/bin/env bash
# Coverage-guided fuzzing with Jazzer.js (issue 12): sets up a runtime its libFuzzer addon loads in, builds the
# fuzz targets, then runs each target for a bounded time on its committed seed corpus.
#
# Usage: .ci/fuzz.sh [SECONDS_PER_TARGET] [TARGET...]     (default 60 s, every target)
#   bash .ci/fuzz.sh 60          CI: about a minute per target
#   bash .ci/fuzz.sh 600         long run
# Env: FUZZ_RUNS (libFuzzer -runs, default unbounded: the time limit ends the run), FUZZ_NICE (default 0; e.g. 19),
#      FUZZ_LOG_DIR (default .cache/fuzz/logs), FUZZ_ARGS (extra libFuzzer flags).
# Exit status: non-zero if a target crashed (its input is saved as .cache/fuzz/artifacts/<target>/crash-*) or
# could not start.
#
# Runtime: Jazzer.js 4.0.0's prebuilt addon needs glibc >= 2.38 and libstdc++ from GCC 13+ (GLIBCXX_3.4.32).
# On Debian 12 (glibc 2.36) it runs on a copy of node patched to use Debian 13's glibc (from .ci/runtimes.sh) and
# Debian 13's libstdc++/libgcc, both unpacked under .cache/, never installed (see ../shared/PLATFORM.md).
# Where the host's libraries suffice, the system node is used as is. Everything it fetches is cached under .cache/.
set -euo pipefail
cd "$(dirname "$0")/.."
REPO=$PWD
SECS=${1:-60}
shift || true
TARGETS=("$@")
if [ "${#TARGETS[@]}" -eq 0 ]; then
  TARGETS=()
  for f in test/fuzz/targets/*.fuzz.ts; do TARGETS+=("$(basename "$f" .fuzz.ts)"); done
fi
CACHE=$REPO/.cache/fuzz
LOGS=${FUZZ_LOG_DIR:-$CACHE/logs}
NICE=${FUZZ_NICE:-0}
mkdir -p "$CACHE" "$LOGS"

log() { printf '[fuzz %ss] %s\n' "$SECONDS" "$*" >&2; }

case "$(dpkg --print-architecture)" in
  amd64) MA=x86_64-linux-gnu ;;
  arm64) MA=aarch64-linux-gnu ;;
  *) echo "fuzz.sh: unsupported architecture $(dpkg --print-architecture)" >&2; exit 1 ;;
esac

ADDON_CHECK="require('@jazzer.js/fuzzer'); process.stdout.write('ok')"
addon_loads() { (cd "$REPO" && "$1" -e "$ADDON_CHECK" 2>/dev/null) | grep -qx ok; }

NODE_FUZZ=$(readlink -f "$(command -v node)")
if ! addon_loads "$NODE_FUZZ"; then
  # The side-by-side glibc and its patched Node 20 (shared with the engine test matrix).
  if ! bash .ci/runtimes.sh >"$CACHE/runtimes.log" 2>&1; then
    cat "$CACHE/runtimes.log" >&2
    exit 1
  fi
  # shellcheck disable=SC1091
  source .cache/runtimes/env
  GLIBC_DIR=$REPO/.cache/runtimes/glibc/usr/lib/$MA
  STDCXX=$CACHE/stdcxx
  if [ ! -e "$STDCXX/root/usr/lib/$MA/libstdc++.so.6" ]; then
    # apt with a private source list, lists and cache: nothing outside .cache/ changes.
    A=$STDCXX/apt
    mkdir -p "$A/lists/partial" "$A/cache/archives/partial" "$A/dl" "$A/empty"
    U=""
    if [ -f /etc/apt/sources.list.d/debian.sources ]; then
      U=$(awk '/^URIs:/{print $2; exit}' /etc/apt/sources.list.d/debian.sources)
    fi
    U=${U:-http://deb.debian.org/debian}
    echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $U trixie main" >"$A/sources.list"
    O=(-q -o Dir::Etc::SourceList="$A/sources.list" -o Dir::Etc::SourceParts="$A/empty"
      -o Dir::Etc::Preferences="$A/empty/none" -o Dir::Etc::PreferencesParts="$A/empty"
      -o Dir::State::Lists="$A/lists" -o Dir::Cache="$A/cache" -o Acquire::Languages=none
      -o APT::Sandbox::User="$(id -un)")
    log "apt: Debian 13 libstdc++6 and libgcc-s1 (unpacked under $STDCXX)"
    apt-get "${O[@]}" update >/dev/null
    (cd "$A/dl" && apt-get "${O[@]}" download libstdc++6 libgcc-s1 >/dev/null)
    rm -rf "$STDCXX/root.tmp"
    for d in "$A"/dl/*.deb; do dpkg -x "$d" "$STDCXX/root.tmp"; done
    rm -rf "$STDCXX/root" && mv "$STDCXX/root.tmp" "$STDCXX/root"
    rm -rf "$A" # the lists are only needed to fetch
  fi
  # A copy of the glibc-patched node whose rpath also holds the newer libstdc++ (the copy, never the original).
  PATCHELF=$(command -v patchelf || echo "$REPO/.cache/runtimes/patchelf/usr/bin/patchelf")
  NODE_FUZZ=$CACHE/node-fuzz/bin/node
  stamp="$(stat -c '%s %Y' "$NODE20_UWS") $("$NODE20_UWS" --version)"
  if [ ! -x "$NODE_FUZZ" ] || [ "$(cat "$NODE_FUZZ.stamp" 2>/dev/null)" != "$stamp" ]; then
    mkdir -p "$(dirname "$NODE_FUZZ")"
    cp "$NODE20_UWS" "$NODE_FUZZ.tmp"
    "$PATCHELF" --set-rpath "$STDCXX/root/usr/lib/$MA:$GLIBC_DIR:/usr/lib/$MA:/lib/$MA" "$NODE_FUZZ.tmp"
    mv "$NODE_FUZZ.tmp" "$NODE_FUZZ"
    echo "$stamp" >"$NODE_FUZZ.stamp"
    log "patched $NODE20_UWS -> $NODE_FUZZ"
  fi
  if ! addon_loads "$NODE_FUZZ"; then
    echo "fuzz.sh: the Jazzer.js addon does not load in $NODE_FUZZ:" >&2
    (cd "$REPO" && "$NODE_FUZZ" -e "$ADDON_CHECK") || true
    exit 1
  fi
fi
log "runtime: $NODE_FUZZ ($("$NODE_FUZZ" --version))"

# The targets and the sources they load, compiled to plain ESM under .cache/ (Jazzer.js instruments them as it
# loads them; the tsx loader is not needed). tsc emits even when it reports type errors (npm run typecheck is the
# gate for those): what the tree holds is fuzzed. The relay path reads the vendored spec at run time: copy it.
# One build per invocation, so runs of several targets side by side do not rebuild under each other.
BUILD=$(mktemp -d "$CACHE/build.XXXXXX")
trap 'rm -rf "$BUILD"' EXIT
node_modules/.bin/tsc -p test/fuzz/tsconfig.json --outDir "$BUILD" ||
  log "tsc reported type errors (see above); fuzzing the emitted code"
if [ -d src/protocol/spec ]; then cp -r src/protocol/spec "$BUILD/src/protocol/spec"; fi

# One line per run: inputs executed, seconds, execs/s, coverage (libFuzzer's cov: edges, ft: features), corpus.
summarize() {
  local t=$1 rc=$2 f=$LOGS/$1.log runs secs eps cov ft corp
  runs=$(grep -oE '^Done [0-9]+ runs in [0-9]+' "$f" | tail -1 | awk '{print $2}')
  secs=$(grep -oE '^Done [0-9]+ runs in [0-9]+' "$f" | tail -1 | awk '{print $5}')
  eps=$(grep -oE 'stat::average_exec_per_sec: +[0-9]+' "$f" | tail -1 | awk '{print $2}')
  cov=$(grep -oE ' cov: [0-9]+ ft: [0-9]+ corp: [0-9]+/[0-9]+[a-zA-Z]*' "$f" | tail -1)
  printf '%s %s: runs=%s seconds=%s exec/s=%s%s exit=%s%s\n' "$(date -u +%FT%TZ)" "$t" "${runs:-?}" "${secs:-?}" \
    "${eps:-?}" "${cov:- cov: ?}" "$rc" "$([ "$rc" = 0 ] || echo ' FINDING')"
}

status=0
for t in "${TARGETS[@]}"; do
  js=$BUILD/test/fuzz/targets/$t.fuzz.js
  if [ ! -f "$js" ]; then echo "fuzz.sh: no target $t (test/fuzz/targets/$t.fuzz.ts)" >&2; status=1; continue; fi
  work=$CACHE/corpus/$t # new inputs land here; the committed seeds stay as they are
  art=$CACHE/artifacts/$t
  mkdir -p "$work" "$art"
  args=(-max_total_time="$SECS" -artifact_prefix="$art/" -dict=test/fuzz/awp.dict -print_final_stats=1)
  if [ -n "${FUZZ_RUNS:-}" ]; then args+=(-runs="$FUZZ_RUNS"); fi
  # Large inputs only where the input format needs them (amplified relay texts reach 1 MB on their own).
  args+=(-max_len=65536)
  # shellcheck disable=SC2206
  args+=(${FUZZ_ARGS:-})
  inst=(-i "$BUILD/src/")
  # Jazzer traces every comparison of instrumented code: parseMessage's per-character depth scan made the relay
  # target 3x slower. The jsonrpc target instruments it fully.
  if [ "$t" = relay ]; then inst+=(-e protocol/jsonrpc.js); fi
  log "target $t: ${SECS}s (log: $LOGS/$t.log)"
  set +e
  nice -n "$NICE" "$NODE_FUZZ" node_modules/@jazzer.js/core/dist/cli.js "$js" "$work" "test/fuzz/corpus/$t" \
    "${inst[@]}" --sync --timeout=10000 -- "${args[@]}" >"$LOGS/$t.log" 2>&1
  rc=$?
  set -e
  summarize "$t" "$rc" | tee -a "$LOGS/summary.txt" >&2
  if [ "$rc" -ne 0 ]; then
    status=1
    log "target $t FAILED (exit $rc): see $LOGS/$t.log; inputs in $art/"
    grep -m1 -A25 -E '==[0-9]+== (Uncaught Exception|ERROR)|Error:' "$LOGS/$t.log" >&2 || tail -n 30 "$LOGS/$t.log" >&2
  fi
done
exit "$status"
