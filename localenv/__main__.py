"""``python -m localenv up|down|env|status``: the local environment's command line (see the Makefile)."""

from __future__ import annotations

import argparse
import shlex
import sys

from localenv import exports
from localenv.environment import LocalEnvironment
from localenv.processes import ComponentError
from localenv.settings import Settings


def main(argv: list[str] | None = None) -> int:
    """Run one command; print a clear error and exit 1 when a component fails."""
    parser = argparse.ArgumentParser(prog="python -m localenv", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    up = commands.add_parser("up", help="start everything (harmless when already up)")
    up.add_argument(
        "--nodes",
        type=int,
        default=0,
        help="size of the managed-nodepool NodePool once a run's setup has installed kwok-operator "
        "(default 0: the setup sizes it)",
    )
    commands.add_parser("down", help="stop everything and remove the state directory")
    commands.add_parser("env", help='print export lines for a shell: eval "$(make -s local-env)"')
    commands.add_parser("status", help="show which components run")
    options = parser.parse_args(argv)
    environment = LocalEnvironment(Settings.from_environment())
    try:
        if options.command == "up":
            environment.up(node_count=options.nodes)
        elif options.command == "down":
            environment.down()
            print("local environment stopped")
        elif options.command == "env":
            for name, value in exports.variables(environment).items():
                print(f"export {name}={shlex.quote(value)}")
        else:
            for component, running in environment.component_states().items():
                print(f"{component:22} {'running' if running else 'stopped'}")
    except (ComponentError, ValueError) as error:
        print(f"localenv {options.command}: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
