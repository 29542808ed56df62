#!/usr/bin/env bash
# The Slurm batch script that `kiln image --target` writes (DIR/job.slurm), submitted to a real
# one-node Slurm 22.05 cluster brought up on loopback by this test:
#   - munged, slurmctld -D and slurmd -D started here, every file (slurm.conf, munge key, socket
#     and pid, state, spool, logs) under one temp folder, SLURM_CONF pointing at it; stopped by
#     PID on exit, whatever happens;
#   - `kiln image` for a CPU target written here (scheduler slurm, container_runtime apptainer)
#     whose partition, account, time limit, constraint, cores and memory fit the cluster (read
#     from `slurmd -C` and the slurm.conf written here);
#   - Apptainer is not packaged in Debian 12: slurm_apptainer_shim.sh stands in for it, first on
#     the job's PATH (its limits are at its top), so job.slurm runs unchanged: SIF build, self-test
#     on the node, `srun ... run` over an input .npz;
#   - job 1 (output in another folder) builds the SIF; its output must match the bundle's
#     selftest/expected.npz and `kiln-runtime run` on the host; job 2 (output beside the input,
#     relative paths) re-uses the SIF; job 3 (missing input) must fail, naming the file; job 4,
#     for an SMT node with a GPU (a pretend one, /dev/null in gres.conf), is a GPU image (skipped
#     where the CUDA plugin was not built) whose job.slurm adds --hint=nomultithread, --gres=gpu:1
#     and --nv, must be granted the GPU, and runs on the CPUs when submitted with KILN_DEVICE=cpu
#     (the pretend GPU cannot compute).
# Usage: slurm_test.sh KILN KILN_RUNTIME MODEL. Exit 77 = skipped (ctest SKIP_RETURN_CODE), with a reason.
set -euo pipefail
kiln=$1 kiln_runtime=$2 model=$3
here=$(cd "$(dirname "$0")" && pwd)

skip() { echo "SKIP: $*"; exit 77; }
fail() { echo "FAIL: $*" >&2; exit 1; }
for tool in munged slurmctld slurmd sbatch; do
  command -v "$tool" > /dev/null ||
    skip "$tool is not installed: apt-get install --no-install-recommends munge slurmctld slurmd slurm-client"
done
[ "$(id -u)" = 0 ] || skip "needs root (slurmd runs jobs as their user; the apptainer shim uses mount and chroot)"
id munge > /dev/null 2>&1 || skip "no 'munge' user (the munge package creates it)"
for tool in umoci unshare chroot setpriv; do command -v "$tool" > /dev/null || skip "$tool is not installed"; done
# Debian's python3 has python3-numpy; a python3 earlier on PATH (pyenv, venv) may not.
python=""
for p in /usr/bin/python3 python3; do "$p" -c 'import numpy' 2> /dev/null && { python=$p; break; }; done
[ -n "$python" ] || skip "no python3 with numpy (apt-get install python3-numpy)"

