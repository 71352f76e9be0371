"""A function deployed on moto whose handler module is written into a folder of the test's: the
emulator's Lambda imports it from there (moto keeps the code, it cannot run it)."""

from __future__ import annotations

import io
import zipfile
from pathlib import Path
from typing import Any


def deploy_function(
    session: Any,
    functions: Path,
    module: str,
    source: str,
    *,
    name: str = "f",
    environment: dict[str, str] | None = None,
) -> Any:
    """``module.handler`` as the function ``name``; returns the Lambda client."""
    (functions / f"{module}.py").write_text(source)
    role = session.client("iam").create_role(RoleName=f"{name}-role", AssumeRolePolicyDocument="{}")
    code = io.BytesIO()
    with zipfile.ZipFile(code, "w") as archive:
        archive.writestr(f"{module}.py", "")
    client = session.client("lambda")
    client.create_function(
        FunctionName=name,
        Runtime="python3.12",
        Role=role["Role"]["Arn"],
        Handler=f"{module}.handler",
        Code={"ZipFile": code.getvalue()},
        Environment={"Variables": environment or {}},
    )
    return client
