#!/usr/bin/env bash
# Capture the Ansible output of the w-* incidents by running ansible-core for real.
#
# Needs ansible-core in a scratch venv outside the repo:
#   python3 -m venv /tmp/w_ansvenv && /tmp/w_ansvenv/bin/pip install ansible-core
# The project lives under $CAPTURE/runner/project, as an AAP execution environment keeps it
# under /runner/project; every output file has the "$CAPTURE" prefix removed, so paths read
# /runner/project/...  Outputs: $CAPTURE/out/ansible-*.txt (stdout+stderr, exit code last).
set -u
CAPTURE=${1:-/tmp/w_capture}
ANSIBLE_PLAYBOOK=/tmp/w_ansvenv/bin/ansible-playbook
PROJECT=$CAPTURE/runner/project
OUT=$CAPTURE/out
mkdir -p "$PROJECT" "$OUT"
cd "$PROJECT" || exit 1
export ANSIBLE_HOST_KEY_CHECKING=False ANSIBLE_NOCOLOR=1 ANSIBLE_FORCE_COLOR=0
# A plain PATH: the target's discovered interpreter is then Debian's /usr/bin/python3.11.
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin

cat > inventory.ini <<'EOF'
[baremetal]
# Local stand-ins for the targets: racadm and templates run on "the node" via -c local.
n-c04-11 ansible_connection=local ansible_python_interpreter=auto_silent
n-d01-03 ansible_connection=local
# An unroutable management address: ssh times out.
n-a07-02 ansible_host=10.20.4.17 ansible_user=cloud-admin ansible_ssh_common_args='-o ConnectTimeout=5'
EOF

cat > provision.yml <<'EOF'
- name: Provision bare-metal node
  hosts: "{{ target_node }}"
  gather_facts: false
  tasks:
    - name: Power on node through the BMC
      ansible.builtin.shell: racadm -r {{ bmc_address }} -u root -p "$BMC_PASSWORD" serveraction powerup
      environment:
        BMC_PASSWORD: "{{ bmc_password }}"
EOF

cat > kickstart.yml <<'EOF'
- name: Render kickstart for node
  hosts: "{{ target_node }}"
  gather_facts: false
  tasks:
    - name: Render kickstart file
      ansible.builtin.template:
        src: kickstart/rhel9.ks.j2
        dest: /tmp/w_capture/rendered.ks
        mode: "0644"
EOF

cat > prepare-node.yml <<'EOF'
- name: Prepare node for provisioning
  hosts: "{{ target_node }}"
  gather_facts: true
  tasks:
    - name: Wait for node agent socket
      ansible.builtin.shell: test -e {{ agent_socket }} || { touch {{ agent_socket }}; exit 1; }
      register: agent_socket_check
      until: agent_socket_check.rc == 0
      retries: 5
      delay: 3
      changed_when: false
    - name: Load site BMC overrides
      ansible.builtin.include_vars:
        file: bmc-overrides.yml
      ignore_errors: true
EOF

run() {
    local name=$1
    shift
    "$ANSIBLE_PLAYBOOK" "$@" > "$OUT/ansible-$name.txt" 2>&1
    echo "exit code $?" >> "$OUT/ansible-$name.txt"
    sed -i "s#$CAPTURE##g" "$OUT/ansible-$name.txt"
}

"$ANSIBLE_PLAYBOOK" --version > "$OUT/ansible-version.txt" 2>&1
run rc127 -i inventory.ini provision.yml -e target_node=n-c04-11 -e bmc_address=10.20.8.11 \
    -e bmc_password=not-a-real-password
run template-missing -i inventory.ini kickstart.yml -e target_node=n-c04-11
run unreachable -i inventory.ini prepare-node.yml -e target_node=n-a07-02 \
    -e agent_socket=/run/node-agent/agent.sock
rm -f "$CAPTURE/agent.sock"
run warnings -i inventory.ini prepare-node.yml -e target_node=n-d01-03 \
    -e agent_socket="$CAPTURE/agent.sock"
