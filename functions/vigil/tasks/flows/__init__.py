"""Flows: a task whose body calls steps on ``run`` (``run.step``, ``run.sleep``,
``run.wait_for``), journalled one item per step beside the task's record (docs/guides/flows.md).

* :mod:`.run`: the steps as the body calls them, one :class:`~.run.Flow` per execution;
* :mod:`.journal`: every DynamoDB request of the journal;
* :mod:`.wake`: a suspended flow's wake-up (an SQS delay or a one-time schedule);
* :mod:`.signals`: signals to flows, and waking a suspended flow to cancel it;
* :mod:`.timeline`: the steps as an operator reads them;
* :mod:`.errors`: what the calls raise.
"""
