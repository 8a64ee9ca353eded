"""drkit's one typed configuration model and its loader.

``model`` holds the frozen pydantic classes; ``loader`` reads YAML, resolves ``${ENV}`` secret
references and turns every defect into a :class:`drkit.errors.Problem` naming its key path;
``discovery`` decides which file a command uses when none is given.
"""

from drkit.config.discovery import default_config_path, resolve_config_path
from drkit.config.loader import load_config, load_config_text
from drkit.config.model import (
    ClusterConfig,
    DrkitConfig,
    FailoverPolicy,
    FlowConfig,
    HealthPolicy,
    NameFilter,
    ReplicationPolicyConfig,
    SecurityConfig,
    StateStoreConfig,
)

__all__ = [
    "ClusterConfig",
    "DrkitConfig",
    "FailoverPolicy",
    "FlowConfig",
    "HealthPolicy",
    "NameFilter",
    "ReplicationPolicyConfig",
    "SecurityConfig",
    "StateStoreConfig",
    "default_config_path",
    "load_config",
    "load_config_text",
    "resolve_config_path",
]
