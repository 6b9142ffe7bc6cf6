#!/usr/bin/env bash
# A real 3-node Slurm cluster on this one machine, for tests: its own munged, one slurmctld and
# three slurmds (n1 n2 n3), each slurmd in a network + UTS namespace of its own on a private
# bridge (10.99.0.0/24), each node with fake GPUs (character devices, or symlinks to /dev/null
# where mknod is not allowed) and a colod. The layout is docs/slurm-sites.md's: GPU memory is
# booked as `shard`s of 1 GiB bound to each GPU's File=, and where the devices cgroup (v1) can be
# used, task/cgroup with ConstrainDevices=yes keeps each job to the GPUs Slurm gave it.
#
#   cluster.sh up DIR              bring a cluster up in the (empty or new) directory DIR
#   cluster.sh down DIR            stop everything `up` started there and remove its network
#   cluster.sh status DIR          what runs, and sinfo
#   cluster.sh restart-colod DIR nI   kill -9 node nI's colod and start it again
#   cluster.sh kill-colod DIR nI      kill -9 node nI's colod
#   cluster.sh start-colod DIR nI     start node nI's colod (after kill-colod)
#   cluster.sh env DIR             the environment a Slurm command needs (eval "$(cluster.sh env DIR)")
#
# Nothing in /etc/slurm, /etc/munge or the system's munged is touched: every Slurm command must
# run with SLURM_CONF=DIR/slurm.conf. Needs root, iproute2, util-linux and the Debian packages
# slurmctld slurmd slurm-client munge. Environment:
#   COLOD       the colod binary (default: build/bin/colod of this source tree)
#   COLO_SPANK  a SPANK plugin (.so) to load on every node and in sbatch/srun (default: none)
#   COLO_CLUSTER_GPUS  each node's GPUs and their memory in GiB, e.g. "n1=80,80 n2=80,40
#               n3=40" (default: two 80 GiB GPUs on every node)
#   COLO_ISOLATION=none  no task/cgroup even where the devices cgroup can be used
#   CLUSTER_TIMING=1  up logs how long each phase took
#
# In DIR: slurm.conf, gres.conf, cgroup.conf, plugstack.conf, job_submit.lua (a copy of
# packaging/slurm/job_submit.lua with this cluster's settings), health-check (Slurm's
# HealthCheckProgram: packaging/slurm/colo-health-check for this cluster), jobcomp.log (finished
# jobs: sacct -c), isolation ("cgroup" or "none"), ctld/slurmctld.log, nodes/nI/slurmd.log,
# colo/nI/colod.log and colo/nI/state, munge/, dev/nI/nvidia0.. (the fake GPUs), work/USER
# (working directories of colo-alice and colo-bob, theirs). colod of node nI serves
# /run/colo-slurm/nI.sock.
#
# The bridge, namespaces and ports have fixed names, so one cluster runs per machine at a time.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
SOURCE_DIR="$(cd "$HERE/../.." && pwd)"
COLOD="${COLOD:-$SOURCE_DIR/build/bin/colod}"
JOB_SUBMIT_LUA="$SOURCE_DIR/packaging/slurm/job_submit.lua"
HEALTH_CHECK="$SOURCE_DIR/packaging/slurm/colo-health-check"

NODES=(n1 n2 n3)
BRIDGE=colo-slurm-br
BRIDGE_ADDR=10.99.0.1
SUBNET_BITS=24
CTLD_PORT=16817
SLURMD_PORT=16818
COLO_SOCKET_DIR=/run/colo-slurm
SHARD_GIB=1     # the GPU memory of one shard (colod's slurm.shard_size, job_submit.lua's SHARD_MIB)
MARGIN_GIB=2    # colod's gates.memory_margin: a GPU books its memory less this
HEALTH_CHECK_INTERVAL=10
SYSTEM_PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
DEADLINE=20  # seconds, for every wait
LOCK_FILE=/run/lock/colo-slurm-cluster.lock
[ -d /run/lock ] || LOCK_FILE=/tmp/colo-slurm-cluster.lock

die() {
  echo "cluster.sh: $*" >&2
  exit 1
}
log() { echo "cluster.sh: $*" >&2; }

