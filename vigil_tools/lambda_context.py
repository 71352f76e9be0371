"""A Lambda context object for invoking handlers in-process (tests, the emulator, benchmarks)."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass, field


@dataclass
class LambdaContext:
    function_name: str = "vigil-local"
    memory_limit_in_mb: int = 256
    invoked_function_arn: str = "arn:aws:lambda:us-east-1:123456789012:function:vigil-local"
    aws_request_id: str = field(default_factory=lambda: str(uuid.uuid4()))
    remaining_ms: Callable[[], int] = lambda: 60_000

    def get_remaining_time_in_millis(self) -> int:
        return self.remaining_ms()
