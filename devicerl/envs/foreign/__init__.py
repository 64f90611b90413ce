"""Devices in their own Python environment: `ForeignEnv` and the protocol it speaks.

``remote.py`` is the one module the other environment needs (standard library only);
``venv.py`` builds and caches such environments.
"""

from devicerl.envs.foreign.env import ForeignEnv
from devicerl.envs.foreign.options import ForeignOptions

__all__ = ["ForeignEnv", "ForeignOptions"]
