#!/usr/bin/env bash
# Installs, from Debian's packages, whatever pipetrain needs that this machine
# lacks: the compiler and CMake, OpenBLAS, zlib, Open MPI, the fortunes corpus
# used by the demo, Python 3 (tests only: independent second implementations),
# and extracts scikit-learn's digits data set without installing scikit-learn.
# Runs apt-get only when something is missing; needs root (or sudo) then.
set -euo pipefail

packages=(build-essential cmake pkg-config libopenblas-dev zlib1g-dev libopenmpi-dev openmpi-bin
          fortunes-min fortunes python3)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
if [ ${#missing[@]} -gt 0 ]; then
  echo "install-deps: installing ${missing[*]}"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# scikit-learn's 8x8 digits (1797 images, 64 features, 10 classes), the one
# file taken out of Debian's python3-sklearn package.
here=$(cd "$(dirname "$0")/.." && pwd)
digits="$here/data/digits.csv.gz"
if [ ! -s "$digits" ]; then
  mkdir -p "$here/data"
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  [ -n "$(ls /var/lib/apt/lists/*Packages* 2>/dev/null)" ] || $sudo apt-get update -qq
  (cd "$tmp" && apt-get download -qq python3-sklearn >/dev/null 2>&1) ||
    { $sudo apt-get update -qq && (cd "$tmp" && apt-get download -qq python3-sklearn >/dev/null); }
  dpkg -x "$tmp"/python3-sklearn_*.deb "$tmp/x"
  found=$(find "$tmp/x" -name digits.csv.gz | head -n 1)
  [ -n "$found" ] || { echo "install-deps: digits.csv.gz not in python3-sklearn" >&2; exit 1; }
  cp "$found" "$digits.tmp" && mv "$digits.tmp" "$digits"
fi
