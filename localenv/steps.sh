# Build steps side by side, sourced by localenv/build.sh and localenv/images.sh. A cold build spends
# much of its time downloading modules or linking on one core, so a few steps at once keep both cores
# of a small machine busy (docs/benchmarks.md, "Cold `make demo`").
#
# The first step that fails stops the others and the script, its message last: within a step, the
# sourcing script's fail() writes its message to $step_failure, and this prints it when the step ends.
# Env: KAI_LOCALENV_BUILD_JOBS   steps run side by side (default 3)

steps_jobs="${KAI_LOCALENV_BUILD_JOBS:-3}"
[[ "$steps_jobs" =~ ^[1-9][0-9]*$ ]] ||
  fail "KAI_LOCALENV_BUILD_JOBS must be a positive number, got '$steps_jobs'"
steps_dir="$(mktemp -d)"
declare -A step_of_pid=()

stop_steps() {
  local pid
  for pid in "${!step_of_pid[@]}"; do kill -- "-$pid" 2>/dev/null || true; done
  wait || true
  step_of_pid=()
}
# A step's process group does not get the terminal's interrupt: pass it on.
trap 'stop_steps; exit 130' INT TERM
trap 'rm -rf "$steps_dir"' EXIT

# Runs a step in the background once a slot is free; what it prints lands in step_output <name>.
start_step() { # <name> <command...>
  while ((${#step_of_pid[@]} >= steps_jobs)); do await_step; done
  # Started under job control, so in a process group of its own: stopping it stops its compilers too.
  # (Job control only for the start: bash would report each step's end otherwise.)
  set -m
  { step_failure="$steps_dir/$1.failure" "${@:2}" >"$steps_dir/$1"; } &
  set +m
  step_of_pid[$!]="$1"
}

# Waits for one step to end; if it failed, stops the others and fails with its message.
await_step() {
  local pid status name
  while :; do
    for pid in "${!step_of_pid[@]}"; do
      kill -0 "$pid" 2>/dev/null && continue
      status=0
      wait "$pid" || status=$?
      name="${step_of_pid[$pid]}"
      unset "step_of_pid[$pid]"
      ((status == 0)) && return
      stop_steps
      fail "$(cat "$steps_dir/$name.failure" 2>/dev/null || echo "step $name failed (exit $status)")"
    done
    sleep 0.2
  done
}

await_steps() {
  while ((${#step_of_pid[@]} > 0)); do await_step; done
}

step_output() { # <name>
  cat "$steps_dir/$1"
}