node_ns() { echo "colo-slurm-$1"; }   # the network namespace of node $1
node_veth() { echo "colo-sl-$1"; }    # its veth's host end (at most 15 characters)
node_addr() { echo "10.99.0.1${1#n}"; }  # n1 -> 10.99.0.11

# The memory (GiB) of each GPU of node $1, one a line, from COLO_CLUSTER_GPUS.
node_gpus() {
  local entry
  for entry in ${COLO_CLUSTER_GPUS:-}; do
    if [ "${entry%%=*}" = "$1" ]; then
      tr ',' '\n' <<<"${entry#*=}"
      return 0
    fi
  done
  printf '80\n80\n'
}
# The shards of a GPU of $1 GiB: its memory less colod's margin, in shards.
gpu_shards() { echo $((($1 - MARGIN_GIB) / SHARD_GIB)); }

# --- The colod of a node: its command line lives here, and only here ---

colod_socket() { echo "$COLO_SOCKET_DIR/$1.sock"; }

# Sets COLOD_ARGV to node $1's colod command line, COLOD_ENV to its whole environment (SLURM_CONF:
# colod finds its cluster through scontrol).
colod_argv() {
  local node=$1
  # A short wait before a job that does not fit any GPU goes to another node, so that tests see it;
  # a launch grace (a GPU that just got a job takes no other for that long) that suits jobs of
  # seconds.
  printf '[scheduler]\nlaunch_grace = "%ss"\n[gates]\nmemory_margin = "%sGiB"\n[slurm]\nshard_size = "%sGiB"\nwait_limit = "%ss"\nreconcile_interval = "5s"\n' \
    "${COLO_LAUNCH_GRACE:-1}" "$MARGIN_GIB" "$SHARD_GIB" "${COLO_WAIT_LIMIT:-8}" \
    >"$DIR/colo/$node/colod.toml"
  local sizes
  sizes=$(node_gpus "$node" | sed 's/$/GiB/' | paste -sd,)
  COLOD_ARGV=("$COLOD" --fake-gpus "$(node_gpus "$node" | wc -l)" --fake-gpu-memory "$sizes"
    --state-dir "$DIR/colo/$node/state" --socket "$(colod_socket "$node")" --slurm-node "$node"
    -c "$DIR/colo/$node/colod.toml")
  COLOD_ENV=(PATH="$SYSTEM_PATH" LANG=C.UTF-8 SLURM_CONF="$DIR/slurm.conf")
}

# The SPANK plugin's arguments (key=value), the same on every node: %h is the node's hostname.
spank_args() {
  echo "socket=$COLO_SOCKET_DIR/%h.sock colo=$(dirname "$(realpath "$COLOD")")/colo connect_timeout=5 max_wait=120"
}

# --- Small helpers ---

# wait_for WHAT COMMAND...: runs COMMAND until it succeeds, at most $DEADLINE seconds.
wait_for() {
  local what=$1
  shift
  local end=$((SECONDS + DEADLINE))
  until "$@" >/dev/null 2>&1; do
    if ((SECONDS >= end)); then
      log "timed out after $DEADLINE s waiting for $what"
      return 1
    fi
    sleep 0.1
  done
}

# The pid recorded under DIR/pids/NAME when that process still runs the same program with the
# same command line as when it was recorded (a pid the system gave to another process is not
# ours); nothing otherwise.
recorded_pid() {
  local file="$DIR/pids/$1" pid cmdline
  [ -f "$file" ] || return 0
  read -r pid <"$file" || return 0
  [ -n "$pid" ] && [ -d "/proc/$pid" ] || return 0
  cmdline=$(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null) || return 0
  [ -f "$file.cmdline" ] && [ "$cmdline" = "$(cat "$file.cmdline")" ] || return 0
  echo "$pid"
}

record_pid() {
  local name=$1 pid=$2
  echo "$pid" >"$DIR/pids/$name"
  tr '\0' ' ' <"/proc/$pid/cmdline" >"$DIR/pids/$name.cmdline"
}