work=$(mktemp -d "${TMPDIR:-/tmp}/kiln-slurm-test.XXXXXX")
chmod 755 "$work"  # munged runs as munge and the job's container as 65532: both walk through it
pids=()
cleanup() {
  local rc=$?
  if [ -n "${SLURM_CONF:-}" ] && [ -f "$SLURM_CONF" ] && [ "${#pids[@]}" -ge 2 ]; then
    # Jobs first, while slurmd can still end their steps (they must not outlive the cluster).
    timeout 5 scancel --full --quiet --user=root 2> /dev/null || true
    for _ in $(seq 50); do
      [ -z "$(timeout 2 squeue -h -t running,completing -o %i 2> /dev/null)" ] && break
      sleep 0.1
    done
  fi
  for ((i = ${#pids[@]} - 1; i >= 0; i--)); do  # slurmd, slurmctld, then munged
    kill "${pids[i]}" 2> /dev/null || true
    for _ in $(seq 50); do kill -0 "${pids[i]}" 2> /dev/null || break; sleep 0.1; done
    kill -KILL "${pids[i]}" 2> /dev/null || true
    wait "${pids[i]}" 2> /dev/null || true
  done
  if [ "$rc" != 0 ] && [ "$rc" != 77 ]; then
    for f in "$work"/log/*.log; do [ -f "$f" ] && { echo "--- $f (last 40 lines)"; tail -40 "$f"; }; done
  fi
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 143' TERM INT HUP  # a signal still runs cleanup
export KILN_CACHE_DIR="$work/cache"  # never the user's cache
start=$SECONDS
# Every daemon runs under `timeout`: even if this script is killed outright (SIGKILL at the ctest
# TIMEOUT), none outlives it by long. Only with `&`: the background subshell becomes `timeout`, so
# $! is its PID, and killing it passes the signal on.
daemon() { exec timeout --kill-after=5 230 "$@"; }

# Two free TCP ports on loopback (for slurmctld and slurmd).
read -r ctld_port slurmd_port < <("$python" - << 'PY'
import socket
socks = [socket.socket() for _ in range(2)]
for s in socks:
    s.bind(("127.0.0.1", 0))
print(*(s.getsockname()[1] for s in socks))
PY
)

# Waits up to SECONDS for COMMAND to succeed; fails with WHAT when it does not, or a daemon dies.
wait_for() {  # SECONDS WHAT COMMAND...
  local deadline=$((SECONDS + $1)) what=$2 p
  shift 2
  until "$@" > /dev/null 2>&1; do
    for p in "${pids[@]}"; do kill -0 "$p" 2> /dev/null || fail "a daemon (pid $p) died while waiting for $what"; done
    [ "$SECONDS" -lt "$deadline" ] || fail "timed out waiting for $what"
    sleep 0.1
  done
}

# --- the cluster -------------------------------------------------------------------------
mkdir -p "$work"/{munge,state,spool,log,run}
chown munge: "$work/munge"
chmod 755 "$work/munge"  # munged wants its socket's folder open to all (the key itself is 0400)
dd if=/dev/urandom of="$work/munge/munge.key" bs=1024 count=1 status=none
chown munge: "$work/munge/munge.key"
chmod 400 "$work/munge/munge.key"
munge_socket="$work/munge/munge.socket"
daemon setpriv --reuid=munge --regid=munge --init-groups munged --foreground --key-file="$work/munge/munge.key" \
  --socket="$munge_socket" --pid-file="$work/munge/munged.pid" --seed-file="$work/munge/munged.seed" \
  --log-file="$work/munge/munged.log" > "$work/log/munged.log" 2>&1 &
pids+=($!)
wait_for 10 "munged ($work/log/munged.log)" test -S "$munge_socket"

# The node as slurmd sees it (CPUs, sockets, cores, threads, memory), renamed to localhost.
node_hw=$(slurmd -C | head -1 | sed 's/^NodeName=[^ ]*//')
hw() { sed -n "s/.* $1=\([0-9]*\).*/\1/p" <<< "$node_hw"; }
cpus=$(hw CPUs) sockets=$(hw SocketsPerBoard) cores=$(hw CoresPerSocket) threads=$(hw ThreadsPerCore) memory_mb=$(hw RealMemory)
[ -n "$cpus" ] && [ -n "$sockets" ] && [ -n "$cores" ] && [ -n "$threads" ] && [ -n "$memory_mb" ] ||
  fail "cannot read the node from 'slurmd -C': $node_hw"
cores=$((sockets * cores))
partition=kilntest account=kiln feature=kilnnode
export SLURM_CONF="$work/slurm.conf"
cat > "$SLURM_CONF" << CONF
ClusterName=kilntest
SlurmctldHost=localhost
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$munge_socket
StateSaveLocation=$work/state
SlurmdSpoolDir=$work/spool
SlurmctldPidFile=$work/run/slurmctld.pid
SlurmdPidFile=$work/run/slurmd.pid
SlurmctldLogFile=$work/log/slurmctld.log
SlurmdLogFile=$work/log/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
DefMemPerCPU=256
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/filetxt
JobCompLoc=$work/log/jobcomp.txt
MailProg=/bin/true
ReturnToService=2
GresTypes=gpu
NodeName=localhost $node_hw Features=$feature Gres=gpu:1 State=UNKNOWN
PartitionName=$partition Nodes=localhost Default=YES MaxTime=INFINITE State=UP
CONF
# One pretend GPU for --gres=gpu:1 (slurmd drops a GPU without a device file; with task/none no
# device cgroup uses /dev/null). The shim ignores --nv, and kiln runs the model on the CPUs.
echo "NodeName=localhost Name=gpu File=/dev/null" > "$work/gres.conf"
daemon slurmctld -D -i -f "$SLURM_CONF" > "$work/log/slurmctld.out" 2>&1 &
pids+=($!)
daemon slurmd -D -N localhost -f "$SLURM_CONF" > "$work/log/slurmd.out" 2>&1 &
pids+=($!)
node_idle() { [ "$(timeout 3 sinfo -h -n localhost -o %t 2> /dev/null)" = idle ]; }
wait_for 30 "the node to be idle ($work/log/slurmctld.log)" node_idle
echo "slurm up in $((SECONDS - start)) s: partition $partition, node localhost with $cpus CPUs ($cores cores), $memory_mb MB"

# --- the image and its recipes ---------------------------------------------------------------
# This test's one-node cluster as a kiln target, with every Slurm option kiln writes but qos (a
# QOS needs the accounting database); GPUS (default none) for job 4.
target() {  # FILE CORES THREADS_PER_CORE [GPUS]
  cat > "$1" << YAML
name: slurm-loopback
kind: hpc
scheduler: slurm
container_runtime: apptainer
nodes: 1
node:
  cpu: {model: "test node", cores: $2, threads_per_core: $3, isa: [avx2, fma]}
  memory_gb: $((memory_mb / 1024))
  gpus: [$([ "${4:-0}" -gt 0 ] && echo "{model: test-gpu, count: $4, memory_gb: 1}")]
slurm:
  partition: $partition
  account: $account
  time_limit: "00:05:00"
  constraint: $feature
YAML
}
image() {  # DIR TARGET
  "$kiln" image "$model" -o "$1" --target "$2" > "$1.log" 2>&1 || { cat "$1.log"; fail "kiln image failed"; }
  [ -s "$1/job.slurm" ] || fail "kiln image did not write $1/job.slurm"
}
img="$work/img"
target "$work/target.yaml" "$cores" "$threads"
image "$img" "$work/target.yaml"
grep '^#SBATCH' "$img/job.slurm"
grep -q "^#SBATCH --partition=$partition\$" "$img/job.slurm" || fail "job.slurm does not ask for partition $partition"
grep -q "^#SBATCH --cpus-per-task=$cores\$" "$img/job.slurm" || fail "job.slurm does not ask for $cores CPUs"

# The apptainer stand-in, first on the jobs' PATH (sbatch exports the submitter's environment).
mkdir -p "$work/bin"
install -m 755 "$here/slurm_apptainer_shim.sh" "$work/bin/apptainer"
export PATH="$work/bin:$PATH"
export APPTAINER_SHIM_LOG="$work/apptainer-calls.log"
unset CUDA_VISIBLE_DEVICES  # only Slurm's gres should set it

# Inputs and outputs in folders of their own; the container runs as 65532 and writes there.
mkdir -p "$work/io/in" "$work/io/out"
cp "$img/bundle/selftest/inputs.npz" "$work/io/in/inputs.npz"
chown -R 65532:65532 "$work/io"

# Submits job.slurm from the image folder with ARGS and waits (at most 120 s) for it to end;
# sets job_id, job_state, job_exit, job_log and job_info (`scontrol -o show job`).
submit() {  # ARGS...
  local t0=$SECONDS deadline=$((SECONDS + 120))
  job_id=$(cd "$img" && timeout 20 sbatch --parsable job.slurm "$@" 2> "$work/sbatch.err") ||
    { cat "$work/sbatch.err"; fail "sbatch refused job.slurm $*"; }
  job_id=${job_id%%;*}
  [ -s "$work/sbatch.err" ] && { cat "$work/sbatch.err"; fail "sbatch warned about job.slurm"; }
  while :; do
    job_info=$(timeout 10 scontrol -o show job "$job_id" 2> /dev/null || true)
    job_state=$(sed -n 's/.* JobState=\([A-Z_]*\).*/\1/p' <<< "$job_info")
    case "$job_state" in
      COMPLETED | FAILED | CANCELLED | TIMEOUT | NODE_FAIL | OUT_OF_MEMORY | BOOT_FAIL | DEADLINE | PREEMPTED) break ;;
    esac
    [ "$SECONDS" -lt "$deadline" ] || { echo "$job_info"; fail "job $job_id did not end within 120 s (state '$job_state')"; }
    sleep 0.2
  done
  job_exit=$(sed -n 's/.* ExitCode=\([0-9:]*\).*/\1/p' <<< "$job_info")
  job_log=$(sed -n 's/.* StdOut=\([^ ]*\).*/\1/p' <<< "$job_info")
  echo "--- job $job_id ($*): $job_state, exit $job_exit in $((SECONDS - t0)) s, log $job_log"
  [ -f "$job_log" ] && cat "$job_log"
  return 0
}
expect_completed() {
  [ "$job_state" = COMPLETED ] && [ "$job_exit" = 0:0 ] ||
    fail "job $job_id ended $job_state with exit $job_exit, expected COMPLETED 0:0"
  grep -q "self-test on " "$job_log" || fail "job $job_id did not announce the self-test"
  grep -q "selftest passed" "$job_log" || fail "job $job_id did not pass the self-test on the node"
}
# OUTPUT must match the bundle's expected outputs (and the host's kiln-runtime on the same input,
# with the job's thread count: oneDNN splits reductions by thread, so other counts may differ in the
# last bits, as they do on AVX2 machines).
check_output() {  # OUTPUT THREADS
  "$kiln_runtime" run "$img/bundle/model/model.kiln" --input "$work/io/in/inputs.npz" --output "$work/host.npz" --threads "$2" > "$work/host.log" 2>&1 ||
    { cat "$work/host.log"; fail "kiln-runtime run failed on the host"; }
  "$python" - "$1" "$img/bundle/selftest/expected.npz" "$work/host.npz" << 'PY'
import sys
import numpy as np
got, expected, host = (np.load(p) for p in sys.argv[1:4])
assert sorted(got.files) == sorted(expected.files), (got.files, expected.files)
for name in expected.files:
    a, e, h = got[name], expected[name], host[name]
    assert a.shape == e.shape and a.dtype == e.dtype, (name, a.shape, a.dtype, e.shape, e.dtype)
    assert np.allclose(a, e, rtol=1e-4, atol=1e-5), (name, float(np.abs(a - e).max()))
    assert np.array_equal(a, h), (name, "differs from kiln-runtime run on the host", float(np.abs(a - h).max()))
    print(f"output '{name}' {a.shape} {a.dtype}: matches expected.npz (max |diff| {float(np.abs(a - e).max()):.2g}) and the host run")
PY
}

# Job 1: builds the SIF, output in another folder (two binds).
submit "$work/io/in/inputs.npz" "$work/io/out/result.npz"
expect_completed
[ "$(grep -c '^build ' "$APPTAINER_SHIM_LOG")" = 1 ] || fail "job 1 did not build the SIF once"
ls "$img"/*.sif > /dev/null 2>&1 || fail "job 1 left no SIF in $img"
ls "$img"/*.tmp > /dev/null 2>&1 && fail "job 1 left a temporary SIF"
grep -q "wrote $work/io/out/result.npz" "$job_log" || fail "job 1 did not report its output"
check_output "$work/io/out/result.npz" "$cores"

# Job 2: the SIF is re-used; output beside the input (one bind), relative paths from the submit folder.
submit ../io/in/inputs.npz ../io/in/result2.npz
expect_completed
[ "$(grep -c '^build ' "$APPTAINER_SHIM_LOG")" = 1 ] || fail "job 2 rebuilt the SIF"
check_output "$work/io/in/result2.npz" "$cores"

# Job 3: a missing input fails the job early, saying which file.
submit "$work/io/in/missing.npz" "$work/io/out/never.npz"
[ "$job_state" = FAILED ] || fail "the job with a missing input ended $job_state, expected FAILED"
grep -q "job.slurm: input '.*missing.npz': No such file or directory" "$job_log" || fail "the job with a missing input did not name it"
[ ! -e "$work/io/out/never.npz" ] || fail "the failed job wrote an output"
grep -q "selftest" "$job_log" && fail "the job with a missing input ran the self-test"

# Job 4: a target with SMT nodes (one core, two threads) and a GPU: a GPU image, whose job.slurm
# adds --hint=nomultithread, --gres=gpu:1 and --nv; sbatch passes the first two on to the job's
# srun: it must run as well. The pretend GPU cannot compute: KILN_DEVICE=cpu at submission, which
# job.slurm hands to the container, runs the model on the CPUs.
plugin="$(dirname "$kiln")/libkiln_cuda.so"
if [ ! -f "$plugin" ]; then
  echo "job 4 skipped: the CUDA plugin was not built here ($plugin), and a GPU target's image carries it"
else
  img="$work/img-gpu"
  target "$work/target-gpu.yaml" 1 2 1
  image "$img" "$work/target-gpu.yaml"
  grep -q '^#SBATCH --hint=nomultithread$' "$img/job.slurm" || fail "an SMT target's job.slurm has no --hint=nomultithread"
  grep -q '^#SBATCH --gres=gpu:1$' "$img/job.slurm" || fail "a GPU target's job.slurm has no --gres=gpu:1"
  grep -q "^#SBATCH --cpus-per-task=1\$" "$img/job.slurm" || fail "the one-core target's job.slurm does not ask for 1 CPU"
  grep -q 'exec --cleanenv --nv ' "$img/job.slurm" || fail "a GPU target's job.slurm does not pass --nv"
  grep -q ',KILN_DEVICE=$DEVICE,KILN_CUDA_PRECISION=$PRECISION" ' "$img/job.slurm" ||
    fail "a GPU target's job.slurm does not pass KILN_DEVICE and KILN_CUDA_PRECISION on"
  export KILN_DEVICE=cpu
  submit "$work/io/in/inputs.npz" "$work/io/out/gpu.npz"
  unset KILN_DEVICE
  expect_completed
  # Slurm tells the job its GPU in CUDA_VISIBLE_DEVICES (what --nv passes on): the batch step and srun's.
  grep "^exec " "$APPTAINER_SHIM_LOG" | tail -2 > "$work/gpu-calls.log"
  [ "$(grep -c ' CUDA_VISIBLE_DEVICES=0$' "$work/gpu-calls.log")" = 2 ] || { cat "$work/gpu-calls.log"; fail "job 4 was not granted the GPU"; }
  [ "$(grep -c 'KILN_DEVICE=cpu' "$work/gpu-calls.log")" = 2 ] || { cat "$work/gpu-calls.log"; fail "job 4 did not pass KILN_DEVICE on"; }
  [ "$(grep -c 'KILN_CUDA_PRECISION=fp32' "$work/gpu-calls.log")" = 2 ] ||
    { cat "$work/gpu-calls.log"; fail "job 4 did not pass the image's KILN_CUDA_PRECISION on"; }
  check_output "$work/io/out/gpu.npz" 1  # one core: --cpus-per-task=1
fi

echo "--- apptainer calls"
cat "$APPTAINER_SHIM_LOG"
echo "PASS: slurm ($((SECONDS - start)) s)"
