#!/bin/sh
# rc-pingpong.sh's exit status, without a device: a fake ibv_rc_pingpong on PATH whose server
# (no host argument) and client (a host argument) exit as told. A failed run on either side must
# fail the script, and a server left waiting by a failed client must not hold it up.
set -u
script=$(dirname "$0")/rc-pingpong.sh
fake=$(mktemp -d)
trap 'rm -rf "$fake"' EXIT
cat > "$fake/ibv_rc_pingpong" << 'FAKE'
#!/bin/sh
for last; do :; done
case $last in
  10.*) exit "$FAKE_CLIENT" ;;
  *) [ "$FAKE_SERVER" = hang ] && exec sleep 60
     exit "$FAKE_SERVER" ;;
esac
FAKE
chmod +x "$fake/ibv_rc_pingpong"
export PATH="$fake:$PATH" TRIB_VM_PINGPONG_DELAY=0 TRIB_VM_PINGPONG_TIMEOUT=30
export TRIB_VM_HCA0=rxe0 TRIB_VM_HCA1=rxe1 TRIB_VM_GID0=1 TRIB_VM_GID1=1 TRIB_VM_IP0=10.77.0.1
failures=0
check() {  # server client expected-status(0 or fail)
  start=$(date +%s)
  FAKE_SERVER=$1 FAKE_CLIENT=$2 sh "$script" 4096 1 > "$fake/out" 2>&1
  rc=$?
  took=$(($(date +%s) - start))
  verdict=ok
  if [ "$3" = 0 ] && [ $rc != 0 ]; then verdict="exit $rc, expected 0"; fi
  if [ "$3" = fail ] && [ $rc = 0 ]; then verdict="exit 0, expected a failure"; fi
  [ $took -le 10 ] || verdict="took $took s"
  echo "server $1, client $2: $verdict"
  [ "$verdict" = ok ] || { failures=$((failures + 1)); cat "$fake/out"; }
}
check 0 0 0
check 1 0 fail
check 0 1 fail
check 1 1 fail
check hang 1 fail
[ $failures = 0 ]
