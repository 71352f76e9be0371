"""The names the CDK app (``infra/``) and the runtime library must agree on, each written once.

infra imports these at synth and the runtime imports them in Lambda and in the container, so every
module here imports the standard library only: synth must not pull in boto3, Powertools or pydantic,
and a cold start pays nothing for them. A test holds that line.
"""
