#!/usr/bin/env bash
# Mutation checks of the kernel tests: each mutation below changes one line of the kernels' code
# (or of how timings read them), rebuilds the tests that should notice (in build/mutate, apart
# from build/release) and expects them to fail. A mutation is found by a fragment of code, not by
# a line number, and only where it is code (the part of a line before any //), so comments may
# change freely; it must match exactly one line, or the script stops. The file is restored
# whatever happens.
#
#   tools/mutate.sh --list          the mutations' names
#   tools/mutate.sh --check         only that each fragment is on one code line (no build; a
#                                   ctest, so a kernel edit that moves a fragment is noticed)
#   tools/mutate.sh [NAME...]       run them (all by default); one at a time is kinder to a
#                                   shared machine: flock /tmp/sdpa-cpu.lock tools/mutate.sh NAME
#
# Prints one line per mutation: caught (the tests failed), MISSED (they passed) or not run (the
# CPU lacks what the mutated code needs); exits 1 if any was missed. Before the first mutation,
# the same tests must pass unmutated.
set -euo pipefail
cd "$(dirname "$0")/.."

BUILD=${MUTATE_BUILD:-build/mutate}
JOBS=${JOBS:-$(nproc)}
# ccache, where installed, shortens the rebuilds between mutations; without it they still run.
if command -v ccache >/dev/null; then
  export CMAKE_CXX_COMPILER_LAUNCHER=${CMAKE_CXX_COMPILER_LAUNCHER:-ccache}
  export CMAKE_C_COMPILER_LAUNCHER=${CMAKE_C_COMPILER_LAUNCHER:-ccache}
fi

# name | file | code fragment | replacement | test program and its doctest options (no spaces
# inside an option: doctest's ? matches one) | optionally, the /proc/cpuinfo flag without which
# the mutated code never runs here (the mutation is then reported not run: neither caught nor
# missed)
MUTATIONS=(
  "mask|kernels/query_blocks.cpp|std::clamp(r.end, key0, key_end)|std::clamp(r.end + 1, key0, key_end)|test_kernels"
  "rescale|kernels/attention_tiles-inl.h|P::MulAdd(P::Load(w.sum + g), alpha, l)|P::Add(P::Load(w.sum + g), l)|test_kernels"
  "int8-scale|kernels/kv_int8.hpp|scale = m / float(kInt8Max)|scale = m / float(kInt8Max + 1)|test_low_precision -tc=*int8*"
  "int8-max|kernels/kv_int8.hpp|kInt8Max = 127;|kInt8Max = 126;|test_low_precision -tc=*int8*"
  "bf16-ties|kernels/bf16.hpp|(b + 0x7fffu + ((b >> 16) & 1u))|(b + 0x7fffu)|test_low_precision -tc=*bf16*"
  "bf16-ties-simd|kernels/flash_bf16.cpp|hn::Add(hn::Add(b, hn::Set(du, 0x7fffu)), hn::And(hn::ShiftRight<16>(b), hn::Set(du, 1u)))|hn::Add(b, hn::Set(du, 0x7fffu))|test_low_precision -tc=*bf16*"
  "decode-merge|kernels/attention_decode-inl.h|row.sum += weight * part.sum[i];|row.sum += part.sum[i];|test_kernels"
  "window|kernels/mask.cpp|r.begin = std::max(r.begin, p - window_left);|r.begin = std::max(r.begin, p - window_left + 1);|test_mask"
  "score-whole|kernels/attention_decode-inl.h|ScoreChunk<P, R, P::kScoreWholeVecs, 0>(|ScoreChunk<P, R, P::kScoreWholeVecs - 1, 0>(|test_kernels -tc=*grouped-query?and?decode*"
  "score-pairs|kernels/attention_decode-inl.h|const auto x2 = InRegister(WideLoad(k + ld_k + kU * L));|const auto x2 = InRegister(WideLoad(k + kU * L));|test_kernels -tc=*grouped-query?and?decode*|avx2"
  "strip-widen|kernels/attention_decode-inl.h|WidenRows(v + j0 * d_v, chunk.k, d_v, d_v, w.v_pack, g.ld_acc)|WidenRows(v + j0 * d_v, chunk.k - 1, d_v, d_v, w.v_pack, g.ld_acc)|test_low_precision -tc=*K/V?storage?kernels?are?within*"
  "f16-widen|kernels/attention_decode-inl.h|hn::Or(hn::Or(hn::BitCast(du, scaled), special), sign)|hn::Or(hn::BitCast(du, scaled), sign)|test_low_precision -tc=*binary16*"
  "int8-pairs-sign|kernels/int8_dots_pairs-inl.h|Vec::sign8(q, k.sign)|q|test_low_precision -tc=*int8*"
  "int8-zmm-sign|kernels/int8_dots_x86.cpp|_mm512_mask_sub_epi8(x, _mm512_movepi8_mask(s), zero(), x)|x|test_low_precision -tc=*int8*|avx512bw"
  "bf16-pair-order|kernels/bf16_dots_x86.cpp|_mm512_cvtne2ps_pbh(high, _mm512_maskz_loadu_ps(in, r0 + c))|_mm512_cvtne2ps_pbh(_mm512_maskz_loadu_ps(in, r0 + c), high)|test_low_precision -tc=*bf16*|avx512_bf16"
  "bf16-backward-pairs|kernels/flash_backward.cpp|.pairs = round_up(blk.rows, 2) / 2,|.pairs = blk.rows / 2,|test_backward -tc=*bf16?backward*|avx512_bf16"
  "int8-roofs|kernels/registry.cpp|? roof_isa() : fp32, fp32, share}|? roof_isa() : fp32, roof_isa(), share}|test_timing -tc=*int8?decode*"
  "mixed-peak|kernels/registry.cpp|double(shape.d_k) / double(shape.d_k + shape.d_v)|0.5|test_timing -tc=*int8?decode*"
  "prefetch-inline|kernels/query_blocks.hpp|[[gnu::always_inline]] inline void prefetch_to_l2|inline void prefetch_to_l2|test_kernels -tc=*prefetch*"
)

