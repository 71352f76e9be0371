"""``make demo`` (``python -m vigil_tools.demo``): the whole app on the local emulator, act by act.

- :mod:`.main`: the entry point, the set-up and the jobs act (ticks under faults, the redrive);
- :mod:`.control`: job control through the ``vigil`` CLI (pause, run now, a missed tick, a backfill);
- :mod:`.observers`: dedicated observers created, run, crashed, replaced and stopped;
- :mod:`.pooled`: pooled observers packed on hosts, a host lost, a zombie host fenced;
- :mod:`.tasks`: tasks enqueued, retried, dead-lettered and redriven.
"""
