"""Build the hold-out cases: ``python h_make.py [CASE...]`` (all when none is named).

Run as root on Debian 12 from this folder, with the tools ``h_lab.py`` names installed.
"""

from __future__ import annotations

import sys
from collections.abc import Callable

import h_job_cases
import h_pg_cases
import h_web_cases

CASES: dict[str, Callable[[], None]] = {
    "h-db-pg-crash-recovery": h_pg_cases.case_db_pg_crash_recovery,
    "h-none-pg-restart-retry": h_pg_cases.case_none_pg_restart_retry,
    "h-db-readonly-standby": h_pg_cases.case_db_readonly_standby,
    "h-cert-node-selfsigned-chain": h_web_cases.case_cert_selfsigned_chain,
    "h-ingress-go-client-timeout": h_web_cases.case_ingress_go_client_timeout,
    "h-auth-ansible-uri-401": h_web_cases.case_auth_ansible_uri_401,
    "h-wfstate-release-while-provisioning": h_web_cases.case_wfstate_release_while_provisioning,
    "h-none-operator-conflict-404": h_web_cases.case_none_operator_conflict_404,
    "h-node-ironic-ipmi-power": h_job_cases.case_node_ironic_ipmi,
    "h-node-enospc-imager": h_job_cases.case_node_enospc_imager,
    "h-deploy-k8s-imagepullbackoff": h_job_cases.case_deploy_k8s_imagepullbackoff,
    "h-provider-aap-lost-job": h_job_cases.case_provider_aap_lost_job,
}


def main(names: list[str]) -> None:
    h_pg_cases.build_tools()
    for name in names or list(CASES):
        print(f"building {name}", flush=True)
        CASES[name]()


if __name__ == "__main__":
    main(sys.argv[1:])
