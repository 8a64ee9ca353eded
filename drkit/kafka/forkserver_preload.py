"""Imported once by the fork server that admin helpers are forked from (drkit.kafka.isolated),
never by anything else.

It moves the fork server into a process group of its own: a SIGTERM or Ctrl-C sent to the
owner's group (a supervisor stopping a replicator, a terminal) must neither kill the server -
multiprocessing would then report every helper forked from it as dead - nor the helpers.  Until
this runs the server is still in that group: the owner starts it with the stop signals blocked
(drkit.kafka.isolated), and it keeps them blocked; each helper unblocks them for itself.  The
server still ends with its owner (multiprocessing closes it when the owner's end of its pipe
closes, kill -9 included).  And it imports the Kafka adapter once, so each helper forked from it
starts with it loaded.
"""

from __future__ import annotations

import os

import drkit.kafka.admin  # noqa: F401  (loaded once, inherited by every helper)

os.setpgrp()
