#!/bin/sh
# Installs the build into a temporary prefix, moves the prefix elsewhere (an installed copy must
# not remember where it was installed), then builds and runs app.c against it the two ways users
# do: pkg-config and find_package(Tributary).
# Usage: check_install.sh CMAKE BUILD_DIR C_COMPILER GENERATOR
set -eu
cmake=$1 build=$2 cc=$3 generator=$4
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

"$cmake" --install "$build" --prefix "$tmp/staged" >"$tmp/install.log" || { cat "$tmp/install.log"; exit 1; }
mv "$tmp/staged" "$tmp/prefix"
prefix=$(cd "$tmp/prefix" && pwd -P)
pc=$(find "$prefix" -name tributary.pc)
[ -n "$pc" ] || { echo "no tributary.pc installed under $prefix"; exit 1; }
pcdir=$(dirname "$pc")
libdir=$(cd "$pcdir/.." && pwd -P)

# pkg-config: only this prefix's .pc (PKG_CONFIG_LIBDIR replaces the system search path).
pkgconf() { PKG_CONFIG_LIBDIR="$pcdir" PKG_CONFIG_PATH="$pcdir" pkg-config "$@"; }
pc_prefix=$(pkgconf --variable=prefix tributary)
if [ "$(cd "$pc_prefix" 2>/dev/null && pwd -P)" != "$prefix" ]; then
  echo "tributary.pc: prefix=$pc_prefix, but the package lies in $prefix"
  exit 1
fi
# shellcheck disable=SC2046  # pkg-config's output is meant to be split into words
"$cc" -o "$tmp/app_pc" "$here/app.c" $(pkgconf --cflags --libs tributary) -pthread
LD_LIBRARY_PATH="$libdir" "$tmp/app_pc"

# find_package(Tributary): the imported target carries the include directory and the library.
"$cmake" -S "$here/consumer" -B "$tmp/consumer" -G "$generator" -DCMAKE_C_COMPILER="$cc" \
  -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF >"$tmp/consumer.log" 2>&1 ||
  { cat "$tmp/consumer.log"; exit 1; }
"$cmake" --build "$tmp/consumer" >>"$tmp/consumer.log" 2>&1 || { cat "$tmp/consumer.log"; exit 1; }
"$tmp/consumer/app"
echo "install check passed"