# read_pidfile FILE: waits until a daemon wrote its pid there; prints it.
read_pidfile() {
  local file=$1 pid=""
  local end=$((SECONDS + DEADLINE))
  while :; do
    if [ -s "$file" ]; then
      read -r pid <"$file" || true
      if [ -n "$pid" ] && [ -d "/proc/$pid" ]; then
        echo "$pid"
        return 0
      fi
    fi
    ((SECONDS < end)) || die "no live pid in $file after $DEADLINE s"
    sleep 0.05
  done
}

# stop_pid NAME [SIGNAL]: signals a recorded process, waits until it is gone, SIGKILL at the
# deadline.
stop_pid() {
  local name=$1 signal=${2:-TERM} pid
  pid=$(recorded_pid "$name")
  if [ -n "$pid" ]; then
    kill "-$signal" "$pid" 2>/dev/null || true
    local end=$((SECONDS + DEADLINE / 2))
    while [ -d "/proc/$pid" ] && ! grep -q '^State:.*Z' "/proc/$pid/status" 2>/dev/null; do
      if ((SECONDS >= end)); then
        kill -KILL "$pid" 2>/dev/null || true
        end=$((SECONDS + DEADLINE))
        signal=KILL
      fi
      sleep 0.05
    done
  fi
  rm -f "$DIR/pids/$name" "$DIR/pids/$name.cmdline"
}

slurm_env() {
  env -i PATH="$SYSTEM_PATH" LANG=C.UTF-8 SLURM_CONF="$DIR/slurm.conf" "$@"
}

