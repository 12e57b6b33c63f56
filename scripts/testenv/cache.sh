# Sourced by the build scripts beside it: the one home of a build's cache folder, its lock and
# its stamp. A build script reads its pins, then:
#
#   go_pin GO.MOD MODULE           # the version GO.MOD requires of MODULE (the pins' one home)
#   cache_open NAME PINS INPUT...  # $out = <cache root>/PINS; $want = sha256 of the INPUT files
#                                  # (pins and the script); waits while another NAME build runs
#   cache_hit PROGRAM... [--data FILE]... && exit 0
#                                  # the stamp equals $want, every PROGRAM is executable and
#                                  # every FILE is there: prints $out
#   cache_need COMMAND HINT        # stops with "NAME: COMMAND is not installed (HINT)"
#   cache_begin [--clean]          # drops the stamp (and with --clean the folder) before building
#   ...build into $out...
#   cache_done                     # writes the stamp, says how long it took, prints $out
#
# Progress goes to stderr; stdout carries only the folder (its last line), which callers read.
# The cache root is CHECKPOINT_TESTENV_CACHE, else $XDG_CACHE_HOME/checkpoint-runtime/testenv.
# The stamp is written last, so a build stopped half way is never taken for a finished one.

go_pin() { awk -v m="$2" '$1 == m && NF >= 2 { print $2; exit }' "$1"; }

cache_open() {
  cache_name=$1
  cache_pins=$2
  shift 2
  local root=${CHECKPOINT_TESTENV_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/checkpoint-runtime/testenv}
  out="$root/$cache_pins"
  cache_stamp="$out/.built"
  want=$(cat "$@" | sha256sum | cut -d' ' -f1)
  # One build of a kind at a time; builds of other kinds do not wait for it.
  mkdir -p "$root"
  local lock="$root/.$cache_name.lock"
  exec 9>"$lock"
  if ! flock --nonblock 9; then
    echo "$cache_name: another build holds $lock; waiting for it" >&2
    flock 9
    echo "$cache_name: the other build finished" >&2
  fi
}

cache_hit() {
  [[ -f $cache_stamp && $(cat "$cache_stamp") == "$want" ]] || return 1
  while (($#)); do
    if [[ $1 == --data ]]; then  # a file that is not a program (an image archive)
      [[ -f $2 ]] || return 1
      shift 2
    else
      [[ -x $1 ]] || return 1
      shift
    fi
  done
  echo "$cache_name: cached ($cache_pins)" >&2
  echo "$out"
}

cache_need() {
  command -v "$1" >/dev/null || { echo "$cache_name: $1 is not installed ($2)" >&2; exit 1; }
}

cache_begin() {
  [[ ${1:-} == --clean ]] && rm -rf "$out"
  mkdir -p "$out"
  rm -f "$cache_stamp"
  cache_started=$(date +%s)
}

cache_done() {
  echo "$want" >"$cache_stamp"
  echo "$cache_name: built in $(($(date +%s) - cache_started)) s into $out" >&2
  echo "$out"
}
