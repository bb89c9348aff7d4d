#!/usr/bin/env bash
# What a newcomer does first, from a clean clone, as commands: build aml,
# run the README's example, test every example against its golden file,
# start a project with aml init and run the commands it prints, check the
# docs (links, generated pages, runnable examples), then feed aml the
# mistakes newcomers make and check the exit code and the words of each
# answer. Run from the repository root; CI runs it.
set -euo pipefail
cd "$(dirname "$0")/.."
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "newcomer: $*" >&2; exit 1; }

echo "-- build"
go build -o "$work/" ./cmd/aml ./cmd/aml-full   # aml runs aml-full, beside it, for aml check
aml="$work/aml"
"$aml" version

echo "-- the README's example"
[[ $("$aml" run --quiet examples/hello.star) == "Resolved: Explain what AML evaluates." ]] || fail "examples/hello.star"

echo "-- every example against its golden file"
"$aml" test examples | tail -n 1

echo "-- aml init and the commands it prints"
(cd "$work" && "$aml" init starter > init.out) || fail "aml init"
cat "$work/init.out"
grep '^  aml ' "$work/init.out" | sed 's/^  aml //' | while read -r -a args; do
  (cd "$work" && "$aml" "${args[@]}" > /dev/null) || fail "aml ${args[*]}, printed by aml init, failed"
done

echo "-- the docs: links, generated pages, runnable examples"
go test -count=1 ./internal/cli -run 'TestDocsLinks|TestGeneratedDocs|TestDocsExamples' > "$work/docs.out" || { cat "$work/docs.out"; fail "the docs"; }

echo "-- mistakes, with their exit codes and words"
cd "$work"
printf 'def main():\n    return agnet("x")\n' > name.star
printf 'def main():\n    return agent("x", provder = deterministic_agent())\n' > keyword.star
printf 'def main():\n    return agent("x", provider = deterministic_agent()\n' > paren.star
printf 'def f(n):\n    return f(n + 1)\n\ndef main():\n    return f(0)\n' > recursion.star
printf 'configure(agent_provider = deterministic_agent(), max_agent_calls = 1)\n\ndef main():\n    return [agent("a"), agent("b")]\n' > limit.star
printf 'def main():\n    return "\377"\n' > binary.star
printf 'def main():\n    return agent("x" * 5000000, provider = deterministic_agent())\n' > prompt.star
check() { # check WANT_EXIT REGEX COMMAND...
  local want=$1 re=$2; shift 2
  set +e; out=$("$aml" "$@" 2>&1); code=$?; set -e
  [[ $code == "$want" ]] || fail "aml $*: exit $code, want $want: $out"
  grep -Eq -- "$re" <<<"$out" || fail "aml $*: output does not match /$re/: $out"
  (( $(wc -l <<<"$out") <= 30 )) || fail "aml $*: $(wc -l <<<"$out") lines of output"
  printf '  %-34s exit %s\n' "aml $*" "$code"
}
check 2 'name.star:2:12: undefined: agnet \(did you mean agent\?\)' run --quiet name.star
check 2 'keyword.star:2:17: agent: unexpected keyword argument "provder" \(did you mean "provider"\?\)' run --quiet keyword.star
check 1 'keyword.star:2:17: error: agent: unexpected keyword argument "provder"' check keyword.star
check 2 "paren.star:3:1: got outdent, want ','; the \\( at 2:17 is never closed" run --quiet paren.star
check 1 "paren.star:3:1: error: got outdent, want ','; the \\( at 2:17 is never closed" check paren.star
check 1 "paren.star:3:1: got outdent, want ','; the \\( at 2:17 is never closed" fmt paren.star
check 1 'the frame above repeats [0-9]+ more times' run --quiet recursion.star
check 5 'exceeded max_agent_calls 1' run --quiet limit.star
check 5 '"code": "AML_LIMIT_EXCEEDED"' run --quiet --json limit.star
check 2 'binary.star:2:13: not UTF-8 text' run --quiet binary.star
check 1 'binary.star:2:13: error: not UTF-8 text' check binary.star
check 5 'exceeds max_prompt_bytes 4194304' run --quiet prompt.star
check 2 'did you mean agent\?' doc agnet
check 2 'unknown command "rnu" \(did you mean run\?\)' rnu
echo "newcomer: all well"
