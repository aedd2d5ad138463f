#!/bin/sh
# fuzz/smoke.sh WORK_DIR FUZZER ARGS...: runs one libFuzzer target with WORK_DIR (emptied first)
# as its scratch folder and WORK_DIR/new for the inputs it finds, never the seed corpus in the
# repository. Used by the ctest smoke runs, by `make fuzz`, and by the corpus replays of every other
# build (whose scratch files would otherwise be left in /tmp).
set -e
work=$1
shift
rm -rf "$work"
mkdir -p "$work/new"
TMPDIR=$work
export TMPDIR
exec "$@"
