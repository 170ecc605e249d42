#!/usr/bin/env bash
# Capture every program output the w-* incidents quote, then build the case folders.
#
#   bash tests/incidents/_make/w_capture.sh [/tmp/w_capture]
#
# Needs: Debian's nginx, ipmitool (apt-get install ipmitool), go, curl; ansible-core in
# /tmp/w_ansvenv; the two deployment-like venvs under $CAPTURE/root/opt (see
# w_capture_python.py and w_ingress_run.py for how they are made).
set -eu
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../../.." && pwd)
CAPTURE=${1:-/tmp/w_capture}
OUT=$CAPTURE/out
mkdir -p "$OUT" "$CAPTURE/root/var/lib/node-agent/images"

# Go node agent: the errors Go's os/exec and os packages print.
(cd "$HERE" && go build -o "$CAPTURE/w_nodeagent" w_nodeagent.go)
go version > "$OUT/go-version.txt"
ln -sf /dev/full "$CAPTURE/root/var/lib/node-agent/images/rhel-9.4-x86_64.qcow2.part"
{
    # The agent's unit sets PATH without /usr/bin, where the ipmitool package puts it.
    "$CAPTURE/w_nodeagent" power-on /usr/local/sbin:/usr/local/bin:/usr/sbin:/sbin 10.20.8.11
    # ipmitool present, BMC not answering.
    "$CAPTURE/w_nodeagent" power-on /usr/sbin:/usr/bin:/sbin:/bin 10.20.7.40
    # A real ENOSPC: the image file is a symlink to /dev/full.
    "$CAPTURE/w_nodeagent" write-image "$CAPTURE/root/var/lib/node-agent/images/rhel-9.4-x86_64.qcow2.part"
    "$CAPTURE/w_nodeagent" persist-state /var/lib/node-agent/state/tasks.json
} | sed "s#$CAPTURE/root##g" > "$OUT/go.jsonl"
ipmitool -V > "$OUT/ipmitool-version.txt"

# Python workflow worker: ModuleNotFoundError, CalledProcessError (ipmitool), MachineError.
IPMI_PASSWORD=not-a-real-password "$CAPTURE/root/opt/workflow-worker/bin/python" \
    "$HERE/w_capture_python.py" "$CAPTURE/root" > "$OUT/python.json"

# Ansible: rc=127, UNREACHABLE, a missing template, a run with warnings only.
bash "$HERE/w_capture_ansible.sh" "$CAPTURE"

# nginx + the FastAPI provisioning API.
/usr/sbin/nginx -v 2> "$OUT/nginx-version.txt"
"$CAPTURE/root/opt/provisioning-api/bin/python" "$HERE/w_ingress_run.py" "$CAPTURE"

"$REPO/.venv/bin/python" "$HERE/w_build.py" "$CAPTURE" "$REPO/tests/incidents"
