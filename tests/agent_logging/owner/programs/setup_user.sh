#!/bin/sh
# One-time setup for the sudo/become captures (run as root; Debian 12).
# A local user whose sudo needs a password that nobody gives: sudo -n and Ansible's become
# without --ask-become-pass then fail with sudo's and Ansible's own wording.
set -e
apt-get install -y sudo openssh-server ipmitool
id wording >/dev/null 2>&1 || useradd -m -s /bin/bash wording
# A password must exist for sudo to ask for it; nobody uses it.
echo "wording:$(head -c 18 /dev/urandom | base64)" | chpasswd
echo 'wording ALL=(ALL:ALL) ALL' > /etc/sudoers.d/wording
chmod 440 /etc/sudoers.d/wording
