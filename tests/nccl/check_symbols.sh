#!/bin/sh
# Lists every function NCCL's real libnccl.so.2 exports and whether Tributary's has it, with the
# status docs/NCCL.md gives it. Fails when the doc omits a function, when one it calls provided
# or refused is not exported (as nccl* and pnccl*), or when one it calls missing is.
# Usage: check_symbols.sh REAL_LIBNCCL OUR_LIBNCCL NCCL_MD
real=$1 ours=$2 doc=$3
[ -r "$real" ] || { echo "SKIPPED: needs NCCL's libnccl.so.2 ($real not found)"; exit 77; }
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
# Defined functions (T, W), named by their nccl* form.
funcs() { nm -D --defined-only "$1" | awk '$2 == "T" || $2 == "W" { print $3 }' | grep -E '^p?nccl' | sort -u; }
funcs "$real" | sed 's/^pnccl/nccl/' | sort -u > "$tmp/real"
funcs "$ours" > "$tmp/ours-raw"
sed -n 's/^| `\(nccl[A-Za-z0-9_]*\)` | \(provided\|refused\|missing\) |.*/\1 \2/p' "$doc" | sort -u > "$tmp/doc"
[ -s "$tmp/doc" ] || { echo "FAIL: no function table in $doc"; exit 1; }
has() { grep -qx "$1" "$tmp/ours-raw" && grep -qx "p$1" "$tmp/ours-raw"; }
fail=0
printf '%-36s %-8s %s\n' function ours doc
for f in $(cat "$tmp/real"); do
  st=$(awk -v f="$f" '$1 == f { print $2 }' "$tmp/doc")
  if has "$f"; then o=yes; else o=no; fi
  printf '%-36s %-8s %s\n' "$f" "$o" "${st:-NOT IN DOC}"
  [ -n "$st" ] || { echo "FAIL: $f is exported by NCCL but not listed in $doc"; fail=1; }
done
while read -r f st; do
  case $st in
    provided|refused) has "$f" || { echo "FAIL: $doc calls $f $st, but $ours does not export $f and p$f"; fail=1; } ;;
    missing) if grep -qx "$f" "$tmp/ours-raw" || grep -qx "p$f" "$tmp/ours-raw"; then
        echo "FAIL: $doc calls $f missing, but $ours exports it"; fail=1; fi ;;
  esac
done < "$tmp/doc"
echo "$(grep -c ' provided$' "$tmp/doc") provided, $(grep -c ' refused$' "$tmp/doc") refused, $(grep -c ' missing$' "$tmp/doc") missing of $(wc -l < "$tmp/real") NCCL functions"
exit $fail
