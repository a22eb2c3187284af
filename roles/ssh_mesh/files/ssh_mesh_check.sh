#!/bin/sh
# Part of trainops.multinode.ssh_mesh: run on a node as the training user.
#
#   ssh_mesh_check.sh TIMEOUT TARGET...
#
# For each TARGET, in order, one at a time: `ssh -o BatchMode=yes -o StrictHostKeyChecking=yes TARGET true`
# (no password, no prompt, the host key must already be in known_hosts). Prints one line per target:
#   TARGET<TAB>exit status<TAB>last line ssh wrote to stderr
# and exits 0 (the caller reads the lines). A failure that looks like a connection refused by sshd's
# MaxStartups while many nodes check at once is tried again, twice, after a short pause.
set -u
timeout=$1
shift
err=$(mktemp) || exit 2
trap 'rm -f "$err"' EXIT
for target in "$@"; do
    for attempt in 1 2 3; do
        ssh -n -o BatchMode=yes -o StrictHostKeyChecking=yes -o ConnectTimeout="$timeout" \
            -o ControlMaster=no -o ControlPath=none -o LogLevel=ERROR "$target" true >/dev/null 2>"$err"
        rc=$?
        if [ "$rc" -eq 0 ] || [ "$attempt" -eq 3 ] \
            || ! grep -Eq 'kex_exchange_identification|Connection (closed|reset)' "$err"; then
            break
        fi
        sleep "$attempt"
    done
    last=$(tr -d '\r' <"$err" | grep -v '^[[:space:]]*$' | tail -n 1 | tr '\t' ' ')
    printf '%s\t%s\t%s\n' "$target" "$rc" "$last"
done
exit 0
