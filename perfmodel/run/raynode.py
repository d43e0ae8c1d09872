"""`ray start` for a further node of a local cluster (perfmodel.run.keeper --nodes), on this machine.

    python -m perfmodel.run.raynode start --address 127.0.0.1:PORT --block ...   (ray start's arguments)

A local Ray listens on 127.0.0.1 only. Ray's `ray start --address` replaces a loopback address by the
machine's network address, where nothing listens, and refuses a second node when
RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0 (which keeps every other address on the loopback); both are turned
off here, in this process only.
"""

import sys

from ray._private import ray_constants, services


def main() -> int:
    ray_constants.ENABLE_RAY_CLUSTER = True  # read at the call, after import: the check for a second node
    services.resolve_ip_for_localhost = lambda host: host  # join the head where it listens
    from ray.scripts.scripts import main as ray_main

    sys.argv = ["ray", *sys.argv[1:]]
    return ray_main()


if __name__ == "__main__":
    sys.exit(main())