field() { cut -d'|' -f"$2" <<<"$1"; }

if [[ ${1:-} == --list ]]; then
  for m in "${MUTATIONS[@]}"; do echo "$(field "$m" 1): $(field "$m" 2)"; done
  exit 0
fi

# The line numbers where `fragment` is in the code part of `file`'s lines.
code_lines() {
  awk -v from="$2" '{ code = $0; c = index(code, "//"); if (c) code = substr(code, 1, c - 1) }
                    index(code, from) { print NR }' "$1"
}

# The one code line of mutation $1's file that holds its fragment; stops the script otherwise.
mutated_line() {
  local lines
  lines=$(code_lines "$(field "$1" 2)" "$(field "$1" 3)")
  if [[ $(wc -w <<<"$lines") -ne 1 ]]; then
    echo "tools/mutate.sh: $(field "$1" 1): '$(field "$1" 3)' is on $(wc -w <<<"$lines") code" \
      "lines of $(field "$1" 2), not one: update the mutation" >&2
    exit 2
  fi
  echo "$lines"
}

if [[ ${1:-} == --check ]]; then
  for m in "${MUTATIONS[@]}"; do mutated_line "$m" >/dev/null; done
  echo "tools/mutate.sh: each of the ${#MUTATIONS[@]} mutations' fragments is on one code line"
  exit 0
fi

selected=()
if [[ $# -eq 0 ]]; then
  selected=("${MUTATIONS[@]}")
else
  for name in "$@"; do
    found=""
    for m in "${MUTATIONS[@]}"; do [[ $(field "$m" 1) == "$name" ]] && found=$m; done
    [[ -n $found ]] || { echo "tools/mutate.sh: no mutation named $name (--list)" >&2; exit 2; }
    selected+=("$found")
  done
fi

backup=""
mutated=""
restore() {
  if [[ -n $mutated ]]; then cp "$backup" "$mutated"; rm -f "$backup"; mutated=""; fi
}
trap restore EXIT
trap 'restore; exit 130' INT TERM

cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release >/dev/null

# Runs a test program (its name, then doctest options); prints doctest's summary line.
run_test() {
  local program=$1
  shift
  local log=$BUILD/mutate-$program.log
  local status=0
  timeout 900 "$BUILD/tests/$program" "$@" >"$log" 2>&1 || status=$?
  grep -E '^\[doctest\] (test cases|assertions):' "$log" | tr -s ' ' | paste -sd' ' || true
  return $status
}

# The unmutated tests first: a mutation is caught only if they pass without it.
programs=$(for m in "${selected[@]}"; do field "$m" 5; done | sort -u)
while read -r test; do
  read -r -a words <<<"$test"
  cmake --build "$BUILD" -j "$JOBS" --target "${words[0]}" >/dev/null
  if ! summary=$(run_test "${words[@]}"); then
    echo "tools/mutate.sh: $test fails without a mutation: $summary" >&2
    exit 1
  fi
  # A filter that selects no test case would pass under any mutation.
  if [[ $summary == *"test cases: 0 |"* ]]; then
    echo "tools/mutate.sh: $test runs no test case: update its filter" >&2
    exit 2
  fi
done <<<"$programs"

missed=0
printf '%-15s %-30s %-32s %s\n' mutation file tests result
for m in "${selected[@]}"; do
  name=$(field "$m" 1) file=$(field "$m" 2) from=$(field "$m" 3) to=$(field "$m" 4)
  test=$(field "$m" 5) needs=$(field "$m" 6)
  if [[ -n $needs ]] && ! grep -qw -- "$needs" /proc/cpuinfo; then
    printf '%-15s %-30s %-32s %s\n' "$name" "$file" "$test" "not run: this CPU lacks $needs"
    continue
  fi
  lines=$(mutated_line "$m")
  backup=$(mktemp)
  cp "$file" "$backup"
  mutated=$file
  awk -v n="$lines" -v from="$from" -v to="$to" \
    'NR == n { i = index($0, from); $0 = substr($0, 1, i - 1) to substr($0, i + length(from)) }
     { print }' "$backup" >"$file"
  if cmp -s "$file" "$backup" || [[ -z $(code_lines "$file" "$to") ]]; then
    echo "tools/mutate.sh: $name did not apply to $file" >&2
    exit 2
  fi
  read -r -a words <<<"$test"
  if ! cmake --build "$BUILD" -j "$JOBS" --target "${words[0]}" >"$BUILD/mutate-build.log" 2>&1; then
    result="caught (does not compile)"
  elif summary=$(run_test "${words[@]}"); then
    result="MISSED: $summary"
    missed=$((missed + 1))
  else
    result="caught: $summary"
  fi
  restore
  printf '%-15s %-30s %-32s %s\n' "$name" "$file:$lines" "$test" "$result"
done
# Rebuilt unmutated, so the next user of build/mutate starts from the code as it is.
while read -r test; do
  read -r -a words <<<"$test"
  cmake --build "$BUILD" -j "$JOBS" --target "${words[0]}" >/dev/null
done <<<"$programs"
exit $((missed > 0))
