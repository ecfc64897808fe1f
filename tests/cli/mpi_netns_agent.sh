#!/bin/sh
# OpenMPI's rsh agent for tests/cli/test_mpi_netns.sh (--mca plm_rsh_agent): called as ssh would
# be, "agent [options] HOST COMMAND...", it runs COMMAND in the network namespace that
# $SQZ_NETNS_MAP ("HOST NAMESPACE" lines) names for HOST, with HOST as its hostname.
while [ $# -gt 0 ]; do
  case "$1" in -*) shift ;; *) break ;; esac
done
host=$1
shift
ns=$(awk -v h="$host" '$1 == h { print $2 }' "${SQZ_NETNS_MAP:?}")
[ -n "$ns" ] || { echo "mpi_netns_agent: unknown host $host" >&2; exit 1; }
exec ip netns exec "$ns" unshare --uts /bin/sh -c "hostname $host; $*"
