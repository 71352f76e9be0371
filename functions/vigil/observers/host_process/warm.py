"""Imported last by a host's forkserver (its preload), never by Lambda: the warm state every child
inherits, so an observer slot costs little memory.

Importing it does work on purpose (it is what a forkserver preload can run):

- builds the botocore session every child makes its DynamoDB client from, with the DynamoDB model,
  endpoint rules and partitions already parsed (a fresh session costs each child ~11 MB of them).
  Its warm-up client has placeholder credentials, so no real credentials are fetched here: each
  child resolves its own when it builds its client;
- freezes the garbage collector's view of everything imported so far, so the children's
  collections never write to (and so copy) the pages they share with the forkserver.
"""

from __future__ import annotations

import gc

import botocore.session
from botocore.config import Config

SESSION = botocore.session.get_session()
SESSION.create_client(
    "dynamodb",
    region_name="us-east-1",
    aws_access_key_id="warm-up",
    aws_secret_access_key="warm-up",
    config=Config(retries={"mode": "standard"}),
)
gc.freeze()
