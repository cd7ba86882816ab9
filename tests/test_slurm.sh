#!/usr/bin/env bash
# A sweep on a real Slurm: munged, slurmctld and slurmd (Debian's, installed by tools/setup.sh)
# started on loopback as a one-node cluster in a temporary folder, a tiny config submitted
# through the scripts `sdpa-bench slurm` writes (a job array of 3 shards and the merge after
# it), and the merged file compared with an unsharded run: `compare` must call every
# statistics experiment identical. Slurm missing or not starting is a failure, never a skip.
# Every daemon and job is stopped at the end, on failure too; nothing waits without a limit.
#   tests/test_slurm.sh SDPA_BENCH
set -euo pipefail
bench=$(realpath "$1")
deadline=$((SECONDS + 150))  # ctest's own limit is 180 s

fail() {
  echo "test_slurm: FAIL: $*" >&2
  exit 1
}
for tool in munged mungekey slurmctld slurmd sbatch squeue sinfo scontrol scancel; do
  command -v "$tool" >/dev/null ||
    fail "$tool not found: Slurm and munge are required (tools/setup.sh installs them)"
done

tmp=$(mktemp -d /tmp/sdpa-slurm.XXXXXX)
export SLURM_CONF=$tmp/slurm.conf
pids=()
cleanup() {
  local status=$?
  set +e
  # Jobs first (their processes belong to slurmd), then the daemons, each by its own pid.
  if [[ -f $tmp/slurmctld.pid ]]; then
    timeout 10 scancel --quiet --full "--user=$(id -un)" 2>/dev/null
    sleep 0.5
  fi
  for f in "$tmp/slurmd.pid" "$tmp/slurmctld.pid" "$tmp/munge/munged.pid"; do
    [[ -f $f ]] && pids+=("$(cat "$f")")
  done
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
  for _ in 1 2 3 4 5 6 7 8 9 10; do
    local alive=0
    for p in "${pids[@]}"; do kill -0 "$p" 2>/dev/null && alive=1; done
    ((alive)) || break
    sleep 0.3
  done
  for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; done
  if ((status != 0)); then
    for log in "$tmp"/log/*.log "$tmp"/sweep/*.log; do
      [[ -f $log ]] && { echo "--- $log (last lines)"; tail -n 15 "$log"; }
    done >&2
  fi
  rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 1' INT TERM

# Two free TCP ports on loopback (nothing answers on them).
free_port() {
  local port
  for _ in $(seq 200); do
    port=$((20000 + RANDOM % 40000))
    if ! (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
      echo "$port"
      return
    fi
  done
  fail "no free TCP port found"
}
ctld_port=$(free_port)
slurmd_port=$(free_port)
[[ $ctld_port != "$slurmd_port" ]] || slurmd_port=$((ctld_port + 1))

# munge with its own key and socket, so it needs nothing of the system's.
mkdir -p "$tmp/munge" "$tmp/state" "$tmp/spool" "$tmp/log"
chmod 700 "$tmp/munge"
mungekey --create --keyfile="$tmp/munge/munge.key" || fail "mungekey could not create a key"
munged --force --socket="$tmp/munge/socket" --key-file="$tmp/munge/munge.key" \
  --log-file="$tmp/munge/munged.log" --pid-file="$tmp/munge/munged.pid" \
  --seed-file="$tmp/munge/munged.seed" || fail "munged did not start (see $tmp/munge/munged.log)"

user=$(id -un)
cpus=$(nproc)
memory_mb=$(($(awk '/^MemTotal:/ {print $2}' /proc/meminfo) / 1024 / 2))
cat >"$SLURM_CONF" <<EOF
ClusterName=sdpatest
SlurmctldHost=localhost(127.0.0.1)
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
SlurmUser=$user
SlurmdUser=$user
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$tmp/munge/socket
StateSaveLocation=$tmp/state
SlurmdSpoolDir=$tmp/spool
SlurmctldPidFile=$tmp/slurmctld.pid
SlurmdPidFile=$tmp/slurmd.pid
SlurmctldLogFile=$tmp/log/slurmctld.log
SlurmdLogFile=$tmp/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SchedulerType=sched/builtin
MpiDefault=none
ReturnToService=2
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SlurmdParameters=config_overrides
NodeName=localhost NodeAddr=127.0.0.1 CPUs=$cpus RealMemory=$memory_mb State=UNKNOWN
PartitionName=sdpa Nodes=localhost Default=YES MaxTime=INFINITE State=UP
EOF
slurmctld -f "$SLURM_CONF" || fail "slurmctld did not start"
slurmd -f "$SLURM_CONF" -N localhost || fail "slurmd did not start"

# The node is up once sinfo calls it idle.
until [[ $(timeout 10 sinfo -h -n localhost -o %t 2>/dev/null) == idle ]]; do
  ((SECONDS < deadline)) || fail "the node did not come up: $(sinfo 2>&1 | tail -n 2)"
  sleep 0.5
done

cat >"$tmp/tiny.json" <<'EOF'
{
  "name": "tiny",
  "seed": 7,
  "experiments": [
    { "name": "var", "kind": "variance", "kernel": "reference",
      "d_k": [4, 8, 16, 32], "n_q": 8, "n_kv": 8, "trials": 20, "scale": ["none", "sqrt_dk"] },
    { "name": "ent", "kind": "entropy", "kernel": "reference",
      "d_k": [4, 16], "n_kv": [8, 32], "n_q": 4, "trials": 10 }
  ]
}
EOF
"$bench" run "$tmp/tiny.json" -o "$tmp/whole.json" -j 1 >/dev/null 2>"$tmp/whole.err" ||
  fail "the unsharded run failed: $(cat "$tmp/whole.err")"

# The scripts, with an sbatch option passed through, submitted as a user would.
"$bench" slurm "$tmp/tiny.json" --shards 3 --out-dir "$tmp/sweep" --time=5 --cpus-per-task=1 >/dev/null ||
  fail "sdpa-bench slurm failed"
grep -q -- '--time=5' "$tmp/sweep/submit.sh" || fail "sbatch options not passed through"
submitted=$(timeout 60 sh "$tmp/sweep/submit.sh" 2>&1) || fail "submit.sh failed: $submitted"
echo "test_slurm: $submitted"
merge_job=$(sed -n 's/.*merge job \([0-9]*\).*/\1/p' <<<"$submitted")
[[ -n $merge_job ]] || fail "submit.sh did not print the merge job: $submitted"

# Done when the merge job leaves the queue.
while timeout 10 squeue -h -j "$merge_job" 2>/dev/null | grep -q .; do
  ((SECONDS < deadline)) || fail "the jobs did not finish in time: $(squeue 2>&1)"
  sleep 1
done
state=$(timeout 10 scontrol show job "$merge_job" 2>/dev/null | sed -n 's/.*JobState=\([A-Z_]*\).*/\1/p')
[[ -z $state || $state == COMPLETED ]] || fail "the merge job ended $state"

merged=$tmp/sweep/tiny.json
[[ -f $merged ]] || fail "no merged file $merged"
for i in 0 1 2; do
  grep -q "\"index\": $i" "$tmp/sweep/shard-$i.json" || fail "shard-$i.json is not marked shard $i"
done
grep -q '"merged_from"' "$merged" || fail "$merged does not name its shards"
"$bench" compare "$tmp/whole.json" "$merged" >"$tmp/compare.md" || fail "compare failed"
identical=$(grep -c '| identical |' "$tmp/compare.md" || true)
[[ $identical == 2 ]] ||
  fail "compare does not call both experiments identical: $(grep -A4 reproducibility "$tmp/compare.md")"
echo "test_slurm: PASS: 3 shards run as a Slurm array and merged; compare: identical ($((SECONDS)) s)"
