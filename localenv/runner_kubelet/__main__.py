"""Run the runner node's kubelet double: ``python -m localenv.runner_kubelet --kubeconfig ... --port ...``."""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import threading
from pathlib import Path

from kubernetes import client, config

from localenv.runner_images import load_mapping
from localenv.runner_kubelet.agent import RunnerKubelet
from localenv.runner_kubelet.log_server import serve
from localenv.runner_kubelet.node import NodeRegistration


def main() -> None:
    """Register the node, serve its log API and run its pods until killed."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--kubeconfig", type=Path, required=True)
    parser.add_argument("--node-name", required=True)
    parser.add_argument("--port", type=int, required=True, help="kubelet API port (logs)")
    parser.add_argument("--sandbox-root", type=Path, required=True, help="parent of the pods' working dirs")
    parser.add_argument("--kubelet-version", required=True, help="reported in the node's nodeInfo")
    options = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")

    configuration = client.Configuration()
    config.load_kube_config(config_file=str(options.kubeconfig), client_configuration=configuration)
    configuration.connection_pool_maxsize = 16
    api_client = client.ApiClient(configuration)
    kubelet = RunnerKubelet(
        api_client=api_client,
        node_name=options.node_name,
        mapping=load_mapping(),
        sandbox_root=options.sandbox_root,
        api_server_url=configuration.host,
        ca_file=Path(configuration.ssl_ca_cert),
    )
    server = serve(port=options.port, lookup=kubelet.log_source)
    threading.Thread(target=server.serve_forever, name="log-server", daemon=True).start()
    registration = NodeRegistration(
        core=client.CoreV1Api(api_client),
        coordination=client.CoordinationV1Api(api_client),
        name=options.node_name,
        kubelet_port=options.port,
        kubelet_version=options.kubelet_version,
    )
    registration.register()
    threading.Thread(target=registration.heartbeat_forever, name="heartbeat", daemon=True).start()

    def shut_down(signum: int, _frame: object) -> None:
        kubelet.stop_all(grace_seconds=5)
        sys.exit(128 + signum)

    signal.signal(signal.SIGTERM, shut_down)
    logging.getLogger(__name__).info(
        "runner node %s ready; kubelet API on port %s", options.node_name, options.port
    )
    kubelet.watch_forever()


if __name__ == "__main__":
    main()