# Seconds since an $EPOCHREALTIME, with 2 decimals.
since() { awk -v a="$1" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.2f", b - a }'; }

# Logs the time a bring-up phase took (CLUSTER_TIMING=1).
phase() {
  if [ "${CLUSTER_TIMING:-}" = 1 ]; then log "$(since "$PHASE_START") s: $1"; fi
  PHASE_START=$EPOCHREALTIME
}
PHASE_START=$EPOCHREALTIME

# --- Configuration ---

# "cgroup" when the devices cgroup (v1) is mounted here, so that slurmd's task/cgroup can keep a
# job to its GPUs (ConstrainDevices=yes); "none" otherwise, or with COLO_ISOLATION=none.
# The fake GPUs must then be character devices of their own (mknod): symlinks to /dev/null would
# make the cgroup deny every job /dev/null.
isolation() {
  local probe=$DIR/dev/.mknod-probe
  if [ "${COLO_ISOLATION:-}" != none ] && grep -q ' /sys/fs/cgroup/devices cgroup ' /proc/mounts &&
    mknod "$probe" c 195 255 2>/dev/null; then
    rm -f "$probe"
    echo cgroup
  else
    echo none
  fi
}

write_configs() {
  local node i gib shards file
  mkdir -p "$DIR"/{ctld/state,pids,dev,colo,work}
  chmod 0755 "$DIR" "$DIR"/{ctld,dev,colo,work}
  chmod 0700 "$DIR/ctld/state" "$DIR/pids"
  isolation >"$DIR/isolation"
  local node_lines="" gres_lines="" max_gpus=0 max_shards=0 min_shards=""
  for node in "${NODES[@]}"; do
    mkdir -p "$DIR/nodes/$node/spool" "$DIR/dev/$node" "$DIR/colo/$node/state"
    chmod 0755 "$DIR/nodes" "$DIR/nodes/$node" "$DIR/dev/$node" "$DIR/colo/$node"
    i=0
    local node_shards=0
    while read -r gib; do
      file=$DIR/dev/$node/nvidia$i
      shards=$(gpu_shards "$gib")
      # A character device of NVIDIA's major: the devices cgroup allows or denies it as it would
      # a GPU (opening an allowed one fails with ENXIO, there being no driver).
      rm -f "$file"
      if [ "$(cat "$DIR/isolation")" = cgroup ]; then
        mknod -m 0666 "$file" c 195 "$i"
      else
        mknod -m 0666 "$file" c 195 "$i" 2>/dev/null || ln -sfn /dev/null "$file"
      fi
      # Cores= on every GPU's line: without it Slurm 22.05 may give a whole-GPU job a GPU whose
      # shards are in use (tests/slurm/NOTES.md).
      gres_lines+="NodeName=$node Name=gpu File=$file Cores=0-7"$'\n'
      gres_lines+="NodeName=$node Name=shard Count=$shards File=$file"$'\n'
      node_shards=$((node_shards + shards))
      ((max_shards >= shards)) || max_shards=$shards
      if [ -z "$min_shards" ] || ((min_shards > shards)); then min_shards=$shards; fi
      i=$((i + 1))
    done < <(node_gpus "$node")
    ((max_gpus >= i)) || max_gpus=$i
    node_lines+="NodeName=$node NodeHostname=$node NodeAddr=$(node_addr "$node") CPUs=8 RealMemory=16000 Gres=gpu:$i,shard:$node_shards State=UNKNOWN"$'\n'
  done
  local task_plugin=task/none cgroup_conf="CgroupPlugin=cgroup/v1"
  if [ "$(cat "$DIR/isolation")" = cgroup ]; then
    task_plugin=task/cgroup
    cgroup_conf+=$'\nConstrainDevices=yes'
  fi

  cat >"$DIR/slurm.conf" <<EOF
# A test cluster made by tests/slurm/cluster.sh; every path is under $DIR.
ClusterName=colo-test
SlurmctldHost=localhost($BRIDGE_ADDR)
SlurmctldPort=$CTLD_PORT
SlurmdPort=$SLURMD_PORT
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$DIR/munge/munge.sock,cred_expire=10
StateSaveLocation=$DIR/ctld/state
SlurmctldPidFile=$DIR/ctld/slurmctld.pid
SlurmctldLogFile=$DIR/ctld/slurmctld.log
SlurmctldDebug=info
SlurmdSpoolDir=$DIR/nodes/%n/spool
SlurmdPidFile=$DIR/nodes/%n/slurmd.pid
SlurmdLogFile=$DIR/nodes/%n/slurmd.log
SlurmdDebug=info
SlurmdParameters=config_overrides
PlugStackConfig=$DIR/plugstack.conf
JobSubmitPlugins=lua
PrologFlags=Alloc
GresTypes=gpu,shard,mps
HealthCheckProgram=$DIR/health-check
HealthCheckInterval=$HEALTH_CHECK_INTERVAL
ProctrackType=proctrack/linuxproc
TaskPlugin=$task_plugin
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/filetxt
JobCompLoc=$DIR/jobcomp.log
MpiDefault=none
SwitchType=switch/none
MailProg=/bin/true
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU_Memory
DefMemPerCPU=100
SchedulerType=sched/builtin
SchedulerParameters=sched_interval=1,batch_sched_delay=0,sched_min_interval=0
MinJobAge=86400
ReturnToService=2
KillWait=2
InactiveLimit=0
Waittime=0
$node_lines
PartitionName=main Nodes=$(IFS=,; echo "${NODES[*]}") Default=YES MaxTime=INFINITE State=UP
EOF
  {
    echo "AutoDetect=off"
    printf '%s' "$gres_lines"
  } >"$DIR/gres.conf"
  # slurmd 22.05 always loads a cgroup plugin; detection fails inside `ip netns exec`.
  echo "$cgroup_conf" >"$DIR/cgroup.conf"
  if [ -n "${COLO_SPANK:-}" ]; then
    echo "required $COLO_SPANK $(spank_args)" >"$DIR/plugstack.conf"
  else
    : >"$DIR/plugstack.conf"
  fi
  # job_submit/lua reads job_submit.lua next to slurm.conf; its settings are this cluster's.
  sed -e "s/^SHARD_MIB = .*/SHARD_MIB = $((SHARD_GIB * 1024))/" \
    -e "s/^MAX_GPU_SHARDS = .*/MAX_GPU_SHARDS = $max_shards/" \
    -e "s/^MAX_GPUS_PER_NODE = .*/MAX_GPUS_PER_NODE = $max_gpus/" \
    -e "s/^MPS_FULL_SHARDS = .*/MPS_FULL_SHARDS = $min_shards/" \
    "$JOB_SUBMIT_LUA" >"$DIR/job_submit.lua"
  # Slurm runs its health check with no environment but SLURMD_NODENAME.
  cat >"$DIR/health-check" <<EOF
#!/bin/sh
export PATH=$SYSTEM_PATH SLURM_CONF=$DIR/slurm.conf
export COLO=$(dirname "$(realpath "$COLOD")")/colo COLO_SOCKET=$COLO_SOCKET_DIR/%h.sock
exec $HEALTH_CHECK
EOF
  chmod 0755 "$DIR/health-check"
  chmod 0644 "$DIR"/{slurm.conf,gres.conf,cgroup.conf,plugstack.conf,job_submit.lua}

  local user
  for user in colo-alice colo-bob; do
    if id "$user" >/dev/null 2>&1; then
      mkdir -p "$DIR/work/$user"
      chown "$user:" "$DIR/work/$user"
      chmod 0755 "$DIR/work/$user"
    fi
  done
}

# --- munge ---

start_munged() {
  local m="$DIR/munge"
  mkdir -p "$m"
  chown munge:munge "$m"
  chmod 0755 "$m"
  dd if=/dev/urandom of="$m/munge.key" bs=1024 count=1 status=none
  chown munge:munge "$m/munge.key"
  chmod 0600 "$m/munge.key"
  runuser -u munge -- /usr/sbin/munged --key-file="$m/munge.key" --socket="$m/munge.sock" \
    --pid-file="$m/munged.pid" --log-file="$m/munged.log" --seed-file="$m/munged.seed" \
    </dev/null >>"$m/munged.out" 2>&1 9>&- || die "munged did not start: $(cat "$m/munged.out")"
  record_pid munged "$(read_pidfile "$m/munged.pid")"
  munge_works() { munge --socket "$m/munge.sock" -n | unmunge --socket "$m/munge.sock"; }
  wait_for "munged to answer" munge_works || die "munged does not answer on $m/munge.sock"
}

# --- Network ---

netns_mounted() { mountpoint -q /run/netns; }

make_network() {
  local node ns veth
  # What this cluster creates, so that down removes exactly that.
  : >"$DIR/network"
  if ! netns_mounted; then echo "mounted /run/netns" >>"$DIR/network"; fi
  ip link add "$BRIDGE" type bridge
  echo "link $BRIDGE" >>"$DIR/network"
  ip addr add "$BRIDGE_ADDR/$SUBNET_BITS" dev "$BRIDGE"
  ip link set "$BRIDGE" up
  for node in "${NODES[@]}"; do
    ns=$(node_ns "$node")
    veth=$(node_veth "$node")
    ip netns add "$ns"
    echo "netns $ns" >>"$DIR/network"
    ip link add "$veth" type veth peer name eth0 netns "$ns"
    echo "link $veth" >>"$DIR/network"
    ip link set "$veth" master "$BRIDGE" up
    ip -n "$ns" addr add "$(node_addr "$node")/$SUBNET_BITS" dev eth0
    ip -n "$ns" link set lo up
    ip -n "$ns" link set eth0 up
  done
  # The first line only when `ip netns add` mounted it just now.
  if grep -q "^mounted /run/netns" "$DIR/network" && ! netns_mounted; then
    sed -i '/^mounted \/run\/netns/d' "$DIR/network"
  fi
}

remove_network() {
  [ -f "$DIR/network" ] || return 0
  local kind name
  # Namespaces first: their ends of the veths go with them.
  while read -r kind name; do
    [ "$kind" = netns ] || continue
    if [ -e "/run/netns/$name" ]; then ip netns del "$name" 2>/dev/null || true; fi
  done <"$DIR/network"
  while read -r kind name; do
    [ "$kind" = link ] || continue
    if ip link show "$name" >/dev/null 2>&1; then ip link del "$name" 2>/dev/null || true; fi
  done <"$DIR/network"
  if grep -q "^mounted /run/netns" "$DIR/network" && netns_mounted; then
    if [ -z "$(ls -A /run/netns 2>/dev/null)" ]; then
      umount /run/netns 2>/dev/null || umount -l /run/netns || true
      rmdir /run/netns 2>/dev/null || true
    else
      log "left /run/netns mounted: other namespaces live there"
    fi
  fi
  rm -f "$DIR/network"
}

# --- Slurm daemons ---

start_slurmctld() {
  slurm_env /usr/sbin/slurmctld -c -f "$DIR/slurm.conf" </dev/null >>"$DIR/ctld/slurmctld.out" 2>&1 9>&- ||
    die "slurmctld did not start: $(tail -5 "$DIR/ctld/slurmctld.log" 2>/dev/null)"
  record_pid slurmctld "$(read_pidfile "$DIR/ctld/slurmctld.pid")"
  wait_for "slurmctld to answer" ctld_up ||
    die "slurmctld does not answer: $(tail -5 "$DIR/ctld/slurmctld.log")"
}

ctld_up() { slurm_env scontrol ping | grep -q "is UP"; }

start_slurmd() {
  local node=$1
  # A hostname of its own (UTS namespace) inside the node's network namespace.
  # shellcheck disable=SC2016 # $1 and $2 are the inner shell's
  # `ip netns exec` mounts a sysfs of the namespace's own, without /sys/fs/cgroup's mounts: the
  # devices hierarchy is mounted again there for task/cgroup.
  local cgroup=:
  if [ "$(cat "$DIR/isolation")" = cgroup ]; then
    cgroup='mount -t tmpfs cgroup_root /sys/fs/cgroup && mkdir /sys/fs/cgroup/devices && mount -t cgroup -o devices devices /sys/fs/cgroup/devices'
  fi
  slurm_env ip netns exec "$(node_ns "$node")" unshare --uts \
    sh -c 'hostname "$1" && eval "$3" && exec /usr/sbin/slurmd -f "$2" -N "$1"' sh "$node" \
    "$DIR/slurm.conf" "$cgroup" \
    </dev/null >>"$DIR/nodes/$node/slurmd.out" 2>&1 9>&- ||
    die "slurmd $node did not start: $(tail -5 "$DIR/nodes/$node/slurmd.log" 2>/dev/null)"
  record_pid "slurmd-$node" "$(read_pidfile "$DIR/nodes/$node/slurmd.pid")"
}

nodes_idle() {
  local states
  states=$(slurm_env sinfo -h -N -o '%N %t' | sort -u)
  [ "$(echo "$states" | grep -c ' idle$')" -eq "${#NODES[@]}" ]
}

# --- colod ---

start_colod() {
  local node=$1 pid
  mkdir -p "$COLO_SOCKET_DIR"
  chown root:root "$COLO_SOCKET_DIR"
  chmod 0755 "$COLO_SOCKET_DIR"
  mkdir -p "$DIR/colo/$node/state"
  local log="$DIR/colo/$node/colod.log"
  colod_argv "$node"
  echo "--- $(date '+%F %T') ${COLOD_ARGV[*]}" >>"$log"
  setsid env -i "${COLOD_ENV[@]}" "${COLOD_ARGV[@]}" </dev/null >>"$log" 2>&1 9>&- &
  pid=$!
  local end=$((SECONDS + DEADLINE)) exe
  exe=$(realpath "$COLOD")
  # Recorded once the child runs colod (setsid and env exec it in the same process).
  until [ "$(readlink "/proc/$pid/exe" 2>/dev/null)" = "$exe" ]; do
    [ -d "/proc/$pid" ] || die "colod $node exited: $(tail -5 "$log")"
    ((SECONDS < end)) || { kill -KILL "$pid"; die "colod $node did not start"; }
    sleep 0.02
  done
  record_pid "colod-$node" "$pid"
  # colod says "serving" once it listens on its socket.
  until [ "$(grep -c "colod: serving $(colod_socket "$node")" "$log")" -ge "$(grep -c '^--- ' "$log")" ]; do
    [ -d "/proc/$pid" ] || die "colod $node exited: $(tail -5 "$log")"
    ((SECONDS < end)) || die "colod $node does not serve after $DEADLINE s: $(tail -5 "$log")"
    sleep 0.05
  done
}

# kill_colod NODE [SIGNAL]: SIGKILL by default (its jobs keep running; a stale socket stays).
kill_colod() {
  local node=$1
  stop_pid "colod-$node" "${2:-KILL}"
}

# --- Commands ---

# Whether anything `up` started in DIR still runs (or its network is still there).
running() {
  local name
  [ -f "$DIR/network" ] && return 0
  for name in munged slurmctld "${NODES[@]/#/slurmd-}" "${NODES[@]/#/colod-}"; do
    [ -n "$(recorded_pid "$name")" ] && return 0
  done
  return 1
}

# Whether the machine has this script's bridge or namespaces while nothing of a cluster runs: no
# process in any node's namespace and nothing listening on slurmctld's port. A run killed before
# `down` (SIGKILL of the test, a machine's shutdown of the test's container) leaves that behind,
# and it must not keep every later cluster from coming up. The lock held above keeps another
# cluster.sh from being half way through `up` meanwhile.
leftover_network() {
  local node ns any=1
  ip link show "$BRIDGE" >/dev/null 2>&1 && any=0
  for node in "${NODES[@]}"; do
    ns=$(node_ns "$node")
    [ -e "/run/netns/$ns" ] || continue
    any=0
    [ -z "$(ip netns pids "$ns" 2>/dev/null)" ] || return 1
  done
  [ "$any" -eq 0 ] || return 1
  ! ss -Hltn "sport = :$CTLD_PORT" 2>/dev/null | grep -q .
}

remove_leftover_network() {
  local node veth
  log "removing the network a killed cluster left (bridge $BRIDGE, namespaces colo-slurm-*)"
  for node in "${NODES[@]}"; do
    if [ -e "/run/netns/$(node_ns "$node")" ]; then ip netns del "$(node_ns "$node")" || true; fi
    veth=$(node_veth "$node")
    if ip link show "$veth" >/dev/null 2>&1; then ip link del "$veth" || true; fi
  done
  if ip link show "$BRIDGE" >/dev/null 2>&1; then ip link del "$BRIDGE" || true; fi
}

cmd_up() {
  [ "$(id -u)" -eq 0 ] || die "needs root (network namespaces, munge, slurmd)"
  local p
  for p in /usr/sbin/slurmctld /usr/sbin/slurmd /usr/bin/sbatch /usr/sbin/munged; do
    [ -x "$p" ] || die "$p is missing: apt-get install slurmctld slurmd slurm-client munge"
  done
  [ -x "$COLOD" ] || die "no colod at $COLOD (build it, or set COLOD)"
  [ -f "$JOB_SUBMIT_LUA" ] || die "no $JOB_SUBMIT_LUA"
  if [ -d "$DIR" ] && running; then die "$DIR already has a running cluster (cluster.sh down $DIR)"; fi
  if leftover_network; then
    remove_leftover_network
  fi
  ip link show "$BRIDGE" >/dev/null 2>&1 && die "bridge $BRIDGE exists: another cluster runs on this machine"
  for p in "${NODES[@]}"; do
    [ -e "/run/netns/$(node_ns "$p")" ] && die "namespace $(node_ns "$p") exists: another cluster runs here"
    [ -S "$(colod_socket "$p")" ] && [ -n "$(colod_socket_owner "$p")" ] &&
      die "a colod serves $(colod_socket "$p") already"
  done
  mkdir -p "$DIR"
  chmod 0755 "$DIR"
  # Anything that fails from here on takes down what came up.
  trap 'log "bring-up failed; taking down what came up"; cmd_down >/dev/null 2>&1 || true' EXIT
  local start=$EPOCHREALTIME
  PHASE_START=$start
  write_configs
  start_munged
  phase "munged"
  make_network
  phase "network"
  local node
  for node in "${NODES[@]}"; do start_colod "$node"; done
  phase "colods"
  start_slurmctld
  phase "slurmctld"
  for node in "${NODES[@]}"; do start_slurmd "$node"; done
  wait_for "all nodes to be idle" nodes_idle ||
    die "nodes not idle: $(slurm_env sinfo -N 2>&1)"
  phase "slurmds, nodes idle"
  trap - EXIT
  log "up in $(since "$start") s: SLURM_CONF=$DIR/slurm.conf"
}

# "yes" when a process of this network namespace has node $1's colod socket bound.
colod_socket_owner() {
  if grep -q " $(colod_socket "$1")\$" /proc/net/unix 2>/dev/null; then echo yes; fi
}

cmd_down() {
  [ -d "$DIR" ] || die "no directory $DIR"
  local node ns pids start=$EPOCHREALTIME
  # Jobs first, so that their steps end while slurmd still runs.
  if [ -n "$(recorded_pid slurmctld)" ]; then
    local jobs
    jobs=$(slurm_env timeout 5 squeue -h -o '%i' 2>/dev/null | tr '\n' ' ') || true
    # shellcheck disable=SC2086
    [ -z "${jobs// /}" ] || slurm_env timeout 5 scancel $jobs >/dev/null 2>&1 || true
  fi
  stop_pid slurmctld
  for node in "${NODES[@]}"; do stop_pid "slurmd-$node"; done
  # Whatever still runs in a node's namespace (slurmstepd, job processes) is this cluster's.
  if [ -f "$DIR/network" ]; then
    local end=$((SECONDS + DEADLINE)) sig=TERM
    while :; do
      pids=""
      while read -r kind ns; do
        if [ "$kind" != netns ] || [ ! -e "/run/netns/$ns" ]; then continue; fi
        pids+=" $(ip netns pids "$ns" 2>/dev/null | tr '\n' ' ')"
      done <"$DIR/network"
      [ -n "${pids// /}" ] || break
      # shellcheck disable=SC2086
      kill "-$sig" $pids 2>/dev/null || true
      sig=KILL
      ((SECONDS < end)) || { log "processes left in the namespaces: $pids"; break; }
      sleep 0.1
    done
  fi
  for node in "${NODES[@]}"; do
    kill_colod "$node" TERM
    # A killed colod leaves its socket behind.
    if [ -S "$(colod_socket "$node")" ] && [ -z "$(colod_socket_owner "$node")" ]; then
      rm -f "$(colod_socket "$node")"
    fi
  done
  rmdir "$COLO_SOCKET_DIR" 2>/dev/null || true
  # The job cgroups task/cgroup made (slurm_nI/uid_U/job_J/step_S/task_T) outlive the namespaces
  # that mounted their hierarchy: emptied by Slurm, they are removed deepest first.
  for node in "${NODES[@]}"; do
    if [ -d "/sys/fs/cgroup/devices/slurm_$node" ]; then
      find "/sys/fs/cgroup/devices/slurm_$node" -depth -type d -exec rmdir {} + 2>/dev/null || true
    fi
  done
  stop_pid munged
  remove_network
  log "down in $(since "$start") s"
}

cmd_status() {
  local name pid rc=0
  for name in munged slurmctld "${NODES[@]/#/colod-}" "${NODES[@]/#/slurmd-}"; do
    pid=$(recorded_pid "$name")
    if [ -n "$pid" ]; then echo "$name running (pid $pid)"; else echo "$name not running"; rc=1; fi
  done
  if [ -n "$(recorded_pid slurmctld)" ]; then slurm_env sinfo -N -o '%N %t %G' || rc=1; fi
  return $rc
}

usage() {
  sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2
  exit 2
}

[ $# -ge 2 ] || usage
command=$1
DIR=$(realpath -m "$2")
# One command at a time on this machine (the names above are the machine's): fd 9 holds the lock
# until this script exits; the daemons it starts do not inherit it.
if [ "$command" != env ]; then
  exec 9>>"$LOCK_FILE"
  flock -w "$DEADLINE" 9 || die "another cluster.sh holds $LOCK_FILE for more than $DEADLINE s"
fi
case "$command" in
  up) cmd_up ;;
  down) cmd_down ;;
  status) cmd_status ;;
  env) echo "export SLURM_CONF=$DIR/slurm.conf" ;;
  restart-colod | kill-colod | start-colod)
    [ $# -eq 3 ] || usage
    node=$3
    [[ " ${NODES[*]} " == *" $node "* ]] || die "no node $node (${NODES[*]})"
    [ -f "$DIR/slurm.conf" ] || die "no cluster in $DIR"
    [ "$command" = start-colod ] || kill_colod "$node"
    if [ "$command" != kill-colod ]; then
      # A killed colod leaves its socket behind; the new one binds it afresh.
      [ -z "$(colod_socket_owner "$node")" ] || die "a colod serves $(colod_socket "$node") already"
      start_colod "$node"
    fi
    ;;
  *) usage ;;
esac
