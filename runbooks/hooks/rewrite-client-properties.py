#!/usr/bin/env python3
"""Example failover hook: point a client properties file at the new active cluster.

Configure it as an ``after`` hook of ``move_pointer`` (config/drkit.example.yaml):

    failover:
      hooks:
        - when: after
          step: move_pointer
          command: ["python3", "runbooks/hooks/rewrite-client-properties.py",
                    "/etc/app/client.properties"]

drkit passes the run's context as JSON on stdin (schema drkit.failover.hook/v1); this hook
rewrites ``bootstrap.servers`` in the file to the target's bootstrap servers, atomically, and
keeps every other line as it was.  Applications (or their config watcher) pick it up on
restart.  Exit code 0 on success; anything else is reported in the run.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: rewrite-client-properties.py PROPERTIES_FILE", file=sys.stderr)
        return 2
    path = Path(argv[1])
    context = json.load(sys.stdin)
    servers = context["target_bootstrap_servers"]
    lines = path.read_text().splitlines() if path.exists() else []
    out = [line for line in lines if not line.strip().startswith("bootstrap.servers")]
    out.append(f"bootstrap.servers={servers}")
    handle, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    with os.fdopen(handle, "w") as stream:
        stream.write("\n".join(out) + "\n")
    Path(tmp).replace(path)
    print(f"{path}: bootstrap.servers={servers} (run {context['run']}, {context['target']})")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
