"""The checks every edge hands to the config loader (drkit.config.loader): the parts of a
config that higher layers build and name - a flow's policy and transforms
(drkit.topology.checks), the steps hooks name (drkit.failover.hooks).  Kept in one tuple so the
CLI, the drill processes and ``drkit config validate`` refuse the same configs."""

from __future__ import annotations

from drkit.config.loader import ConfigCheck
from drkit.failover.hooks import hook_step_problems
from drkit.topology.checks import component_problems

CONFIG_CHECKS: tuple[ConfigCheck, ...] = (component_problems, hook_step_problems)
