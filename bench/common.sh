# shellcheck shell=bash
# What the bench shell scripts share: their flag checks and finding the lockstep binary. Sourced, not run.

positive() {  # flag value: exits unless value is a positive integer
  if ! [[ $2 =~ ^[1-9][0-9]*$ ]]; then
    echo "error: $1 needs a positive integer, got '$2'" >&2
    exit 2
  fi
}

needs_value() {  # flag arguments-left: exits when the flag is the last argument
  if (($2 < 2)); then
    echo "error: $1 needs a value; see -h" >&2
    exit 2
  fi
}

require_lockstep() {  # build-dir: exits unless build-dir/lockstep is an executable
  if [[ ! -x $1/lockstep ]]; then
    echo "error: no lockstep binary at $1/lockstep; build it (scripts/build.sh) or pass --build DIR" >&2
    exit 2
  fi
}
