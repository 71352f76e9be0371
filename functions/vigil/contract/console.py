"""Names the console's construct (``infra.console``) and its functions (``vigil.console``) share."""

from __future__ import annotations

from enum import StrEnum

ROLE_ENV = "VIGIL_CONSOLE_ROLE"
OPERATE_ARN_ENV = "VIGIL_CONSOLE_OPERATE_ARN"
RUNS_TABLE_ENV = "VIGIL_RUNS_TABLE"


class Role(StrEnum):
    """Which of the console's two functions: ``view`` draws the pages and refuses every action
    (its role has no write grant either); ``operate`` acts, then draws the page."""

    VIEW = "view"
    OPERATE = "operate"
