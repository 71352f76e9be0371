"""A pooled observer host: one Fargate task that runs up to K observers, each in its own process.

- :mod:`.heartbeat_store`: the host's one write per heartbeat interval (its liveness and fence);
- :mod:`.plan`: which children to start and stop for an ``assigned`` map (pure);
- :mod:`.exits`: how a child's end is described in its ``HOST_EXIT`` report (pure);
- :mod:`.children`: child processes (a forkserver with the heavy modules preloaded) and what runs
  inside one (today's :class:`~vigil.observers.runtime.ObserverRuntime` for one generation);
- :mod:`.calls`: the host's own calls (heartbeats, exit reports), run beside its loop so that none
  can hold it up;
- :mod:`.exit_reports`: each child's end, pending until its report lands;
- :mod:`.supervisor`: the steppable loop that ties them together;
- :mod:`.settings` and :mod:`.entry`: the environment and ``python -m vigil.observers.main``.
"""
