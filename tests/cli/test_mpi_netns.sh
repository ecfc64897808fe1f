#!/usr/bin/env bash
# Distributed calibration across two "hosts" (issue 12, step 5): two network namespaces joined by
# a veth pair, each with its own hostname (UTS namespace), OpenMPI started in the first and
# launching the second rank through an rsh agent (tests/cli/mpi_netns_agent.sh: `ip netns exec`,
# as ssh would log in), ranks talking over the TCP transport only (no shared memory). The
# statistics file and a q4_0:gptq model must be byte-identical to one process.
# Skips (77) without mpirun, without MPI in sqz, without the data, or when namespaces cannot be
# made (not root, no CAP_NET_ADMIN, no iproute2, no unshare).
set -u
sqz=${SQZ_BIN:?}
data=${SQZ_TEST_DATA:-${SQZ_TEST_DATA_DEFAULT:?}}
build=${SQZ_BUILD_DIR:-$(dirname "$sqz")}
here=$(cd "$(dirname "$0")" && pwd)
command -v mpirun > /dev/null || { echo "skipping: no mpirun"; exit 77; }
grep -q '^SQZ_MPI:BOOL=ON' "$build/CMakeCache.txt" 2> /dev/null || { echo "skipping: sqz built without MPI"; exit 77; }
command -v ip > /dev/null && command -v unshare > /dev/null || { echo "skipping: no ip or unshare"; exit 77; }
s260=$data/models/stories260K/stories260K.bin
wiki=$data/data/wiki.test.raw
for f in "$wiki" "$s260"; do [ -e "$f" ] || { echo "skipping: $f not found"; exit 77; }; done

a=sqzA$$ b=sqzB$$ va=sqzva$$ vb=sqzvb$$
net=10.201.$(($$ % 200 + 20))
tmp=$(mktemp -d)
cleanup() { ip netns del "$a" 2> /dev/null; ip netns del "$b" 2> /dev/null; rm -rf "$tmp"; }
trap cleanup EXIT
if ! { ip netns add "$a" && ip netns add "$b"; } 2> "$tmp/err"; then
  echo "skipping: cannot create network namespaces: $(head -1 "$tmp/err")"; exit 77
fi
set -e
ip link add "$va" type veth peer name "$vb"
ip link set "$va" netns "$a"
ip link set "$vb" netns "$b"
ip -n "$a" addr add "$net.1/24" dev "$va"
ip -n "$b" addr add "$net.2/24" dev "$vb"
for ns in "$a" "$b"; do ip -n "$ns" link set lo up; done
ip -n "$a" link set "$va" up
ip -n "$b" link set "$vb" up
set +e
printf '%s %s\n' "$net.1" "$a" "$net.2" "$b" > "$tmp/hosts.ns"
printf '%s slots=1\n' "$net.1" "$net.2" > "$tmp/hostfile"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OPENBLAS_NUM_THREADS=1
export SQZ_NETNS_MAP=$tmp/hosts.ns
export LSAN_OPTIONS="suppressions=$here/lsan_mpi.supp:print_suppressions=0"
# (ASan build) whole stacks, and OpenMPI's plugins kept loaded, so that the suppressions can name them
export ASAN_OPTIONS="${ASAN_OPTIONS:-}:fast_unwind_on_malloc=0" OMPI_MCA_mca_base_component_disable_dlclose=1
tail -n 1200 "$wiki" > "$tmp/calib.txt"
c1=(--calib-samples 16 --calib-ctx 128 --threads 1)

# two ranks, one per namespace; mpirun itself runs in namespace a as host $net.1
two_hosts() {
  timeout 120 ip netns exec "$a" unshare --uts /bin/sh -c 'hostname "$0"; exec "$@"' "$net.1" \
    mpirun --hostfile "$tmp/hostfile" -np 2 --mca plm_rsh_agent "$here/mpi_netns_agent.sh" \
    --mca plm_rsh_no_tree_spawn 1 --mca btl tcp,self --mca btl_tcp_if_include "$net.0/24" \
    --mca oob_tcp_if_include "$net.0/24" -x OPENBLAS_NUM_THREADS -x LSAN_OPTIONS -x ASAN_OPTIONS -x SQZ_NETNS_MAP \
    --tag-output "$@"
}
fail=0
check() { # NAME OUT ARGS...: one process (a job of one rank) and two hosts byte-identical
  local name=$1 out=$2; shift 2
  timeout 120 mpirun -np 1 --mca btl self,vader "$sqz" "$@" -o "$tmp/one.$out" > "$tmp/log1" 2>&1 ||
    { echo "FAIL: $name on one process"; cat "$tmp/log1"; fail=1; return; }
  if ! two_hosts "$sqz" "$@" -o "$tmp/two.$out" > "$tmp/log2" 2>&1; then
    echo "FAIL: $name on two hosts"; cat "$tmp/log2"; fail=1; return
  fi
  if cmp -s "$tmp/one.$out" "$tmp/two.$out"; then echo "ok: $name: two hosts == one process, byte for byte"
  else echo "FAIL: $name: two hosts differ from one process"; fail=1; fi
}
# which host each rank ran on, over the TCP transport
two_hosts /bin/sh -c 'echo "rank $OMPI_COMM_WORLD_RANK on $(hostname) in $(ip -o -4 addr show | grep -o "inet [0-9.]*" | tr "\n" " ")"' \
  > "$tmp/where" 2>&1 || { echo "FAIL: mpirun across the namespaces"; cat "$tmp/where"; exit 1; }
cat "$tmp/where"
grep -q "rank 1 on $net.2" "$tmp/where" || { echo "FAIL: rank 1 did not run in the second namespace"; fail=1; }
check stats s.sqzs calibrate "$s260" --text "$tmp/calib.txt" --hessian "${c1[@]}"
check gptq q.gguf compress "$s260" --quant q4_0:gptq:pure --calib "$tmp/calib.txt" "${c1[@]}"
exit $fail
