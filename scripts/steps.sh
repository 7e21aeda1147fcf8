# Background steps for scripts/setup.sh and scripts/setup_trainers.sh (sourced, not run).
#   step_start NAME COMMAND...   runs COMMAND (a program or a shell function) in the background, its output
#                                to a log file of its own under a temporary directory
#   step_wait_all                waits for every started step; prints "done: NAME in N s" as each ends
#                                well; at the first that fails, prints "FAILED: NAME (exit N) after N s"
#                                and its log, stops the others and exits non-zero
#   step_time NAME COMMAND...    runs COMMAND in the foreground (output to the terminal) and prints its
#                                "done:" line the same way; a failure exits the script (set -e)
# Call step_start and step_time only where set -e holds (not after || or &&, not in an if condition): bash
# turns set -e off inside a function called there, even in its background subshells, so a failing command
# would not stop the step. The temporary directory is removed at exit; an exit before step_wait_all (a
# foreground step failed, Ctrl-C, SIGTERM) stops the steps still running: each has a process group of its own.
STEPS_DIR=$(mktemp -d "${TMPDIR:-/tmp}/envfoundry-setup.XXXXXX")
declare -gA STEP_PID=()
declare -gA STEP_LOG=()

step_start() {
  local name=$1
  shift
  local log
  log="$STEPS_DIR/$(printf '%s' "$name" | tr -c 'A-Za-z0-9._-' '_').log"
  STEP_LOG[$name]=$log
  set -m  # the step gets a process group of its own: stopping it stops every process it started
  (
    t0=$(date +%s)
    set +e
    (set -e; "$@") >"$log" 2>&1 </dev/null  # not under ||: that would turn set -e off inside the step
    rc=$?
    echo "$rc $(( $(date +%s) - t0 ))" >"$log.end"
    exit "$rc"
  ) &
  STEP_PID[$name]=$!
  set +m
}

step_wait_all() {
  local pid name n rc secs
  while [ ${#STEP_PID[@]} -gt 0 ]; do
    pid=
    wait -n -p pid "${STEP_PID[@]}" || true
    name=
    for n in "${!STEP_PID[@]}"; do [ "${STEP_PID[$n]}" = "$pid" ] && name=$n; done
    [ -n "$name" ] || continue
    unset "STEP_PID[$name]"
    read -r rc secs <"${STEP_LOG[$name]}.end" 2>/dev/null || { rc=1; secs=?; }
    if [ "$rc" = 0 ]; then
      echo "done: $name in $secs s"
    else
      echo "FAILED: $name (exit $rc) after $secs s; its log:" >&2
      sed 's/^/  | /' "${STEP_LOG[$name]}" >&2
      exit 1
    fi
  done
}

step_time() {
  local name=$1 t0
  shift
  t0=$(date +%s)
  "$@"
  echo "done: $name in $(( $(date +%s) - t0 )) s"
}

_step_cleanup() {
  local groups=() names=() name
  for name in "${!STEP_PID[@]}"; do
    [ ! -f "${STEP_LOG[$name]}.end" ] || continue  # ended, not waited for yet
    names+=("$name")
    groups+=("-${STEP_PID[$name]}")
  done
  if [ ${#groups[@]} -gt 0 ]; then
    echo "stopping the set-up steps still running: $(IFS=,; echo "${names[*]}" | sed 's/,/, /g')" >&2
    kill -- "${groups[@]}" 2>/dev/null || true
    wait 2>/dev/null || true
  fi
  rm -rf "$STEPS_DIR"
}
trap _step_cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
