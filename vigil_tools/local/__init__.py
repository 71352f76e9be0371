"""``vigil local up``: the app's template running live on one machine, on moto's server.

Unlike the demo and the testing kit (in-process, simulated clock), everything here runs in real
time and answers over HTTP, so the ``vigil`` CLI and the AWS CLI work against it.
"""
