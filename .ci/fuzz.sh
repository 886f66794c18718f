#!/usr/bin/env bash
# Runs each fuzz target for a while: .ci/fuzz.sh FUZZTIME pkg:Target...
#
# A finding (a crash or failed check) always fails: Go writes the input to
# testdata/fuzz/<Target>/ and says "Failing input written". Under heavy load
# on a small machine the fuzzing engine can stall and end with only "context
# deadline exceeded" and no input: that is not a finding, so the target is
# run again, and only a third stall fails.
set -uo pipefail
fuzztime=$1
shift
log=$(mktemp)
trap 'rm -f "$log"' EXIT
for t in "$@"; do
  pkg=${t%%:*}
  fn=${t##*:}
  for try in 1 2 3; do
    echo "fuzz $fn ($pkg, $fuzztime, try $try)"
    if go test "$pkg" -run '^$' -fuzz "^$fn\$" -fuzztime "$fuzztime" >"$log" 2>&1; then
      grep -E '^fuzz: elapsed' "$log" | tail -n 1
      break
    fi
    if grep -q 'Failing input written' "$log" || ! grep -q 'context deadline exceeded' "$log" || [ "$try" = 3 ]; then
      cat "$log"
      exit 1
    fi
    echo "fuzz $fn: the engine stalled without a finding; trying again"
  done
done
