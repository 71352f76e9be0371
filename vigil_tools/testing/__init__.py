"""``vigil_tools.testing``: test a team's jobs and observer kinds against the deployed app.

The pytest plugin (registered by the ``vigil`` distribution's ``pytest11`` entry point) gives
every test a ``vigil_stack``: the app's synthesized template deployed on the embedded emulator,
driven on a simulated clock through the same functions, reconciler and container runtime
``make demo`` uses. It lives in ``vigil_tools``, not in ``vigil``, because ``vigil`` is the
runtime library shipped to Lambda and the containers, which must not carry pytest or moto.
"""

from vigil_tools.testing.kill import Kill, KillAt
from vigil_tools.testing.names import UnknownName
from vigil_tools.testing.stack import DeadLetter, HeldRun, ObserverState, Tick, VigilStack

__all__ = [
    "DeadLetter",
    "HeldRun",
    "Kill",
    "KillAt",
    "ObserverState",
    "Tick",
    "UnknownName",
    "VigilStack",
]
